//! The generic entry points: a document kind and one JSON request of
//! pki-rotate's request schema (`pki_rotate::request`) through
//! `pki_document_create`, `pki_document_step` and `pki_document_read`,
//! whatever the engine.
//!
//! Every create and step runs pki-rotate's driver (load, decide, write by
//! compare-and-swap, retry from a fresh read on a lost race) and returns
//! what it did as one JSON document (pki-rotate's `StepResult`) in a
//! buffer; a read changes nothing and returns a buffer.

use crate::abi::{handle, key_in, opt_bytes, time_in};
use crate::buffer::pki_buffer;
use crate::error::{Failure, pki_result};
use crate::step::step_buffer;
use crate::store::pki_store;
use crate::{cred, keys, set, signer};
use pki_rotate::request;
use pki_rotate::request::StepResult;
use serde::de::DeserializeOwned;
use std::ffi::c_char;
use time::OffsetDateTime;

/// The kind of document a generic function works on; the `kind` argument
/// of `pki_document_create`, `pki_document_step` and `pki_document_read`.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum pki_kind {
    /// A signer (service-CA scheme, and a CA signed by someone else's
    /// root): `key` is its store key (`"signer"` is the CLI's).
    PKI_KIND_SIGNER = 0,
    /// A CA set rotated in gated steps: `key` is its store key (`"set"`).
    PKI_KIND_SET = 1,
    /// A key ring of token signing keys: `key` is its store key (`"keys"`).
    PKI_KIND_KEYRING = 2,
    /// A credential minted by an outside system: `key` is its name (1-64
    /// of `a-z0-9._-`, not starting with `.`), kept at `creds/NAME`.
    PKI_KIND_CRED = 3,
}

/// The kind named by a `kind` argument.
fn kind_in(kind: u32) -> Result<pki_kind, Failure> {
    Ok(match kind {
        0 => pki_kind::PKI_KIND_SIGNER,
        1 => pki_kind::PKI_KIND_SET,
        2 => pki_kind::PKI_KIND_KEYRING,
        3 => pki_kind::PKI_KIND_CRED,
        other => {
            return Err(Failure::invalid(format!(
                "parameter `kind`: {other} is not a pki_kind (0-3)"
            )));
        }
    })
}

/// A request that must be given.
fn required<T: DeserializeOwned>(bytes: Option<&[u8]>) -> Result<T, Failure> {
    let bytes = bytes.ok_or_else(|| Failure::null("request"))?;
    Ok(request::from_json("parameter `request`", bytes)?)
}

/// A request whose absence (or `{}`) is the engine's default.
fn or_default<T: DeserializeOwned + Default>(bytes: Option<&[u8]>) -> Result<T, Failure> {
    Ok(request::from_json_or_default("parameter `request`", bytes)?)
}

pub(crate) fn create(
    store: &pki_store,
    kind: pki_kind,
    key: &str,
    request: Option<&[u8]>,
    now: OffsetDateTime,
) -> Result<StepResult, Failure> {
    match kind {
        pki_kind::PKI_KIND_SIGNER => signer::create(store, key, &required(request)?, now),
        pki_kind::PKI_KIND_SET => set::create(store, key, &required(request)?, now),
        pki_kind::PKI_KIND_KEYRING => keys::create(store, key, &or_default(request)?, now),
        pki_kind::PKI_KIND_CRED => cred::create(store, cred::name(key)?, &required(request)?, now),
    }
}

pub(crate) fn step(
    store: &pki_store,
    kind: pki_kind,
    key: &str,
    request: Option<&[u8]>,
    now: OffsetDateTime,
) -> Result<StepResult, Failure> {
    match kind {
        pki_kind::PKI_KIND_SIGNER => signer::step(store, key, &or_default(request)?, now),
        pki_kind::PKI_KIND_SET => set::step(store, key, &or_default(request)?, now),
        pki_kind::PKI_KIND_KEYRING => keys::step(store, key, &or_default(request)?, now),
        pki_kind::PKI_KIND_CRED => cred::step(store, cred::name(key)?, &or_default(request)?, now),
    }
}

