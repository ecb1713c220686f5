//! Credentials minted by an outside system (the credential engine): the
//! embedder asks for the next action, performs it (mint, revoke) and
//! reports its result; pki commits each step before the next, so a crash
//! anywhere resumes without minting twice for one attempt, revoking the
//! current credential or forgetting an old one.
//!
//! A controller loop: `pki_cred_next` → MINT: mint once for that rotation
//! and attempt (after a crash, adopt what you captured for it instead),
//! then `pki_cred_report_minted` or `pki_cred_report_mint_failed`; REVOKE:
//! revoke the credential given (already revoked is success), then
//! `pki_cred_report_revoked` or `pki_cred_report_revoke_failed`; WAIT:
//! come back at `pki_cred_action_next_wake`.
//!
//! `pki_cred_next` is `pki_rotate::credential::advance`, the function the
//! CLI's `pki cred reconcile` runs: the same steps, the same actions, the
//! same bound (`PKI_CRED_ADVANCE_MAX_STEPS`).
//!
//! A mint that fails after it minted (it returned a credential, then an
//! error; it timed out) is reported with what it returned through
//! `pki_cred_report_mint_failed_captured`: pki keeps it and asks for its
//! revocation (REVOKE_STRAY) before the next attempt, so it cannot leak. So
//! is a mint reported after the document moved on (another replica
//! reported that attempt first). Replicas that share a store avoid minting
//! twice at all with `pki_cred_next_as`: a mint attempt is recorded with
//! the owner that recorded it, and only that owner is asked to run it.

use crate::abi::{
    bytes_in, free_handle, handle, into_handle, out_ptr, str_in, time_in, time_out, write_out,
};
use crate::buffer::{CText, pki_buffer, pki_bytes};
use crate::error::{Failure, boundary, boundary_value, pki_result};
use crate::store::{KindStore, pki_store};
use pki_rotate::Driver;
use pki_rotate::credential::status::CredentialStatus;
use pki_rotate::credential::{
    Action, AdvanceOptions, CredentialEngine, CredentialInput, CredentialPolicy, CredentialState,
    Next, Secret, WaitReason, advance, credential_key, validate_credential_name, validate_owner,
};
use std::ffi::c_char;
use time::OffsetDateTime;

/// `pki_cred_action_kind`: mint once for the action's rotation and attempt.
pub const PKI_CRED_ACTION_MINT: u32 = 1;
/// `pki_cred_action_kind`: revoke the action's credential.
pub const PKI_CRED_ACTION_REVOKE: u32 = 2;
/// `pki_cred_action_kind`: nothing to do before `pki_cred_action_wait_until`.
pub const PKI_CRED_ACTION_WAIT: u32 = 3;
/// `pki_cred_action_kind`: revoke the action's credential, what the failed
/// (or late) mint attempt (`pki_cred_action_rotation`,
/// `pki_cred_action_attempt`) returned; then `pki_cred_report_stray_revoked`
/// or `pki_cred_report_stray_revoke_failed`.
pub const PKI_CRED_ACTION_REVOKE_STRAY: u32 = 4;

/// `pki_cred_action_wait_reason`: the current credential is not due yet.
pub const PKI_CRED_WAIT_EXPIRY: u32 = 1;
/// `pki_cred_action_wait_reason`: the old credential stays usable until the
/// grace period ends.
pub const PKI_CRED_WAIT_GRACE: u32 = 2;
/// `pki_cred_action_wait_reason`: a hook failed; its retry waits.
pub const PKI_CRED_WAIT_BACKOFF: u32 = 3;
/// `pki_cred_action_wait_reason`: the mint in progress belongs to another
/// owner (`pki_cred_next_as`): only it runs the mint; look again later.
pub const PKI_CRED_WAIT_MINT_ELSEWHERE: u32 = 4;

/// The most steps one `pki_cred_next` commits before it fails with
/// `PKI_RESULT_UNEXPECTED` (a store that does not keep its writes): a
/// rotation has at most two bookkeeping steps in a row. The CLI's
/// reconcile has the same bound: both run `pki_rotate::credential::advance`.
pub const PKI_CRED_ADVANCE_MAX_STEPS: u32 = 8;
// cbindgen needs the literal; the bound is the engine's.
const _: () = assert!(PKI_CRED_ADVANCE_MAX_STEPS == pki_rotate::credential::ADVANCE_MAX_STEPS);

/// What the embedder does next for one credential. Immutable; free with
/// `pki_cred_action_free`.
pub struct pki_cred_action {
    kind: u32,
    rotation: u64,
    attempt: u32,
    wait_reason: u32,
    next_wake: i64,
    credential: CText,
}

/// # Safety
///
/// As for `str_in`.
unsafe fn name_in<'a>(name: *const c_char, name_len: usize) -> Result<&'a str, Failure> {
    // SAFETY: same contract as ours.
    let name = unsafe { str_in(name, name_len, "name") }?;
    validate_credential_name(name)?;
    Ok(name)
}

fn driver(store: &pki_store) -> Driver<KindStore<'_, CredentialState>> {
    store.driver()
}

