//! Key rings of service-account token signing keys, kept in a store: create
//! (a new ring, an imported key set, a saved document), step (rotate by
//! age, forced reason, end of grace; retire), read the published keys and
//! the status, sign and verify tokens.
//!
//! The ring lives under a store key (`keys` is the CLI's: a directory store
//! publishes `keys/active.key`, `keys/public.pem`, `keys/jwks.json`). Every
//! change is one `Driver::step` of pki-rotate's `KeyRingEngine` with
//! compare-and-swap: racing replicas rotate once, and a refused or failed
//! call leaves the store unchanged. A program that keeps the ring itself
//! uses a `memory:` store, reads `PKI_KEYRING_STATE` and creates it again
//! from `{"state": …}`.

use crate::abi::{bytes_in, handle, into_handle, key_in, os_rng, time_in};
use crate::buffer::pki_buffer;
use crate::error::{Failure, pki_result};
use crate::step::status_json;
use crate::store::pki_store;
use pki_rotate::request::{KeyRingCreate, KeyRingStep};
use pki_rotate::request::{StepEvent, StepResult};
use pki_rotate::{KeyRing, KeyRingEngine};
use std::ffi::c_char;
use time::OffsetDateTime;

fn status(ring: &KeyRing, now: OffsetDateTime) -> String {
    status_json(&ring.status(now))
}

fn load(store: &pki_store, key: &str) -> Result<KeyRing, Failure> {
    Ok(store.driver::<KeyRing>().load::<KeyRingEngine>(key)?.0)
}

pub(crate) fn create(
    store: &pki_store,
    key: &str,
    input: &KeyRingCreate,
    now: OffsetDateTime,
) -> Result<StepResult, Failure> {
    let location = store.new_document_location::<KeyRing>(
        key,
        pki_rotate::keyring::STORE_KEY,
        input.key_store.is_some(),
    )?;
    let site = pki_rotate::request::CreateSite {
        tokens: store.tokens.as_ref(),
        location: &location,
    };
    let ring = input.document_at(site, now, &mut os_rng())?;
    store.create::<KeyRingEngine>(key, &ring, now, status)
}

pub(crate) fn step(
    store: &pki_store,
    key: &str,
    input: &KeyRingStep,
    now: OffsetDateTime,
) -> Result<StepResult, Failure> {
    let step = store.driver::<KeyRing>().step::<KeyRingEngine, _>(
        key,
        &input.input(),
        now,
        &mut os_rng(),
    )?;
    Ok(StepResult::of_step(&step, StepEvent::of, |d| {
        status(d, now)
    }))
}

/// Which form of a key ring `pki_document_read` writes.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum pki_keyring_output {
    /// The whole ring as one JSON document, the active private key inline
    /// (secret: keep it like a key). `pki_document_create` takes it back as
    /// `{"state": …}`.
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
    /// The status at `now` as JSON, the same as `pki keys status --json`
    /// (`active`, `accepted` with `accepted_until`, `action_due`,
    /// `next_wake`, `history`…; no private key).
    PKI_KEYRING_STATUS = 5,
}

pub(crate) fn read(
    store: &pki_store,
    key: &str,
    output: u32,
    now: OffsetDateTime,
) -> Result<pki_buffer, Failure> {
    if output > 5 {
        return Err(Failure::invalid(format!(
            "output {output} is not a pki_keyring_output (0-5)"
        )));
    }
    let ring = load(store, key)?;
    let bytes = zeroize::Zeroizing::new(match output {
        0 => ring.to_json()?.as_bytes().to_vec(),
        1 => ring.public_pem().into_bytes(),
        2 => ring.jwks().to_json().into_bytes(),
        3 => ring.active.key.to_pkcs8_pem()?.as_bytes().to_vec(),
        4 => ring.active.kid.clone().into_bytes(),
        _ => status(&ring, now).into_bytes(),
    });
    Ok(pki_buffer::new(&bytes))
}

/// Signs `claims` (a JSON object, used byte for byte as the payload) with
/// the active key of the ring at `key` in `store` at `now`: a compact JWS
/// with header `{"alg","kid","typ":"JWT"}` (ES256 for P-256 keys, RS256 for
/// RSA). `claims` are data, not an input: they are signed as given.
///
/// On success the caller owns `*out_token` and frees it with `pki_buffer_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (bad key), `PKI_RESULT_TIME`,
/// `PKI_RESULT_TOKEN_MALFORMED` (claims not a JSON object),
/// `PKI_RESULT_TOKEN_LIFETIME` (claims that outlive the grace period),
/// `PKI_RESULT_KEYRING_CLOCK_BEHIND`, `PKI_RESULT_NOT_INITIALIZED`,
/// `PKI_RESULT_CORRUPT_STATE`, `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `key` NULL or valid for
/// `key_len` bytes; `claims` NULL or valid for `claims_len` bytes;
/// `out_token` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_sign(
    store: *const pki_store,
    key: *const c_char,
    key_len: usize,
    claims: *const u8,
    claims_len: usize,
    now: i64,
    out_token: *mut *mut pki_buffer,
) -> pki_result {
    ffi!(out_token => {
        store = handle(store, "store");
        key = key_in(key, key_len);
        claims = bytes_in(claims, claims_len, "claims");
        now = time_in(now, "now");
    } {
        let token = load(store, key)?.sign_token(claims, now)?;
        Ok::<_, Failure>(into_handle(pki_buffer::new(token.as_bytes())))
    })
}

/// Verifies a compact JWS at `now` against the ring at `key` in `store`:
/// the active key and the accepted keys still in their grace (by `kid`),
/// then `exp` and `nbf` when present. `PKI_RESULT_OK` means accepted;
/// every other code says why not.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (bad key), `PKI_RESULT_TIME`,
/// `PKI_RESULT_TOKEN_MALFORMED`, `PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM`,
/// `PKI_RESULT_TOKEN_UNKNOWN_KID`, `PKI_RESULT_TOKEN_KEY_NO_LONGER_ACCEPTED`,
/// `PKI_RESULT_TOKEN_BAD_SIGNATURE`, `PKI_RESULT_TOKEN_EXPIRED`,
/// `PKI_RESULT_TOKEN_NOT_YET_VALID`, `PKI_RESULT_NOT_INITIALIZED`,
/// `PKI_RESULT_CORRUPT_STATE`, `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `key` NULL or valid for
/// `key_len` bytes; `token` NULL or valid for `token_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_keyring_verify(
    store: *const pki_store,
    key: *const c_char,
    key_len: usize,
    token: *const u8,
    token_len: usize,
    now: i64,
) -> pki_result {
    ffi!({
        store = handle(store, "store");
        key = key_in(key, key_len);
        token = bytes_in(token, token_len, "token");
        now = time_in(now, "now");
    } {
        load(store, key)?.verify_token(token, now)?;
        Ok(())
    })
}
