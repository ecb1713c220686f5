//! Key rings of service-account token signing keys: create or import,
//! rotate (by age, forced reason, end of grace), read the published keys,
//! sign and verify tokens.
//!
//! Two ways to keep a ring:
//!
//! - in a `pki_store` (`pki_keyring_store_*`), under the store key `keys`
//!   (the CLI's: a directory store publishes `keys/active.key`,
//!   `keys/public.pem`, `keys/jwks.json`). Every change is one
//!   `Driver::step` of pki-rotate's `KeyRingEngine` with compare-and-swap:
//!   racing replicas rotate once, and a refused or failed call leaves the
//!   store unchanged. This is what a controller wants;
//! - as an immutable in-memory `pki_keyring` that the embedder stores
//!   itself (`pki_keyring_export` with `PKI_KEYRING_STATE`, then
//!   `pki_keyring_from_state`).

use crate::abi::{
    bytes_in, free_handle, handle, into_handle, out_ptr, seconds, str_in, time_in, time_out,
    write_out,
};
use crate::buffer::pki_buffer;
use crate::error::{Failure, boundary, pki_result};
use crate::store::{KindStore, pki_store};
use pki_core::KeyAlgorithm;
use pki_rotate::keyring::STORE_KEY;
use pki_rotate::{
    Driver, Engine, ImportedKeys, KeyRing, KeyRingEngine, KeyRingInput, KeyRingPolicy,
};
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

/// One form of a ring (see `pki_keyring_output`).
fn export_bytes(ring: &KeyRing, output: u32) -> Result<zeroize::Zeroizing<Vec<u8>>, Failure> {
    Ok(match output {
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
    })
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
        let bytes = export_bytes(ring, output)?;
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

fn store_driver(store: &pki_store) -> Driver<KindStore<'_, KeyRing>> {
    store.driver()
}

fn load_from(store: &pki_store) -> Result<KeyRing, Failure> {
    Ok(store_driver(store).load::<KeyRingEngine>(STORE_KEY)?.0)
}

/// Creates a key ring with a new active key at `now` (Unix seconds) in
/// `store`, under the store key `keys` (a directory store publishes
/// `keys/active.key` 0600, `keys/public.pem`, `keys/jwks.json`). Fails when
/// a ring is there already; nothing is written then.
///
/// `store` and `policy` are borrowed for the call (`policy` NULL: the
/// default).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT`, `PKI_RESULT_TIME`,
/// `PKI_RESULT_KEYRING_POLICY`, `PKI_RESULT_ALREADY_INITIALIZED`,
/// `PKI_RESULT_CONFLICT`, `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `policy` NULL or valid for
/// reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_store_create(
    store: *const pki_store,
    policy: *const pki_keyring_policy,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: NULL or valid for reads (contract).
        let policy = policy_in(unsafe { policy.as_ref() })?;
        let now = time_in(now, "now")?;
        let ring = KeyRing::new(policy, now, &mut crate::abi::os_rng())?;
        store_driver(store).create::<KeyRingEngine>(STORE_KEY, &ring)?;
        Ok(())
    })
}

/// Creates a key ring over an existing key set in `store`, under the store
/// key `keys`: as `pki_keyring_import` (PEM keys, the first private key
/// active; or a JWK Set), then stored as `pki_keyring_store_create` does.
///
/// Returns as `pki_keyring_store_create`, and `PKI_RESULT_KEYRING_IMPORT`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `keys` NULL or valid for
/// `keys_len` bytes; `policy` NULL or valid for reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_store_import(
    store: *const pki_store,
    keys: *const u8,
    keys_len: usize,
    policy: *const pki_keyring_policy,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let keys = unsafe { bytes_in(keys, keys_len, "keys") }?;
        // SAFETY: NULL or valid for reads (contract).
        let policy = policy_in(unsafe { policy.as_ref() })?;
        let now = time_in(now, "now")?;
        let imported = ImportedKeys::parse("keys", keys)?;
        let ring = KeyRing::import(policy, imported, now, &mut crate::abi::os_rng())?;
        store_driver(store).create::<KeyRingEngine>(STORE_KEY, &ring)?;
        Ok(())
    })
}

