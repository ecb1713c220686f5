//! Changes the engine refuses unless asked for on purpose: a leaf's kind
//! or names narrowed without `Replace`, leaf DNS names no certificate
//! should carry, and rotations that cut consumers off (an expired CA; a
//! rotation while clients may still hold the bundle of two rotations ago)
//! without `allow_trust_break`, which is then recorded in the history.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_rotate::preflight::Side;
use pki_rotate::status::{Health, PendingAction, SignerStatus};
use pki_rotate::{
    Engine, Event, ForcedRotation, LeafChange, LeafKind, LeafReason, LeafRequest, RotateError,
    SignerEngine, SignerInput, SignerPolicy, SignerState,
};
use support::seed::{T0, rng};
use time::{Duration, OffsetDateTime};

fn step(
    s: &SignerState,
    input: &SignerInput,
    now: OffsetDateTime,
    seed: u64,
) -> pki_rotate::Result<(SignerState, Vec<Event>)> {
    let outcome = SignerEngine::step(s, input, now, &mut rng(seed))?;
    Ok((outcome.document.into_owned(), outcome.events))
}

fn signer(policy: SignerPolicy) -> SignerState {
    let s = SignerState::new("service-ca", policy, T0, &mut rng(1)).unwrap();
    let web = SignerInput::request(
        "web",
        LeafRequest::server(vec!["web.ns.svc".into(), "web.ns".into()]),
    );
    step(&s, &web, T0, 2).unwrap().0
}

fn forced(reason: &str) -> SignerInput {
    SignerInput::forced(ForcedRotation::new(reason))
}

#[test]
fn a_request_that_changes_the_kind_or_drops_names_needs_replace() {
    let s = signer(SignerPolicy::default());
    let mut client = LeafRequest::server(vec!["web.ns.svc".into(), "web.ns".into()]);
    client.kind = LeafKind::Client;
    let err = SignerEngine::plan(&s, &SignerInput::request("web", client.clone()), T0).unwrap_err();
    assert!(
        matches!(&err, RotateError::Signer(pki_rotate::SignerError::LeafChangeNeedsReplace { changes, .. }) if changes.contains("from server to client")),
        "{err}"
    );
    let fewer = LeafRequest::server(vec!["web.ns.svc".into()]);
    let err = SignerEngine::plan(&s, &SignerInput::request("web", fewer), T0).unwrap_err();
    assert!(err.to_string().contains("would lose web.ns"), "{err}");

    let replace = SignerInput {
        leaves: vec![LeafChange::Replace {
            name: "web".into(),
            request: client,
        }],
        ..SignerInput::default()
    };
    let (next, events) = step(&s, &replace, T0, 3).unwrap();
    assert!(events.iter().any(|e| matches!(
        e,
        Event::LeafReissued {
            reason: LeafReason::KindChanged {
                from: LeafKind::Server,
                to: LeafKind::Client
            },
            ..
        }
    )));
    let cert = &next.leaves["web"].issued.as_ref().unwrap().cert;
    assert_eq!(LeafKind::of(cert), Some(LeafKind::Client));
}

#[test]
fn renew_reissues_only_the_named_leaf_and_an_unknown_name_is_refused() {
    let s = signer(SignerPolicy::default());
    let s = step(
        &s,
        &SignerInput::request("api", LeafRequest::server(vec!["api.ns.svc".into()])),
        T0,
        3,
    )
    .unwrap()
    .0;
    let renew = |name: &str| SignerInput {
        leaves: vec![LeafChange::Renew { name: name.into() }],
        ..SignerInput::default()
    };
    let later = T0 + Duration::days(10);
    let (next, events) = step(&s, &renew("web"), later, 4).unwrap();
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(
        matches!(&events[0], Event::LeafReissued { name, reason: LeafReason::Renewed, .. } if name == "web")
    );
    let web = |st: &SignerState, n: &str| st.leaves[n].issued.as_ref().unwrap().cert.clone();
    assert_ne!(web(&s, "web"), web(&next, "web"));
    assert_eq!(web(&s, "api"), web(&next, "api"));
    assert!(matches!(
        SignerEngine::plan(&s, &renew("nope"), later),
        Err(RotateError::Signer(pki_rotate::SignerError::UnknownLeaf(n))) if n == "nope"
    ));
}

