//! Carrying a plan out: the document once its change is made, and what
//! happened.

use super::{
    Change, Credential, CredentialState, Event, HISTORY_LIMIT, HookAction, HookFailure,
    MintAttempt, Plan, RotationRecord, Secret, StrayCredential,
};
use crate::engines::Outcome;
use crate::model::error::{Result, RotateError};
use std::borrow::Cow;
use time::OffsetDateTime;

/// Carries out `plan`: its change, if any, as one new document. Decides
/// nothing: what comes next and the wake-up are the plan's.
///
/// # Errors
///
/// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when the change
/// does not fit the document (a plan asking to keep a current credential the
/// document does not have), which a plan made from the same document never
/// asks. Nothing is returned then.
pub fn apply(doc: &CredentialState, plan: Plan) -> Result<Outcome<'_, CredentialState, Event>> {
    let Some(change) = plan.change else {
        return Ok(Outcome {
            document: Cow::Borrowed(doc),
            events: Vec::new(),
            next_wake: plan.next_wake,
            findings: crate::engines::guard::Findings::none(),
        });
    };
    let (next, events) = transition(doc, &change, plan.at)?;
    Ok(Outcome {
        document: Cow::Owned(next),
        events,
        next_wake: plan.next_wake,
        findings: crate::engines::guard::Findings::none(),
    })
}

/// The document once `change` is made at `at`, and what happened.
pub(super) fn transition(
    doc: &CredentialState,
    change: &Change,
    at: OffsetDateTime,
) -> Result<(CredentialState, Vec<Event>)> {
    let mut next = doc.clone();
    let name = doc.name.clone();
    let events = match change {
        Change::KeepOld => keep_old(&mut next)?,
        Change::StartMint {
            rotation,
            attempt,
            owner,
        } => start_mint(&mut next, *rotation, *attempt, owner.as_deref(), at),
        Change::RecordMint {
            rotation,
            attempt,
            value,
        } => record_mint(&mut next, *rotation, *attempt, value, at),
        Change::RecordFailure { failure, stray } => {
            record_failure(&mut next, failure, stray.as_ref())
        }
        Change::KeepLateMint {
            rotation,
            attempt,
            value,
        } => keep_late_mint(&mut next, *rotation, *attempt, value, at),
        Change::RecordStrayRevoke { rotation, attempt } => {
            next.strays
                .retain(|s| (s.rotation, s.attempt) != (*rotation, *attempt));
            vec![Event::StrayRevoked {
                name,
                rotation: *rotation,
                attempt: *attempt,
            }]
        }
        Change::RecordStrayFailure {
            rotation,
            attempt,
            failure,
        } => record_stray_failure(&mut next, *rotation, *attempt, failure),
        Change::RecordRevoke { rotation } => record_revoke(&mut next, *rotation, at),
    };
    next.validate()?;
    Ok((next, events))
}

/// Moves the current credential to old. A plan asks for this only while a
/// current credential exists, so its absence means the document is corrupt.
fn keep_old(next: &mut CredentialState) -> Result<Vec<Event>> {
    let current = next.current.clone().ok_or_else(|| {
        RotateError::corrupt(
            format!("credential \"{}\"", next.name),
            "has no current credential to keep",
        )
    })?;
    let rotation = current.rotation;
    next.old = Some(current);
    Ok(vec![Event::KeptOld {
        name: next.name.clone(),
        rotation,
    }])
}

/// Records the attempt as started before the mint hook runs, so a crash
/// during the hook leaves a record of an attempt that may have minted
/// something; its rotation number is never handed out again.
fn start_mint(
    next: &mut CredentialState,
    rotation: u64,
    attempt: u32,
    owner: Option<&str>,
    at: OffsetDateTime,
) -> Vec<Event> {
    next.mint = Some(MintAttempt {
        rotation,
        attempt,
        started_at: at,
        owner: owner.map(str::to_string),
    });
    next.next_rotation = next.next_rotation.max(rotation + 1);
    vec![Event::MintStarted {
        name: next.name.clone(),
        rotation,
        attempt,
    }]
}

/// Makes the minted credential current and ends the attempt; the history
/// keeps only its last [`HISTORY_LIMIT`] rotations so the document stays
/// small however long it lives.
fn record_mint(
    next: &mut CredentialState,
    rotation: u64,
    attempt: u32,
    value: &Secret,
    at: OffsetDateTime,
) -> Vec<Event> {
    next.current = Some(Credential {
        rotation,
        minted_at: at,
        value: value.clone(),
    });
    next.mint = None;
    next.failure = None;
    next.history.push(RotationRecord {
        rotation,
        minted_at: at,
        attempts: attempt,
        revoked_at: None,
    });
    if next.history.len() > HISTORY_LIMIT {
        let excess = next.history.len() - HISTORY_LIMIT;
        next.history.drain(..excess);
    }
    vec![Event::Minted {
        name: next.name.clone(),
        rotation,
    }]
}

/// Records a failed step; a failed mint ends its attempt, and what it
/// printed is kept as a stray in the same commit, so a crash cannot forget
/// a credential that may be live.
fn record_failure(
    next: &mut CredentialState,
    failure: &HookFailure,
    stray: Option<&Secret>,
) -> Vec<Event> {
    if failure.action == HookAction::Mint {
        next.mint = None;
    }
    let name = next.name.clone();
    let mut events = vec![Event::Failed {
        name: name.clone(),
        failure: failure.clone(),
    }];
    if let Some(value) = stray {
        next.strays.push(StrayCredential {
            rotation: failure.rotation,
            attempt: failure.failures,
            captured_at: failure.at,
            value: value.clone(),
            failure: None,
        });
        events.push(Event::StrayKept {
            name,
            rotation: failure.rotation,
            attempt: failure.failures,
        });
    }
    next.failure = Some(failure.clone());
    events
}

/// Keeps what a late mint printed as a stray: it may be a live credential
/// that nothing else records, so it must stay until it is revoked.
fn keep_late_mint(
    next: &mut CredentialState,
    rotation: u64,
    attempt: u32,
    value: &Secret,
    at: OffsetDateTime,
) -> Vec<Event> {
    next.strays.push(StrayCredential {
        rotation,
        attempt,
        captured_at: at,
        value: value.clone(),
        failure: None,
    });
    vec![Event::LateMintKept {
        name: next.name.clone(),
        rotation,
        attempt,
    }]
}

/// Records a stray's failed revocation on the stray itself, so each stray
/// backs off on its own and the current credential's failure is untouched.
fn record_stray_failure(
    next: &mut CredentialState,
    rotation: u64,
    attempt: u32,
    failure: &HookFailure,
) -> Vec<Event> {
    for s in &mut next.strays {
        if (s.rotation, s.attempt) == (rotation, attempt) {
            s.failure = Some(failure.clone());
        }
    }
    vec![Event::Failed {
        name: next.name.clone(),
        failure: failure.clone(),
    }]
}

/// Forgets the old credential once revoked and stamps its history record,
/// so the audit trail says when the rotation ended.
fn record_revoke(next: &mut CredentialState, rotation: u64, at: OffsetDateTime) -> Vec<Event> {
    next.old = None;
    next.failure = None;
    if let Some(r) = next.history.iter_mut().find(|r| r.rotation == rotation) {
        r.revoked_at = Some(at);
    }
    vec![Event::Revoked {
        name: next.name.clone(),
        rotation,
    }]
}
