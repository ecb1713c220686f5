//! Deciding: the one change an input asks for at a time, what comes once
//! it is committed, and when to look again. Reports the document does not
//! wait for are kept (a late mint) or refused, never dropped.

use super::apply::transition;
use super::next::due;
use super::{
    Action, Change, CredentialInput, CredentialState, HookAction, HookFailure, Next, Secret,
    StepKind, retry_after, sanitize_message, validate_owner,
};
use crate::model::error::{Result, RotateError};
use time::OffsetDateTime;

#[cfg(doc)]
use super::apply;

/// The decision: the change to commit (if any), what comes after it, and
/// when to look again. Made by [`plan`]; [`apply`] only carries it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The time of the plan (the time of the change).
    pub at: OffsetDateTime,
    /// The one change to commit; None: nothing changes (waiting, the
    /// action is the embedder's, or the report was already recorded).
    pub change: Option<Change>,
    /// What comes once the change is committed.
    pub next: Next,
    /// When to step again if nothing else happens: `at` when a step or an
    /// action is due, the end of the wait otherwise.
    pub next_wake: OffsetDateTime,
}

fn unexpected(doc: &CredentialState, reason: String) -> RotateError {
    RotateError::Credential(crate::CredentialError::UnexpectedReport {
        name: doc.name.clone(),
        reason,
    })
}

fn waiting_for(doc: &CredentialState) -> String {
    match (&doc.mint, &doc.old, &doc.current) {
        (Some(m), _, _) => format!(
            "the document waits for rotation {} attempt {}",
            m.rotation, m.attempt
        ),
        (None, _, _) if !doc.strays.is_empty() => {
            "the document waits for the revocation of stray credentials".to_string()
        }
        (None, Some(o), Some(c)) if o.rotation != c.rotation => {
            format!(
                "the document waits for the revocation of credential {}",
                o.rotation
            )
        }
        _ => "the document waits for no mint or revocation".to_string(),
    }
}

impl CredentialState {
    /// Whether mint attempt `attempt` of `rotation` was ever started, as far
    /// as the document can tell (a rotation older than the history: yes).
    fn attempted(&self, rotation: u64, attempt: u32) -> bool {
        if rotation == 0 || attempt == 0 || rotation >= self.next_rotation {
            return false;
        }
        if let Some(m) = self.mint.as_ref().filter(|m| m.rotation == rotation) {
            return attempt <= m.attempt;
        }
        if let Some(f) = self
            .failure
            .as_ref()
            .filter(|f| f.action == HookAction::Mint && f.rotation == rotation)
        {
            return attempt <= f.failures;
        }
        if let Some(r) = self.history.iter().find(|r| r.rotation == rotation) {
            return attempt <= r.attempts;
        }
        self.history.first().is_none_or(|r| rotation < r.rotation)
    }

    /// The attempt the next [`Change::StartMint`] records: a retry
    /// continues the failed rotation; otherwise a new one.
    fn next_attempt(&self) -> (u64, u32) {
        match &self.failure {
            Some(f) if f.action == HookAction::Mint => (f.rotation, f.failures + 1),
            _ => (self.next_rotation, 1),
        }
    }
}

/// A mint reported for an attempt the document no longer waits for
/// (another embedder reported it first, or it was superseded): what it
/// printed is kept as a stray, unless the document already holds it.
fn late_mint(
    doc: &CredentialState,
    rotation: u64,
    attempt: u32,
    printed: Option<&Secret>,
    what: &str,
) -> Result<Option<Change>> {
    if !doc.attempted(rotation, attempt) {
        return Err(unexpected(
            doc,
            format!(
                "reported {what} of rotation {rotation} attempt {attempt}, which was never started, but {}",
                waiting_for(doc)
            ),
        ));
    }
    let Some(value) = printed.filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    // Already recorded (a repeated report): nothing to keep, and a live
    // credential must never be revoked as a stray.
    if doc.is_live(value) || doc.strays.iter().any(|s| s.value == *value) {
        return Ok(None);
    }
    if doc
        .strays
        .iter()
        .any(|s| (s.rotation, s.attempt) == (rotation, attempt))
    {
        return Err(unexpected(
            doc,
            format!(
                "reported {what} of rotation {rotation} attempt {attempt} after the document moved on, and a stray credential of that attempt is already kept: keep this credential and report it again once that one is revoked"
            ),
        ));
    }
    Ok(Some(Change::KeepLateMint {
        rotation,
        attempt,
        value: value.clone(),
    }))
}

