//! The one result of every engine's step: `pki_step`.
//!
//! `pki_signer_create` / `_step`, `pki_set_create` / `_step`,
//! `pki_keyring_create` / `_step` and `pki_cred_create` / `_step` each run
//! pki-rotate's driver (load, decide, write by compare-and-swap, retry from
//! a fresh read on a lost race) and return what it did in the same shape:
//! whether it wrote, the events, when to step again, the document's
//! revision, how many rounds it took, and the status of the document now in
//! the store as JSON. A signer step also holds the signer (a `pki_signer`
//! handle), a credential advance the embedder's next action.

use crate::abi::{free, getter, handle};
use crate::buffer::{CText, pki_bytes};
mod action;

use crate::error::{Failure, pki_result};
pub(crate) use action::ActionEntry;
pub use action::{
    PKI_CRED_ACTION_MINT, PKI_CRED_ACTION_REVOKE, PKI_CRED_ACTION_REVOKE_STRAY,
    PKI_CRED_ACTION_WAIT, PKI_CRED_ADVANCE_MAX_STEPS, PKI_CRED_WAIT_BACKOFF, PKI_CRED_WAIT_EXPIRY,
    PKI_CRED_WAIT_GRACE, PKI_CRED_WAIT_MINT_ELSEWHERE, pki_cred_action,
};
use pki_rotate::SignerState;
use pki_rotate::request::{StepEvent, StepResult};
use time::OffsetDateTime;

/// One event, kept as its kind, its one-line message and its JSON object.
pub(crate) struct EventEntry {
    kind: CText,
    message: CText,
    json: CText,
}

impl EventEntry {
    fn of(event: &StepEvent) -> Self {
        EventEntry {
            kind: CText::new(event.kind()),
            message: CText::new(event.message()),
            json: CText::new(&event.0.to_string()),
        }
    }
}

/// What a step did, whatever the engine: pki-rotate's [`StepResult`]
/// (whether it wrote, the events, when to step again, the document's
/// revision and the rounds it took, the status of the document now in the
/// store), kept with the views C reads, and for a signer the document.
/// Immutable: it may be read from several threads at once. Free with
/// `pki_step_free`.
pub struct pki_step {
    result: StepResult,
    revision: CText,
    events: Vec<EventEntry>,
    status: CText,
    signer: Option<SignerState>,
    action: Option<ActionEntry>,
}

impl pki_step {
    /// The handle of a step result.
    pub(crate) fn of_result(result: StepResult) -> Self {
        pki_step {
            revision: CText::new(&result.revision),
            events: result.events.iter().map(EventEntry::of).collect(),
            status: CText::new(&result.status_json()),
            action: result.action.as_ref().map(ActionEntry::of),
            signer: None,
            result,
        }
    }

    /// A step from its parts; `status` is the status JSON of the document
    /// now in the store.
    pub(crate) fn new(
        changed: bool,
        next_wake: OffsetDateTime,
        attempts: u32,
        revision: &pki_rotate::Revision,
        events: Vec<StepEvent>,
        status: &str,
    ) -> Self {
        Self::of_result(StepResult::new(
            changed, next_wake, attempts, revision, events, status,
        ))
    }

    /// What pki-rotate's driver returned, with the document's status, and
    /// the document.
    pub(crate) fn of_driver<D, E>(
        step: pki_rotate::Step<D, E>,
        event: impl Fn(&E) -> StepEvent,
        status: impl FnOnce(&D) -> String,
    ) -> (Self, D) {
        let result = StepResult::of_step(&step, event, status);
        (Self::of_result(result), step.document)
    }

    /// A step decided from the store's summary of the document: nothing
    /// was due, nothing was read or written, and there is no status.
    pub(crate) fn idle(idle: &pki_rotate::IdleStep) -> Self {
        Self::of_result(StepResult::idle(idle))
    }

    /// The step read and wrote part of the document: its status and
    /// document are the part's.
    pub(crate) fn by_parts(mut self) -> Self {
        self.result.by_parts = true;
        self
    }

    /// The signer document the step holds (a signer's create or step).
    pub(crate) fn signer(&self) -> Option<&SignerState> {
        self.signer.as_ref()
    }

    /// The step holds the signer document now in the store.
    pub(crate) fn with_signer(mut self, state: SignerState) -> Self {
        self.signer = Some(state);
        self
    }
}

/// A status as JSON text; what cannot be reported is an empty string.
pub(crate) fn status_json<S: serde::Serialize>(status: &S) -> String {
    serde_json::to_string(status).unwrap_or_default()
}

/// Whether the step wrote a new document (a create always does). NULL
/// gives false.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_changed(step: *const pki_step) -> bool {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(step, false, |s| s.result.changed) }
}

/// When to step again if nothing else happens (Unix seconds): the engine's
/// wake-up time of the document now in the store (after a signer's
/// rotation, the new CA's, bridges' and leaves' times; for a credential,
/// the time its next action is due). Never before the step's `now`; equal
/// to it when something is due at once (a credential to mint, a document
/// just created with work due). NULL gives 0.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_next_wake(step: *const pki_step) -> i64 {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(step, 0, |s| s.result.next_wake) }
}

