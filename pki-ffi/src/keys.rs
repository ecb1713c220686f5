//! Key rings of service-account token signing keys: create or import,
//! rotate (by age, forced reason, end of grace), read the published keys,
//! sign and verify tokens.

use crate::abi::{
    bytes_in, free_handle, handle, into_handle, out_ptr, seconds, str_in, time_in, time_out,
    write_out,
};
use crate::buffer::pki_buffer;
use crate::error::{Failure, boundary, pki_result};
use pki_core::KeyAlgorithm;
use pki_rotate::{Engine, ImportedKeys, KeyRing, KeyRingEngine, KeyRingInput, KeyRingPolicy};
use std::ffi::c_char;

/// A key ring: one active signing key and the public keys still accepted.
/// Immutable: `pki_keyring_rotate` returns a new ring, so one handle may be
/// read from several threads at once. Free with `pki_keyring_free`.
pub struct pki_keyring {
    ring: KeyRing,
}

/// The policy of a key ring. All durations are in seconds.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct pki_keyring_policy {
    /// A `pki_key_type`: the type of new active keys.
    pub key_type: u32,
    /// Rotate the active key once it is this old.
    pub lifetime_seconds: i64,
    /// How long a rotated-out key stays accepted, from the rotation.
    pub grace_seconds: i64,
    /// The longest token lifetime, 0 when not stated. The grace must cover it.
    pub max_token_lifetime_seconds: i64,
}

/// P-256 keys, 90 days of lifetime, 24 hours of grace, no stated token lifetime.
#[unsafe(no_mangle)]
pub extern "C" fn pki_keyring_policy_default() -> pki_keyring_policy {
    let p = KeyRingPolicy::default();
    pki_keyring_policy {
        key_type: 0,
        lifetime_seconds: p.lifetime.whole_seconds(),
        grace_seconds: p.grace.whole_seconds(),
        max_token_lifetime_seconds: 0,
    }
}

fn policy_in(p: Option<&pki_keyring_policy>) -> Result<KeyRingPolicy, Failure> {
    let Some(p) = p else {
        return Ok(KeyRingPolicy::default());
    };
    let algorithm = match p.key_type {
        0 => KeyAlgorithm::EcdsaP256,
        1 => KeyAlgorithm::Rsa2048,
        2 => KeyAlgorithm::Rsa3072,
        3 => KeyAlgorithm::Rsa4096,
        other => {
            return Err(Failure::invalid(format!(
                "key type {other} is not a pki_key_type (0 = P-256, 1-3 = RSA 2048/3072/4096)"
            )));
        }
    };
    Ok(KeyRingPolicy {
        algorithm,
        lifetime: seconds(p.lifetime_seconds),
        grace: seconds(p.grace_seconds),
        max_token_lifetime: (p.max_token_lifetime_seconds != 0)
            .then(|| seconds(p.max_token_lifetime_seconds)),
    })
}

/// Hands a ring to C.
///
/// # Safety
///
/// `out` must be non-NULL and valid for one write.
unsafe fn give(out: *mut *mut pki_keyring, ring: KeyRing) {
    // SAFETY: our caller's contract.
    unsafe { write_out(out, into_handle(pki_keyring { ring })) }
}

/// Hands bytes to C as a buffer.
///
/// # Safety
///
/// `out` must be non-NULL and valid for one write.
unsafe fn give_buffer(out: *mut *mut pki_buffer, bytes: &[u8]) {
    // SAFETY: our caller's contract.
    unsafe { write_out(out, into_handle(pki_buffer::new(bytes))) }
}

