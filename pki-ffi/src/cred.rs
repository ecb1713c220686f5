//! Credentials minted by an outside system (the credential engine): the
//! embedder asks for the next action, performs it (mint, revoke) and
//! reports its result; pki commits each step before the next, so a crash
//! anywhere resumes without minting twice for one attempt, revoking the
//! current credential or forgetting an old one.
//!
//! A controller loop: `pki_cred_step` with NULL input (advance) →
//! `pki_step_action`: MINT: mint once for that rotation and attempt (after
//! a crash, adopt what you captured for it instead), then report `minted`
//! or `mint_failed`; REVOKE: revoke the credential given (already revoked
//! is success), then report `revoked` or `revoke_failed`; REVOKE_STRAY:
//! revoke what a failed or late mint printed, then report `stray_revoked`
//! or `stray_revoke_failed`; WAIT: advance again at `pki_step_next_wake`.
//!
//! An advance is `pki_rotate::credential::advance`, the function the CLI's
//! `pki cred reconcile` runs: the same steps, the same actions, the same
//! bound (`PKI_CRED_ADVANCE_MAX_STEPS`).

mod action;

pub(crate) use action::ActionEntry;
pub use action::{
    PKI_CRED_ACTION_MINT, PKI_CRED_ACTION_REVOKE, PKI_CRED_ACTION_REVOKE_STRAY,
    PKI_CRED_ACTION_WAIT, PKI_CRED_ADVANCE_MAX_STEPS, PKI_CRED_WAIT_BACKOFF, PKI_CRED_WAIT_EXPIRY,
    PKI_CRED_WAIT_GRACE, PKI_CRED_WAIT_MINT_ELSEWHERE, pki_cred_action,
};

use crate::abi::{handle, into_handle, json_in, json_or_default, os_rng, str_in, time_in};
use crate::buffer::pki_buffer;
use crate::error::{Failure, pki_result};
use crate::step::{pki_step, status_json};
use crate::store::pki_store;
use pki_rotate::Files;
use pki_rotate::credential::status::CredentialStatus;
use pki_rotate::credential::{
    AdvanceOptions, CredentialEngine, CredentialState, Next, advance, credential_key,
    validate_credential_name,
};
use pki_rotate::request::{CredCreate, CredRequest, CredStep, NextAction, StepEvent, StepResult};
use pki_rotate::{Driver, Revision, Store};
use std::cell::{Cell, RefCell};
use std::ffi::c_char;
use time::OffsetDateTime;