/// The document's revision in the store after the step: opaque UTF-8 text
/// (also NUL-terminated), equal to the one before when nothing was written.
///
/// Borrowed: valid until `step` is freed. NULL gives an empty view.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_revision(step: *const pki_step) -> pki_bytes {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(step, pki_bytes::EMPTY, |s| s.revision.view()) }
}

/// How many read-decide-write rounds the step took: 1 without contention,
/// one more for each write lost to another writer (for a credential
/// advance, the rounds of all the steps it took; for a create, 1). NULL
/// gives 0.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_attempts(step: *const pki_step) -> u32 {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(step, 0, |s| s.result.attempts) }
}

/// Whether the step was decided from the summary the store keeps with the
/// document (`pki_signer_step` with `"unless_idle": true`): nothing was
/// due, no document was read, and the step has no status and no signer.
/// NULL gives false.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_idle(step: *const pki_step) -> bool {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(step, false, |s| s.result.idle) }
}

/// Whether the step went over part of the document
/// (`pki_signer_step` with `"unless_idle": true` and `leaves`, inside the
/// summary's promise): it read and wrote the document's head and the named
/// leaves only, and its status and signer hold the CA, the bundle and
/// those leaves, not the others (the store holds them all). NULL gives
/// false.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_by_parts(step: *const pki_step) -> bool {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(step, false, |s| s.result.by_parts) }
}

/// The status of the document now in the store at the step's `now`, as
/// JSON (UTF-8, also NUL-terminated): for a signer `pki status --json`'s
/// report, for a CA set `pki set status --json`'s, for a key ring `pki keys
/// status --json`'s, for a credential the entry of `pki cred status
/// --json`. It holds no private key and no credential.
///
/// Borrowed: valid until `step` is freed. NULL gives an empty view.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_status_json(step: *const pki_step) -> pki_bytes {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(step, pki_bytes::EMPTY, |s| s.status.view()) }
}

/// One event of a step, as `pki_step_event` reads it. Every engine's events
/// have this shape.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pki_event {
    /// What happened, in kebab-case (`"rotated"`, `"leaf-reissued"`,
    /// `"bundle-pruned"`, `"bridge-retired"`, `"step"`, `"expired"`,
    /// `"minted"`…; see the README for every engine's kinds). UTF-8,
    /// NUL-terminated.
    pub kind: pki_bytes,
    /// One line for logs and Kubernetes events. UTF-8, NUL-terminated.
    pub message: pki_bytes,
    /// The whole event as a JSON object: `kind`, the event's fields (times
    /// in RFC 3339) and `message`. UTF-8, NUL-terminated.
    pub json: pki_bytes,
}

/// The number of events of the step (0 when nothing happened). NULL gives 0.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_events_len(step: *const pki_step) -> usize {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(step, 0, |s| s.events.len()) }
}

/// Reads event `index` (from 0 to `pki_step_events_len` - 1, in the order
/// they happened) into `*out_event`. The views are borrowed from `step`:
/// valid until `step` is freed.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_NOT_FOUND` (index out of range) or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step`; `out_event` NULL or valid for
/// one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_event(
    step: *const pki_step,
    index: usize,
    out_event: *mut pki_event,
) -> pki_result {
    ffi!(out_event => {
        step = handle(step, "step");
    } {
        let e = step.events.get(index).ok_or_else(|| {
            Failure::new(
                pki_result::PKI_RESULT_NOT_FOUND,
                format!("event {index} of {}", step.events.len()),
            )
        })?;
        Ok::<_, Failure>(pki_event {
            kind: e.kind.view(),
            message: e.message.view(),
            json: e.json.view(),
        })
    })
}

/// The embedder's next action after a credential advance (`pki_cred_step`
/// without a report): mint, revoke, revoke a stray, or wait (until
/// `pki_step_next_wake`). Its `credential` view is borrowed from `step`:
/// valid until `step` is freed, which zeroes it.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_NOT_FOUND` (the step is not a credential advance) or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step`; `out_action` NULL or valid for
/// one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_action(
    step: *const pki_step,
    out_action: *mut pki_cred_action,
) -> pki_result {
    ffi!(out_action => {
        step = handle(step, "step");
    } {
        step.action.as_ref().map(ActionEntry::view).ok_or_else(|| {
            Failure::new(
                pki_result::PKI_RESULT_NOT_FOUND,
                "the step is not a credential advance (a report or another engine's step)",
            )
        })
    })
}

/// Frees a step (a signer document it holds has its keys zeroed, an action
/// its credential). NULL is accepted. Signers read from it stay valid; its
/// views (revision, status, events, action) do not.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_free(step: *mut pki_step) {
    // SAFETY: NULL or a live handle freed once (contract).
    unsafe { free(step) }
}
