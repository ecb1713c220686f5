//! A CA set rotated in gated steps (GEP-18, StarlingX) in a store, under
//! the store key `set` (the CLI's): create, issue, target, start, ack,
//! fail, retry, advance, abort, and read the status and the per-target
//! plan as JSON. Every call is one `Driver::step` of pki-rotate's
//! `SetEngine`: a refused call leaves the store unchanged.
//!
//! Lists are passed as comma-separated text (`"cluster:serving+client,etcd:client"`,
//! `"etcd,metrics"`); text parameters are pointer and length, UTF-8, no
//! NUL terminator needed.

use crate::abi::{handle, into_handle, os_rng, out_ptr, str_in, time_in, write_out};
use crate::buffer::pki_buffer;
use crate::error::{Failure, boundary, pki_result};
use crate::store::pki_store;
use pki_rotate::set::{STORE_KEY, fingerprint};
use pki_rotate::{LeafSpec, Roles, SetEngine, SetInput, SetState};
use std::collections::BTreeSet;
use std::ffi::c_char;
use time::OffsetDateTime;

fn list(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Borrows optional text: NULL is None.
///
/// # Safety
///
/// `ptr` must be NULL or valid for `len` bytes.
unsafe fn opt_str<'a>(
    ptr: *const c_char,
    len: usize,
    what: &str,
) -> Result<Option<&'a str>, Failure> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and valid for `len` bytes (caller contract).
    unsafe { str_in(ptr, len, what) }.map(Some)
}

fn step(store: &pki_store, input: &SetInput, now: OffsetDateTime) -> Result<(), Failure> {
    store
        .driver::<SetState>()
        .step::<SetEngine, _>(STORE_KEY, input, now, &mut os_rng())?;
    Ok(())
}

fn load(store: &pki_store) -> Result<SetState, Failure> {
    Ok(store.driver::<SetState>().load::<SetEngine>(STORE_KEY)?.0)
}

/// Creates a CA set in `store`: one new CA per item of `cas`, a
/// comma-separated list of `NAME:ROLES` (ROLES: `serving`, `client` or
/// `serving+client`), with P-256 keys valid for `lifetime_seconds` from
/// `now` (Unix seconds). Fails when a set exists there already.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT`, `PKI_RESULT_SET_INVALID`,
/// `PKI_RESULT_ALREADY_INITIALIZED`, `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `cas` NULL or valid for
/// `cas_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_set_create(
    store: *const pki_store,
    cas: *const c_char,
    cas_len: usize,
    lifetime_seconds: i64,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let cas = unsafe { str_in(cas, cas_len, "cas") }?;
        let now = time_in(now, "now")?;
        let mut parsed = Vec::new();
        for item in list(cas) {
            let (name, roles) = item
                .split_once(':')
                .ok_or_else(|| Failure::invalid(format!("\"{item}\" is not NAME:ROLES")))?;
            let roles: Roles = roles.parse()?;
            parsed.push((name.to_string(), roles));
        }
        let state = SetState::new(
            &parsed,
            pki_core::KeyAlgorithm::EcdsaP256,
            crate::abi::seconds(lifetime_seconds),
            now,
            &mut os_rng(),
        )?;
        store
            .driver::<SetState>()
            .create::<SetEngine>(STORE_KEY, &state)?;
        Ok(())
    })
}

/// Issues (or re-issues) the leaf `name` of CA `ca` for `target` (created
/// if new): a serving certificate when `serving`, a client certificate when
/// `client`, both when both; `dns` is a comma-separated list of DNS names
/// (empty for a client certificate). Valid for 365 days, cut at the CA's
/// NotAfter.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT`, `PKI_RESULT_SET_UNKNOWN_CA`,
/// `PKI_RESULT_SET_INVALID`, `PKI_RESULT_SET_TRUST_BROKEN`,
/// `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; each text pointer NULL or
/// valid for its length.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pki_set_issue(
    store: *const pki_store,
    name: *const c_char,
    name_len: usize,
    ca: *const c_char,
    ca_len: usize,
    serving: bool,
    client: bool,
    dns: *const c_char,
    dns_len: usize,
    target: *const c_char,
    target_len: usize,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointers and lengths from the caller (contract).
        let (name, ca, dns, target) = unsafe {
            (
                str_in(name, name_len, "name")?,
                str_in(ca, ca_len, "ca")?,
                str_in(dns, dns_len, "dns")?,
                str_in(target, target_len, "target")?,
            )
        };
        let spec = LeafSpec {
            ca: ca.to_string(),
            serving,
            client,
            dns_names: list(dns),
            ip_addresses: Vec::new(),
            common_name: None,
            target: target.to_string(),
            lifetime: pki_rotate::set::DEFAULT_SET_LEAF_LIFETIME,
        };
        let input = SetInput::Issue {
            replace: false,
            name: name.to_string(),
            spec,
        };
        step(store, &input, time_in(now, "now")?)
    })
}

