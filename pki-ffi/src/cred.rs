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

use crate::abi::{handle, into_handle, json_in, json_or_default, os_rng, str_in, time_in};
use crate::buffer::{CText, pki_buffer, pki_bytes};
use crate::error::{Failure, pki_result};
use crate::input::{CredCreateIn, CredRequest, CredStepIn};
use crate::step::{EventEntry, pki_step, status_json};
use crate::store::pki_store;
use pki_rotate::Files;
use pki_rotate::credential::status::CredentialStatus;
use pki_rotate::credential::{
    Action, AdvanceOptions, CredentialEngine, CredentialState, Event, Next, WaitReason, advance,
    credential_key, validate_credential_name,
};
use pki_rotate::{Driver, Revision, Store};
use serde_json::json;
use std::cell::{Cell, RefCell};
use std::ffi::c_char;
use time::OffsetDateTime;

/// `pki_cred_action.kind`: mint once for the action's rotation and attempt.
pub const PKI_CRED_ACTION_MINT: u32 = 1;
/// `pki_cred_action.kind`: revoke the action's credential (the old one).
pub const PKI_CRED_ACTION_REVOKE: u32 = 2;
/// `pki_cred_action.kind`: nothing to do before `pki_step_next_wake`.
pub const PKI_CRED_ACTION_WAIT: u32 = 3;
/// `pki_cred_action.kind`: revoke the action's credential, what the failed
/// (or late) mint attempt `rotation`/`attempt` returned; then report
/// `stray_revoked` or `stray_revoke_failed`.
pub const PKI_CRED_ACTION_REVOKE_STRAY: u32 = 4;

/// `pki_cred_action.wait_reason`: the current credential is not due yet.
pub const PKI_CRED_WAIT_EXPIRY: u32 = 1;
/// `pki_cred_action.wait_reason`: the old credential stays usable until the
/// grace period ends.
pub const PKI_CRED_WAIT_GRACE: u32 = 2;
/// `pki_cred_action.wait_reason`: a hook failed; its retry waits.
pub const PKI_CRED_WAIT_BACKOFF: u32 = 3;
/// `pki_cred_action.wait_reason`: the mint in progress belongs to another
/// owner (advance with `owner`): only it runs the mint; look again later.
pub const PKI_CRED_WAIT_MINT_ELSEWHERE: u32 = 4;

/// The most steps one advance commits before it fails with
/// `PKI_RESULT_UNEXPECTED` (a store that does not keep its writes): a
/// rotation has at most two bookkeeping steps in a row. The CLI's
/// reconcile has the same bound: both run `pki_rotate::credential::advance`.
pub const PKI_CRED_ADVANCE_MAX_STEPS: u32 = 8;
// cbindgen needs the literal; the bound is the engine's.
const _: () = assert!(PKI_CRED_ADVANCE_MAX_STEPS == pki_rotate::credential::ADVANCE_MAX_STEPS);

/// What the embedder does next for a credential, as `pki_step_action`
/// reads it after an advance.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pki_cred_action {
    /// `PKI_CRED_ACTION_MINT`, `_REVOKE`, `_WAIT` or `_REVOKE_STRAY`.
    pub kind: u32,
    /// The rotation to mint for, whose old credential to revoke, or of the
    /// failed mint whose stray credential to revoke; 0 for a wait.
    pub rotation: u64,
    /// The attempt of a mint (1, then one more after each failure), or of
    /// the failed mint whose stray credential to revoke; 0 otherwise.
    pub attempt: u32,
    /// Why a wait waits (`PKI_CRED_WAIT_*`); 0 for other actions. It ends
    /// at `pki_step_next_wake`.
    pub wait_reason: u32,
    /// The credential to revoke, old or stray (empty for other actions).
    /// Borrowed: valid until the step is freed, which zeroes it.
    pub credential: pki_bytes,
}

/// An action kept by a step.
pub(crate) struct ActionEntry {
    kind: u32,
    rotation: u64,
    attempt: u32,
    wait_reason: u32,
    credential: CText,
}

