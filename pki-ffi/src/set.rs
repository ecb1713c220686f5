//! A CA set rotated in gated steps (GEP-18, StarlingX) in a store: create,
//! step (issue, target, start, ack, fail, retry, advance, abort), and read
//! the status or the per-target plan. Every change is one `Driver::step` of
//! pki-rotate's `SetEngine`: a refused step leaves the store unchanged.

use crate::abi::{handle, into_handle, json_in, json_or_default, key_in, os_rng, time_in};
use crate::buffer::pki_buffer;
use crate::error::{Failure, pki_result};
use crate::step::{pki_step, status_json};
use crate::store::pki_store;
use pki_rotate::request::StepEvent;
use pki_rotate::request::{SetCreate, SetStepRequest};
use pki_rotate::set::fingerprint;
use pki_rotate::{SetEngine, SetState};
use std::ffi::c_char;
use time::OffsetDateTime;

fn status(doc: &SetState, now: OffsetDateTime) -> String {
    status_json(&doc.status(now))
}

/// Creates a CA set at `key` in `store` (`"set"` is the CLI's): one new CA
/// per item of `cas`, valid from `now` (Unix seconds). A document already
/// there is never overwritten (`PKI_RESULT_ALREADY_INITIALIZED`).
///
/// `input` is `input_len` bytes of JSON: `{"cas": [{"name": "cluster",
/// "roles": "serving+client"}, {"name": "etcd", "roles": "serving"}],
/// "key_type": "p256", "lifetime_seconds": 157680000}`. `roles` is
/// `"serving"`, `"client"` or `"serving+client"`; `key_type` as for
/// `pki_signer_create` (default `"p256"`); `lifetime_seconds` the CAs'
/// lifetime (default 1825 days). `store`, `key` and `input` are borrowed.
///
/// On success the caller owns `*out_step` (its status is `pki set status
/// --json`'s) and frees it with `pki_step_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (bad key, malformed input),
/// `PKI_RESULT_SET_INVALID` (no CA, a bad name or role, a lifetime too
/// short), `PKI_RESULT_ALREADY_INITIALIZED`, `PKI_RESULT_STORE`,
/// `PKI_RESULT_UNKNOWN_OUTCOME`, `PKI_RESULT_CRYPTO` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `key` NULL or valid for
/// `key_len` bytes; `input` NULL or valid for `input_len` bytes; `out_step`
/// NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_set_create(
    store: *const pki_store,
    key: *const c_char,
    key_len: usize,
    input: *const c_char,
    input_len: usize,
    now: i64,
    out_step: *mut *mut pki_step,
) -> pki_result {
    ffi!(out_step => {
        store = handle(store, "store");
        key = key_in(key, key_len);
        input = json_in::<SetCreate>(input, input_len, "input");
        now = time_in(now, "now");
    } {
        let doc = SetState::new(
            &input.cas()?,
            input.algorithm(),
            input.lifetime(),
            now,
            &mut os_rng(),
        )?;
        store.create::<SetEngine>(key, &doc, now, status).map(into_handle)
    })
}