/// Records a new credential `name` (store key `creds/NAME`, files
/// `creds/NAME/current`, `old`, `state.json`, all secret) with nothing
/// minted yet: the first `pki_cred_next` asks for a mint. Rotated once
/// `expire_seconds` have passed since its mint; the previous credential is
/// revoked `grace_seconds` after its successor's mint.
///
/// `store` is borrowed; `name` is `name_len` bytes.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (not UTF-8), `PKI_RESULT_INVALID_CREDENTIAL_NAME`,
/// `PKI_RESULT_INVALID_CREDENTIAL_POLICY`, `PKI_RESULT_ALREADY_INITIALIZED`,
/// `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `name` NULL or valid for
/// `name_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_create(
    store: *const pki_store,
    name: *const c_char,
    name_len: usize,
    expire_seconds: i64,
    grace_seconds: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let name = unsafe { name_in(name, name_len) }?;
        let policy = CredentialPolicy {
            expire: time::Duration::seconds(expire_seconds),
            grace: time::Duration::seconds(grace_seconds),
        };
        let doc = CredentialState::new(name, policy, None)?;
        driver(store).create::<CredentialEngine>(&credential_key(name), &doc)?;
        Ok(())
    })
}

/// Takes every bookkeeping step that is due at `now` (keep the current
/// credential as old, record a mint attempt), each committed on its own,
/// and says what the embedder must do next. A mint attempt it records has
/// no owner; it asks to run only attempts without one (see
/// `pki_cred_next_as`).
///
/// On success the caller owns `*out_action` and frees it with
/// `pki_cred_action_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_CREDENTIAL_NAME`, `PKI_RESULT_NOT_INITIALIZED`,
/// `PKI_RESULT_CONFLICT`, `PKI_RESULT_STORE`, `PKI_RESULT_CORRUPT_STATE`,
/// `PKI_RESULT_UNSUPPORTED_STATE_VERSION`, `PKI_RESULT_TIME`,
/// `PKI_RESULT_UNEXPECTED` (still stepping after
/// `PKI_CRED_ADVANCE_MAX_STEPS` steps; each was committed) or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `name` NULL or valid for
/// `name_len` bytes; `out_action` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_next(
    store: *const pki_store,
    name: *const c_char,
    name_len: usize,
    now: i64,
    out_action: *mut *mut pki_cred_action,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let name = unsafe { name_in(name, name_len) }?;
        out_ptr(out_action, "out_action")?;
        let now = time_in(now, "now")?;
        let action = next(store, name, None, now)?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_action, into_handle(action)) };
        Ok(())
    })
}

/// As `pki_cred_next`, for the embedder `owner` (`owner_len` bytes: 1-128
/// of `A-Z a-z 0-9 . _ : @ / -`; a name that stays the same across restarts
/// of the replica that keeps its mint captures): a mint attempt it records
/// is its own, and a mint attempt another owner recorded is never handed to
/// it — it gets `PKI_CRED_ACTION_WAIT` with `PKI_CRED_WAIT_MINT_ELSEWHERE`.
/// So replicas racing on one store mint once per attempt.
///
/// Returns as `pki_cred_next`, and `PKI_RESULT_INVALID_ARGUMENT` for an
/// unusable owner.
///
/// # Safety
///
/// As for `pki_cred_next`, with `owner` NULL or valid for `owner_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_next_as(
    store: *const pki_store,
    name: *const c_char,
    name_len: usize,
    owner: *const c_char,
    owner_len: usize,
    now: i64,
    out_action: *mut *mut pki_cred_action,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let name = unsafe { name_in(name, name_len) }?;
        // SAFETY: pointer and length from the caller (contract).
        let owner = unsafe { str_in(owner, owner_len, "owner") }?;
        validate_owner(owner)
            .map_err(|e| Failure::new(pki_result::PKI_RESULT_INVALID_ARGUMENT, e.to_string()))?;
        out_ptr(out_action, "out_action")?;
        let now = time_in(now, "now")?;
        let action = next(store, name, Some(owner), now)?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_action, into_handle(action)) };
        Ok(())
    })
}

/// The one advance, as an action handle.
fn next(
    store: &pki_store,
    name: &str,
    owner: Option<&str>,
    now: OffsetDateTime,
) -> Result<pki_cred_action, Failure> {
    let options = AdvanceOptions {
        owner,
        max_steps: None,
    };
    let advanced = advance(
        &driver(store),
        name,
        options,
        now,
        &mut crate::abi::os_rng(),
    )?;
    let action = |kind, rotation, attempt, wait_reason, credential: &[u8]| pki_cred_action {
        kind,
        rotation,
        attempt,
        wait_reason,
        next_wake: time_out(advanced.next_wake),
        credential: CText::from_bytes(credential),
    };
    Ok(match &advanced.next {
        Next::Act(Action::Mint { rotation, attempt }) => {
            action(PKI_CRED_ACTION_MINT, *rotation, *attempt, 0, &[])
        }
        Next::Act(Action::Revoke { rotation, value }) => {
            action(PKI_CRED_ACTION_REVOKE, *rotation, 0, 0, value.as_bytes())
        }
        Next::Act(Action::RevokeStray {
            rotation,
            attempt,
            value,
        }) => action(
            PKI_CRED_ACTION_REVOKE_STRAY,
            *rotation,
            *attempt,
            0,
            value.as_bytes(),
        ),
        Next::Act(Action::Wait { reason, .. }) => {
            let reason = match reason {
                WaitReason::Expiry => PKI_CRED_WAIT_EXPIRY,
                WaitReason::Grace => PKI_CRED_WAIT_GRACE,
                WaitReason::Backoff => PKI_CRED_WAIT_BACKOFF,
                WaitReason::MintElsewhere => PKI_CRED_WAIT_MINT_ELSEWHERE,
            };
            action(PKI_CRED_ACTION_WAIT, 0, 0, reason, &[])
        }
        // Only a step limit stops advance with a step due; none is given.
        Next::Step(_) => {
            return Err(Failure::new(
                pki_result::PKI_RESULT_UNEXPECTED,
                format!("credential \"{name}\": a step is still due after advancing"),
            ));
        }
        // An action this build of the C ABI does not know yet.
        other => {
            return Err(Failure::new(
                pki_result::PKI_RESULT_UNEXPECTED,
                format!("credential \"{name}\": an action the C ABI cannot express: {other:?}"),
            ));
        }
    })
}