fn mint_failure(
    rotation: u64,
    attempt: u32,
    message: &str,
    stray: Option<Secret>,
    now: OffsetDateTime,
) -> Change {
    Change::RecordFailure {
        failure: HookFailure {
            action: HookAction::Mint,
            rotation,
            failures: attempt,
            message: sanitize_message(message),
            at: now,
            retry_after: retry_after(attempt, now),
        },
        stray,
    }
}

/// Decides the one change `input` asks for at `now`, and what comes after
/// it: the whole decision. Pure: the same document, input and time give
/// the same plan.
///
/// # Errors
///
/// Those of [`CredentialState::validate`] for `doc`;
/// [`CredentialError::InvalidMintOwner`](crate::CredentialError::InvalidMintOwner)
/// for an unusable owner in `input`;
/// [`CredentialError::UnexpectedReport`](crate::CredentialError::UnexpectedReport)
/// for a report the document does not wait for (a mint, failure or revocation
/// of another rotation or attempt).
pub fn plan(doc: &CredentialState, input: &CredentialInput, now: OffsetDateTime) -> Result<Plan> {
    doc.validate()?;
    let owner = input.owner();
    if let Some(owner) = owner {
        validate_owner(owner)?;
    }
    let change = decide(doc, input, now)?;
    let next = match &change {
        None => due(doc, owner, now),
        // Look ahead: what the document asks for once the change is in.
        Some(change) => due(&transition(doc, change, now)?.0, owner, now),
    };
    let next_wake = match &next {
        Next::Act(Action::Wait { until, .. }) => (*until).max(now),
        _ => now,
    };
    Ok(Plan {
        at: now,
        change,
        next,
        next_wake,
    })
}

/// The change `input` asks for.
fn decide(
    doc: &CredentialState,
    input: &CredentialInput,
    now: OffsetDateTime,
) -> Result<Option<Change>> {
    match input {
        CredentialInput::Step | CredentialInput::StepAs { .. } => Ok(step(doc, input, now)),
        CredentialInput::Minted {
            rotation,
            attempt,
            value,
        } => minted(doc, *rotation, *attempt, value, now),
        CredentialInput::MintFailed {
            rotation,
            attempt,
            message,
            captured,
        } => {
            if !doc.awaits_mint(*rotation, *attempt) {
                return late_mint(doc, *rotation, *attempt, captured.as_ref(), "a failed mint");
            }
            // A live credential printed again is not a new one: taking it
            // for a stray would revoke it.
            let stray = captured
                .as_ref()
                .filter(|v| !v.is_empty() && !doc.is_live(v))
                .filter(|v| !doc.strays.iter().any(|s| s.value == **v))
                .cloned();
            Ok(Some(mint_failure(*rotation, *attempt, message, stray, now)))
        }
        CredentialInput::Revoked { rotation } => revoked(doc, *rotation),
        CredentialInput::RevokeFailed { rotation, message } => {
            revoke_failed(doc, *rotation, message, now)
        }
        CredentialInput::StrayRevoked { rotation, attempt } => {
            stray_revoked(doc, *rotation, *attempt)
        }
        CredentialInput::StrayRevokeFailed {
            rotation,
            attempt,
            message,
        } => stray_revoke_failed(doc, *rotation, *attempt, message, now),
    }
}

impl CredentialState {
    /// Whether the mint attempt recorded as started is this one: any other
    /// report is late and must not move the document.
    fn awaits_mint(&self, rotation: u64, attempt: u32) -> bool {
        self.mint
            .as_ref()
            .is_some_and(|m| m.rotation == rotation && m.attempt == attempt)
    }
}

/// A step takes the document's own next step, if that is ours to record;
/// an action due is the embedder's, so nothing changes.
fn step(doc: &CredentialState, input: &CredentialInput, now: OffsetDateTime) -> Option<Change> {
    match due(doc, input.owner(), now) {
        Next::Step(StepKind::KeepOld) => Some(Change::KeepOld),
        Next::Step(StepKind::StartMint) => {
            let (rotation, attempt) = doc.next_attempt();
            Some(Change::StartMint {
                rotation,
                attempt,
                owner: input.owner().map(str::to_string),
            })
        }
        Next::Act(_) => None,
    }
}