#[test]
fn removing_a_leaf_the_signer_does_not_keep_is_nothing_to_do_so_a_rerun_succeeds() {
    let s = signer(SignerPolicy::default());
    let remove = |name: &str| SignerInput {
        leaves: vec![LeafChange::Remove { name: name.into() }],
        ..SignerInput::default()
    };
    let later = T0 + Duration::days(10);
    let (removed, events) = step(&s, &remove("web"), later, 4).unwrap();
    assert!(matches!(&events[..], [Event::LeafRemoved { name }] if name == "web"));
    // The same request again (its first answer lost): nothing changes,
    // and the step says why.
    let outcome = SignerEngine::step(&removed, &remove("web"), later, &mut rng(5)).unwrap();
    assert!(matches!(outcome.document, std::borrow::Cow::Borrowed(_)));
    assert_eq!(outcome.events.len(), 1, "{:?}", outcome.events);
    assert_eq!(
        outcome.events[0].to_string(),
        "nothing to do: no certificate named \"web\""
    );
    // Removed within the same input first, or never there: the same.
    let twice = SignerInput {
        leaves: vec![
            LeafChange::Remove { name: "web".into() },
            LeafChange::Remove { name: "web".into() },
        ],
        ..SignerInput::default()
    };
    let (next, events) = step(&s, &twice, later, 6).unwrap();
    assert!(next.leaves.is_empty());
    assert!(matches!(
        &events[..],
        [Event::AlreadyDone { .. }, Event::LeafRemoved { .. }]
    ));
}

#[test]
fn leaf_dns_names_that_no_certificate_should_carry_are_refused() {
    for (name, why) in [
        ("*", "bare wildcard"),
        ("*.com", "top-level domain"),
        ("*.local.", "top-level domain"),
        ("192.168.1.10", "IP address"),
        ("2001:db8::1", "IP address"),
        ("[::1]", "IP address"),
    ] {
        let err = LeafRequest::server(vec![name.into()])
            .validate()
            .unwrap_err();
        assert!(err.to_string().contains(why), "{name}: {err}");
    }
    LeafRequest::server(vec!["*.apps.example.com".into(), "db-1.ns.svc".into()])
        .validate()
        .unwrap();
}

#[test]
fn rotating_an_expired_ca_is_refused_unless_allowed_and_then_recorded() {
    let s = signer(SignerPolicy::default());
    let now = s.ca.cert.not_after() + Duration::days(3);
    let err = step(&s, &SignerInput::default(), now, 5).unwrap_err();
    let RotateError::Signer(pki_rotate::SignerError::TrustBreak { breaks, .. }) = &err else {
        panic!("{err}");
    };
    assert_eq!(breaks.len(), 1, "{breaks:?}");
    assert!(breaks[0].contains("no bridge can be made"), "{err}");

    let allowed = SignerInput {
        allow_trust_break: Some("lapsed".into()),
        ..SignerInput::default()
    };
    let (next, _) = step(&s, &allowed, now, 5).unwrap();
    let record = next.history.last().unwrap();
    assert_eq!(record.overridden.len(), 1);
    assert_eq!(record.overridden[0].name, "previous-ca-expired");
    assert!(
        record.overridden[0]
            .detail
            .starts_with("allowed (lapsed): ")
    );
}

#[test]
fn a_second_rotation_within_the_reload_interval_is_refused_then_allowed_after_it() {
    let mut policy = SignerPolicy::default();
    policy.rotation.reload_interval = Some(Duration::days(7));
    let s = signer(policy);
    let first = s.rotation_due_at(&s.policy) + Duration::hours(1);
    let (s, _) = step(&s, &SignerInput::default(), first, 6).unwrap();

    let err = step(&s, &forced("again"), first + Duration::days(6), 7).unwrap_err();
    let RotateError::Signer(pki_rotate::SignerError::TrustBreak { breaks, .. }) = &err else {
        panic!("{err}");
    };
    // Clients with the oldest bundle, and servers with the oldest certificates.
    assert_eq!(breaks.len(), 2, "{breaks:?}");
    let until = pki_core::datetime::rfc3339(first + Duration::days(7));
    assert!(breaks.iter().all(|b| b.contains(&until)), "{breaks:?}");

    // Compromise distrusts the previous CAs on purpose: not a break to allow.
    let compromise = SignerInput::forced(ForcedRotation {
        no_bridges: true,
        ..ForcedRotation::new("key leaked")
    });
    step(&s, &compromise, first + Duration::days(6), 8).unwrap();

    // Once I has passed, every consumer holds the previous step's material.
    let (next, _) = step(&s, &forced("again"), first + Duration::days(7), 9).unwrap();
    assert!(next.history.last().unwrap().overridden.is_empty());
}

