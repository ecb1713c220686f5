//! Invariants of the signer engine over random valid policies and random
//! reconcile schedules.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_core::{Certificate, RotationPolicy};
mod support;

use pki_rotate::{Engine, SignerEngine};
use pki_rotate::{Event, ForcedRotation, LeafRequest, SignerPolicy, SignerState};
use proptest::prelude::*;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;

/// A reconcile that allows trust breaks: the schedules here include
/// operators who let the CA expire or force rotations back to back, and the
/// invariants below must hold for those too (the refusals themselves are
/// tested in guarded_changes.rs).
fn reconcile<R: rand_core::CryptoRng + ?Sized>(
    state: &SignerState,
    policy: &SignerPolicy,
    now: OffsetDateTime,
    forced: Option<&ForcedRotation>,
    rng: &mut R,
) -> pki_rotate::Result<(SignerState, Vec<Event>, OffsetDateTime)> {
    let mut input = support::engine::input(policy, forced);
    input.allow_trust_break = Some("property test schedule".into());
    let outcome = SignerEngine::step(state, &input, now, rng)?;
    let wake = outcome.next_wake;
    Ok((outcome.document.into_owned(), outcome.events, wake))
}
use time::{Duration, OffsetDateTime, macros::datetime};

// 2026-01-01: creation time of every signer here.
const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

#[derive(Debug, Clone)]
struct Step {
    advance_hours: i64,
    forced: Option<u8>,
}

fn policy() -> impl Strategy<Value = SignerPolicy> {
    // M from 2 to 60 days, D from 2M to 4M: every such policy is valid.
    (2i64..60, 0i64..=100).prop_map(|(m, extra_pct)| {
        let min_trust = Duration::days(m);
        let lifetime = Duration::days(2 * m + 2 * m * extra_pct / 100);
        SignerPolicy {
            rotation: RotationPolicy {
                lifetime,
                min_trust,
                reload_interval: None,
            },
            ..SignerPolicy::default()
        }
    })
}

fn schedule() -> impl Strategy<Value = Vec<Step>> {
    prop::collection::vec(
        (1i64..24 * 40, prop::option::weighted(0.15, 0u8..3)).prop_map(
            |(advance_hours, forced)| Step {
                advance_hours,
                forced,
            },
        ),
        1..12,
    )
}

struct Run {
    states: Vec<(OffsetDateTime, SignerState)>,
    /// The wake-up time of each step's outcome, beside its state.
    wakes: Vec<OffsetDateTime>,
    events: Vec<(OffsetDateTime, Event)>,
    json: Vec<u8>,
}

fn run(policy: SignerPolicy, steps: &[Step], seed: u64) -> Run {
    // Keys and signatures from this stream: the same seed, the same output.
    pki_core::CryptoProvider::rust_crypto()
        .install_default()
        .expect("only the deterministic provider is installed in tests");
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut s = SignerState::new("prop-ca", policy, T0, &mut rng).unwrap();
    let mut request = LeafRequest::server(vec!["svc.ns.svc".into()]);
    request.lifetime = policy.rotation.min_trust;
    s.request_leaf("svc", request).unwrap();
    // A leaf refreshed more often than the schedule steps.
    let mut short = LeafRequest::server(vec!["short.ns.svc".into()]);
    short.lifetime = Duration::minutes(90);
    s.request_leaf("short", short).unwrap();
    let mut now = T0;
    let mut states = Vec::new();
    let mut wakes = Vec::new();
    let mut events = Vec::new();
    for step in steps {
        let forced = step
            .forced
            .map(|n| ForcedRotation::new(format!("reason {n}")));
        let (next, ev, next_check) =
            reconcile(&s, &policy, now, forced.as_ref(), &mut rng).unwrap();
        assert!(next_check >= now);
        wakes.push(next_check);
        events.extend(ev.into_iter().map(|e| (now, e)));
        states.push((now, next.clone()));
        s = next;
        now += Duration::hours(step.advance_hours);
    }
    Run {
        states,
        wakes,
        events,
        json: s.to_json().unwrap().to_vec(),
    }
}