impl ActionEntry {
    pub(crate) fn view(&self) -> pki_cred_action {
        pki_cred_action {
            kind: self.kind,
            rotation: self.rotation,
            attempt: self.attempt,
            wait_reason: self.wait_reason,
            credential: self.credential.view(),
        }
    }

    /// The entry of `action`; None for an action this build cannot express.
    fn of(action: &Action) -> Option<Self> {
        let entry = |kind, rotation, attempt, wait_reason, credential: &[u8]| ActionEntry {
            kind,
            rotation,
            attempt,
            wait_reason,
            credential: CText::from_bytes(credential),
        };
        Some(match action {
            Action::Mint { rotation, attempt } => {
                entry(PKI_CRED_ACTION_MINT, *rotation, *attempt, 0, &[])
            }
            Action::Revoke { rotation, value } => {
                entry(PKI_CRED_ACTION_REVOKE, *rotation, 0, 0, value.as_bytes())
            }
            Action::RevokeStray {
                rotation,
                attempt,
                value,
            } => entry(
                PKI_CRED_ACTION_REVOKE_STRAY,
                *rotation,
                *attempt,
                0,
                value.as_bytes(),
            ),
            Action::Wait { reason, .. } => {
                let reason = match reason {
                    WaitReason::Expiry => PKI_CRED_WAIT_EXPIRY,
                    WaitReason::Grace => PKI_CRED_WAIT_GRACE,
                    WaitReason::Backoff => PKI_CRED_WAIT_BACKOFF,
                    WaitReason::MintElsewhere => PKI_CRED_WAIT_MINT_ELSEWHERE,
                };
                entry(PKI_CRED_ACTION_WAIT, 0, 0, reason, &[])
            }
            _ => return None,
        })
    }
}

