#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use super::*;
use crate::engines::keyring::KeyRingPolicy;
use crate::engines::leaf::{LeafRequest, refresh_at};
use crate::engines::signer::{SignerInput, SignerPolicy};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use time::macros::datetime;

// 2026-01-01: the simulated creation time of every document here.
const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

/// A signer made at T0 (default policy: D 790d, M 395d) with `web` issued.
fn signer_with_web(policy: SignerPolicy, lifetime: Duration) -> SignerState {
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let state = SignerState::new("service-ca", policy, T0, &mut rng).unwrap();
    let mut request = LeafRequest::server(vec!["web.ns.svc".into()]);
    request.lifetime = lifetime;
    let input = SignerInput::request("web", request);
    let outcome = SignerEngine::step(&state, &input, T0, &mut rng).unwrap();
    outcome.document.into_owned()
}

fn kinds(f: &Forecast) -> Vec<(EventKind, OffsetDateTime)> {
    f.events.iter().map(|e| (e.kind, e.at)).collect()
}

fn check<'f>(f: &'f Forecast, name: &str) -> &'f ForecastCheck {
    f.checks.iter().find(|c| c.name == name).unwrap()
}

#[test]
fn a_rotation_in_the_window_comes_with_its_bridge_expiry_and_the_end_of_the_old_ca() {
    let state = signer_with_web(SignerPolicy::default(), Duration::days(365));
    let old_ca = state.ca.cert.clone();
    // Until the old CA's end: its successor rotates a second later.
    let until = old_ca.not_after() + Duration::SECOND;
    let f = forecast(Some(&state), None, T0, until);
    let rotation_at = old_ca.not_after() - Duration::days(395) + Duration::SECOND;
    let old_end = old_ca.not_after() + Duration::SECOND;
    let main: Vec<_> = kinds(&f)
        .into_iter()
        .filter(|(k, _)| *k != EventKind::LeafRefresh && *k != EventKind::BundlePrune)
        .collect();
    assert_eq!(
        main,
        [
            (EventKind::Rotation, rotation_at),
            (EventKind::BridgeExpiry, old_end),
            (EventKind::PreviousCaUntrusted, old_end),
        ],
        "{f:#?}"
    );
    // Events in time order.
    assert!(f.events.windows(2).all(|w| w[0].at <= w[1].at), "{f:#?}");
    // web: refreshed at 80% of its first year, re-issued at the rotation,
    // then refreshed again.
    let refreshes: Vec<_> = f
        .events
        .iter()
        .filter(|e| e.kind == EventKind::LeafRefresh)
        .map(|e| e.at)
        .collect();
    assert!(refreshes.contains(&rotation_at), "{refreshes:?}");
    let first = refresh_at(
        &state.leaves["web"].issued.as_ref().unwrap().cert,
        state.policy.leaf_refresh_fraction,
    );
    assert_eq!(refreshes[0], first);
    assert!(f.checks.iter().all(|c| c.ok), "{:#?}", f.checks);
}

/// The forecast's times are the times at which real steps act: stepping a
/// copy of the document only at those times (and one second before each)
/// does the same things at the same times.
#[test]
fn stepping_the_engine_at_the_forecast_times_does_what_the_forecast_says() {
    let state = signer_with_web(SignerPolicy::default(), Duration::days(365));
    let f = forecast(Some(&state), None, T0, T0 + Duration::days(800));
    let mut doc = state.clone();
    let mut rng = ChaCha20Rng::seed_from_u64(99);
    let mut times: Vec<_> = f.events.iter().map(|e| e.at).collect();
    times.dedup();
    for at in times {
        let before = SignerEngine::step(
            &doc,
            &SignerInput::default(),
            at - Duration::SECOND,
            &mut rng,
        )
        .unwrap();
        assert!(
            before.events.is_empty(),
            "at {at} - 1s: {:?}",
            before.events
        );
        let step = SignerEngine::step(&doc, &SignerInput::default(), at, &mut rng).unwrap();
        let expected: Vec<_> = f
            .events
            .iter()
            .filter(|e| e.at == at)
            .map(|e| e.kind)
            .collect();
        let mut got: Vec<EventKind> = Vec::new();
        for e in &step.events {
            got.push(match e {
                Event::Rotated { .. } => EventKind::Rotation,
                Event::LeafReissued { .. } => EventKind::LeafRefresh,
                Event::BridgeRetired { .. } => EventKind::BridgeExpiry,
                Event::BundlePruned { .. } => EventKind::BundlePrune,
                other => panic!("unexpected {other}"),
            });
        }
        let without_trust: Vec<_> = expected
            .iter()
            .copied()
            .filter(|k| *k != EventKind::PreviousCaUntrusted)
            .collect();
        assert_eq!(got, without_trust, "at {at}");
        doc = step.document.into_owned();
    }
}