pub(crate) fn read(
    store: &pki_store,
    kind: pki_kind,
    key: &str,
    output: u32,
    now: OffsetDateTime,
) -> Result<pki_buffer, Failure> {
    match kind {
        pki_kind::PKI_KIND_SIGNER => signer::read(store, key, output, now),
        pki_kind::PKI_KIND_SET => set::read(store, key, output, now),
        pki_kind::PKI_KIND_KEYRING => keys::read(store, key, output, now),
        pki_kind::PKI_KIND_CRED => cred::read(store, cred::name(key)?, output, now),
    }
}

/// Creates a document of `kind` at `key` in `store` from `request` at
/// `now` (Unix seconds). A document already there is never overwritten:
/// `PKI_RESULT_ALREADY_INITIALIZED`, and nothing is written.
///
/// `request` is `request_len` bytes of JSON, one of pki-rotate's create
/// requests (`pki_rotate::request`; an optional `"version": 1`, unknown
/// fields refused), by kind:
///
/// - `PKI_KIND_SIGNER`: `{"common_name": "service-ca", "key_type": "p256",
///   "policy": {"lifetime_seconds", "min_trust_seconds",
///   "reload_interval_seconds", "leaf_refresh_fraction",
///   "keep_previous_root"}}` (a new CA), `{"import": {"ca": PEM, "key":
///   PEM, "chain": PEM}, "policy": {…}}` (a CA signed by someone else's
///   root) or `{"state": {…}}` (a saved document, `PKI_SIGNER_STATE`). A
///   new CA with `"key_store": "pkcs11:token=LABEL"` has its key made in
///   that PKCS#11 token, through the module the store was opened with
///   (`pkcs11_module` of `pki_store_open`; without it
///   `PKI_RESULT_PKCS11_NOT_OPEN`, nothing made or written);
/// - `PKI_KIND_SET`: `{"cas": [{"name": "cluster", "roles":
///   "serving+client"}], "key_type": "p256", "lifetime_seconds": N}`;
/// - `PKI_KIND_KEYRING` (NULL: a new ring with the default policy):
///   `{"policy": {"key_type", "lifetime_seconds", "grace_seconds",
///   "max_token_lifetime_seconds"}}`, `{"import": "PEM or JWK Set",
///   "policy": {…}}` or `{"state": {…}}` (`PKI_KEYRING_STATE`). A new
///   ring with `"key_store": "pkcs11:token=LABEL"` has its signing keys
///   made in that PKCS#11 token, as a signer's CA key is;
/// - `PKI_KIND_CRED`: `{"expire_seconds": N, "grace_seconds": N}` (the
///   grace shorter than the expiry); nothing is minted yet.
///
/// `key` is `key_len` bytes: a store key (`/`-separated segments of
/// `a-z`, `0-9`, `.`, `_`, `-`), or for a credential its name. `store`,
/// `key` and `request` are borrowed for the call.
///
/// On success the caller owns `*out_result` and frees it with
/// `pki_buffer_free`: the step result (see `pki_document_step`), `changed`
/// true, no events. A signer's whole document is read with
/// `pki_signer_load` (or `pki_document_read`).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (an unknown kind, a bad key, a malformed
/// request, an unknown field or schema version), the engine's own codes
/// (`PKI_RESULT_INVALID_POLICY`, the PEM and import results,
/// `PKI_RESULT_SET_INVALID`, `PKI_RESULT_KEYRING_POLICY`,
/// `PKI_RESULT_INVALID_CREDENTIAL_NAME`…), `PKI_RESULT_CORRUPT_STATE`,
/// `PKI_RESULT_UNSUPPORTED_STATE_VERSION`,
/// `PKI_RESULT_ALREADY_INITIALIZED`, `PKI_RESULT_STORE`,
/// `PKI_RESULT_UNKNOWN_OUTCOME`, `PKI_RESULT_TIME`, `PKI_RESULT_CRYPTO`,
/// the PKCS#11 codes (800-899: a CA key made in a token) or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `key` NULL or valid for
/// `key_len` bytes; `request` NULL or valid for `request_len` bytes;
/// `out_result` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_document_create(
    store: *const pki_store,
    kind: u32,
    key: *const c_char,
    key_len: usize,
    request: *const c_char,
    request_len: usize,
    now: i64,
    out_result: *mut *mut pki_buffer,
) -> pki_result {
    ffi!(out_result => {
        store = handle(store, "store");
        kind = kind_in(kind);
        key = key_in(key, key_len);
        request = opt_bytes(request.cast::<u8>(), request_len, "request");
        now = time_in(now, "now");
    } create(store, kind, key, request, now).and_then(|r| step_buffer(&r)).map(crate::abi::into_handle))
}