fn status(doc: &CredentialState, now: OffsetDateTime) -> String {
    status_json(&CredentialStatus::of(doc, now))
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

/// A store seen through `advance`, which reports neither the revision of
/// the document it ends on nor the rounds it took: the last revision read
/// or written, and the number of reads (one per round).
struct Recording<S> {
    inner: S,
    revision: RefCell<Option<Revision>>,
    rounds: Cell<u32>,
}

impl<S: Store> Store for Recording<S> {
    fn location(&self) -> String {
        self.inner.location()
    }

    fn get(&self, key: &str) -> pki_rotate::Result<Option<(Files, Revision)>> {
        let got = self.inner.get(key)?;
        self.rounds.set(self.rounds.get() + 1);
        *self.revision.borrow_mut() = got.as_ref().map(|(_, r)| r.clone());
        Ok(got)
    }

    fn put(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
    ) -> pki_rotate::Result<Revision> {
        let revision = self.inner.put(key, expected, files)?;
        *self.revision.borrow_mut() = Some(revision.clone());
        Ok(revision)
    }
}

fn step(
    store: &pki_store,
    name: &str,
    input: &CredStep,
    now: OffsetDateTime,
) -> Result<*mut pki_step, Failure> {
    let owner = match input.request()? {
        CredRequest::Report(report) => {
            let step = store
                .driver::<CredentialState>()
                .step::<CredentialEngine, _>(&credential_key(name), &report, now, &mut os_rng())?;
            let (out, _) = pki_step::of_driver(step, StepEvent::of_credential, |d| status(d, now));
            return Ok(into_handle(out));
        }
        CredRequest::Advance(owner) => owner,
    };
    let driver = Driver::new(Recording {
        inner: store.of::<CredentialState>(),
        revision: RefCell::new(None),
        rounds: Cell::new(0),
    });
    let options = AdvanceOptions {
        owner: owner.as_deref(),
        max_steps: None,
    };
    let advanced = advance(&driver, name, options, now, &mut os_rng())?;
    let action = match &advanced.next {
        Next::Act(action) => NextAction::of(action),
        // Only a step limit stops advance with a step due; none is given.
        Next::Step(_) | _ => {
            return Err(Failure::new(
                pki_result::PKI_RESULT_UNEXPECTED,
                format!("credential \"{name}\": a step is still due after advancing"),
            ));
        }
    };
    let recorded = driver.store();
    let revision = recorded
        .revision
        .borrow()
        .clone()
        .unwrap_or_else(|| Revision::new(""));
    let result = StepResult::of_advance(
        &advanced,
        &revision,
        recorded.rounds.get(),
        action,
        &status(&advanced.document, now),
    );
    Ok(into_handle(pki_step::of_result(result)))
}

/// Records a new credential `name` in `store` (store key `creds/NAME`,
/// files `creds/NAME/current`, `old`, `state.json`, all secret) with
/// nothing minted yet: the first advance asks for a mint. It is rotated
/// once `expire_seconds` have passed since its mint; the previous
/// credential is revoked `grace_seconds` after its successor's mint.
///
/// `name` is `name_len` bytes: 1-64 of `a-z0-9._-`, not starting with `.`.
/// `input` is `input_len` bytes of JSON: `{"expire_seconds": N,
/// "grace_seconds": N}` (the grace shorter than the expiry). `now` is Unix
/// seconds. `store`, `name` and `input` are borrowed.
///
/// On success the caller owns `*out_step` (its status is the credential's
/// entry of `pki cred status --json`; its next wake-up is `now`, a mint
/// being due) and frees it with `pki_step_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (malformed input),
/// `PKI_RESULT_INVALID_CREDENTIAL_NAME`,
/// `PKI_RESULT_INVALID_CREDENTIAL_POLICY`, `PKI_RESULT_ALREADY_INITIALIZED`,
/// `PKI_RESULT_TIME`, `PKI_RESULT_STORE`, `PKI_RESULT_UNKNOWN_OUTCOME` or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `name` NULL or valid for
/// `name_len` bytes; `input` NULL or valid for `input_len` bytes; `out_step`
/// NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_create(
    store: *const pki_store,
    name: *const c_char,
    name_len: usize,
    input: *const c_char,
    input_len: usize,
    now: i64,
    out_step: *mut *mut pki_step,
) -> pki_result {
    ffi!(out_step => {
        store = handle(store, "store");
        name = name_in(name, name_len);
        input = json_in::<CredCreate>(input, input_len, "input");
        now = time_in(now, "now");
    } {
        let doc = CredentialState::new(name, input.policy(), None)?;
        store
            .create::<CredentialEngine>(&credential_key(name), &doc, now, status)
            .map(into_handle)
    })
}

