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
use pki_rotate::credential::status::CredentialStatus;
use pki_rotate::credential::{
    CredentialEngine, CredentialState, credential_key, validate_credential_name,
};
use pki_rotate::driver::{AdvanceOptions, advance};
use pki_rotate::request::{CredCreate, CredRequest, CredStep, StepEvent, StepResult};
use time::OffsetDateTime;

fn status(doc: &CredentialState, now: OffsetDateTime) -> String {
    status_json(&CredentialStatus::of(doc, now))
}

/// A credential name, checked.
pub(crate) fn name(name: &str) -> Result<&str, Failure> {
    validate_credential_name(name)?;
    Ok(name)
}

pub(crate) fn step(
    store: &pki_store,
    name: &str,
    input: &CredStep,
    now: OffsetDateTime,
) -> Result<StepResult, Failure> {
    let driver = store.driver::<CredentialState>();
    let step = match input.request()? {
        CredRequest::Report(report) => driver.step::<CredentialEngine, _>(
            &credential_key(name),
            &report,
            now,
            &mut os_rng(),
        )?,
        CredRequest::Advance(owner) => {
            let options = AdvanceOptions {
                owner: owner.as_deref(),
                max_steps: None,
            };
            let advanced = advance(&driver, name, options, now, &mut os_rng())?;
            // Only a step limit stops advance with a step due; none is given.
            if advanced.action().is_none() {
                return Err(Failure::new(
                    pki_result::PKI_RESULT_UNEXPECTED,
                    format!("credential \"{name}\": a step is still due after advancing"),
                ));
            }
            advanced
        }
    };
    Ok(StepResult::of_step(&step, StepEvent::of_credential, |d| {
        status(d, now)
    }))
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