/// `PKI_CRED_ACTION_MINT`, `PKI_CRED_ACTION_REVOKE`, `PKI_CRED_ACTION_WAIT`
/// or `PKI_CRED_ACTION_REVOKE_STRAY`; 0 for NULL.
///
/// # Safety
///
/// `action` must be NULL or a live `pki_cred_action`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_action_kind(action: *const pki_cred_action) -> u32 {
    // SAFETY: NULL or a live handle (contract).
    boundary_value(0, || unsafe { action.as_ref() }.map_or(0, |a| a.kind))
}

/// The rotation to mint for, whose old credential to revoke, or of the
/// failed mint whose stray credential to revoke; 0 for a wait or NULL.
///
/// # Safety
///
/// `action` must be NULL or a live `pki_cred_action`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_action_rotation(action: *const pki_cred_action) -> u64 {
    // SAFETY: NULL or a live handle (contract).
    boundary_value(0, || unsafe { action.as_ref() }.map_or(0, |a| a.rotation))
}

/// The attempt of a mint (1, then one more after each failure), or of the
/// failed mint whose stray credential to revoke; 0 otherwise.
///
/// # Safety
///
/// `action` must be NULL or a live `pki_cred_action`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_action_attempt(action: *const pki_cred_action) -> u32 {
    // SAFETY: NULL or a live handle (contract).
    boundary_value(0, || unsafe { action.as_ref() }.map_or(0, |a| a.attempt))
}

/// Unix seconds: the end of a wait (the time asked for otherwise); 0 for NULL.
/// The same as `pki_cred_action_next_wake`.
///
/// # Safety
///
/// `action` must be NULL or a live `pki_cred_action`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_action_wait_until(action: *const pki_cred_action) -> i64 {
    // SAFETY: NULL or a live handle (contract).
    boundary_value(0, || unsafe { action.as_ref() }.map_or(0, |a| a.next_wake))
}

/// Unix seconds: when to call `pki_cred_next` again if nothing else
/// happens — the time asked for when an action is due now, the end of the
/// wait for `PKI_CRED_ACTION_WAIT` (the engine's next wake-up); 0 for NULL.
///
/// # Safety
///
/// `action` must be NULL or a live `pki_cred_action`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_action_next_wake(action: *const pki_cred_action) -> i64 {
    // SAFETY: NULL or a live handle (contract).
    boundary_value(0, || unsafe { action.as_ref() }.map_or(0, |a| a.next_wake))
}

/// Why a `PKI_CRED_ACTION_WAIT` waits: `PKI_CRED_WAIT_EXPIRY`,
/// `PKI_CRED_WAIT_GRACE`, `PKI_CRED_WAIT_BACKOFF` or
/// `PKI_CRED_WAIT_MINT_ELSEWHERE`; 0 for other actions or NULL.
///
/// # Safety
///
/// `action` must be NULL or a live `pki_cred_action`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_action_wait_reason(action: *const pki_cred_action) -> u32 {
    boundary_value(0, || {
        // SAFETY: NULL or a live handle (contract).
        unsafe { action.as_ref() }.map_or(0, |a| a.wait_reason)
    })
}

/// The credential to revoke, old or stray (empty for other actions).
///
/// Borrowed: valid until `action` is freed (its memory is zeroed then).
///
/// # Safety
///
/// `action` must be NULL or a live `pki_cred_action`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_action_credential(action: *const pki_cred_action) -> pki_bytes {
    boundary_value(pki_bytes::EMPTY, || {
        // SAFETY: NULL or a live handle (contract).
        unsafe { action.as_ref() }.map_or(pki_bytes::EMPTY, |a| a.credential.view())
    })
}

/// Frees an action (zeroing the credential it holds). NULL is accepted.
///
/// # Safety
///
/// `action` must be NULL or a live `pki_cred_action` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_action_free(action: *mut pki_cred_action) {
    // SAFETY: NULL or a live handle freed once (contract).
    boundary_value((), || unsafe { free_handle(action) })
}