/// A mint's report. A mint that printed nothing, or a credential already in
/// use (revoking the old one would then revoke the new one), is a failed
/// attempt: recorded, retried with backoff.
fn minted(
    doc: &CredentialState,
    rotation: u64,
    attempt: u32,
    value: &Secret,
    now: OffsetDateTime,
) -> Result<Option<Change>> {
    if !doc.awaits_mint(rotation, attempt) {
        return late_mint(doc, rotation, attempt, Some(value), "a mint");
    }
    let reused = doc.is_live(value) || doc.strays.iter().any(|s| s.value == *value);
    let refused = if value.is_empty() {
        Some("the mint reported an empty credential")
    } else if reused {
        Some("the mint reported the credential already in use, not a new one")
    } else {
        None
    };
    Ok(Some(match refused {
        Some(message) => mint_failure(rotation, attempt, message, None, now),
        None => Change::RecordMint {
            rotation,
            attempt,
            value: value.clone(),
        },
    }))
}

/// A revocation's report. Revoking the current credential would leave
/// consumers with nothing valid, so that report is refused; a repeated
/// report of one already forgotten changes nothing.
fn revoked(doc: &CredentialState, rotation: u64) -> Result<Option<Change>> {
    if doc.current.as_ref().is_some_and(|c| c.rotation == rotation) {
        return Err(unexpected(
            doc,
            format!(
                "refusing to record the revocation of credential {rotation}: it is the current credential"
            ),
        ));
    }
    match &doc.old {
        Some(o) if o.rotation == rotation => Ok(Some(Change::RecordRevoke { rotation })),
        // Already forgotten (a concurrent embedder reported it), or
        // never known: nothing to keep, nothing to change.
        _ if rotation < doc.next_rotation => Ok(None),
        _ => Err(unexpected(
            doc,
            format!("reported the revocation of credential {rotation}, which was never minted"),
        )),
    }
}

/// A failed revocation of the old credential, counted on from the last
/// failure of the same revocation so that the backoff grows.
fn revoke_failed(
    doc: &CredentialState,
    rotation: u64,
    message: &str,
    now: OffsetDateTime,
) -> Result<Option<Change>> {
    match &doc.old {
        Some(o) if o.rotation == rotation && doc.in_grace() => {
            let failures = match &doc.failure {
                Some(f) if f.action == HookAction::Revoke && f.rotation == rotation => {
                    f.failures + 1
                }
                _ => 1,
            };
            Ok(Some(Change::RecordFailure {
                failure: HookFailure {
                    action: HookAction::Revoke,
                    rotation,
                    failures,
                    message: sanitize_message(message),
                    at: now,
                    retry_after: retry_after(failures, now),
                },
                stray: None,
            }))
        }
        _ => Err(unexpected(
            doc,
            format!(
                "reported a failed revocation of credential {rotation}, but {}",
                waiting_for(doc)
            ),
        )),
    }
}

/// A stray credential's revocation: forget it. A repeated report (a
/// concurrent embedder's) changes nothing; one never attempted is refused.
fn stray_revoked(doc: &CredentialState, rotation: u64, attempt: u32) -> Result<Option<Change>> {
    if doc
        .strays
        .iter()
        .any(|s| s.rotation == rotation && s.attempt == attempt)
    {
        return Ok(Some(Change::RecordStrayRevoke { rotation, attempt }));
    }
    if rotation < doc.next_rotation {
        // Already forgotten: a concurrent embedder reported it.
        Ok(None)
    } else {
        Err(unexpected(
            doc,
            format!(
                "reported the revocation of a stray credential of rotation {rotation}, which was never attempted"
            ),
        ))
    }
}

/// A failed revocation of a stray credential, counted per stray so each
/// backs off on its own.
fn stray_revoke_failed(
    doc: &CredentialState,
    rotation: u64,
    attempt: u32,
    message: &str,
    now: OffsetDateTime,
) -> Result<Option<Change>> {
    match doc
        .strays
        .iter()
        .find(|s| s.rotation == rotation && s.attempt == attempt)
    {
        Some(stray) => {
            let failures = stray.failure.as_ref().map_or(1, |f| f.failures + 1);
            Ok(Some(Change::RecordStrayFailure {
                rotation,
                attempt,
                failure: HookFailure {
                    action: HookAction::RevokeStray,
                    rotation,
                    failures,
                    message: sanitize_message(message),
                    at: now,
                    retry_after: retry_after(failures, now),
                },
            }))
        }
        None => Err(unexpected(
            doc,
            format!(
                "reported a failed revocation of the stray credential of rotation {rotation} attempt {attempt}, but {}",
                waiting_for(doc)
            ),
        )),
    }
}