#[test]
fn an_emergency_rotation_passes_the_reload_interval_guard_and_records_what_it_breaks() {
    // No reload interval: I is taken to be M (395d), so every rotation
    // within 395d of the previous one is held by the guard.
    let s = signer(SignerPolicy::default());
    let first = s.rotation_due_at(&s.policy) + Duration::hours(1);
    let (s, _) = step(&s, &SignerInput::default(), first, 6).unwrap();
    let soon = first + Duration::days(30);
    let err = step(&s, &forced("plain"), soon, 7).unwrap_err();
    let RotateError::Signer(pki_rotate::SignerError::TrustBreak { summary, .. }) = &err else {
        panic!("{err}");
    };
    assert_eq!(
        summary,
        "within the reload interval (assumed 395d) of the previous rotation"
    );

    for (emergency, words) in [
        (
            ForcedRotation {
                grace: Some(Duration::hours(1)),
                ..ForcedRotation::new("key on a lost laptop")
            },
            "the emergency rotation \"key on a lost laptop\", which trusts the previous CA for 1h only",
        ),
        (
            ForcedRotation {
                no_bridges: true,
                ..ForcedRotation::new("key leaked")
            },
            "the compromise rotation \"key leaked\", which distrusts the previous CA at once",
        ),
    ] {
        let (next, _) = step(&s, &SignerInput::forced(emergency), soon, 8).unwrap();
        let record = next.history.last().unwrap();
        assert_eq!(next.history.len(), 2);
        assert_eq!(record.overridden.len(), 2, "{:?}", record.overridden);
        for o in &record.overridden {
            assert_eq!(o.name, "bundle-of-two-rotations-ago");
            assert!(
                o.detail.starts_with(&format!("accepted by {words}: ")),
                "{}",
                o.detail
            );
        }
    }
}

#[test]
fn a_grace_period_does_not_pass_the_expired_ca_guard_but_a_compromise_does() {
    let s = signer(SignerPolicy::default());
    let now = s.ca.cert.not_after() + Duration::days(3);
    let grace = SignerInput::forced(ForcedRotation {
        grace: Some(Duration::hours(1)),
        ..ForcedRotation::new("lapsed")
    });
    let err = step(&s, &grace, now, 5).unwrap_err();
    assert!(
        matches!(&err, RotateError::Signer(pki_rotate::SignerError::TrustBreak { summary, .. })
            if summary.contains("has expired")),
        "{err}"
    );
    let compromise = SignerInput::forced(ForcedRotation {
        no_bridges: true,
        ..ForcedRotation::new("lapsed and leaked")
    });
    let (next, _) = step(&s, &compromise, now, 5).unwrap();
    let record = next.history.last().unwrap();
    assert_eq!(record.overridden.len(), 1);
    assert_eq!(record.overridden[0].name, "previous-ca-expired");
}

#[test]
fn status_is_structured_versioned_and_carries_no_material() {
    let s = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap();
    // A 500-day leaf: still fresh when the CA becomes due at day 395.
    let mut web = LeafRequest::server(vec!["web.ns.svc".into()]);
    web.lifetime = Duration::days(500);
    let s = step(&s, &SignerInput::request("web", web), T0, 2)
        .unwrap()
        .0;
    let due = s.rotation_due_at(&s.policy) + Duration::hours(1);
    let status = SignerStatus::of(&s, due).unwrap();
    assert_eq!(status.health, Health::ActionDue);
    assert!(
        matches!(&status.pending[0], PendingAction::RotateCa { ca_id, .. } if *ca_id == s.ca.cert.id())
    );
    // The leaf is re-issued by the CA the rotation makes, unknown yet.
    assert!(matches!(
        &status.pending[1],
        PendingAction::IssueLeaf {
            issuer_ca_id: None,
            reason: LeafReason::IssuerRotated,
            ..
        }
    ));
    let quiet = SignerStatus::of(&s, T0 + Duration::days(1)).unwrap();
    assert_eq!(quiet.health, Health::Ok);
    assert_eq!(quiet.leaves[0].issuer_ca_id, Some(s.ca.cert.id()));
    let json = serde_json::to_string(&status).unwrap();
    assert!(json.contains("\"schema_version\":1"), "{json}");
    assert!(
        !json.contains("BEGIN") && !json.contains("\"Ok\""),
        "{json}"
    );
}

