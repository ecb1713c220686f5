//! Credentials minted by an outside system (the credential engine): the
//! embedder asks for the next action, performs it (mint, revoke) and
//! reports its result; pki commits each step before the next, so a crash
//! anywhere resumes without minting twice for one attempt, revoking the
//! current credential or forgetting an old one.
//!
//! A controller loop: `pki_document_step` with `PKI_KIND_CRED` and NULL
//! request (advance) → the step result's `action`: `mint`: mint once for that rotation and attempt (after
//! a crash, adopt what you captured for it instead), then report `minted`
//! or `mint_failed`; `revoke`: revoke the credential given (already revoked
//! is success), then report `revoked` or `revoke_failed`; `revoke_stray`:
//! revoke what a failed or late mint printed, then report `stray_revoked`
//! or `stray_revoke_failed`; `wait`: advance again at the result's
//! `next_wake`.
//!
//! An advance is `pki_rotate::driver::advance`, the function the CLI's
//! `pki cred reconcile` runs: the same steps, the same actions, the same
//! bound (`PKI_CRED_ADVANCE_MAX_STEPS`).

use crate::abi::os_rng;
use crate::buffer::pki_buffer;
use crate::error::{Failure, pki_result};
use crate::step::status_json;
use crate::store::pki_store;
use pki_rotate::Files;
use pki_rotate::credential::status::CredentialStatus;
use pki_rotate::credential::{
    CredentialEngine, CredentialState, Next, credential_key, validate_credential_name,
};
use pki_rotate::driver::{AdvanceOptions, advance};
use pki_rotate::request::{CredCreate, CredRequest, CredStep, NextAction, StepEvent, StepResult};
use pki_rotate::{Driver, Revision, Store};
use std::cell::{Cell, RefCell};
use time::OffsetDateTime;

fn status(doc: &CredentialState, now: OffsetDateTime) -> String {
    status_json(&CredentialStatus::of(doc, now))
}

/// A credential name, checked.
pub(crate) fn name(name: &str) -> Result<&str, Failure> {
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

pub(crate) fn step(
    store: &pki_store,
    name: &str,
    input: &CredStep,
    now: OffsetDateTime,
) -> Result<StepResult, Failure> {
    let owner = match input.request()? {
        CredRequest::Report(report) => {
            let step = store
                .driver::<CredentialState>()
                .step::<CredentialEngine, _>(&credential_key(name), &report, now, &mut os_rng())?;
            return Ok(StepResult::of_step(&step, StepEvent::of_credential, |d| {
                status(d, now)
            }));
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
    Ok(result)
}

pub(crate) fn create(
    store: &pki_store,
    name: &str,
    input: &CredCreate,
    now: OffsetDateTime,
) -> Result<StepResult, Failure> {
    let doc = CredentialState::new(name, input.policy(), None)?;
    store.create::<CredentialEngine>(&credential_key(name), &doc, now, status)
}

/// Which form of a credential `pki_document_read` writes.
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

pub(crate) fn read(
    store: &pki_store,
    name: &str,
    output: u32,
    now: OffsetDateTime,
) -> Result<pki_buffer, Failure> {
    if output > 1 {
        return Err(Failure::invalid(format!(
            "output {output} is not a pki_cred_output (0-1)"
        )));
    }
    let (doc, _) = store
        .driver::<CredentialState>()
        .load::<CredentialEngine>(&credential_key(name))?;
    if output == 0 {
        return Ok(pki_buffer::new(status(&doc, now).as_bytes()));
    }
    let current = doc.current.ok_or_else(|| {
        Failure::new(
            pki_result::PKI_RESULT_NOT_FOUND,
            format!("credential \"{name}\" has not been minted yet"),
        )
    })?;
    Ok(pki_buffer::new(current.value.as_bytes()))
}