/// Creates `target` or sets the bundles it loads: `trusts` (CAs whose
/// servers it verifies) and `client_ca` (CAs whose clients it verifies),
/// comma-separated; NULL keeps a list as it is.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT`, `PKI_RESULT_SET_UNKNOWN_CA`,
/// `PKI_RESULT_SET_INVALID`, `PKI_RESULT_NOT_INITIALIZED`,
/// `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; each text pointer NULL or
/// valid for its length.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_set_target(
    store: *const pki_store,
    target: *const c_char,
    target_len: usize,
    trusts: *const c_char,
    trusts_len: usize,
    client_ca: *const c_char,
    client_ca_len: usize,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointers and lengths from the caller (contract).
        let (target, trusts, client_ca) = unsafe {
            (
                str_in(target, target_len, "target")?,
                opt_str(trusts, trusts_len, "trusts")?,
                opt_str(client_ca, client_ca_len, "client_ca")?,
            )
        };
        let set = |v: Option<&str>| v.map(|t| list(t).into_iter().collect::<BTreeSet<_>>());
        let input = SetInput::Target {
            name: target.to_string(),
            trusts: set(trusts),
            client_ca: set(client_ca),
        };
        step(store, &input, time_in(now, "now")?)
    })
}

/// Starts a rotation (idle or completed → trust-both) for `reason`; with
/// `one_at_a_time`, serving certificates later move one target at a time.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT`, `PKI_RESULT_SET_WRONG_STEP` (a rotation
/// runs), `PKI_RESULT_SET_CA_REFUSED`, `PKI_RESULT_SET_INVALID`,
/// `PKI_RESULT_SET_TRUST_BROKEN`, `PKI_RESULT_NOT_INITIALIZED`,
/// `PKI_RESULT_CONFLICT`, `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `reason` NULL or valid for
/// `reason_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_set_start(
    store: *const pki_store,
    reason: *const c_char,
    reason_len: usize,
    one_at_a_time: bool,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let reason = unsafe { str_in(reason, reason_len, "reason") }?;
        let input = SetInput::Start {
            reason: reason.to_string(),
            imports: Vec::new(),
            one_at_a_time,
        };
        step(store, &input, time_in(now, "now")?)
    })
}

/// Records that `target` loaded the files with `fingerprint` (see
/// `pki_set_plan_json`). Acknowledging the current fingerprint again
/// changes nothing; another fingerprint is refused.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT`, `PKI_RESULT_SET_UNKNOWN_TARGET`,
/// `PKI_RESULT_SET_STALE_FINGERPRINT`, `PKI_RESULT_SET_TARGET_FAILED`,
/// `PKI_RESULT_SET_TRUST_BROKEN`, `PKI_RESULT_NOT_INITIALIZED`,
/// `PKI_RESULT_CONFLICT`, `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; each text pointer NULL or
/// valid for its length.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_set_ack(
    store: *const pki_store,
    target: *const c_char,
    target_len: usize,
    fingerprint: *const c_char,
    fingerprint_len: usize,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointers and lengths from the caller (contract).
        let (target, fp) = unsafe {
            (
                str_in(target, target_len, "target")?,
                str_in(fingerprint, fingerprint_len, "fingerprint")?,
            )
        };
        let input = SetInput::Ack {
            target: target.to_string(),
            fingerprint: fp.to_string(),
        };
        step(store, &input, time_in(now, "now")?)
    })
}

/// Goes to the next step. When targets have not acknowledged their files
/// (or failed), it is refused with `PKI_RESULT_SET_STEP_BLOCKED` unless
/// `override_reason` (NULL: none) gives a reason, which is recorded.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT`, `PKI_RESULT_SET_WRONG_STEP`,
/// `PKI_RESULT_SET_STEP_BLOCKED`, `PKI_RESULT_SET_TRUST_BROKEN`,
/// `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_CONFLICT`, `PKI_RESULT_STORE`
/// or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `override_reason` NULL or
/// valid for `override_reason_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_set_advance(
    store: *const pki_store,
    override_reason: *const c_char,
    override_reason_len: usize,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let reason = unsafe { opt_str(override_reason, override_reason_len, "override_reason") }?;
        let input = SetInput::Advance {
            from: None,
            override_reason: reason.map(str::to_string),
        };
        step(store, &input, time_in(now, "now")?)
    })
}