/// One controller step on the ring in `store` at `now`: rotates the active
/// key when it reached its lifetime, or when `forced_reason` (NULL: none) is
/// a reason not acted on before; retires the keys named in `retire` (NULL:
/// none; comma-separated kids: imported keys, or keys past their grace);
/// removes accepted keys whose grace has ended. Written by compare-and-swap
/// only when something changed; a racing writer makes it read and decide
/// again (a forced rotation racing a rotation is one rotation).
///
/// `*out_changed` receives whether anything changed and `*out_next_check`
/// (Unix seconds) when to step again; either may be NULL. A refused step
/// writes nothing, to the store or to the outputs.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (text not UTF-8), `PKI_RESULT_TIME`,
/// `PKI_RESULT_EMPTY_FORCED_REASON`, `PKI_RESULT_KEYRING_RETIRE`,
/// `PKI_RESULT_KEYRING_CLOCK_BEHIND`, `PKI_RESULT_NOT_INITIALIZED`,
/// `PKI_RESULT_CORRUPT_STATE`, `PKI_RESULT_CONFLICT`, `PKI_RESULT_STORE` or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `forced_reason` NULL or
/// valid for `forced_reason_len` bytes; `retire` NULL or valid for
/// `retire_len` bytes; each `out_` pointer NULL or valid for one write.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pki_keyring_store_rotate(
    store: *const pki_store,
    forced_reason: *const c_char,
    forced_reason_len: usize,
    retire: *const c_char,
    retire_len: usize,
    now: i64,
    out_changed: *mut bool,
    out_next_check: *mut i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        let mut input = KeyRingInput::default();
        if !forced_reason.is_null() {
            // SAFETY: non-NULL, valid for the length given (contract).
            let reason = unsafe { str_in(forced_reason, forced_reason_len, "forced_reason") }?;
            input.forced = Some(reason.to_string());
        }
        if !retire.is_null() {
            // SAFETY: non-NULL, valid for the length given (contract).
            let kids = unsafe { str_in(retire, retire_len, "retire") }?;
            input.retire = kids
                .split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(str::to_string)
                .collect();
        }
        let now = time_in(now, "now")?;
        let step = store_driver(store).step::<KeyRingEngine, _>(
            STORE_KEY,
            &input,
            now,
            &mut crate::abi::os_rng(),
        )?;
        // SAFETY: each output is NULL (skipped) or valid for a write (contract).
        unsafe {
            if !out_changed.is_null() {
                write_out(out_changed, step.changed);
            }
            if !out_next_check.is_null() {
                write_out(out_next_check, time_out(step.next_wake));
            }
        }
        Ok(())
    })
}

/// Writes one form of the ring in `store` (see `pki_keyring_output`: the
/// JWK Set, the public PEM, the active key id…) to a new buffer, read at
/// the store's current revision.
///
/// On success the caller owns `*out_buffer` and frees it with
/// `pki_buffer_free` (buffers are zeroed when freed).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (an unknown output),
/// `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_CORRUPT_STATE`,
/// `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `out_buffer` NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_store_export(
    store: *const pki_store,
    output: u32,
    out_buffer: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        out_ptr(out_buffer, "out_buffer")?;
        let ring = load_from(store)?;
        let bytes = export_bytes(&ring, output)?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { give_buffer(out_buffer, &bytes) };
        Ok(())
    })
}

/// Signs `claims` with the active key of the ring in `store` at `now`, as
/// `pki_keyring_sign` does.
///
/// On success the caller owns `*out_token` and frees it with `pki_buffer_free`.
///
/// Returns as `pki_keyring_sign`, and `PKI_RESULT_KEYRING_CLOCK_BEHIND`,
/// `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_CORRUPT_STATE` or
/// `PKI_RESULT_STORE`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `claims` NULL or valid for
/// `claims_len` bytes; `out_token` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_store_sign(
    store: *const pki_store,
    claims: *const u8,
    claims_len: usize,
    now: i64,
    out_token: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let claims = unsafe { bytes_in(claims, claims_len, "claims") }?;
        let now = time_in(now, "now")?;
        out_ptr(out_token, "out_token")?;
        let token = load_from(store)?.sign_token(claims, now)?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { give_buffer(out_token, token.as_bytes()) };
        Ok(())
    })
}

/// Verifies a compact JWS at `now` against the ring in `store`, as
/// `pki_keyring_verify` does. `PKI_RESULT_OK` means accepted.
///
/// Returns as `pki_keyring_verify`, and `PKI_RESULT_NOT_INITIALIZED`,
/// `PKI_RESULT_CORRUPT_STATE` or `PKI_RESULT_STORE`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `token` NULL or valid for
/// `token_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_store_verify(
    store: *const pki_store,
    token: *const u8,
    token_len: usize,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let token = unsafe { bytes_in(token, token_len, "token") }?;
        let now = time_in(now, "now")?;
        load_from(store)?.verify_token(token, now)?;
        Ok(())
    })
}

/// The status of the ring in `store` at `now` as JSON, the same as `pki
/// keys status --json` (`active`, `accepted` with `accepted_until`,
/// `action_due`, `next_wake`, `history`…; no private key).
///
/// On success the caller owns `*out_json` and frees it with
/// `pki_buffer_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`, `PKI_RESULT_TIME`,
/// `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_CORRUPT_STATE`,
/// `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `out_json` NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_store_status_json(
    store: *const pki_store,
    now: i64,
    out_json: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        let now = time_in(now, "now")?;
        out_ptr(out_json, "out_json")?;
        let json = serde_json::to_vec(&load_from(store)?.status(now))
            .map_err(|e| Failure::new(pki_result::PKI_RESULT_UNEXPECTED, e.to_string()))?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { give_buffer(out_json, &json) };
        Ok(())
    })
}

/// Reads the ring in `store` as an in-memory `pki_keyring`: a snapshot at
/// the store's current revision, for the `pki_keyring_*` readers. Changes
/// go through `pki_keyring_store_rotate`, not through the snapshot.
///
/// On success the caller owns `*out_ring` and frees it with `pki_keyring_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_CORRUPT_STATE`,
/// `PKI_RESULT_UNSUPPORTED_STATE_VERSION`, `PKI_RESULT_STORE` or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `out_ring` NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_store_load(
    store: *const pki_store,
    out_ring: *mut *mut pki_keyring,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        out_ptr(out_ring, "out_ring")?;
        let ring = load_from(store)?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { give(out_ring, ring) };
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