fn report(store: &pki_store, name: &str, input: CredentialInput, now: i64) -> Result<(), Failure> {
    let now = time_in(now, "now")?;
    driver(store).step::<CredentialEngine, _>(
        &credential_key(name),
        &input,
        now,
        &mut crate::abi::os_rng(),
    )?;
    Ok(())
}

/// Reports that the mint of `rotation`/`attempt` produced `credential`
/// (`credential_len` bytes, surrounding whitespace trimmed): it becomes
/// current, with `now` as its mint time. An empty credential, or one already
/// in use, is recorded as a failed attempt instead. Reporting the same mint
/// twice is accepted. A mint of an attempt the document no longer waits for
/// (another replica reported it first, or it was superseded) is kept as a
/// stray credential and revoked (`PKI_CRED_ACTION_REVOKE_STRAY`): never
/// dropped; only while a stray of that same attempt is still kept is it
/// refused (keep it, and report it again once that one is revoked).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_CREDENTIAL_NAME`, `PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT`
/// (an attempt that never started: nothing recorded),
/// `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_CONFLICT`, `PKI_RESULT_STORE`,
/// `PKI_RESULT_CORRUPT_STATE`, `PKI_RESULT_TIME` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `name` NULL or valid for
/// `name_len` bytes; `credential` NULL or valid for `credential_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_report_minted(
    store: *const pki_store,
    name: *const c_char,
    name_len: usize,
    rotation: u64,
    attempt: u32,
    credential: *const u8,
    credential_len: usize,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let name = unsafe { name_in(name, name_len) }?;
        // SAFETY: pointer and length from the caller (contract).
        let credential = unsafe { bytes_in(credential, credential_len, "credential") }?;
        let value = Secret::from_output(credential);
        report(
            store,
            name,
            CredentialInput::Minted {
                rotation,
                attempt,
                value,
            },
            now,
        )
    })
}

/// Reports that the mint of `rotation`/`attempt` failed and minted nothing
/// (`message`, `message_len` bytes of UTF-8, is shown in the status, on one
/// line with control characters escaped):
/// recorded with a retry time (30 s, doubling, at most 1 h). When the mint
/// may have made a credential before failing, report it with
/// `pki_cred_report_mint_failed_captured` instead.
///
/// Returns as `pki_cred_report_minted`, and `PKI_RESULT_INVALID_ARGUMENT`
/// for a message that is not UTF-8.
///
/// # Safety
///
/// As for `pki_cred_report_minted`, with `message` valid for `message_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_report_mint_failed(
    store: *const pki_store,
    name: *const c_char,
    name_len: usize,
    rotation: u64,
    attempt: u32,
    message: *const c_char,
    message_len: usize,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let name = unsafe { name_in(name, name_len) }?;
        // SAFETY: pointer and length from the caller (contract).
        let message = unsafe { str_in(message, message_len, "message") }?.to_string();
        report(
            store,
            name,
            CredentialInput::MintFailed {
                rotation,
                attempt,
                message,
                captured: None,
            },
            now,
        )
    })
}

/// Reports that the mint of `rotation`/`attempt` failed, and what it
/// returned before it failed (`captured`, `captured_len` bytes, trimmed;
/// NULL or empty: nothing). A mint that failed may have minted: pki keeps
/// the captured credential (secret, `creds/NAME/stray-R-A`) and asks for
/// its revocation (`PKI_CRED_ACTION_REVOKE_STRAY`) before the next
/// attempt. A captured value equal to the current or old credential is not
/// kept (it is live, not stray). Otherwise as `pki_cred_report_mint_failed`.
///
/// Returns as `pki_cred_report_mint_failed`.
///
/// # Safety
///
/// As for `pki_cred_report_mint_failed`, with `captured` NULL or valid for
/// `captured_len` bytes.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pki_cred_report_mint_failed_captured(
    store: *const pki_store,
    name: *const c_char,
    name_len: usize,
    rotation: u64,
    attempt: u32,
    message: *const c_char,
    message_len: usize,
    captured: *const u8,
    captured_len: usize,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let name = unsafe { name_in(name, name_len) }?;
        // SAFETY: pointer and length from the caller (contract).
        let message = unsafe { str_in(message, message_len, "message") }?.to_string();
        let captured = if captured.is_null() {
            None
        } else {
            // SAFETY: non-NULL, valid for `captured_len` bytes (contract).
            let bytes = unsafe { bytes_in(captured, captured_len, "captured") }?;
            Some(Secret::from_output(bytes)).filter(|v| !v.is_empty())
        };
        report(
            store,
            name,
            CredentialInput::MintFailed {
                rotation,
                attempt,
                message,
                captured,
            },
            now,
        )
    })
}

/// Reports that the stray credential of the failed mint `rotation`/`attempt`
/// is revoked (or was already gone): it is forgotten.
///
/// Returns as `pki_cred_report_minted`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `name` NULL or valid for
/// `name_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_report_stray_revoked(
    store: *const pki_store,
    name: *const c_char,
    name_len: usize,
    rotation: u64,
    attempt: u32,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let name = unsafe { name_in(name, name_len) }?;
        report(
            store,
            name,
            CredentialInput::StrayRevoked { rotation, attempt },
            now,
        )
    })
}

