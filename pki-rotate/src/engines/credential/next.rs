//! What comes next for a credential: the bookkeeping step due, or the
//! action the embedder must run (or the wait, with why), and how the
//! document decides it.

use super::{CredentialState, Secret};
use time::{Duration, OffsetDateTime};

#[cfg(doc)]
use super::{CredentialInput, MintAttempt, plan, status};

/// How long an embedder waits before looking again at a mint another
/// embedder owns ([`WaitReason::MintElsewhere`]).
pub const MINT_ELSEWHERE_RECHECK: Duration = Duration::seconds(30);

/// A bookkeeping step the engine takes by itself when stepped with
/// [`CredentialInput::Step`] or [`CredentialInput::StepAs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// The current credential expired: keep it as old.
    KeepOld,
    /// Record a mint attempt as started.
    StartMint,
}

/// Why [`Action::Wait`] waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitReason {
    /// The current credential is not due for rotation yet.
    Expiry,
    /// The old credential stays usable until the grace period ends.
    Grace,
    /// The last attempt failed; the next waits for its retry time.
    Backoff,
    /// The mint in progress belongs to another embedder
    /// ([`MintAttempt::owner`]): only it runs the mint; look again later.
    MintElsewhere,
}

impl std::fmt::Display for WaitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WaitReason::Expiry => "until the credential expires",
            WaitReason::Grace => "until the grace period ends",
            WaitReason::Backoff => "until the failed step may be retried",
            WaitReason::MintElsewhere => "for the mint another reconciler runs",
        })
    }
}

/// What the embedder must do: run a hook and report its result, or wait.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Mint once for this recorded attempt (or adopt what an earlier run
    /// of it captured) and report [`CredentialInput::Minted`] or
    /// [`CredentialInput::MintFailed`].
    Mint {
        /// The rotation.
        rotation: u64,
        /// The attempt.
        attempt: u32,
    },
    /// Revoke `value` (already revoked is success) and report
    /// [`CredentialInput::Revoked`] or [`CredentialInput::RevokeFailed`].
    Revoke {
        /// The old credential's rotation.
        rotation: u64,
        /// The old credential.
        value: Secret,
    },
    /// Revoke what a failed or late mint attempt printed (already gone, or
    /// never a credential, is success) and report
    /// [`CredentialInput::StrayRevoked`] or
    /// [`CredentialInput::StrayRevokeFailed`].
    RevokeStray {
        /// The attempt's rotation.
        rotation: u64,
        /// The attempt.
        attempt: u32,
        /// What it printed.
        value: Secret,
    },
    /// Nothing to do before `until`.
    Wait {
        /// When to look again.
        until: OffsetDateTime,
        /// Why.
        reason: WaitReason,
    },
}

/// What comes once a plan's change is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Next {
    /// Another bookkeeping step is due at the same time: step again
    /// ([`advance`](crate::driver::advance) does).
    Step(StepKind),
    /// The embedder acts, or waits.
    Act(Action),
}

/// What the document asks for at `now` with nothing reported, for the
/// embedder `owner`: a bookkeeping step, or the embedder's action. Pure:
/// the same document, owner and time give the same answer.
pub(super) fn due(doc: &CredentialState, owner: Option<&str>, now: OffsetDateTime) -> Next {
    if let Some(m) = &doc.mint {
        return Next::Act(if m.run_by(owner) {
            Action::Mint {
                rotation: m.rotation,
                attempt: m.attempt,
            }
        } else {
            Action::Wait {
                until: now + MINT_ELSEWHERE_RECHECK,
                reason: WaitReason::MintElsewhere,
            }
        });
    }
    // Before anything else may mint, what failed attempts printed is
    // revoked: otherwise a third credential could be live.
    if let Some(stray) = doc.strays.iter().find(|s| s.due(now)) {
        return Next::Act(Action::RevokeStray {
            rotation: stray.rotation,
            attempt: stray.attempt,
            value: stray.value.clone(),
        });
    }
    if let Some(until) = doc
        .strays
        .iter()
        .filter_map(|s| s.failure.as_ref().map(|f| f.retry_after))
        .min()
    {
        return Next::Act(Action::Wait {
            until,
            reason: WaitReason::Backoff,
        });
    }
    let backoff = doc
        .failure
        .as_ref()
        .map(|f| f.retry_after)
        .filter(|t| *t > now)
        .map(|until| {
            Next::Act(Action::Wait {
                until,
                reason: WaitReason::Backoff,
            })
        });
    match (&doc.old, &doc.current) {
        (Some(old), Some(current)) if old.rotation != current.rotation => {
            let grace_end = current.minted_at + doc.policy.grace;
            if now < grace_end {
                return Next::Act(Action::Wait {
                    until: grace_end,
                    reason: WaitReason::Grace,
                });
            }
            backoff.unwrap_or_else(|| {
                Next::Act(Action::Revoke {
                    rotation: old.rotation,
                    value: old.value.clone(),
                })
            })
        }
        // Kept as old, or nothing minted yet: mint.
        (Some(_), Some(_)) | (_, None) => backoff.unwrap_or(Next::Step(StepKind::StartMint)),
        (None, Some(current)) => {
            let due = current.minted_at + doc.policy.expire;
            if now >= due {
                Next::Step(StepKind::KeepOld)
            } else {
                Next::Act(Action::Wait {
                    until: due,
                    reason: WaitReason::Expiry,
                })
            }
        }
    }
}

/// What the document asks for at `now`, as [`status`] reports it: the
/// bookkeeping step due, or what the owner of the mint in progress (if
/// any) must do. The same decision [`plan`] makes for a step.
pub(crate) fn due_for_status(doc: &CredentialState, now: OffsetDateTime) -> Next {
    let owner = doc.mint.as_ref().and_then(|m| m.owner.as_deref());
    due(doc, owner, now)
}