#[test]
fn the_previous_ca_is_untrusted_exactly_when_status_says_its_trust_ended() {
    let state = signer_with_web(SignerPolicy::default(), Duration::days(365));
    let f = forecast(Some(&state), None, T0, T0 + Duration::days(800));
    let untrusted = f
        .events
        .iter()
        .find(|e| e.kind == EventKind::PreviousCaUntrusted)
        .unwrap()
        .at;
    let rotation = f
        .events
        .iter()
        .find(|e| e.kind == EventKind::Rotation)
        .unwrap()
        .at;
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let rotated = SignerEngine::step(&state, &SignerInput::default(), rotation, &mut rng)
        .unwrap()
        .document
        .into_owned();
    let trusted = |at| {
        crate::engines::signer::status::SignerStatus::of(&rotated, at)
            .unwrap()
            .previous
            .unwrap()
            .trusted
    };
    assert!(trusted(untrusted - Duration::SECOND));
    assert!(!trusted(untrusted));
}

#[test]
fn a_window_before_the_rotation_has_only_leaf_refreshes() {
    let state = signer_with_web(SignerPolicy::default(), Duration::days(365));
    let f = forecast(Some(&state), None, T0, T0 + Duration::days(300));
    assert_eq!(
        f.events.iter().map(|e| e.kind).collect::<Vec<_>>(),
        [EventKind::LeafRefresh],
        "{f:#?}"
    );
    assert!(
        f.events[0].detail.starts_with("web: "),
        "{}",
        f.events[0].detail
    );
}

#[test]
fn a_leaf_longer_than_m_fails_the_lifetime_check() {
    let state = signer_with_web(SignerPolicy::default(), Duration::days(500));
    let f = forecast(Some(&state), None, T0, T0 + Duration::days(800));
    let c = check(&f, check::LEAF_LIFETIME_WITHIN_CA);
    assert!(!c.ok);
    assert!(c.detail.contains("web asks for 500d"), "{}", c.detail);
}

/// An imported CA is never rotated by pki: late refreshes are cut at its
/// end, then it expires, and the step after that fails.
#[test]
fn an_imported_ca_cuts_late_leaves_then_expires_unreplaced() {
    let mut rng = ChaCha20Rng::seed_from_u64(21);
    let ca = pki_core::CertificateAuthority::generate_root(
        "org-ca",
        pki_core::KeyAlgorithm::EcdsaP256,
        T0,
        Duration::days(200),
        &mut rng,
    )
    .unwrap();
    let import = pki_core::CaImport {
        cert: ca.cert.clone(),
        key: Some(ca.key.clone()),
        chain: Vec::new(),
    };
    let state = SignerState::import(&import, SignerPolicy::default(), T0).unwrap();
    let mut request = LeafRequest::server(vec!["web.ns.svc".into()]);
    request.lifetime = Duration::days(100);
    let state = SignerEngine::step(&state, &SignerInput::request("web", request), T0, &mut rng)
        .unwrap()
        .document
        .into_owned();
    let f = forecast(Some(&state), None, T0, T0 + Duration::days(300));
    let cut = check(&f, check::LEAF_LIFETIME_WITHIN_CA);
    assert!(!cut.ok, "{cut:?} {f:#?}");
    assert!(cut.detail.contains("web issued at"), "{}", cut.detail);
    let expiry = f
        .events
        .iter()
        .find(|e| e.kind == EventKind::CaExpiry)
        .unwrap();
    assert_eq!(expiry.at, ca.cert.not_after() + Duration::SECOND);
    assert!(!check(&f, check::CA_REPLACED_BEFORE_EXPIRY).ok);
    // From the expiry to the end of the window, for pictures.
    assert_eq!(
        check(&f, check::CA_REPLACED_BEFORE_EXPIRY).spans,
        [(expiry.at, T0 + Duration::days(300))]
    );
    assert!(
        f.events.iter().all(|e| e.kind != EventKind::Rotation),
        "{f:#?}"
    );
    // Between the CA's rotation time (long past: 200d < M) and its end the
    // engine wakes for the leaves only, not at every step; after the end,
    // re-issuing the expired leaf fails.
    let steps = check(&f, check::ENGINE_STEPS);
    assert!(
        !steps.ok
            && steps
                .detail
                .contains("the step at 2026-07-20T00:00:01Z fails"),
        "{steps:?}"
    );
}

#[test]
fn a_reload_interval_longer_than_the_leaf_refresh_window_fails() {
    let mut policy = SignerPolicy::default();
    policy.rotation.reload_interval = Some(Duration::days(100));
    let state = signer_with_web(policy, Duration::days(365));
    let f = forecast(Some(&state), None, T0, T0 + Duration::days(30));
    let c = check(&f, check::LEAF_REFRESH_COVERS_RELOAD);
    assert!(!c.ok, "{c:?}");
    assert!(c.detail.contains("73d"), "{}", c.detail);
    // The overlap of a rotation still holds: M = 395d > I.
    assert!(check(&f, check::TRUST_OVERLAP_COVERS_RELOAD).ok);
}