/// Reports that revoking the stray credential of the failed mint
/// `rotation`/`attempt` failed: it is kept, retried after a backoff, and
/// no mint runs meanwhile.
///
/// Returns as `pki_cred_report_mint_failed`.
///
/// # Safety
///
/// As for `pki_cred_report_mint_failed`.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pki_cred_report_stray_revoke_failed(
    store: *const pki_store,
    name: *const c_char,
    name_len: usize,
    rotation: u64,
    attempt: u32,
    message: *const c_char,
    message_len: usize,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let name = unsafe { name_in(name, name_len) }?;
        // SAFETY: pointer and length from the caller (contract).
        let message = unsafe { str_in(message, message_len, "message") }?.to_string();
        report(
            store,
            name,
            CredentialInput::StrayRevokeFailed {
                rotation,
                attempt,
                message,
            },
            now,
        )
    })
}

/// Reports that the old credential of `rotation` is revoked (or was
/// already): it is forgotten. Refused for the current credential.
///
/// Returns as `pki_cred_report_minted`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `name` NULL or valid for
/// `name_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_report_revoked(
    store: *const pki_store,
    name: *const c_char,
    name_len: usize,
    rotation: u64,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let name = unsafe { name_in(name, name_len) }?;
        report(store, name, CredentialInput::Revoked { rotation }, now)
    })
}

/// Reports that revoking the old credential of `rotation` failed: it is
/// kept, and the revocation retried after a backoff.
///
/// Returns as `pki_cred_report_mint_failed`.
///
/// # Safety
///
/// As for `pki_cred_report_mint_failed`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_report_revoke_failed(
    store: *const pki_store,
    name: *const c_char,
    name_len: usize,
    rotation: u64,
    message: *const c_char,
    message_len: usize,
    now: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let name = unsafe { name_in(name, name_len) }?;
        // SAFETY: pointer and length from the caller (contract).
        let message = unsafe { str_in(message, message_len, "message") }?.to_string();
        report(
            store,
            name,
            CredentialInput::RevokeFailed { rotation, message },
            now,
        )
    })
}

/// The credential's status at `now` as JSON (the objects of `pki cred
/// status --json`'s `credentials`): state, times, failure, next action,
/// history; never a credential.
///
/// On success the caller owns `*out_json` and frees it with `pki_buffer_free`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `name` NULL or valid for
/// `name_len` bytes; `out_json` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_status_json(
    store: *const pki_store,
    name: *const c_char,
    name_len: usize,
    now: i64,
    out_json: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let name = unsafe { name_in(name, name_len) }?;
        out_ptr(out_json, "out_json")?;
        let now = time_in(now, "now")?;
        let (doc, _) = driver(store).load::<CredentialEngine>(&credential_key(name))?;
        let json = serde_json::to_vec(&CredentialStatus::of(&doc, now))
            .map_err(|e| Failure::new(pki_result::PKI_RESULT_UNEXPECTED, e.to_string()))?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_json, into_handle(pki_buffer::new(&json))) };
        Ok(())
    })
}