/// Creates a key ring with a new active key, at `now` (Unix seconds).
///
/// `policy` NULL means `pki_keyring_policy_default()`; it is borrowed for
/// the call. On success the caller owns `*out_ring` and frees it once with
/// `pki_keyring_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT`, `PKI_RESULT_TIME`,
/// `PKI_RESULT_KEYRING_POLICY` (a grace that does not cover the longest
/// token lifetime, non-positive durations) or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `policy` must be NULL or valid for reads; `out_ring` NULL or valid for
/// one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_new(
    policy: *const pki_keyring_policy,
    now: i64,
    out_ring: *mut *mut pki_keyring,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or valid for reads (contract).
        let policy = policy_in(unsafe { policy.as_ref() })?;
        let now = time_in(now, "now")?;
        out_ptr(out_ring, "out_ring")?;
        let ring = KeyRing::new(policy, now, &mut crate::abi::os_rng())?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { give(out_ring, ring) };
        Ok(())
    })
}

/// Creates a key ring over an existing key set: PEM keys (k3s's
/// `service.key`; the first private key becomes active and, once rotated
/// out, stays accepted for the grace period; every other key stays
/// accepted until retired) or a JWK Set of public keys (a new active
/// key is generated).
///
/// `keys` and `policy` are borrowed for the call (`policy` NULL: the
/// default). On success the caller owns `*out_ring` and frees it with
/// `pki_keyring_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT`, `PKI_RESULT_TIME`,
/// `PKI_RESULT_KEYRING_POLICY`, `PKI_RESULT_KEYRING_IMPORT` or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `keys` must be NULL or valid for `keys_len` bytes; `policy` NULL or
/// valid for reads; `out_ring` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_import(
    keys: *const u8,
    keys_len: usize,
    policy: *const pki_keyring_policy,
    now: i64,
    out_ring: *mut *mut pki_keyring,
) -> pki_result {
    boundary(|| {
        // SAFETY: pointer and length from the caller (contract).
        let keys = unsafe { bytes_in(keys, keys_len, "keys") }?;
        // SAFETY: NULL or valid for reads (contract).
        let policy = policy_in(unsafe { policy.as_ref() })?;
        let now = time_in(now, "now")?;
        out_ptr(out_ring, "out_ring")?;
        let imported = ImportedKeys::parse("keys", keys)?;
        let ring = KeyRing::import(policy, imported, now, &mut crate::abi::os_rng())?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { give(out_ring, ring) };
        Ok(())
    })
}

/// Reads a ring from the JSON document `pki_keyring_to_state` wrote.
///
/// On success the caller owns `*out_ring` and frees it with `pki_keyring_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_UNSUPPORTED_STATE_VERSION`, `PKI_RESULT_CORRUPT_STATE` or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `state` must be NULL or valid for `state_len` bytes; `out_ring` NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_from_state(
    state: *const u8,
    state_len: usize,
    out_ring: *mut *mut pki_keyring,
) -> pki_result {
    boundary(|| {
        // SAFETY: pointer and length from the caller (contract).
        let state = unsafe { bytes_in(state, state_len, "state") }?;
        out_ptr(out_ring, "out_ring")?;
        let ring = KeyRing::from_json(state)?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { give(out_ring, ring) };
        Ok(())
    })
}

/// Which published form [`pki_keyring_export`] writes.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum pki_keyring_output {
    /// The whole ring as one JSON document, the active private key inline
    /// (secret: keep it like a key).
    PKI_KEYRING_STATE = 0,
    /// Every published public key as `PUBLIC KEY` PEM, active first (what
    /// kube-apiserver's `--service-account-key-file` takes).
    PKI_KEYRING_PUBLIC_PEM = 1,
    /// The JWK Set `{"keys": [...]}`, `kid` = RFC 7638 thumbprint.
    PKI_KEYRING_JWKS = 2,
    /// The active private key, PKCS#8 PEM (secret).
    PKI_KEYRING_ACTIVE_KEY = 3,
    /// The active key's id (its RFC 7638 thumbprint).
    PKI_KEYRING_ACTIVE_KID = 4,
}

