//! Carrying out a step's plan on the ring.

use super::{
    AcceptedKey, ActiveKey, KeyOrigin, KeyRing, KeyRingEvent, KeyRingPlan, KeyRotationReason,
    KeyRotationRecord, next_wake, token_keys,
};
use crate::engines::Outcome;
use crate::model::error::{Result, RotateError};
use pki_core::{CaKey, PrivateKey};
use rand_core::CryptoRng;
use std::borrow::Cow;
use time::OffsetDateTime;

/// Carries out `plan`: a new active key from `rng` when rotating (from the
/// token, when the ring's keys are in one: recorded in one round, made or
/// adopted in the next).
///
/// # Errors
///
/// [`RotateError::Core`] when a key cannot be generated, made in the token or
/// destroyed there (see [`RingTokenKeys`](super::RingTokenKeys)); a
/// [`KeyRingError::Jose`](crate::KeyRingError::Jose) when the new key is one
/// the ring cannot publish;
/// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when a rotation in
/// a token finds no recorded key to make. Nothing is returned then.
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
    // Only what the stored ring lists as retiring is destroyed: keys that
    // leave in this step are listed, and destroyed once that is committed.
    if plan.destroy_retiring
        && let Some(keys) = &mut next.token_keys
    {
        events.extend(keys.destroy_retiring()?.into_iter().map(KeyRingEvent::from));
    }
    // A new key in a token is recorded first; the rotation waits for the
    // next round, after that intent is committed.
    if plan.rotate.is_some() && token_keys::intend(&mut next, rng, &mut events)? {
        return Ok(outcome(next, events, now));
    }
    if let Some(reason) = plan.record_forced {
        next.forced_reasons.insert(reason.clone());
        events.push(KeyRingEvent::ForcedRotationSatisfied {
            reason,
            by: ring.active.kid.clone(),
        });
    }
    // Removals first: a key rotated out now must not be swept by them.
    let mut left = Vec::new();
    next.accepted.retain(|k| {
        if plan.retire.contains(&k.kid) {
            events.push(KeyRingEvent::Retired { kid: k.kid.clone() });
        } else if plan.expired.contains(&k.kid) {
            events.push(KeyRingEvent::Expired { kid: k.kid.clone() });
        } else {
            return true;
        }
        left.push(k.kid.clone());
        false
    });
    if let Some(keys) = &mut next.token_keys {
        events.extend(
            left.iter()
                .filter_map(|kid| keys.remove(kid))
                .map(KeyRingEvent::from),
        );
    }
    if let Some(reason) = plan.rotate {
        rotate(&mut next, reason, now, rng, &mut events)?;
    }
    Ok(outcome(next, events, now))
}

fn outcome(
    next: KeyRing,
    events: Vec<KeyRingEvent>,
    now: OffsetDateTime,
) -> Outcome<'static, KeyRing, KeyRingEvent> {
    let wake = next_wake(&next, now);
    Outcome {
        document: Cow::Owned(next),
        events,
        next_wake: wake,
        findings: crate::engines::guard::Findings::none(),
    }
}

/// The new active key: the token's recorded one, made or adopted now, or a
/// new key in this process.
fn new_key<R: CryptoRng + ?Sized>(ring: &KeyRing, rng: &mut R) -> Result<CaKey> {
    let algorithm = ring.policy.algorithm;
    match &ring.token_keys {
        None => Ok(PrivateKey::generate(algorithm, rng)?.into()),
        Some(keys) => match keys.make_pending(algorithm)? {
            Some(key) => Ok(key.into()),
            // The intent is recorded in the round before; without one
            // none is made here.
            None => Err(RotateError::corrupt(
                super::document::STATE_FILE,
                "a rotation of a key in a token has no recorded key to make",
            )),
        },
    }
}

/// Makes a new active key; the previous one stays accepted for the grace.
fn rotate<R: CryptoRng + ?Sized>(
    next: &mut KeyRing,
    reason: KeyRotationReason,
    now: OffsetDateTime,
    rng: &mut R,
    events: &mut Vec<KeyRingEvent>,
) -> Result<()> {
    let fresh = ActiveKey::new(new_key(next, rng)?, now, KeyOrigin::Generated)?;
    let old = std::mem::replace(&mut next.active, fresh);
    if let Some(keys) = &mut next.token_keys {
        keys.rotated(&old.kid, old.key.token().map(pki_core::TokenKey::uri));
    }
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
    Ok(())
}