/// The current credential (what consumers use).
///
/// On success the caller owns `*out_credential` and frees it with
/// `pki_buffer_free` (which zeroes it). `PKI_RESULT_NOT_FOUND` before the
/// first mint.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `name` NULL or valid for
/// `name_len` bytes; `out_credential` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_current(
    store: *const pki_store,
    name: *const c_char,
    name_len: usize,
    out_credential: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let name = unsafe { name_in(name, name_len) }?;
        out_ptr(out_credential, "out_credential")?;
        let (doc, _) = driver(store).load::<CredentialEngine>(&credential_key(name))?;
        let current = doc.current.ok_or_else(|| {
            Failure::new(
                pki_result::PKI_RESULT_NOT_FOUND,
                format!("credential \"{name}\" has not been minted yet"),
            )
        })?;
        let buffer = into_handle(pki_buffer::new(current.value.as_bytes()));
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_credential, buffer) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::store::pki_store_new_memory;
    use pki_result::*;

    const T0: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

    struct Store(*mut pki_store);
    impl Drop for Store {
        fn drop(&mut self) {
            // SAFETY: made by pki_store_new_memory, freed once.
            unsafe { crate::store::pki_store_free(self.0) }
        }
    }

    fn next_of(store: &Store, now: i64) -> (u32, u64, u32, i64, Vec<u8>) {
        let mut action = std::ptr::null_mut();
        // SAFETY: live store, static name, valid out pointer.
        let r = unsafe { pki_cred_next(store.0, c"db".as_ptr(), 2, now, &mut action) };
        assert_eq!(r, PKI_RESULT_OK);
        // SAFETY: `action` is live until freed below.
        let out = unsafe {
            let b = pki_cred_action_credential(action);
            let cred = if b.data.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(b.data, b.len).to_vec()
            };
            (
                pki_cred_action_kind(action),
                pki_cred_action_rotation(action),
                pki_cred_action_attempt(action),
                pki_cred_action_wait_until(action),
                cred,
            )
        };
        // SAFETY: freed once.
        unsafe { pki_cred_action_free(action) };
        out
    }

    #[test]
    fn a_rotation_through_the_c_abi_mints_once_and_never_revokes_current() {
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid out pointer.
        assert_eq!(unsafe { pki_store_new_memory(&mut raw) }, PKI_RESULT_OK);
        let store = Store(raw);
        let name = c"db".as_ptr();
        // SAFETY: live store, static name and data.
        unsafe {
            assert_eq!(
                pki_cred_create(store.0, name, 2, 3600, 3600),
                PKI_RESULT_INVALID_CREDENTIAL_POLICY
            );
            assert_eq!(
                pki_cred_create(store.0, c"Bad".as_ptr(), 3, 3600, 60),
                PKI_RESULT_INVALID_CREDENTIAL_NAME
            );
            assert_eq!(pki_cred_create(store.0, name, 2, 3600, 60), PKI_RESULT_OK);
        }
        assert_eq!(
            next_of(&store, T0),
            (PKI_CRED_ACTION_MINT, 1, 1, T0, vec![])
        );
        // SAFETY: as above.
        unsafe {
            assert_eq!(
                pki_cred_report_minted(store.0, name, 2, 1, 2, b"x".as_ptr(), 1, T0),
                PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT
            );
            assert_eq!(
                pki_cred_report_minted(store.0, name, 2, 1, 1, b"one\n".as_ptr(), 4, T0),
                PKI_RESULT_OK
            );
            assert_eq!(
                pki_cred_report_revoked(store.0, name, 2, 1, T0),
                PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT
            );
        }
        assert_eq!(
            next_of(&store, T0),
            (PKI_CRED_ACTION_WAIT, 0, 0, T0 + 3600, vec![])
        );
        // Due: the bookkeeping steps are taken, then a mint is asked for.
        assert_eq!(
            next_of(&store, T0 + 3600),
            (PKI_CRED_ACTION_MINT, 2, 1, T0 + 3600, vec![])
        );
        // SAFETY: as above.
        unsafe {
            let msg = "quota exceeded";
            assert_eq!(
                pki_cred_report_mint_failed(
                    store.0,
                    name,
                    2,
                    2,
                    1,
                    msg.as_ptr().cast(),
                    msg.len(),
                    T0 + 3600
                ),
                PKI_RESULT_OK
            );
        }
        assert_eq!(
            next_of(&store, T0 + 3600),
            (PKI_CRED_ACTION_WAIT, 0, 0, T0 + 3630, vec![])
        );
        assert_eq!(
            next_of(&store, T0 + 3630),
            (PKI_CRED_ACTION_MINT, 2, 2, T0 + 3630, vec![])
        );
        // SAFETY: as above.
        unsafe {
            assert_eq!(
                pki_cred_report_minted(store.0, name, 2, 2, 2, b"two".as_ptr(), 3, T0 + 3630),
                PKI_RESULT_OK
            );
        }
        assert_eq!(
            next_of(&store, T0 + 3631),
            (PKI_CRED_ACTION_WAIT, 0, 0, T0 + 3690, vec![])
        );
        assert_eq!(
            next_of(&store, T0 + 3690),
            (PKI_CRED_ACTION_REVOKE, 1, 0, T0 + 3690, b"one".to_vec())
        );
        let mut json = std::ptr::null_mut();
        let mut current = std::ptr::null_mut();
        // SAFETY: as above; buffers freed once.
        unsafe {
            assert_eq!(
                pki_cred_status_json(store.0, name, 2, T0 + 3690, &mut json),
                PKI_RESULT_OK
            );
            let b = crate::buffer::pki_buffer_data(json);
            let text = std::str::from_utf8(std::slice::from_raw_parts(b.data, b.len))
                .unwrap()
                .to_string();
            crate::buffer::pki_buffer_free(json);
            assert!(
                text.contains("\"state\":\"revoking\"") && !text.contains("two"),
                "{text}"
            );
            assert_eq!(
                pki_cred_report_revoked(store.0, name, 2, 1, T0 + 3690),
                PKI_RESULT_OK
            );
            assert_eq!(
                pki_cred_current(store.0, name, 2, &mut current),
                PKI_RESULT_OK
            );
            let b = crate::buffer::pki_buffer_data(current);
            assert_eq!(std::slice::from_raw_parts(b.data, b.len), b"two");
            crate::buffer::pki_buffer_free(current);
        }
        assert_eq!(next_of(&store, T0 + 3690).0, PKI_CRED_ACTION_WAIT);
    }

    #[test]
    fn a_failed_mint_that_returned_a_credential_is_revoked_before_the_next_attempt() {
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid out pointer.
        assert_eq!(unsafe { pki_store_new_memory(&mut raw) }, PKI_RESULT_OK);
        let store = Store(raw);
        let name = c"db".as_ptr();
        let msg = "timed out";
        // SAFETY: live store, static name and data.
        unsafe {
            assert_eq!(pki_cred_create(store.0, name, 2, 3600, 60), PKI_RESULT_OK);
        }
        assert_eq!(next_of(&store, T0).0, PKI_CRED_ACTION_MINT);
        // SAFETY: as above.
        unsafe {
            assert_eq!(
                pki_cred_report_mint_failed_captured(
                    store.0,
                    name,
                    2,
                    1,
                    1,
                    msg.as_ptr().cast(),
                    msg.len(),
                    b"stray\n".as_ptr(),
                    6,
                    T0
                ),
                PKI_RESULT_OK
            );
        }
        // Revoked at once, and again after the mint's backoff: no mint
        // while it may be live.
        for now in [T0, T0 + 30] {
            assert_eq!(
                next_of(&store, now),
                (PKI_CRED_ACTION_REVOKE_STRAY, 1, 1, now, b"stray".to_vec())
            );
        }
        // SAFETY: as above.
        unsafe {
            assert_eq!(
                pki_cred_report_stray_revoke_failed(
                    store.0,
                    name,
                    2,
                    1,
                    1,
                    msg.as_ptr().cast(),
                    msg.len(),
                    T0 + 30
                ),
                PKI_RESULT_OK
            );
            assert_eq!(
                pki_cred_report_stray_revoked(store.0, name, 2, 5, 1, T0 + 30),
                PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT
            );
        }
        assert_eq!(
            next_of(&store, T0 + 31),
            (PKI_CRED_ACTION_WAIT, 0, 0, T0 + 60, vec![])
        );
        // SAFETY: as above.
        unsafe {
            assert_eq!(
                pki_cred_report_stray_revoked(store.0, name, 2, 1, 1, T0 + 60),
                PKI_RESULT_OK
            );
        }
        assert_eq!(
            next_of(&store, T0 + 60),
            (PKI_CRED_ACTION_MINT, 1, 2, T0 + 60, vec![])
        );
    }

    /// The rotations of `tests/data/cred-trace.txt` through the C ABI: a
    /// controller calling `pki_cred_next` until it says wait, performing
    /// and reporting each action. `tests/cred_trace.rs` runs the same trace
    /// through the CLI: the actions asked for are the same.
    #[test]
    fn the_c_abi_asks_for_the_actions_of_the_shared_trace() {
        const TRACE: &str = include_str!("../../tests/data/cred-trace.txt");
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid out pointer.
        assert_eq!(unsafe { pki_store_new_memory(&mut raw) }, PKI_RESULT_OK);
        let store = Store(raw);
        let name = c"db".as_ptr();
        // SAFETY: live store, static name.
        let created = unsafe { pki_cred_create(store.0, name, 2, 7200, 600) };
        assert_eq!(created, PKI_RESULT_OK);
        let mut runs: Vec<(i64, Vec<Vec<String>>)> = Vec::new();
        for line in TRACE.lines() {
            let line = line.split('#').next().unwrap().trim();
            let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
            match words.first().map(String::as_str) {
                None => {}
                Some("at") => runs.push((unix(&words[1]), Vec::new())),
                Some(_) => runs.last_mut().unwrap().1.push(words),
            }
        }
        assert!(runs.len() >= 5);
        let reason_name = |r| match r {
            PKI_CRED_WAIT_EXPIRY => "expiry",
            PKI_CRED_WAIT_GRACE => "grace",
            PKI_CRED_WAIT_BACKOFF => "backoff",
            _ => "other",
        };
        for (now, lines) in runs {
            let mut asked = Vec::new();
            let mut outcomes = lines
                .iter()
                .filter(|l| l[0] != "wait")
                .map(|l| l.last().unwrap().clone());
            loop {
                let mut action = std::ptr::null_mut();
                // SAFETY: live store, static name, valid out pointer.
                let r = unsafe { pki_cred_next(store.0, name, 2, now, &mut action) };
                assert_eq!(r, PKI_RESULT_OK);
                // SAFETY: `action` is live until freed below.
                let (kind, rotation, attempt, wake, reason, credential) = unsafe {
                    let b = pki_cred_action_credential(action);
                    let credential = if b.data.is_null() {
                        String::new()
                    } else {
                        String::from_utf8(std::slice::from_raw_parts(b.data, b.len).to_vec())
                            .unwrap()
                    };
                    let out = (
                        pki_cred_action_kind(action),
                        pki_cred_action_rotation(action),
                        pki_cred_action_attempt(action),
                        pki_cred_action_next_wake(action),
                        pki_cred_action_wait_reason(action),
                        credential,
                    );
                    assert_eq!(pki_cred_action_wait_until(action), out.3);
                    pki_cred_action_free(action);
                    out
                };
                if kind == PKI_CRED_ACTION_WAIT {
                    asked.push(format!("wait {} {}", rfc3339(wake), reason_name(reason)));
                    break;
                }
                assert_eq!((wake, reason), (now, 0), "an action is due now");
                let outcome = outcomes.next().expect("more actions than the trace");
                let ok = outcome == "ok";
                let msg = "hook failed";
                // SAFETY: live store, static name and data.
                let r = unsafe {
                    match kind {
                        PKI_CRED_ACTION_MINT => {
                            asked.push(format!("mint {rotation} {attempt}"));
                            let value = format!("cred-{rotation}-{attempt}");
                            let stray = format!("stray-{rotation}-{attempt}");
                            match outcome.as_str() {
                                "ok" => pki_cred_report_minted(
                                    store.0,
                                    name,
                                    2,
                                    rotation,
                                    attempt,
                                    value.as_ptr(),
                                    value.len(),
                                    now,
                                ),
                                "fail-printed" => pki_cred_report_mint_failed_captured(
                                    store.0,
                                    name,
                                    2,
                                    rotation,
                                    attempt,
                                    msg.as_ptr().cast(),
                                    msg.len(),
                                    stray.as_ptr(),
                                    stray.len(),
                                    now,
                                ),
                                _ => pki_cred_report_mint_failed(
                                    store.0,
                                    name,
                                    2,
                                    rotation,
                                    attempt,
                                    msg.as_ptr().cast(),
                                    msg.len(),
                                    now,
                                ),
                            }
                        }
                        PKI_CRED_ACTION_REVOKE => {
                            assert!(credential.starts_with(&format!("cred-{rotation}-")));
                            asked.push(format!("revoke {rotation}"));
                            if ok {
                                pki_cred_report_revoked(store.0, name, 2, rotation, now)
                            } else {
                                pki_cred_report_revoke_failed(
                                    store.0,
                                    name,
                                    2,
                                    rotation,
                                    msg.as_ptr().cast(),
                                    msg.len(),
                                    now,
                                )
                            }
                        }
                        PKI_CRED_ACTION_REVOKE_STRAY => {
                            assert_eq!(credential, format!("stray-{rotation}-{attempt}"));
                            asked.push(format!("revoke-stray {rotation} {attempt}"));
                            if ok {
                                pki_cred_report_stray_revoked(
                                    store.0, name, 2, rotation, attempt, now,
                                )
                            } else {
                                pki_cred_report_stray_revoke_failed(
                                    store.0,
                                    name,
                                    2,
                                    rotation,
                                    attempt,
                                    msg.as_ptr().cast(),
                                    msg.len(),
                                    now,
                                )
                            }
                        }
                        other => panic!("unknown action {other}"),
                    }
                };
                assert_eq!(r, PKI_RESULT_OK);
            }
            let expected: Vec<String> = lines
                .iter()
                .map(|l| {
                    let words = if l[0] == "wait" {
                        &l[..]
                    } else {
                        &l[..l.len() - 1]
                    };
                    words.join(" ")
                })
                .collect();
            assert_eq!(asked, expected, "the run at {}", rfc3339(now));
        }
    }

    fn unix(text: &str) -> i64 {
        OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
            .unwrap()
            .unix_timestamp()
    }

    fn rfc3339(t: i64) -> String {
        pki_core::datetime::rfc3339(OffsetDateTime::from_unix_timestamp(t).unwrap())
    }

    #[test]
    fn a_mint_another_owner_recorded_is_never_handed_out_and_a_late_one_is_revoked() {
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid out pointer.
        assert_eq!(unsafe { pki_store_new_memory(&mut raw) }, PKI_RESULT_OK);
        let store = Store(raw);
        let name = c"db".as_ptr();
        let next_as = |owner: &str| {
            let mut action = std::ptr::null_mut();
            // SAFETY: live store, static name, owner valid for its length.
            let r = unsafe {
                pki_cred_next_as(
                    store.0,
                    name,
                    2,
                    owner.as_ptr().cast(),
                    owner.len(),
                    T0,
                    &mut action,
                )
            };
            if r != PKI_RESULT_OK {
                return (r, 0, 0, 0);
            }
            // SAFETY: live until freed.
            unsafe {
                let out = (
                    r,
                    pki_cred_action_kind(action),
                    pki_cred_action_wait_reason(action),
                    pki_cred_action_next_wake(action),
                );
                pki_cred_action_free(action);
                out
            }
        };
        // SAFETY: live store, static name.
        let created = unsafe { pki_cred_create(store.0, name, 2, 3600, 60) };
        assert_eq!(created, PKI_RESULT_OK);
        assert_eq!(
            next_as("replica-a"),
            (PKI_RESULT_OK, PKI_CRED_ACTION_MINT, 0, T0)
        );
        assert_eq!(
            next_as("replica-b"),
            (
                PKI_RESULT_OK,
                PKI_CRED_ACTION_WAIT,
                PKI_CRED_WAIT_MINT_ELSEWHERE,
                T0 + 30
            )
        );
        assert_eq!(
            next_of(&store, T0).0,
            PKI_CRED_ACTION_WAIT,
            "no owner: not its mint"
        );
        assert_eq!(
            next_as("replica-a").1,
            PKI_CRED_ACTION_MINT,
            "asked again after a restart"
        );
        assert_eq!(next_as("bad owner").0, PKI_RESULT_INVALID_ARGUMENT);
        // A replica that minted anyway (without owners) reports late: kept
        // and revoked, never dropped.
        // SAFETY: live store, static name and data.
        unsafe {
            assert_eq!(
                pki_cred_report_minted(store.0, name, 2, 1, 1, b"a".as_ptr(), 1, T0),
                PKI_RESULT_OK
            );
            assert_eq!(
                pki_cred_report_minted(store.0, name, 2, 1, 1, b"b".as_ptr(), 1, T0),
                PKI_RESULT_OK
            );
        }
        assert_eq!(
            next_of(&store, T0),
            (PKI_CRED_ACTION_REVOKE_STRAY, 1, 1, T0, b"b".to_vec())
        );
    }
}