/// Writes one form of the ring (see `pki_keyring_output`) to a new buffer.
///
/// On success the caller owns `*out_buffer` and frees it with
/// `pki_buffer_free` (buffers are zeroed when freed).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (an unknown output) or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `ring` must be NULL or a live `pki_keyring`; `out_buffer` NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_export(
    ring: *const pki_keyring,
    output: u32,
    out_buffer: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let ring = &unsafe { handle(ring, "ring") }?.ring;
        out_ptr(out_buffer, "out_buffer")?;
        let bytes: zeroize::Zeroizing<Vec<u8>> = match output {
            0 => zeroize::Zeroizing::new(ring.to_json()?.as_bytes().to_vec()),
            1 => zeroize::Zeroizing::new(ring.public_pem().into_bytes()),
            2 => zeroize::Zeroizing::new(ring.jwks().to_json().into_bytes()),
            3 => zeroize::Zeroizing::new(ring.active.key.to_pkcs8_pem()?.as_bytes().to_vec()),
            4 => zeroize::Zeroizing::new(ring.active.kid.clone().into_bytes()),
            other => {
                return Err(Failure::invalid(format!(
                    "output {other} is not a pki_keyring_output (0-4)"
                )));
            }
        };
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { give_buffer(out_buffer, &bytes) };
        Ok(())
    })
}

/// One controller step at `now`: rotates the active key when it reached its
/// lifetime, or when `forced_reason` (NULL: none) is a reason not acted on
/// before, and removes accepted keys whose grace has ended.
///
/// `*out_next` receives the new ring (the caller owns it and frees it with
/// `pki_keyring_free`; it is a copy of `ring` when nothing changed),
/// `*out_changed` whether anything changed (store the new state then), and
/// `*out_next_check` (Unix seconds) when to step again. `ring` is not changed.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT`, `PKI_RESULT_TIME`,
/// `PKI_RESULT_EMPTY_FORCED_REASON`, `PKI_RESULT_KEYRING_CLOCK_BEHIND`,
/// `PKI_RESULT_CRYPTO` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `ring` must be NULL or a live `pki_keyring`; `forced_reason` NULL or
/// valid for `forced_reason_len` bytes of UTF-8; every `out_` pointer NULL
/// or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_rotate(
    ring: *const pki_keyring,
    forced_reason: *const c_char,
    forced_reason_len: usize,
    now: i64,
    out_next: *mut *mut pki_keyring,
    out_changed: *mut bool,
    out_next_check: *mut i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let ring = &unsafe { handle(ring, "ring") }?.ring;
        let forced = if forced_reason.is_null() {
            None
        } else {
            // SAFETY: non-NULL, valid for the length given (contract).
            Some(unsafe { str_in(forced_reason, forced_reason_len, "forced_reason") }?.to_string())
        };
        let now = time_in(now, "now")?;
        out_ptr(out_next, "out_next")?;
        out_ptr(out_changed, "out_changed")?;
        out_ptr(out_next_check, "out_next_check")?;
        let mut input = KeyRingInput::default();
        input.forced = forced;
        let outcome = KeyRingEngine::step(ring, &input, now, &mut crate::abi::os_rng())?;
        let changed = outcome.changed();
        let next_check = time_out(outcome.next_wake);
        let next = outcome.into_document();
        // SAFETY: every output checked non-NULL; valid for a write (contract).
        unsafe {
            give(out_next, next);
            write_out(out_changed, changed);
            write_out(out_next_check, next_check);
        }
        Ok(())
    })
}

/// Signs `claims` (a JSON object, used byte for byte as the payload) with
/// the active key at `now`: a compact JWS with header
/// `{"alg","kid","typ":"JWT"}` (ES256 for P-256 keys, RS256 for RSA).
///
/// On success the caller owns `*out_token` and frees it with `pki_buffer_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`, `PKI_RESULT_TIME`,
/// `PKI_RESULT_TOKEN_MALFORMED` (claims not a JSON object),
/// `PKI_RESULT_TOKEN_LIFETIME` (claims that outlive the grace period) or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `ring` must be NULL or a live `pki_keyring`; `claims` NULL or valid for
/// `claims_len` bytes; `out_token` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_sign(
    ring: *const pki_keyring,
    claims: *const u8,
    claims_len: usize,
    now: i64,
    out_token: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let ring = &unsafe { handle(ring, "ring") }?.ring;
        // SAFETY: pointer and length from the caller (contract).
        let claims = unsafe { bytes_in(claims, claims_len, "claims") }?;
        let now = time_in(now, "now")?;
        out_ptr(out_token, "out_token")?;
        let token = ring.sign_token(claims, now)?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { give_buffer(out_token, token.as_bytes()) };
        Ok(())
    })
}