/// One step of the credential `name` in `store` at `now` (Unix seconds).
///
/// `input` is `input_len` bytes of JSON, one request:
///
/// - NULL, or `{"advance": {"owner": "replica-a"}}` (`owner` optional):
///   take every bookkeeping step that is due (keep the current credential
///   as old, record a mint attempt), each committed on its own, and say
///   what the embedder must do next (`pki_step_action`). With an `owner`
///   (1-128 of `A-Z a-z 0-9 . _ : @ / -`, a name that stays the same across
///   restarts of the replica that keeps its mint captures), a mint attempt
///   it records is its own, and one another owner recorded is never handed
///   to it: it gets `PKI_CRED_ACTION_WAIT` with
///   `PKI_CRED_WAIT_MINT_ELSEWHERE`. Without, it is asked to run only
///   attempts without an owner. So replicas racing on one store mint once
///   per attempt;
/// - `{"minted": {"rotation": R, "attempt": A, "credential": "…"}}` (or
///   `"credential_base64"` for bytes that are not UTF-8): the mint produced
///   the credential (surrounding whitespace trimmed); it becomes current,
///   minted at `now`. An empty credential, or one already in use, is
///   recorded as a failed attempt instead. The same report twice is
///   accepted; a mint of an attempt the document no longer waits for
///   (another replica reported it first) is kept as a stray credential and
///   revoked (REVOKE_STRAY), never dropped;
/// - `{"mint_failed": {"rotation": R, "attempt": A, "message": "…",
///   "captured": "…"}}` (or `"captured_base64"`; optional: what the mint
///   returned before it failed, kept as a stray and revoked before the next
///   attempt): retried after a backoff (30 s, doubling, at most 1 h); the
///   message is shown in the status on one line;
/// - `{"revoked": {"rotation": R}}`, `{"revoke_failed": {"rotation": R,
///   "message": "…"}}`: the old credential of that rotation is revoked (or
///   was already), or its revocation failed (retried after a backoff);
/// - `{"stray_revoked": {"rotation": R, "attempt": A}}`,
///   `{"stray_revoke_failed": {"rotation": R, "attempt": A, "message":
///   "…"}}`: the same for a stray credential (no mint runs meanwhile).
///
/// `store`, `name` and `input` are borrowed.
///
/// On success the caller owns `*out_step` (events: `kept-old`,
/// `mint-started`, `minted`, `revoked`, `failed`, `stray-kept`,
/// `late-mint-kept`, `stray-revoked`; status: the credential's entry of
/// `pki cred status --json`, never a credential) and frees it with
/// `pki_step_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (malformed input, an unusable owner),
/// `PKI_RESULT_INVALID_CREDENTIAL_NAME`,
/// `PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT` (a report the document does
/// not wait for: another attempt, the current credential's revocation;
/// nothing recorded), `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_CONFLICT`,
/// `PKI_RESULT_STORE`, `PKI_RESULT_UNKNOWN_OUTCOME`,
/// `PKI_RESULT_CORRUPT_STATE`, `PKI_RESULT_UNSUPPORTED_STATE_VERSION`,
/// `PKI_RESULT_TIME`, `PKI_RESULT_UNEXPECTED` (still stepping after
/// `PKI_CRED_ADVANCE_MAX_STEPS` steps; each was committed) or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `name` NULL or valid for
/// `name_len` bytes; `input` NULL or valid for `input_len` bytes; `out_step`
/// NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_step(
    store: *const pki_store,
    name: *const c_char,
    name_len: usize,
    input: *const c_char,
    input_len: usize,
    now: i64,
    out_step: *mut *mut pki_step,
) -> pki_result {
    ffi!(out_step => {
        store = handle(store, "store");
        name = name_in(name, name_len);
        input = json_or_default::<CredStep>(input, input_len, "input");
        now = time_in(now, "now");
    } step(store, name, &input, now))
}

/// Which form of a credential `pki_cred_read` writes.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum pki_cred_output {
    /// The status at `now` as JSON (the credential's entry of `pki cred
    /// status --json`): state, times, failure, next action, history; never
    /// a credential.
    PKI_CRED_STATUS = 0,
    /// The current credential (what consumers use), as minted (secret);
    /// `PKI_RESULT_NOT_FOUND` before the first mint.
    PKI_CRED_CURRENT = 1,
}

/// Reads the credential `name` in `store` without changing it, as `output`
/// (a `pki_cred_output`: the status at `now`, Unix seconds, or the current
/// credential) to a new buffer.
///
/// On success the caller owns `*out_buffer` and frees it with
/// `pki_buffer_free` (which zeroes it).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (an unknown output),
/// `PKI_RESULT_INVALID_CREDENTIAL_NAME`, `PKI_RESULT_TIME`,
/// `PKI_RESULT_NOT_FOUND` (no current credential yet),
/// `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_CORRUPT_STATE`,
/// `PKI_RESULT_STORE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `name` NULL or valid for
/// `name_len` bytes; `out_buffer` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_cred_read(
    store: *const pki_store,
    name: *const c_char,
    name_len: usize,
    output: u32,
    now: i64,
    out_buffer: *mut *mut pki_buffer,
) -> pki_result {
    ffi!(out_buffer => {
        store = handle(store, "store");
        name = name_in(name, name_len);
        now = time_in(now, "now");
    } {
        if output > 1 {
            return Err(Failure::invalid(format!(
                "output {output} is not a pki_cred_output (0-1)"
            )));
        }
        let (doc, _) = store
            .driver::<CredentialState>()
            .load::<CredentialEngine>(&credential_key(name))?;
        let buffer = if output == 0 {
            pki_buffer::new(status(&doc, now).as_bytes())
        } else {
            let current = doc.current.ok_or_else(|| {
                Failure::new(
                    pki_result::PKI_RESULT_NOT_FOUND,
                    format!("credential \"{name}\" has not been minted yet"),
                )
            })?;
            pki_buffer::new(current.value.as_bytes())
        };
        Ok::<_, Failure>(into_handle(buffer))
    })
}

#[cfg(test)]
mod tests;
