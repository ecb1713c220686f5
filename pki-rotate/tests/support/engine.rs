//! The signer engine called the way the rotation tests read best: a policy
//! and an optional forced rotation in, the next document, its events and
//! the wake-up time out.

#![allow(dead_code)]

use pki_rotate::{
    Engine, Event, ForcedRotation, Plan, SignerEngine, SignerInput, SignerPolicy, SignerState,
};
use rand_core::CryptoRng;
use time::OffsetDateTime;

pub fn input(policy: &SignerPolicy, forced: Option<&ForcedRotation>) -> SignerInput {
    SignerInput {
        policy: Some(*policy),
        forced: forced.cloned(),
        ..SignerInput::default()
    }
}

pub fn plan(
    state: &SignerState,
    policy: &SignerPolicy,
    now: OffsetDateTime,
    forced: Option<&ForcedRotation>,
) -> pki_rotate::Result<Plan> {
    SignerEngine::plan(state, &input(policy, forced), now)
}

pub fn apply<R: CryptoRng + ?Sized>(
    state: &SignerState,
    plan: Plan,
    rng: &mut R,
) -> pki_rotate::Result<(SignerState, Vec<Event>)> {
    let outcome = SignerEngine::apply(state, plan, rng)?.guarded()?;
    Ok((outcome.document.into_owned(), outcome.events))
}

pub fn reconcile<R: CryptoRng + ?Sized>(
    state: &SignerState,
    policy: &SignerPolicy,
    now: OffsetDateTime,
    forced: Option<&ForcedRotation>,
    rng: &mut R,
) -> pki_rotate::Result<(SignerState, Vec<Event>, OffsetDateTime)> {
    let outcome = SignerEngine::step(state, &input(policy, forced), now, rng)?;
    let wake = outcome.next_wake;
    Ok((outcome.document.into_owned(), outcome.events, wake))
}
