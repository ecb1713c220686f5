//! The credential engine's unit tests, by topic. The helpers here build
//! documents at pinned times and step them.

use super::*;
use time::macros::datetime;
use time::{Duration, OffsetDateTime};

// 2026-01-01, a fixed start: nothing here reads the clock.
const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

fn policy() -> CredentialPolicy {
    CredentialPolicy {
        expire: Duration::hours(720),
        grace: Duration::minutes(10),
    }
}

fn fresh() -> CredentialState {
    CredentialState::new("db", policy(), None).unwrap()
}

/// What a step of `doc` at `now` decides first: the bookkeeping step it
/// commits, or (nothing to commit) what the embedder must do: read from
/// the plan.
fn next_action(doc: &CredentialState, now: OffsetDateTime) -> Next {
    let plan = plan(doc, &CredentialInput::Step, now).unwrap();
    match plan.change.as_ref().and_then(Change::step_kind) {
        Some(kind) => Next::Step(kind),
        None => plan.next,
    }
}

fn step(
    doc: &CredentialState,
    input: CredentialInput,
    now: OffsetDateTime,
) -> Result<CredentialState> {
    let plan = plan(doc, &input, now)?;
    Ok(apply(doc, plan)?.into_document())
}

fn minted(rotation: u64, attempt: u32, v: &str) -> CredentialInput {
    CredentialInput::Minted {
        rotation,
        attempt,
        value: Secret::new(v),
    }
}

/// A document with credential 1 current, minted at T0.
fn with_first() -> CredentialState {
    let d = step(&fresh(), CredentialInput::Step, T0).unwrap();
    assert_eq!(
        d.mint.as_ref().map(|m| (m.rotation, m.attempt)),
        Some((1, 1))
    );
    step(&d, minted(1, 1, "one"), T0).unwrap()
}

/// The engine never draws randomness; this RNG proves it by failing.
struct NoRng;
impl rand_core::TryRng for NoRng {
    type Error = std::convert::Infallible;
    fn try_next_u32(&mut self) -> std::result::Result<u32, Self::Error> {
        unreachable!("the credential engine draws no randomness")
    }
    fn try_next_u64(&mut self) -> std::result::Result<u64, Self::Error> {
        unreachable!("the credential engine draws no randomness")
    }
    fn try_fill_bytes(&mut self, _: &mut [u8]) -> std::result::Result<(), Self::Error> {
        unreachable!("the credential engine draws no randomness")
    }
}
impl rand_core::TryCryptoRng for NoRng {}

/// Credential 1 current, kept as old and a mint of rotation 2 started, at
/// `due`.
fn minting_second() -> (CredentialState, OffsetDateTime) {
    let due = T0 + Duration::hours(720);
    let kept = step(&with_first(), CredentialInput::Step, due).unwrap();
    (step(&kept, CredentialInput::Step, due).unwrap(), due)
}

fn mint_failed(rotation: u64, attempt: u32, captured: Option<&str>) -> CredentialInput {
    CredentialInput::MintFailed {
        rotation,
        attempt,
        message: "timed out after 2m and was killed".into(),
        captured: captured.map(Secret::new),
    }
}

mod files;
mod plan;
mod property;
mod rotation;
mod strays;