/// Records that `target` failed to load its files, for `reason`: it blocks
/// `pki_set_advance` until `pki_set_retry` makes it pending again.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT`, `PKI_RESULT_SET_UNKNOWN_TARGET`,
/// `PKI_RESULT_SET_WRONG_STEP` (no rotation runs), `PKI_RESULT_SET_INVALID`
/// (an empty reason), `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_CONFLICT`,
/// `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; each text pointer NULL or
/// valid for its length.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_set_fail(
    store: *const pki_store,
    target: *const c_char,
    target_len: usize,
    reason: *const c_char,
    reason_len: usize,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointers and lengths from the caller (contract).
        let (target, reason) = unsafe {
            (
                str_in(target, target_len, "target")?,
                str_in(reason, reason_len, "reason")?,
            )
        };
        let input = SetInput::Fail {
            target: target.to_string(),
            reason: reason.to_string(),
        };
        step(store, &input, time_in(now, "now")?)
    })
}

/// Makes the failed `target` pending again: it must acknowledge its files
/// anew (`pki_set_ack`) before the step can advance.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT`, `PKI_RESULT_SET_UNKNOWN_TARGET`,
/// `PKI_RESULT_SET_INVALID` (it has not failed),
/// `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_CONFLICT`, `PKI_RESULT_STORE`
/// or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `target` NULL or valid for
/// `target_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_set_retry(
    store: *const pki_store,
    target: *const c_char,
    target_len: usize,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let target = unsafe { str_in(target, target_len, "target") }?;
        let input = SetInput::Retry {
            target: target.to_string(),
        };
        step(store, &input, time_in(now, "now")?)
    })
}

/// Aborts the rotation: before trust-new, to reverting (targets ack, then
/// advance to idle, every leaf back on the old CAs); in trust-new, forward
/// to completed, which destroys the old CA keys and so is refused with
/// `PKI_RESULT_SET_ABORT_STRANDS` while a target has not acknowledged its
/// trust-new files (see `pki_set_abort_override`). Refused with
/// `PKI_RESULT_SET_WRONG_STEP` when nothing runs or it already reverts.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_SET_WRONG_STEP`, `PKI_RESULT_SET_ABORT_STRANDS`,
/// `PKI_RESULT_SET_TRUST_BROKEN`, `PKI_RESULT_NOT_INITIALIZED`,
/// `PKI_RESULT_CONFLICT`, `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_set_abort(store: *const pki_store, now: i64) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        let input = SetInput::Abort {
            override_reason: None,
        };
        step(store, &input, time_in(now, "now")?)
    })
}

/// Aborts like `pki_set_abort`, but an abort that would strand targets
/// proceeds for `override_reason`, which is recorded with the targets it
/// stranded (the status's `overrides`).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT`, `PKI_RESULT_SET_WRONG_STEP`,
/// `PKI_RESULT_SET_INVALID` (an empty reason where one is needed),
/// `PKI_RESULT_SET_TRUST_BROKEN`, `PKI_RESULT_NOT_INITIALIZED`,
/// `PKI_RESULT_CONFLICT`, `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `override_reason` NULL or
/// valid for `override_reason_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_set_abort_override(
    store: *const pki_store,
    override_reason: *const c_char,
    override_reason_len: usize,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let reason = unsafe { str_in(override_reason, override_reason_len, "override_reason") }?;
        let input = SetInput::Abort {
            override_reason: Some(reason.to_string()),
        };
        step(store, &input, time_in(now, "now")?)
    })
}

/// The status as JSON, the same as `pki set status --json` (`step`,
/// per-target `fingerprint` and `progress`, `blocking`, `overrides`,
/// `timeline`…).
///
/// On success the caller owns `*out_json` and frees it with
/// `pki_buffer_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_CORRUPT_STATE`,
/// `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `out_json` NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_set_status_json(
    store: *const pki_store,
    now: i64,
    out_json: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        out_ptr(out_json, "out_json")?;
        let state = load(store)?;
        let json = serde_json::to_vec(&state.status(time_in(now, "now")?))
            .map_err(|e| Failure::invalid(format!("status: {e}")))?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_json, into_handle(pki_buffer::new(&json))) };
        Ok(())
    })
}

/// The per-target plan as JSON: which files each target should have now.
/// `{"TARGET": {"fingerprint": "sha256:…", "files": {"trust/CA.crt":
/// {"contents": "PEM…", "secret": false}, …}}, …}`; private keys are
/// included (`secret: true`), so the caller must keep the buffer private.
///
/// On success the caller owns `*out_json` and frees it with
/// `pki_buffer_free` (which zeroizes it).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_CORRUPT_STATE`,
/// `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `out_json` NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_set_plan_json(
    store: *const pki_store,
    out_json: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        out_ptr(out_json, "out_json")?;
        let state = load(store)?;
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
        let json = zeroize::Zeroizing::new(
            serde_json::to_vec(&plan).map_err(|e| Failure::invalid(format!("plan: {e}")))?,
        );
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_json, into_handle(pki_buffer::new(&json))) };
        Ok(())
    })
}