/// One step of the document of `kind` at `key` in `store` at `now` (Unix
/// seconds): pki-rotate's `Driver::step`, the loop the CLI runs. Read the
/// document and its revision, decide, and, only when something changed,
/// write the result if the revision is still the one read; when another
/// writer changed it in between, read again and decide again (after 8 lost
/// writes in a row: `PKI_RESULT_CONFLICT`). A refused step writes nothing.
///
/// `request` is `request_len` bytes of JSON, one of pki-rotate's step
/// requests (`pki_rotate::request`), or NULL (or `{}`) for the periodic
/// step (for a CA set a report, for a credential an advance). By kind:
///
/// - `PKI_KIND_SIGNER`: every field optional: `"policy"`, `"forced":
///   {"reason", "grace_seconds", "no_bridges"}`, `"allow_trust_break":
///   "reason"`, `"leaves": [{"request"|"replace": {"name", "kind",
///   "dns_names", "ip_addresses", "lifetime_seconds"}}, {"remove"|"renew":
///   {"name"}}]`; alone: `"rotate_to": {"ca", "key", "chain",
///   "current_keys", "proposed_keys", "force"}`, `"renew_same_key": true`,
///   `"ack": {"consumer", "fingerprint"}`; `"unless_idle": true` (alone or
///   with `leaves`) decides from the store's summary (the result's `idle`
///   and `by_parts`). A rotation that would cut consumers off is
///   `PKI_RESULT_TRUST_BREAK` unless `allow_trust_break` gives a reason;
/// - `PKI_KIND_SET`: one of `{"issue": {"name", "ca", "serving", "client",
///   "dns_names", "ip_addresses", "common_name", "target",
///   "lifetime_seconds", "replace"}}`, `{"target": {"name", "trusts",
///   "client_ca"}}`, `{"start": {"reason", "one_at_a_time", "imports":
///   [{"name", "ca", "key", "chain"}]}}`, `{"ack": {"target",
///   "fingerprint"}}`, `{"fail": {"target", "reason"}}`, `{"retry":
///   {"target"}}`, `{"advance": {"override_reason", "from"}}`, `{"abort":
///   {"override_reason"}}`;
/// - `PKI_KIND_KEYRING`: `{"forced": "reason", "retire": ["kid", …]}`;
/// - `PKI_KIND_CRED`: `{"advance": {"owner": "replica-a"}}` (the default:
///   the embedder's next action is the result's `action`), or a report:
///   `{"minted": {"rotation", "attempt", "credential" |
///   "credential_base64"}}`, `{"mint_failed": {"rotation", "attempt",
///   "message", "captured" | "captured_base64"}}`, `{"revoked":
///   {"rotation"}}`, `{"revoke_failed": {"rotation", "message"}}`,
///   `{"stray_revoked": {"rotation", "attempt"}}`, `{"stray_revoke_failed":
///   {"rotation", "attempt", "message"}}`.
///
/// `store`, `key` and `request` are borrowed for the call. On success the
/// caller owns `*out_result` and frees it with `pki_buffer_free` (which
/// zeroes it): the step result, one JSON object (pki-rotate's
/// `StepResult`):
///
/// ```json
/// {"version": 1, "changed": true, "next_wake": 1798761600,
///  "revision": "…", "attempts": 1, "idle": false, "by_parts": false,
///  "events": [{"kind": "rotated", …, "message": "…"}],
///  "status": {…},
///  "action": {"kind": "mint", "rotation": 1, "attempt": 1}}
/// ```
///
/// `changed`: whether the step wrote; `next_wake`: when to step again if
/// nothing else happens (Unix seconds, never before `now`); `revision`:
/// the document's revision after the step (opaque); `attempts`: the
/// read-decide-write rounds it took (1 without contention); `idle`:
/// decided from the store's summary, nothing read, `status` null;
/// `by_parts`: over the document's head and the named leaves only (the
/// status is the part's); `events`: what happened, in order, each an
/// object with `kind` (kebab-case), the event's fields (times in RFC 3339)
/// and `message` (one line); `status`: the status of the document now in
/// the store (as the CLI's `status --json`); `action` (after a credential
/// advance only): `kind` `"mint"`, `"revoke"`, `"wait"` or
/// `"revoke_stray"`, `rotation`, `attempt`, for a wait `wait_reason`
/// (`"expiry"`, `"grace"`, `"backoff"`, `"mint_elsewhere"`), and for a
/// revoke the credential as `credential_base64`. Nothing is
/// written on failure, except `PKI_RESULT_UNKNOWN_OUTCOME`: the write's
/// answer was lost and it may have landed (step again: it is safe).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT`, `PKI_RESULT_NOT_INITIALIZED`,
/// `PKI_RESULT_CONFLICT`, `PKI_RESULT_STORE`, `PKI_RESULT_UNKNOWN_OUTCOME`,
/// `PKI_RESULT_CORRUPT_STATE`, `PKI_RESULT_UNSUPPORTED_STATE_VERSION`, the
/// engine's own codes (signer 300-399 and 700-749, set 600-649, key ring
/// 650-679, credential 680-699), the PKCS#11 codes (800-899: a CA key in
/// a token; `PKI_RESULT_PKCS11_NOT_OPEN` when the store was opened without
/// its module), `PKI_RESULT_TIME`, `PKI_RESULT_CRYPTO`,
/// `PKI_RESULT_UNEXPECTED` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// As for `pki_document_create`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_document_step(
    store: *const pki_store,
    kind: u32,
    key: *const c_char,
    key_len: usize,
    request: *const c_char,
    request_len: usize,
    now: i64,
    out_result: *mut *mut pki_buffer,
) -> pki_result {
    ffi!(out_result => {
        store = handle(store, "store");
        kind = kind_in(kind);
        key = key_in(key, key_len);
        request = opt_bytes(request.cast::<u8>(), request_len, "request");
        now = time_in(now, "now");
    } step(store, kind, key, request, now).and_then(|r| step_buffer(&r)).map(crate::abi::into_handle))
}