#[test]
fn a_short_grace_rotation_still_running_fails_the_overlap_check() {
    let mut policy = SignerPolicy::default();
    policy.rotation.reload_interval = Some(Duration::days(7));
    let state = signer_with_web(policy, Duration::days(365));
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let mut forced = crate::engines::signer::ForcedRotation::new("drill");
    forced.grace = Some(Duration::days(1));
    let at = T0 + Duration::days(10);
    let input = SignerInput {
        allow_trust_break: Some("test".into()),
        ..SignerInput::forced(forced)
    };
    let rotated = SignerEngine::step(&state, &input, at, &mut rng)
        .unwrap()
        .document
        .into_owned();
    let f = forecast(Some(&rotated), None, at, at + Duration::days(30));
    let c = check(&f, check::TRUST_OVERLAP_COVERS_RELOAD);
    assert!(!c.ok, "{c:?}");
    assert!(c.detail.contains("1d"), "{}", c.detail);
    let untrusted = f
        .events
        .iter()
        .find(|e| e.kind == EventKind::PreviousCaUntrusted)
        .unwrap();
    assert_eq!(untrusted.at, at + Duration::days(1) + Duration::SECOND);
}

#[test]
fn the_same_documents_give_the_same_forecast() {
    let state = signer_with_web(SignerPolicy::default(), Duration::days(365));
    let a = forecast(Some(&state), None, T0, T0 + Duration::days(1000));
    let b = forecast(Some(&state), None, T0, T0 + Duration::days(1000));
    assert_eq!(a, b);
}

#[test]
fn a_key_ring_forecast_has_its_rotations_and_removals() {
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let policy = KeyRingPolicy {
        lifetime: Duration::days(90),
        grace: Duration::days(1),
        ..KeyRingPolicy::default()
    };
    let ring = KeyRing::new(policy, T0, &mut rng).unwrap();
    let f = forecast(None, Some(&ring), T0, T0 + Duration::days(100));
    let got = kinds(&f);
    assert_eq!(got.len(), 2, "{f:#?}");
    assert_eq!(got[0].0, EventKind::KeyRotation);
    assert_eq!(
        got[1],
        (EventKind::KeyRemoval, got[0].1 + Duration::days(1))
    );
}

/// What pictures of the timeline read: each CA's life, and when a failing
/// check bites.
#[test]
fn the_cas_lives_and_the_checks_spans_follow_the_rotations() {
    let state = signer_with_web(SignerPolicy::default(), Duration::days(365));
    let old_ca = state.ca.cert.clone();
    let until = old_ca.not_after() + Duration::SECOND;
    let f = forecast(Some(&state), None, T0, until);
    let rotation_at = old_ca.not_after() - Duration::days(395) + Duration::SECOND;
    let [old, new] = f.cas.as_slice() else {
        panic!("two CAs expected: {:#?}", f.cas)
    };
    assert_eq!(old.not_before, Some(old_ca.not_before()));
    assert_eq!(old.current_from, Some(old_ca.not_before()));
    assert_eq!(old.replaced_at, Some(rotation_at));
    assert_eq!(old.untrusted_at, Some(until));
    assert_eq!(old.bridge, None);
    assert_eq!(new.current_from, Some(rotation_at));
    assert_eq!(new.replaced_at, None);
    assert!(new.name.contains("the rotation at"), "{}", new.name);
    assert!(new.bridge.is_some_and(|(_, end)| end == old_ca.not_after()));
    assert!(
        f.checks.iter().all(|c| c.spans.is_empty()),
        "{:#?}",
        f.checks
    );

    // A 1-day grace against a 7-day reload interval: the previous CA still
    // trusted at the start is a life of its own, and the check bites from
    // its end of trust until every consumer has reloaded.
    let mut policy = SignerPolicy::default();
    policy.rotation.reload_interval = Some(Duration::days(7));
    let state = signer_with_web(policy, Duration::days(365));
    let mut forced = crate::engines::signer::ForcedRotation::new("drill");
    forced.grace = Some(Duration::days(1));
    let at = T0 + Duration::days(10);
    let input = SignerInput {
        allow_trust_break: Some("test".into()),
        ..SignerInput::forced(forced)
    };
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let rotated = SignerEngine::step(&state, &input, at, &mut rng)
        .unwrap()
        .document
        .into_owned();
    let f = forecast(Some(&rotated), None, at, at + Duration::days(30));
    let untrusted = at + Duration::days(1) + Duration::SECOND;
    assert_eq!(f.cas.len(), 2, "{:#?}", f.cas);
    assert_eq!(f.cas[0].not_before, Some(state.ca.cert.not_before()));
    assert_eq!(f.cas[0].untrusted_at, Some(untrusted));
    assert_eq!(f.cas[1].current_from, Some(at));
    let c = check(&f, check::TRUST_OVERLAP_COVERS_RELOAD);
    assert_eq!(c.spans, [(untrusted, at + Duration::days(7))]);
}