/// Verifies a compact JWS at `now` against the active key and the accepted
/// keys still in their grace (by `kid`), then `exp` and `nbf` when present.
/// `PKI_RESULT_OK` means accepted; every other code says why not.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`, `PKI_RESULT_TIME`,
/// `PKI_RESULT_TOKEN_MALFORMED`, `PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM`,
/// `PKI_RESULT_TOKEN_UNKNOWN_KID`, `PKI_RESULT_TOKEN_KEY_NO_LONGER_ACCEPTED`,
/// `PKI_RESULT_TOKEN_BAD_SIGNATURE`, `PKI_RESULT_TOKEN_EXPIRED`,
/// `PKI_RESULT_TOKEN_NOT_YET_VALID` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `ring` must be NULL or a live `pki_keyring`; `token` NULL or valid for
/// `token_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_verify(
    ring: *const pki_keyring,
    token: *const u8,
    token_len: usize,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let ring = &unsafe { handle(ring, "ring") }?.ring;
        // SAFETY: pointer and length from the caller (contract).
        let token = unsafe { bytes_in(token, token_len, "token") }?;
        let now = time_in(now, "now")?;
        ring.verify_token(token, now)?;
        Ok(())
    })
}

/// Frees a key ring. NULL is accepted.
///
/// # Safety
///
/// `ring` must be NULL or a live `pki_keyring` not freed before; it must
/// not be used afterwards.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_free(ring: *mut pki_keyring) {
    crate::error::boundary_value((), || {
        // SAFETY: NULL or a live handle, freed once (contract).
        unsafe { free_handle(ring) }
    })
}

/// The result code of a key ring error.
pub(crate) fn keyring_result(e: &pki_rotate::KeyRingError) -> pki_result {
    use pki_result::*;
    use pki_rotate::KeyRingError as K;
    use pki_rotate::keyring::JoseError as J;
    match e {
        K::Policy(_) => PKI_RESULT_KEYRING_POLICY,
        K::Import { .. } => PKI_RESULT_KEYRING_IMPORT,
        K::Retire { .. } => PKI_RESULT_KEYRING_RETIRE,
        K::ClockBehind { .. } => PKI_RESULT_KEYRING_CLOCK_BEHIND,
        K::TokenLifetime(_) => PKI_RESULT_TOKEN_LIFETIME,
        K::Jose(j) => match j {
            J::Malformed { .. } | J::TooLarge { .. } => PKI_RESULT_TOKEN_MALFORMED,
            J::UnsupportedAlgorithm(_) | J::CriticalHeader(_) => {
                PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM
            }
            J::UnknownKid(_) => PKI_RESULT_TOKEN_UNKNOWN_KID,
            J::KeyNoLongerAccepted { .. } => PKI_RESULT_TOKEN_KEY_NO_LONGER_ACCEPTED,
            J::AlgorithmMismatch { .. } | J::BadSignature(_) => PKI_RESULT_TOKEN_BAD_SIGNATURE,
            J::Expired { .. } => PKI_RESULT_TOKEN_EXPIRED,
            J::NotYetValid { .. } => PKI_RESULT_TOKEN_NOT_YET_VALID,
            J::UnsupportedKey { .. } => PKI_RESULT_JWK_UNSUPPORTED_KEY,
            _ => PKI_RESULT_UNEXPECTED,
        },
        _ => PKI_RESULT_UNEXPECTED,
    }
}