fn leaf_of(s: &SignerState) -> Certificate {
    s.leaves["svc"].issued.as_ref().unwrap().cert.clone()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn bridge_a_outlives_rotation_by_at_least_min_trust(policy in policy(), steps in schedule(), seed in any::<u64>()) {
        let r = run(policy, &steps, seed);
        for (at, e) in &r.events {
            if let Event::Rotated { previous_trusted_until: Some(until), .. } = e {
                prop_assert!(*until >= *at + policy.rotation.min_trust - Duration::SECOND);
            }
        }
    }

    #[test]
    fn bundle_always_holds_an_anchor_for_every_live_leaf(policy in policy(), steps in schedule(), seed in any::<u64>()) {
        let r = run(policy, &steps, seed);
        // Every leaf issued so far that is still valid must chain to the
        // current bundle: some member with SKI = the leaf's AKI, valid now.
        // Forced rotations may rotate faster than R >= M allows, so with them
        // only leaves of the current and the previous CA are required.
        let any_forced = steps.iter().any(|s| s.forced.is_some());
        let mut issued: Vec<Certificate> = Vec::new();
        let mut current_ski: Vec<u8> = Vec::new();
        let mut previous_ski: Vec<u8> = Vec::new();
        for (now, state) in &r.states {
            let ski = state.ca.cert.ski().unwrap().to_vec();
            if ski != current_ski {
                previous_ski = std::mem::replace(&mut current_ski, ski);
            }
            issued.push(leaf_of(state));
            for leaf in &issued {
                let aki = leaf.aki().unwrap();
                let required = !any_forced || aki == current_ski.as_slice() || aki == previous_ski.as_slice();
                if !leaf.is_valid_at(*now) || !required {
                    continue;
                }
                // A compromise rotation (no bridges) is the one deliberate break; these runs use none.
                let anchored = state.bundle.certs().iter().any(|c| c.ski() == Some(aki) && c.is_valid_at(*now));
                prop_assert!(anchored, "leaf {} has no valid anchor at {now}", leaf.id());
            }
        }
    }

    #[test]
    fn no_leaf_outlives_its_issuer(policy in policy(), steps in schedule(), seed in any::<u64>()) {
        let r = run(policy, &steps, seed);
        for (_, state) in &r.states {
            let leaf = leaf_of(state);
            prop_assert!(pki_core::issued_by(&leaf, &state.ca.cert).issued_by);
            prop_assert!(leaf.not_after() <= state.ca.cert.not_after());
            if let Some(b) = &state.bridge {
                prop_assert!(b.not_after() <= state.ca.cert.not_after());
            }
        }
    }

    /// What lets a step's summary promise come from its own outcome
    /// instead of a second plan: after any step at `now`, a step with
    /// nothing asked at `now` changes nothing, and its next check is the
    /// outcome's wake-up time.
    #[test]
    fn every_step_leaves_its_document_at_rest_until_its_wake(policy in policy(), steps in schedule(), seed in any::<u64>()) {
        let r = run(policy, &steps, seed);
        for ((now, state), wake) in r.states.iter().zip(&r.wakes) {
            let again = SignerEngine::plan(state, &pki_rotate::SignerInput::default(), *now).unwrap();
            prop_assert!(again.is_empty(), "at {now}: {again:?}");
            prop_assert_eq!(again.next_check, *wake, "at {}", now);
        }
    }

    #[test]
    fn same_seed_same_schedule_same_result(policy in policy(), steps in schedule(), seed in any::<u64>()) {
        let a = run(policy, &steps, seed);
        let b = run(policy, &steps, seed);
        prop_assert_eq!(a.json, b.json);
        prop_assert_eq!(a.events, b.events);
    }
}
