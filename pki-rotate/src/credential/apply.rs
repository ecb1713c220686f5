//! Carrying a plan out: the document once its change is made, and what
//! happened.

use super::{
    Change, Credential, CredentialState, Event, HISTORY_LIMIT, HookAction, MintAttempt, Plan,
    RotationRecord, StrayCredential,
};
use crate::engine::Outcome;
use crate::error::{Result, RotateError};
use std::borrow::Cow;
use time::OffsetDateTime;

/// Carries out `plan`: its change, if any, as one new document. Decides
/// nothing: what comes next and the wake-up are the plan's.
pub fn apply(doc: &CredentialState, plan: Plan) -> Result<Outcome<'_, CredentialState, Event>> {
    let Some(change) = plan.change else {
        return Ok(Outcome {
            document: Cow::Borrowed(doc),
            events: Vec::new(),
            next_wake: plan.next_wake,
        });
    };
    let (next, events) = transition(doc, &change, plan.at)?;
    Ok(Outcome {
        document: Cow::Owned(next),
        events,
        next_wake: plan.next_wake,
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
        Change::KeepOld => {
            let current = next.current.clone().ok_or_else(|| {
                RotateError::corrupt(
                    format!("credential \"{}\"", doc.name),
                    "has no current credential to keep",
                )
            })?;
            let rotation = current.rotation;
            next.old = Some(current);
            vec![Event::KeptOld { name, rotation }]
        }
        Change::StartMint {
            rotation,
            attempt,
            owner,
        } => {
            next.mint = Some(MintAttempt {
                rotation: *rotation,
                attempt: *attempt,
                started_at: at,
                owner: owner.clone(),
            });
            next.next_rotation = next.next_rotation.max(rotation + 1);
            vec![Event::MintStarted {
                name,
                rotation: *rotation,
                attempt: *attempt,
            }]
        }
        Change::RecordMint {
            rotation,
            attempt,
            value,
        } => {
            next.current = Some(Credential {
                rotation: *rotation,
                minted_at: at,
                value: value.clone(),
            });
            next.mint = None;
            next.failure = None;
            next.history.push(RotationRecord {
                rotation: *rotation,
                minted_at: at,
                attempts: *attempt,
                revoked_at: None,
            });
            if next.history.len() > HISTORY_LIMIT {
                let excess = next.history.len() - HISTORY_LIMIT;
                next.history.drain(..excess);
            }
            vec![Event::Minted {
                name,
                rotation: *rotation,
            }]
        }
        Change::RecordFailure { failure, stray } => {
            if failure.action == HookAction::Mint {
                next.mint = None;
            }
            let mut events = vec![Event::Failed {
                name: name.clone(),
                failure: failure.clone(),
            }];
            // One commit with the failure: a crash cannot forget it.
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
        Change::KeepLateMint {
            rotation,
            attempt,
            value,
        } => {
            next.strays.push(StrayCredential {
                rotation: *rotation,
                attempt: *attempt,
                captured_at: at,
                value: value.clone(),
                failure: None,
            });
            vec![Event::LateMintKept {
                name,
                rotation: *rotation,
                attempt: *attempt,
            }]
        }
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
        } => {
            for s in &mut next.strays {
                if (s.rotation, s.attempt) == (*rotation, *attempt) {
                    s.failure = Some(failure.clone());
                }
            }
            vec![Event::Failed {
                name,
                failure: failure.clone(),
            }]
        }
        Change::RecordRevoke { rotation } => {
            next.old = None;
            next.failure = None;
            if let Some(r) = next.history.iter_mut().find(|r| r.rotation == *rotation) {
                r.revoked_at = Some(at);
            }
            vec![Event::Revoked {
                name,
                rotation: *rotation,
            }]
        }
    };
    next.validate()?;
    Ok((next, events))
}