#[test]
fn a_previous_ca_distrusted_on_purpose_does_not_make_status_broken() {
    let s = signer(SignerPolicy::default());
    let at = T0 + Duration::days(30);
    let compromise = SignerInput::forced(ForcedRotation {
        reason: "key leaked".into(),
        grace: None,
        no_bridges: true,
    });
    let (compromised, _) = step(&s, &compromise, at, 3).unwrap();
    // A day later, and long before the old CA expires (day 790): clients
    // and servers still on the old CA's material are cut off on purpose.
    let status = SignerStatus::of(&compromised, at + Duration::days(1)).unwrap();
    assert_eq!(status.health, Health::Ok, "{:?}", status.problems);
    let old_cells: Vec<_> = status
        .trust
        .iter()
        .filter(|c| c.chain == Side::Old || c.bundle == Side::Old)
        .collect();
    assert_eq!(old_cells.len(), 3, "{:?}", status.trust);
    assert!(old_cells.iter().all(|c| c.retired));
    assert!(
        old_cells.iter().any(|c| !c.verified()),
        "the distrusted CA's cells do fail: {:?}",
        status.trust
    );
    let current = status
        .trust
        .iter()
        .find(|c| c.chain == Side::New && c.bundle == Side::New)
        .unwrap();
    assert!(current.verified() && !current.retired);

    let grace = SignerInput::forced(ForcedRotation {
        reason: "drill".into(),
        grace: Some(Duration::days(1)),
        no_bridges: false,
    });
    let (graced, _) = step(&s, &grace, at, 4).unwrap();
    // Within the grace period, the old cells count (and hold).
    let during = SignerStatus::of(&graced, at + Duration::hours(12)).unwrap();
    assert_eq!(during.health, Health::Ok, "{:?}", during.problems);
    assert!(during.trust.iter().all(|c| !c.retired && c.verified()));
    // After it, bridge A has expired: pruning it is due, nothing is broken.
    let after = SignerStatus::of(&graced, at + Duration::days(2)).unwrap();
    assert_eq!(after.health, Health::ActionDue, "{:?}", after.problems);
    assert!(
        after
            .trust
            .iter()
            .any(|c| c.retired && !c.verified() && c.chain == Side::Old)
    );
}

#[test]
fn a_cell_that_fails_on_its_own_still_makes_status_broken() {
    let s = signer(SignerPolicy::default());
    let at = T0 + Duration::days(30);
    let compromise = SignerInput::forced(ForcedRotation {
        reason: "key leaked".into(),
        grace: None,
        no_bridges: true,
    });
    let (mut compromised, _) = step(&s, &compromise, at, 3).unwrap();
    // A bundle that lost the current CA: current servers x current
    // clients fails, which no rotation intended.
    compromised.bundle = s.bundle.clone();
    let status = SignerStatus::of(&compromised, at + Duration::days(1)).unwrap();
    assert_eq!(status.health, Health::Broken);
    assert!(
        status
            .problems
            .iter()
            .any(|p| p.starts_with("new serving chain x new bundle")),
        "{:?}",
        status.problems
    );

    // While the previous CA is still trusted, its failing cell counts too.
    let (mut rotated, _) = step(&s, &forced("drill"), at, 5).unwrap();
    let ca_only = pki_core::Bundle::from_certs([rotated.ca.cert.clone()]);
    rotated.bundle = ca_only;
    let status = SignerStatus::of(&rotated, at + Duration::days(1)).unwrap();
    assert_eq!(status.health, Health::Broken);
    assert!(
        status
            .problems
            .iter()
            .any(|p| p.starts_with("old serving chain x new bundle")),
        "{:?}",
        status.problems
    );
}