/// Reads the document of `kind` at `key` in `store` without changing it,
/// as `output` at `now` (Unix seconds), to a new buffer. `output` is, by
/// kind, a `pki_signer_output` (the state, the status), a `pki_set_output`
/// (the status, the per-target plan), a `pki_keyring_output` (the state,
/// the public PEM, the JWK Set, the active key or its id, the status) or a
/// `pki_cred_output` (the status, the current credential).
///
/// On success the caller owns `*out_buffer` and frees it with
/// `pki_buffer_free` (which zeroes it).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (an unknown kind or output, a bad key),
/// `PKI_RESULT_TIME`, `PKI_RESULT_NOT_FOUND` (a credential not minted
/// yet), `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_CORRUPT_STATE`,
/// `PKI_RESULT_UNSUPPORTED_STATE_VERSION`, `PKI_RESULT_STORE`,
/// `PKI_RESULT_CRYPTO` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `key` NULL or valid for
/// `key_len` bytes; `out_buffer` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_document_read(
    store: *const pki_store,
    kind: u32,
    key: *const c_char,
    key_len: usize,
    output: u32,
    now: i64,
    out_buffer: *mut *mut pki_buffer,
) -> pki_result {
    ffi!(out_buffer => {
        store = handle(store, "store");
        kind = kind_in(kind);
        key = key_in(key, key_len);
        now = time_in(now, "now");
    } read(store, kind, key, output, now).map(crate::abi::into_handle))
}

#[cfg(test)]
mod tests;