/// One step of the CA set at `key` in `store` at `now` (Unix seconds):
/// pki-rotate's `Driver::step` with the set engine, written by
/// compare-and-swap (a racing writer makes it read and decide again), the
/// same as the `pki set` commands. A refused request writes nothing.
///
/// `input` is `input_len` bytes of JSON, one request; NULL asks for nothing
/// (a report: the step's status is the set's now):
///
/// - `{"issue": {"name": "web", "ca": "cluster", "serving": true, "client":
///   false, "dns_names": […], "ip_addresses": […], "common_name": "…",
///   "target": "node-1", "lifetime_seconds": N, "replace": false}}`: issue
///   (or re-issue) the leaf `name` of CA `ca` for `target` (created if new);
///   365 days by default, cut at the CA's NotAfter; `replace` moves a leaf
///   another target has;
/// - `{"target": {"name": "node-1", "trusts": ["cluster"], "client_ca":
///   ["etcd"]}}`: create a target or set the bundles it loads (a list
///   absent is kept);
/// - `{"start": {"reason": "…", "one_at_a_time": false, "imports": [{"name":
///   "cluster", "ca": PEM, "key": PEM, "chain": PEM}]}}`: start a rotation
///   (idle or completed → trust-both), with CAs supplied instead of
///   generated (`ca` may hold the key and chain too, as StarlingX uploads
///   them); `one_at_a_time` moves serving certificates one target at a time;
/// - `{"ack": {"target": "node-1", "fingerprint": "sha256:…"}}`: the target
///   loaded the files with that fingerprint (again: nothing to do);
/// - `{"fail": {"target": "node-1", "reason": "…"}}`, `{"retry": {"target":
///   "node-1"}}`: a target failed to load its files (it blocks advance),
///   and will try again;
/// - `{"advance": {"override_reason": "…", "from": "trust-both"}}`: go to
///   the next step; both fields optional. `override_reason` passes a gate
///   that still waits for targets (recorded; the same reason again in the
///   same step is nothing to do); `from` names the step being left (once
///   left, the request is nothing to do; from another step, refused);
/// - `{"abort": {"override_reason": "…"}}`: abort to the safe target of
///   the step (before trust-new: reverting, then advance to idle; in
///   trust-new: forward to completed, refused with
///   `PKI_RESULT_SET_ABORT_STRANDS` while a target has not loaded it,
///   unless `override_reason`, recorded with the targets it strands).
///
/// `store`, `key` and `input` are borrowed for the call.
///
/// On success the caller owns `*out_step` (events: `step`, `issued`,
/// `new-ca`, `acked`, `failed`, `retrying`, `target-changed`,
/// `old-keys-destroyed`, `already-done`; status: `pki set status --json`'s,
/// with each target's fingerprint to acknowledge) and frees it with
/// `pki_step_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT`, `PKI_RESULT_SET_UNKNOWN_CA`,
/// `PKI_RESULT_SET_UNKNOWN_TARGET`, `PKI_RESULT_SET_INVALID`,
/// `PKI_RESULT_SET_WRONG_STEP`, `PKI_RESULT_SET_STEP_BLOCKED`,
/// `PKI_RESULT_SET_STALE_FINGERPRINT`, `PKI_RESULT_SET_TARGET_FAILED`,
/// `PKI_RESULT_SET_CA_REFUSED`, `PKI_RESULT_SET_TRUST_BROKEN`,
/// `PKI_RESULT_SET_ABORT_STRANDS`, the PEM and import results of an
/// imported CA, `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_CORRUPT_STATE`,
/// `PKI_RESULT_CONFLICT`, `PKI_RESULT_STORE`, `PKI_RESULT_UNKNOWN_OUTCOME`,
/// `PKI_RESULT_TIME` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `key` NULL or valid for
/// `key_len` bytes; `input` NULL or valid for `input_len` bytes; `out_step`
/// NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_set_step(
    store: *const pki_store,
    key: *const c_char,
    key_len: usize,
    input: *const c_char,
    input_len: usize,
    now: i64,
    out_step: *mut *mut pki_step,
) -> pki_result {
    ffi!(out_step => {
        store = handle(store, "store");
        key = key_in(key, key_len);
        input = json_or_default::<SetStepRequest>(input, input_len, "input");
        now = time_in(now, "now");
    } {
        let input = input.input(now)?;
        let step = store
            .driver::<SetState>()
            .step::<SetEngine, _>(key, &input, now, &mut os_rng())?;
        let (out, _) = pki_step::of_driver(step, StepEvent::of, |d| status(d, now));
        Ok::<_, Failure>(into_handle(out))
    })
}

/// Which report `pki_set_read` writes.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum pki_set_output {
    /// The status as JSON, the same as `pki set status --json` (`step`,
    /// per-target `fingerprint` and `progress`, `blocking`, `overrides`,
    /// `timeline`…).
    PKI_SET_STATUS = 0,
    /// The per-target plan as JSON: which files each target should have
    /// now. `{"TARGET": {"fingerprint": "sha256:…", "files": {"trust/CA.crt":
    /// {"contents": "PEM…", "secret": false}, …}}, …}`; private keys are
    /// included (`secret: true`), so keep it private.
    PKI_SET_PLAN = 1,
}

fn plan_json(state: &SetState) -> Result<zeroize::Zeroizing<Vec<u8>>, Failure> {
    let mut plan = serde_json::Map::new();
    for (target, files) in state.target_files()? {
        let fp = fingerprint(files.iter().map(|(p, f)| (p, f.contents.as_slice())));
        let mut entries = serde_json::Map::new();
        for (path, file) in files.iter() {
            entries.insert(
                path.to_string(),
                serde_json::json!({
                    "contents": String::from_utf8_lossy(&file.contents),
                    "secret": file.secret,
                }),
            );
        }
        plan.insert(
            target,
            serde_json::json!({ "fingerprint": fp, "files": entries }),
        );
    }
    Ok(zeroize::Zeroizing::new(
        serde_json::to_vec(&plan).map_err(|e| Failure::invalid(format!("plan: {e}")))?,
    ))
}

/// Reads the CA set at `key` in `store` without changing it, as `output`
/// (a `pki_set_output`: the status at `now`, Unix seconds, or the
/// per-target plan) to a new buffer.
///
/// On success the caller owns `*out_buffer` and frees it with
/// `pki_buffer_free` (which zeroes it).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (bad key, an unknown output),
/// `PKI_RESULT_TIME`, `PKI_RESULT_NOT_INITIALIZED`,
/// `PKI_RESULT_CORRUPT_STATE`, `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `key` NULL or valid for
/// `key_len` bytes; `out_buffer` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_set_read(
    store: *const pki_store,
    key: *const c_char,
    key_len: usize,
    output: u32,
    now: i64,
    out_buffer: *mut *mut pki_buffer,
) -> pki_result {
    ffi!(out_buffer => {
        store = handle(store, "store");
        key = key_in(key, key_len);
        now = time_in(now, "now");
    } {
        if output > 1 {
            return Err(Failure::invalid(format!(
                "output {output} is not a pki_set_output (0-1)"
            )));
        }
        let (state, _) = store.driver::<SetState>().load::<SetEngine>(key)?;
        let bytes = match output {
            0 => zeroize::Zeroizing::new(status(&state, now).into_bytes()),
            _ => plan_json(&state)?,
        };
        Ok::<_, Failure>(into_handle(pki_buffer::new(&bytes)))
    })
}
