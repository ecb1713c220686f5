//! Carrying out a step's plan on the ring.

use super::{
    AcceptedKey, ActiveKey, KeyOrigin, KeyRing, KeyRingEvent, KeyRingPlan, KeyRotationReason,
    KeyRotationRecord, next_wake,
};
use crate::engines::Outcome;
use crate::model::error::Result;
use pki_core::PrivateKey;
use rand_core::CryptoRng;
use std::borrow::Cow;

/// Carries out `plan`: a new active key from `rng` when rotating.
pub fn apply<'d, R: CryptoRng + ?Sized>(
    ring: &'d KeyRing,
    plan: KeyRingPlan,
    rng: &mut R,
) -> Result<Outcome<'d, KeyRing, KeyRingEvent>> {
    let now = plan.now;
    if plan.is_empty() {
        return Ok(Outcome {
            document: Cow::Borrowed(ring),
            events: Vec::new(),
            next_wake: next_wake(ring, now),
            findings: crate::engines::guard::Findings::none(),
        });
    }
    let mut next = ring.clone();
    let mut events = Vec::new();
    if let Some(reason) = plan.record_forced {
        next.forced_reasons.insert(reason.clone());
        events.push(KeyRingEvent::ForcedRotationSatisfied {
            reason,
            by: ring.active.kid.clone(),
        });
    }
    // Removals first: a key rotated out now must not be swept by them.
    next.accepted.retain(|k| {
        if plan.retire.contains(&k.kid) {
            events.push(KeyRingEvent::Retired { kid: k.kid.clone() });
            false
        } else if plan.expired.contains(&k.kid) {
            events.push(KeyRingEvent::Expired { kid: k.kid.clone() });
            false
        } else {
            true
        }
    });
    if let Some(reason) = plan.rotate {
        let key = PrivateKey::generate(next.policy.algorithm, rng)?;
        let fresh = ActiveKey::new(key, now, KeyOrigin::Generated)?;
        let old = std::mem::replace(&mut next.active, fresh);
        // Whatever its origin, the key that signed until now leaves after
        // the grace: keeping an imported one forever would publish a key
        // nobody signs with, and DESIGN promises its removal. The grace is
        // what covers the tokens it signed, here or before the import.
        let until = Some(now + next.policy.grace);
        // A rotation never drops the key that signed tokens still in use:
        // it goes first among the accepted keys for the grace period.
        next.accepted.retain(|k| k.kid != old.kid);
        next.accepted.insert(
            0,
            AcceptedKey {
                public: old.public,
                kid: old.kid.clone(),
                rotated_out_at: Some(now),
                accepted_until: until,
                origin: old.origin,
            },
        );
        if let KeyRotationReason::Forced { reason } = &reason {
            next.forced_reasons.insert(reason.clone());
        }
        next.history.push(KeyRotationRecord {
            at: now,
            reason: reason.clone(),
            from: old.kid.clone(),
            to: next.active.kid.clone(),
            previous_accepted_until: until,
        });
        events.push(KeyRingEvent::Rotated {
            reason,
            previous: old.kid,
            current: next.active.kid.clone(),
            previous_accepted_until: until,
        });
    }
    let wake = next_wake(&next, now);
    Ok(Outcome {
        document: Cow::Owned(next),
        events,
        next_wake: wake,
        findings: crate::engines::guard::Findings::none(),
    })
}
