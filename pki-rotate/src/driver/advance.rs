//! [`advance`]: every due bookkeeping step of one credential, through the
//! driver, until the embedder must act. The one loop the CLI's `pki cred
//! reconcile` and the C ABI's `pki_document_step` (with `PKI_KIND_CRED`) (and through it Go) share.

use crate::driver::{Advanced, Driver, Read, Step};
use crate::engines::credential::{
    Change, CredentialEngine, CredentialInput, CredentialState, Event, Next, Plan, credential_key,
    plan,
};
use crate::model::error::{Result, RotateError};
use crate::model::store::Store;
use rand_core::CryptoRng;
use time::OffsetDateTime;

/// The most steps one [`advance`] commits before it gives up. A rotation
/// has at most two bookkeeping steps in a row (keep the current credential
/// as old, record the mint attempt); after them the embedder must act. The
/// rest is headroom for other writers changing the document in between
/// (each retry of a step is the driver's, within its own bound, and is not
/// counted here). More than this means a store that does not keep its
/// writes, or a bug: [`CredentialError::NotSettling`](crate::CredentialError::NotSettling).
pub const ADVANCE_MAX_STEPS: u32 = 8;

/// How [`advance`] runs.
#[derive(Debug, Clone, Copy, Default)]
pub struct AdvanceOptions<'a> {
    /// Who steps (see [`CredentialInput::StepAs`]): a mint attempt it
    /// records is its own, and it is never asked to run another owner's
    /// (it is told to wait instead). None: an embedder that gives no owner.
    pub owner: Option<&'a str>,
    /// Stop after this many committed steps even when more are due (to
    /// watch a rotation one step at a time); [`Advanced::next`] is then
    /// [`Next::Step`]. None: until the embedder must act.
    pub max_steps: Option<u32>,
}

/// Takes every bookkeeping step of credential `name` due at `now` (keep
/// the current credential as old, record a mint attempt), each committed on
/// its own through `driver` (compare-and-swap, retried on conflict), and
/// returns what the embedder must do next: the plan of the document now in
/// the store. At most [`ADVANCE_MAX_STEPS`] steps.
///
/// The step returned is the last one, with every committed step's events
/// and rounds, `changed` when any step was committed, the plan's
/// `next_wake`, and [`Step::advance`] set.
///
/// # Errors
///
/// Those of each [`Driver::step`] (a step committed before the error stays
/// committed), those of [`Driver::load`] when `options.max_steps` is 0, what
/// the credential engine's plan refuses
/// ([`CredentialError`](crate::CredentialError)), and
/// [`CredentialError::NotSettling`](crate::CredentialError::NotSettling) when a
/// step is still due after [`ADVANCE_MAX_STEPS`] steps.
pub fn advance<S: Store, R: CryptoRng + ?Sized>(
    driver: &Driver<S>,
    name: &str,
    options: AdvanceOptions<'_>,
    now: OffsetDateTime,
    rng: &mut R,
) -> Result<Step<CredentialState, Event>> {
    let key = credential_key(name);
    let input = match options.owner {
        Some(owner) => CredentialInput::StepAs {
            owner: owner.to_string(),
        },
        None => CredentialInput::Step,
    };
    let done = |plan: Plan, mut step: Step<CredentialState, Event>, steps: u32| {
        let (next, next_wake) = match plan.change.as_ref().and_then(Change::step_kind) {
            // Stopped by max_steps with this step due.
            Some(kind) => (Next::Step(kind), plan.at),
            None => (plan.next, plan.next_wake),
        };
        step.changed = steps > 0;
        step.next_wake = next_wake;
        step.advance = Some(Advanced { next, steps });
        step
    };
    if options.max_steps == Some(0) {
        let (doc, revision) = driver.load::<CredentialEngine>(&key)?;
        let plan = plan(&doc, &input, now)?;
        let read = Step::unchanged(doc, revision, Vec::new(), now, Read::Whole);
        return Ok(done(plan, read, 0));
    }
    let mut events = Vec::new();
    let mut steps = 0u32;
    let mut rounds = 0u32;
    for _ in 0..ADVANCE_MAX_STEPS {
        let mut step = driver.step::<CredentialEngine, _>(&key, &input, now, rng)?;
        events.append(&mut step.events);
        steps += u32::from(step.changed);
        rounds = rounds.saturating_add(step.attempts);
        // The decision of the document now stored: what the next step
        // would carry out, or what the embedder must do.
        let plan = plan(&step.document, &input, now)?;
        let stop = options.max_steps.is_some_and(|max| steps >= max);
        if plan.change.is_none() || stop {
            step.events = events;
            step.attempts = rounds;
            return Ok(done(plan, step, steps));
        }
    }
    Err(RotateError::Credential(
        crate::CredentialError::NotSettling {
            name: name.to_string(),
            steps,
        },
    ))
}