/// A credential event as JSON, in the shape of the other engines' events
/// (`{"kind": kebab-case, fields…}`): the credential engine's events do not
/// implement `serde::Serialize`, so they are written here, field by field.
fn event(e: &Event) -> EventEntry {
    let value = match e {
        Event::KeptOld { name, rotation } => {
            json!({"kind": "kept-old", "name": name, "rotation": rotation})
        }
        Event::MintStarted {
            name,
            rotation,
            attempt,
        } => {
            json!({"kind": "mint-started", "name": name, "rotation": rotation, "attempt": attempt})
        }
        Event::Minted { name, rotation } => {
            json!({"kind": "minted", "name": name, "rotation": rotation})
        }
        Event::Revoked { name, rotation } => {
            json!({"kind": "revoked", "name": name, "rotation": rotation})
        }
        Event::Failed { name, failure } => {
            json!({"kind": "failed", "name": name, "failure": failure})
        }
        Event::StrayKept {
            name,
            rotation,
            attempt,
        } => json!({"kind": "stray-kept", "name": name, "rotation": rotation, "attempt": attempt}),
        Event::LateMintKept {
            name,
            rotation,
            attempt,
        } => {
            json!({"kind": "late-mint-kept", "name": name, "rotation": rotation, "attempt": attempt})
        }
        Event::StrayRevoked {
            name,
            rotation,
            attempt,
        } => {
            json!({"kind": "stray-revoked", "name": name, "rotation": rotation, "attempt": attempt})
        }
        // An event this build has no fields for: its message still says it.
        _ => json!({"kind": "other", "message": e.to_string()}),
    };
    EventEntry::from_value(value, e.to_string())
}

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
    input: &CredStepIn,
    now: OffsetDateTime,
) -> Result<*mut pki_step, Failure> {
    let owner = match input.request()? {
        crate::input::CredRequest::Report(report) => {
            let step = store
                .driver::<CredentialState>()
                .step::<CredentialEngine, _>(&credential_key(name), &report, now, &mut os_rng())?;
            let (out, _) = pki_step::of_driver(step, event, |d| status(d, now));
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
        Next::Act(action) => ActionEntry::of(action).ok_or_else(|| {
            Failure::new(
                pki_result::PKI_RESULT_UNEXPECTED,
                format!("credential \"{name}\": an action the C ABI cannot express: {action:?}"),
            )
        })?,
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
    let out = pki_step::new(
        advanced.steps > 0,
        advanced.next_wake,
        recorded.rounds.get(),
        &revision,
        advanced.events.iter().map(event).collect(),
        &status(&advanced.document, now),
    );
    Ok(into_handle(out.with_action(action)))
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
        input = json_in::<CredCreateIn>(input, input_len, "input");
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
        input = json_or_default::<CredStepIn>(input, input_len, "input");
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
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;
    use crate::step::{pki_step_action, pki_step_free, pki_step_next_wake};
    use crate::store::{pki_store_free, pki_store_open};
    use pki_result::*;

    const T0: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

    struct Store(*mut pki_store);
    impl Drop for Store {
        fn drop(&mut self) {
            // SAFETY: made by pki_store_open, freed once.
            unsafe { pki_store_free(self.0) }
        }
    }

    fn memory() -> Store {
        let mut raw = std::ptr::null_mut();
        // SAFETY: a valid location and out pointer.
        let r = unsafe { pki_store_open(c"memory:".as_ptr(), 7, &mut raw) };
        assert_eq!(r, PKI_RESULT_OK);
        Store(raw)
    }

    fn create(store: &Store, name: &str, input: &str) -> pki_result {
        let mut step = std::ptr::null_mut();
        // SAFETY: live store, slices valid for their lengths.
        let r = unsafe {
            pki_cred_create(
                store.0,
                name.as_ptr().cast(),
                name.len(),
                input.as_ptr().cast(),
                input.len(),
                T0,
                &mut step,
            )
        };
        // SAFETY: NULL or the step written above, freed once.
        unsafe { pki_step_free(step) };
        r
    }

    /// An advance's action: kind, rotation, attempt, next wake,
    /// credential, wait reason.
    type Seen = (u32, u64, u32, i64, Vec<u8>, u32);

    /// One cred step; on success, the action when it was an advance.
    fn cred_step(
        store: &Store,
        name: &str,
        input: Option<&str>,
        now: i64,
    ) -> Result<Option<Seen>, pki_result> {
        let mut step = std::ptr::null_mut();
        let (p, n) = input.map_or((std::ptr::null(), 0), |i| (i.as_ptr().cast(), i.len()));
        // SAFETY: live store, slices valid for their lengths.
        let r = unsafe {
            pki_cred_step(
                store.0,
                name.as_ptr().cast(),
                name.len(),
                p,
                n,
                now,
                &mut step,
            )
        };
        if r != PKI_RESULT_OK {
            assert!(step.is_null());
            return Err(r);
        }
        let mut a = pki_cred_action {
            kind: 0,
            rotation: 0,
            attempt: 0,
            wait_reason: 0,
            credential: pki_bytes::EMPTY,
        };
        // SAFETY: the live step, read then freed once.
        unsafe {
            let found = pki_step_action(step, &mut a) == PKI_RESULT_OK;
            let out = found.then(|| {
                let credential = if a.credential.data.is_null() {
                    Vec::new()
                } else {
                    std::slice::from_raw_parts(a.credential.data, a.credential.len).to_vec()
                };
                (
                    a.kind,
                    a.rotation,
                    a.attempt,
                    pki_step_next_wake(step),
                    credential,
                    a.wait_reason,
                )
            });
            pki_step_free(step);
            Ok(out)
        }
    }

    /// An advance: kind, rotation, attempt, next wake, credential.
    fn next_of(store: &Store, now: i64) -> (u32, u64, u32, i64, Vec<u8>) {
        let (k, r, a, w, c, _) = cred_step(store, "db", None, now).unwrap().unwrap();
        (k, r, a, w, c)
    }

    fn report(store: &Store, input: &str, now: i64) -> pki_result {
        match cred_step(store, "db", Some(input), now) {
            Ok(action) => {
                assert!(action.is_none(), "a report has no action");
                PKI_RESULT_OK
            }
            Err(r) => r,
        }
    }

    fn read(store: &Store, output: u32, now: i64) -> Result<Vec<u8>, pki_result> {
        let mut buf = std::ptr::null_mut();
        // SAFETY: live store, static name, out pointer valid.
        let r = unsafe { pki_cred_read(store.0, c"db".as_ptr(), 2, output, now, &mut buf) };
        if r != PKI_RESULT_OK {
            return Err(r);
        }
        // SAFETY: the buffer written above, read then freed once.
        unsafe {
            let b = crate::buffer::pki_buffer_data(buf);
            let bytes = std::slice::from_raw_parts(b.data, b.len).to_vec();
            crate::buffer::pki_buffer_free(buf);
            Ok(bytes)
        }
    }

    #[test]
    fn a_rotation_through_the_c_abi_mints_once_and_never_revokes_current() {
        let store = memory();
        assert_eq!(
            create(
                &store,
                "db",
                r#"{"expire_seconds": 3600, "grace_seconds": 3600}"#
            ),
            PKI_RESULT_INVALID_CREDENTIAL_POLICY
        );
        assert_eq!(
            create(
                &store,
                "Bad",
                r#"{"expire_seconds": 3600, "grace_seconds": 60}"#
            ),
            PKI_RESULT_INVALID_CREDENTIAL_NAME
        );
        assert_eq!(
            create(&store, "db", r#"{"expire_seconds": 3600}"#),
            PKI_RESULT_INVALID_ARGUMENT
        );
        assert_eq!(
            create(
                &store,
                "db",
                r#"{"expire_seconds": 3600, "grace_seconds": 60}"#
            ),
            PKI_RESULT_OK
        );
        assert_eq!(read(&store, 1, T0), Err(PKI_RESULT_NOT_FOUND));
        assert_eq!(
            next_of(&store, T0),
            (PKI_CRED_ACTION_MINT, 1, 1, T0, vec![])
        );
        let minted = |r: u64, a: u32, c: &str| {
            format!(r#"{{"minted": {{"rotation": {r}, "attempt": {a}, "credential": "{c}"}}}}"#)
        };
        assert_eq!(
            report(&store, &minted(1, 2, "x"), T0),
            PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT
        );
        assert_eq!(report(&store, &minted(1, 1, "one\\n"), T0), PKI_RESULT_OK);
        assert_eq!(
            report(&store, r#"{"revoked": {"rotation": 1}}"#, T0),
            PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT
        );
        assert_eq!(
            next_of(&store, T0),
            (PKI_CRED_ACTION_WAIT, 0, 0, T0 + 3600, vec![])
        );
        // Due: the bookkeeping steps are taken, then a mint is asked for.
        assert_eq!(
            next_of(&store, T0 + 3600),
            (PKI_CRED_ACTION_MINT, 2, 1, T0 + 3600, vec![])
        );
        assert_eq!(
            report(
                &store,
                r#"{"mint_failed": {"rotation": 2, "attempt": 1, "message": "quota exceeded"}}"#,
                T0 + 3600
            ),
            PKI_RESULT_OK
        );
        assert_eq!(
            next_of(&store, T0 + 3600),
            (PKI_CRED_ACTION_WAIT, 0, 0, T0 + 3630, vec![])
        );
        assert_eq!(
            next_of(&store, T0 + 3630),
            (PKI_CRED_ACTION_MINT, 2, 2, T0 + 3630, vec![])
        );
        // A credential that is not UTF-8 crosses as base64.
        assert_eq!(
            report(
                &store,
                r#"{"minted": {"rotation": 2, "attempt": 2, "credential_base64": "dHdv/w=="}}"#,
                T0 + 3630
            ),
            PKI_RESULT_OK
        );
        assert_eq!(
            next_of(&store, T0 + 3631),
            (PKI_CRED_ACTION_WAIT, 0, 0, T0 + 3690, vec![])
        );
        assert_eq!(
            next_of(&store, T0 + 3690),
            (PKI_CRED_ACTION_REVOKE, 1, 0, T0 + 3690, b"one".to_vec())
        );
        let text = String::from_utf8(read(&store, 0, T0 + 3690).unwrap()).unwrap();
        assert!(
            text.contains("\"state\":\"revoking\"") && !text.contains("two"),
            "{text}"
        );
        assert_eq!(
            report(&store, r#"{"revoked": {"rotation": 1}}"#, T0 + 3690),
            PKI_RESULT_OK
        );
        assert_eq!(read(&store, 1, T0 + 3690), Ok(b"two\xff".to_vec()));
        assert_eq!(read(&store, 2, T0), Err(PKI_RESULT_INVALID_ARGUMENT));
        assert_eq!(next_of(&store, T0 + 3690).0, PKI_CRED_ACTION_WAIT);
    }

    #[test]
    fn an_advance_reports_its_revision_rounds_and_events_like_every_step() {
        let store = memory();
        let mut step = std::ptr::null_mut();
        let input = r#"{"expire_seconds": 3600, "grace_seconds": 60}"#;
        // SAFETY: live store, slices valid for their lengths; steps freed once.
        unsafe {
            assert_eq!(
                pki_cred_create(
                    store.0,
                    c"db".as_ptr(),
                    2,
                    input.as_ptr().cast(),
                    input.len(),
                    T0,
                    &mut step
                ),
                PKI_RESULT_OK
            );
            let created = crate::step::pki_step_revision(step);
            let created = std::slice::from_raw_parts(created.data, created.len).to_vec();
            assert_eq!(pki_step_next_wake(step), T0, "a mint is due at once");
            pki_step_free(step);
            assert_eq!(
                pki_cred_step(
                    store.0,
                    c"db".as_ptr(),
                    2,
                    std::ptr::null(),
                    0,
                    T0,
                    &mut step
                ),
                PKI_RESULT_OK
            );
            assert!(crate::step::pki_step_changed(step));
            assert_eq!(crate::step::pki_step_attempts(step), 1);
            let revision = crate::step::pki_step_revision(step);
            assert_ne!(
                std::slice::from_raw_parts(revision.data, revision.len),
                &created[..]
            );
            let mut e = std::mem::MaybeUninit::uninit();
            assert_eq!(
                crate::step::pki_step_event(step, 0, e.as_mut_ptr()),
                PKI_RESULT_OK
            );
            let e = e.assume_init();
            let kind = std::slice::from_raw_parts(e.kind.data, e.kind.len);
            assert_eq!(kind, b"mint-started");
            let json = std::slice::from_raw_parts(e.json.data, e.json.len);
            let json: serde_json::Value = serde_json::from_slice(json).unwrap();
            assert_eq!(json["attempt"], 1);
            assert!(json["message"].as_str().unwrap().contains("minting"));
            pki_step_free(step);
        }
    }

    #[test]
    fn a_failed_mint_that_returned_a_credential_is_revoked_before_the_next_attempt() {
        let store = memory();
        assert_eq!(
            create(
                &store,
                "db",
                r#"{"expire_seconds": 3600, "grace_seconds": 60}"#
            ),
            PKI_RESULT_OK
        );
        assert_eq!(next_of(&store, T0).0, PKI_CRED_ACTION_MINT);
        assert_eq!(
            report(
                &store,
                r#"{"mint_failed": {"rotation": 1, "attempt": 1, "message": "timed out", "captured": "stray\n"}}"#,
                T0
            ),
            PKI_RESULT_OK
        );
        // Revoked at once, and again after the mint's backoff: no mint
        // while it may be live.
        for now in [T0, T0 + 30] {
            assert_eq!(
                next_of(&store, now),
                (PKI_CRED_ACTION_REVOKE_STRAY, 1, 1, now, b"stray".to_vec())
            );
        }
        assert_eq!(
            report(
                &store,
                r#"{"stray_revoke_failed": {"rotation": 1, "attempt": 1, "message": "timed out"}}"#,
                T0 + 30
            ),
            PKI_RESULT_OK
        );
        assert_eq!(
            report(
                &store,
                r#"{"stray_revoked": {"rotation": 5, "attempt": 1}}"#,
                T0 + 30
            ),
            PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT
        );
        assert_eq!(
            next_of(&store, T0 + 31),
            (PKI_CRED_ACTION_WAIT, 0, 0, T0 + 60, vec![])
        );
        assert_eq!(
            report(
                &store,
                r#"{"stray_revoked": {"rotation": 1, "attempt": 1}}"#,
                T0 + 60
            ),
            PKI_RESULT_OK
        );
        assert_eq!(
            next_of(&store, T0 + 60),
            (PKI_CRED_ACTION_MINT, 1, 2, T0 + 60, vec![])
        );
    }

    /// The rotations of `tests/data/cred-trace.txt` through the C ABI: a
    /// controller advancing until it must wait, performing and reporting
    /// each action. `tests/cred_trace.rs` runs the same trace through the
    /// CLI: the actions asked for are the same.
    #[test]
    fn the_c_abi_asks_for_the_actions_of_the_shared_trace() {
        const TRACE: &str = include_str!("../../tests/data/cred-trace.txt");
        let store = memory();
        assert_eq!(
            create(
                &store,
                "db",
                r#"{"expire_seconds": 7200, "grace_seconds": 600}"#
            ),
            PKI_RESULT_OK
        );
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
                let (kind, rotation, attempt, wake, credential, reason) =
                    cred_step(&store, "db", None, now).unwrap().unwrap();
                let credential = String::from_utf8(credential).unwrap();
                if kind == PKI_CRED_ACTION_WAIT {
                    asked.push(format!("wait {} {}", rfc3339(wake), reason_name(reason)));
                    break;
                }
                assert_eq!((wake, reason), (now, 0), "an action is due now");
                let outcome = outcomes.next().expect("more actions than the trace");
                let ok = outcome == "ok";
                let input = match kind {
                    PKI_CRED_ACTION_MINT => {
                        asked.push(format!("mint {rotation} {attempt}"));
                        let ra = format!(r#""rotation": {rotation}, "attempt": {attempt}"#);
                        match outcome.as_str() {
                            "ok" => format!(
                                r#"{{"minted": {{{ra}, "credential": "cred-{rotation}-{attempt}"}}}}"#
                            ),
                            "fail-printed" => format!(
                                r#"{{"mint_failed": {{{ra}, "message": "hook failed", "captured": "stray-{rotation}-{attempt}"}}}}"#
                            ),
                            _ => {
                                format!(r#"{{"mint_failed": {{{ra}, "message": "hook failed"}}}}"#)
                            }
                        }
                    }
                    PKI_CRED_ACTION_REVOKE => {
                        assert!(credential.starts_with(&format!("cred-{rotation}-")));
                        asked.push(format!("revoke {rotation}"));
                        if ok {
                            format!(r#"{{"revoked": {{"rotation": {rotation}}}}}"#)
                        } else {
                            format!(
                                r#"{{"revoke_failed": {{"rotation": {rotation}, "message": "hook failed"}}}}"#
                            )
                        }
                    }
                    PKI_CRED_ACTION_REVOKE_STRAY => {
                        assert_eq!(credential, format!("stray-{rotation}-{attempt}"));
                        asked.push(format!("revoke-stray {rotation} {attempt}"));
                        let ra = format!(r#""rotation": {rotation}, "attempt": {attempt}"#);
                        if ok {
                            format!(r#"{{"stray_revoked": {{{ra}}}}}"#)
                        } else {
                            format!(
                                r#"{{"stray_revoke_failed": {{{ra}, "message": "hook failed"}}}}"#
                            )
                        }
                    }
                    other => panic!("unknown action {other}"),
                };
                assert_eq!(report(&store, &input, now), PKI_RESULT_OK);
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
        let store = memory();
        let next_as = |owner: &str| {
            let input = format!(r#"{{"advance": {{"owner": "{owner}"}}}}"#);
            match cred_step(&store, "db", Some(&input), T0) {
                Ok(a) => {
                    let (kind, _, _, wake, _, reason) = a.unwrap();
                    (PKI_RESULT_OK, kind, reason, wake)
                }
                Err(r) => (r, 0, 0, 0),
            }
        };
        assert_eq!(
            create(
                &store,
                "db",
                r#"{"expire_seconds": 3600, "grace_seconds": 60}"#
            ),
            PKI_RESULT_OK
        );
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
        for c in ["a", "b"] {
            let input =
                format!(r#"{{"minted": {{"rotation": 1, "attempt": 1, "credential": "{c}"}}}}"#);
            assert_eq!(report(&store, &input, T0), PKI_RESULT_OK);
        }
        assert_eq!(
            next_of(&store, T0),
            (PKI_CRED_ACTION_REVOKE_STRAY, 1, 1, T0, b"b".to_vec())
        );
    }
}
