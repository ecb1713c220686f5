//! Deciding a step: what the caller asks, whether the active key rotates,
//! which accepted keys leave, and when to look again.

use super::{KeyRing, KeyRingError, KeyRotationReason};
use crate::model::error::{Result, RotateError};
use pki_core::datetime::rfc3339;
use time::OffsetDateTime;

/// What the caller asks of a step besides time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyRingInput {
    /// Rotate now, once per distinct reason.
    pub forced: Option<String>,
    /// Stop accepting these keys (by kid) now: imported keys, or keys whose
    /// grace has ended.
    pub retire: Vec<String>,
    /// Set by [`Engine::rebase`]: a concurrent writer already rotated, so
    /// the forced reason is recorded without a second rotation.
    pub(super) already_rotated: bool,
}

impl KeyRingInput {
    /// A forced rotation with `reason`.
    pub fn forced(reason: impl Into<String>) -> Self {
        KeyRingInput {
            forced: Some(reason.into()),
            ..KeyRingInput::default()
        }
    }

    /// Retire the keys `kids` (imported keys, or keys past their grace).
    pub fn retire(kids: impl IntoIterator<Item = String>) -> Self {
        KeyRingInput {
            retire: kids.into_iter().collect(),
            ..KeyRingInput::default()
        }
    }
}

/// What a step decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRingPlan {
    /// The time of the decision.
    pub now: OffsetDateTime,
    /// Rotate the active key, and why.
    pub rotate: Option<KeyRotationReason>,
    /// A forced reason to record without rotating (a concurrent writer
    /// already rotated).
    pub record_forced: Option<String>,
    /// Accepted keys whose grace has ended, to remove.
    pub expired: Vec<String>,
    /// Keys to retire on request.
    pub retire: Vec<String>,
    /// The ring lists key objects in a token to destroy (its keys that
    /// left): this step destroys them.
    pub destroy_retiring: bool,
}

impl KeyRingPlan {
    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        self.rotate.is_none()
            && self.record_forced.is_none()
            && self.expired.is_empty()
            && self.retire.is_empty()
            && !self.destroy_retiring
    }
}

/// Decides what a step does at `now`.
///
/// # Errors
///
/// [`KeyRingError::ClockBehind`] when `now` is before the active key became
/// active; for a forced rotation,
/// [`SignerError::EmptyForcedReason`](crate::SignerError::EmptyForcedReason)
/// for a blank reason and [`RotateError::InvalidText`] for one that cannot be
/// recorded; [`KeyRingError::Retire`] for a key to retire that is the active
/// one, unknown, or still in its grace.
pub fn plan(ring: &KeyRing, input: &KeyRingInput, now: OffsetDateTime) -> Result<KeyRingPlan> {
    if now < ring.active.since {
        return Err(KeyRingError::ClockBehind {
            action: "step the key ring",
            now: rfc3339(now),
            since: rfc3339(ring.active.since),
        }
        .into());
    }
    let mut plan = KeyRingPlan {
        now,
        rotate: None,
        record_forced: None,
        expired: Vec::new(),
        retire: Vec::new(),
        destroy_retiring: ring
            .token_keys
            .as_ref()
            .is_some_and(|keys| !keys.retiring.is_empty()),
    };
    if let Some(reason) = &input.forced {
        if reason.trim().is_empty() {
            return Err(RotateError::Signer(crate::SignerError::EmptyForcedReason));
        }
        crate::model::text::check_reason("the forced rotation's reason", reason)?;
        if !ring.forced_reasons.contains(reason) {
            if input.already_rotated {
                plan.record_forced = Some(reason.clone());
            } else {
                plan.rotate = Some(KeyRotationReason::Forced {
                    reason: reason.clone(),
                });
            }
        }
    }
    if plan.rotate.is_none() && plan.record_forced.is_none() && now >= ring.rotation_due_at() {
        plan.rotate = Some(KeyRotationReason::Age {
            age_seconds: (now - ring.active.since).whole_seconds(),
            lifetime_seconds: ring.policy.lifetime.whole_seconds(),
        });
    }
    for kid in &input.retire {
        if *kid == ring.active.kid {
            return Err(KeyRingError::Retire {
                kid: kid.clone(),
                reason: "it is the active key (rotate first)".into(),
            }
            .into());
        }
        let Some(key) = ring.accepted.iter().find(|k| k.kid == *kid) else {
            return Err(KeyRingError::Retire {
                kid: kid.clone(),
                reason: "no accepted key has this id".into(),
            }
            .into());
        };
        if let Some(until) = key.accepted_until
            && now < until
        {
            return Err(KeyRingError::Retire {
                kid: kid.clone(),
                reason: format!(
                    "it is accepted until {}: tokens it signed before the rotation may still be in use",
                    rfc3339(until)
                ),
            }
            .into());
        }
        if !plan.retire.contains(kid) {
            plan.retire.push(kid.clone());
        }
    }
    plan.expired = ring
        .accepted
        .iter()
        .filter(|k| !k.accepted_at(now) && !plan.retire.contains(&k.kid))
        .map(|k| k.kid.clone())
        .collect();
    Ok(plan)
}

/// The next time something is due: the active key's rotation or the end of
/// an accepted key's grace, never before `now`.
pub fn next_wake(ring: &KeyRing, now: OffsetDateTime) -> OffsetDateTime {
    ring.accepted
        .iter()
        .filter_map(|k| k.accepted_until)
        .chain(std::iter::once(ring.rotation_due_at()))
        .min()
        .unwrap_or_else(|| ring.rotation_due_at())
        .max(now)
}
