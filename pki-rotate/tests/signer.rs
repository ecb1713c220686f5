//! The signer engine against the service-CA seed's rotation cases.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_core::{KeyAlgorithm, issued_by};
use pki_rotate::{
    Event, ForcedRotation, LeafReason, LeafRequest, RotateError, RotationReason, SignerPolicy,
    SignerState,
};
use support::engine::{apply, plan, reconcile};
use support::seed::{T0, rng};
use time::{Duration, OffsetDateTime, macros::datetime};

fn signer() -> SignerState {
    let mut s = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap();
    s.request_leaf("web", LeafRequest::server(vec!["web.ns.svc".into()]))
        .unwrap();
    let (s, _, _) = reconcile(&s, &s.policy.clone(), T0, None, &mut rng(2)).unwrap();
    s
}

fn rotation_point(s: &SignerState) -> OffsetDateTime {
    s.rotation_due_at(&s.policy)
}

struct Case {
    name: &'static str,
    /// Days after T0.
    at_days: i64,
    forced: Option<&'static str>,
    /// The reason already recorded before the run.
    recorded: Option<&'static str>,
    expect_rotation: Option<&'static str>,
}

#[test]
fn seed_rotation_cases() {
    // The rotation point of the default policy is T0 + 790d - 395d = T0 + 395d
    // (the CA's NotBefore is backdated by 5 minutes, which does not matter at day scale).
    let cases = [
        Case {
            name: "not required",
            at_days: 100,
            forced: None,
            recorded: None,
            expect_rotation: None,
        },
        Case {
            name: "time-based",
            at_days: 396,
            forced: None,
            recorded: None,
            expect_rotation: Some("expiring"),
        },
        Case {
            name: "forced",
            at_days: 10,
            forced: Some("key ceremony 2027"),
            recorded: None,
            expect_rotation: Some("forced"),
        },
        Case {
            name: "forced while half expired",
            at_days: 400,
            forced: Some("compromise"),
            recorded: None,
            expect_rotation: Some("forced"),
        },
        Case {
            name: "forced not required: reason already recorded",
            at_days: 10,
            forced: Some("key ceremony 2027"),
            recorded: Some("key ceremony 2027"),
            expect_rotation: None,
        },
        Case {
            name: "forced and due: one rotation",
            at_days: 500,
            forced: Some("audit"),
            recorded: Some("older"),
            expect_rotation: Some("forced"),
        },
        Case {
            name: "recorded reason does not block a due rotation",
            at_days: 500,
            forced: Some("audit"),
            recorded: Some("audit"),
            expect_rotation: Some("expiring"),
        },
    ];
    for case in cases {
        let mut s = signer();
        s.forced_rotation_reason = case.recorded.map(String::from);
        let now = T0 + Duration::days(case.at_days);
        let forced = case.forced.map(ForcedRotation::new);
        let p = plan(&s, &s.policy, now, forced.as_ref()).unwrap();
        let kind = p.rotation.as_ref().map(|r| match r.reason {
            RotationReason::Expiring { .. } => "expiring",
            RotationReason::Forced { .. } => "forced",
            // Only `pki rotate --to` and `--renew-same-key` make these.
            _ => "external",
        });
        assert_eq!(kind, case.expect_rotation, "case: {}", case.name);
        let (next, events) = apply(&s, p, &mut rng(3)).unwrap();
        let rotations = events
            .iter()
            .filter(|e| matches!(e, Event::Rotated { .. }))
            .count();
        assert_eq!(
            rotations,
            usize::from(case.expect_rotation.is_some()),
            "case: {}",
            case.name
        );
        if let Some(reason) = case.forced
            && case.expect_rotation == Some("forced")
        {
            assert_eq!(
                next.forced_rotation_reason.as_deref(),
                Some(reason),
                "case: {}",
                case.name
            );
        }
        if case.expect_rotation.is_some() {
            assert_ne!(
                next.ca.cert.public_key(),
                s.ca.cert.public_key(),
                "case: {}",
                case.name
            );
            assert_eq!(next.history.len(), 1);
            // The same forced reason again does nothing.
            if let Some(f) = &forced {
                let again = plan(&next, &next.policy, now + Duration::minutes(1), Some(f)).unwrap();
                if case.expect_rotation == Some("forced") {
                    assert!(again.rotation.is_none(), "case: {} ran twice", case.name);
                }
            }
        } else {
            assert_eq!(next.ca.cert, s.ca.cert, "case: {}", case.name);
        }
    }
}

#[test]
fn rotation_reuses_subject_and_builds_both_bridges() {
    let s = signer();
    let now = rotation_point(&s) + Duration::days(1);
    let (next, events, _) = reconcile(&s, &s.policy, now, None, &mut rng(4)).unwrap();
    let old = &s.ca.cert;
    let new = &next.ca.cert;
    assert_eq!(new.subject(), old.subject());
    assert_ne!(new.ski(), old.ski());
    // Bundle = [new CA, bridge A].
    let bundle = next.bundle.certs();
    assert_eq!(bundle.len(), 2);
    assert_eq!(&bundle[0], new);
    let bridge_a = &bundle[1];
    assert_eq!(bridge_a.public_key(), old.public_key());
    assert_eq!(bridge_a.ski(), old.ski());
    assert_eq!(bridge_a.aki(), new.ski());
    assert!(bridge_a.not_after() >= now + s.policy.rotation.min_trust - Duration::SECOND);
    assert!(bridge_a.not_after() >= old.not_after());
    // Bridge B: new key, signed by the old.
    let bridge_b = next.bridge.as_ref().unwrap();
    assert_eq!(bridge_b.public_key(), new.public_key());
    assert_eq!(bridge_b.aki(), old.ski());
    // The leaf was re-issued by the new CA and its chain carries bridge B.
    let leaf = &next.leaves["web"].issued.as_ref().unwrap().cert;
    assert!(issued_by(leaf, new).issued_by);
    assert_eq!(
        next.serving_chain(leaf),
        vec![leaf.clone(), bridge_b.clone()]
    );
    match &events[..] {
        [
            Event::Rotated {
                previous_trusted_until,
                ..
            },
            Event::LeafReissued { reason, .. },
        ] => {
            assert_eq!(*previous_trusted_until, Some(bridge_a.not_after()));
            assert_eq!(*reason, LeafReason::IssuerRotated);
        }
        other => panic!("unexpected events {other:?}"),
    }
}

#[test]
fn emergency_rotation_shortens_the_grace_period() {
    let s = signer();
    let now = T0 + Duration::days(30);
    let forced = ForcedRotation {
        reason: "leak".into(),
        grace: Some(Duration::days(2)),
        no_bridges: false,
    };
    let (next, _, _) = reconcile(&s, &s.policy, now, Some(&forced), &mut rng(5)).unwrap();
    assert_eq!(next.bundle.certs()[1].not_after(), now + Duration::days(2));
    assert_eq!(
        next.previous.unwrap().trusted_until,
        Some(now + Duration::days(2))
    );
}

#[test]
fn compromise_rotation_issues_no_bridges() {
    let s = signer();
    let forced = ForcedRotation {
        reason: "key stolen".into(),
        grace: None,
        no_bridges: true,
    };
    let (next, events, _) = reconcile(
        &s,
        &s.policy,
        T0 + Duration::days(3),
        Some(&forced),
        &mut rng(6),
    )
    .unwrap();
    assert_eq!(next.bundle.len(), 1);
    assert!(next.bridge.is_none());
    assert!(matches!(
        &events[0],
        Event::Rotated {
            previous_trusted_until: None,
            ..
        }
    ));
}

#[test]
fn keep_previous_root_adds_the_old_self_signed_ca() {
    let mut s = signer();
    s.policy.keep_previous_root = true;
    let now = rotation_point(&s) + Duration::hours(1);
    let (next, _, _) = reconcile(&s, &s.policy.clone(), now, None, &mut rng(7)).unwrap();
    assert_eq!(next.bundle.len(), 3);
    assert!(next.bundle.contains(&s.ca.cert));
    // Once the old root expires it is pruned; the current CA stays.
    let later = s.ca.cert.not_after() + Duration::minutes(1);
    let (pruned, events, _) = reconcile(&next, &next.policy, later, None, &mut rng(8)).unwrap();
    assert!(!pruned.bundle.contains(&s.ca.cert));
    assert!(pruned.bundle.contains(&next.ca.cert));
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::BundlePruned { .. }))
    );
}

#[test]
fn clock_before_the_ca_is_refused() {
    let s = signer();
    let err = plan(&s, &s.policy, T0 - Duration::days(1), None).unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::Signer(pki_rotate::SignerError::ClockBeforeCa { .. })
        ),
        "{err}"
    );
}

#[test]
fn empty_forced_reason_is_refused() {
    let s = signer();
    let err = plan(&s, &s.policy, T0, Some(&ForcedRotation::new("  "))).unwrap_err();
    assert!(matches!(
        err,
        RotateError::Signer(pki_rotate::SignerError::EmptyForcedReason)
    ));
}

#[test]
fn leaf_reissued_near_expiry_and_when_names_change_with_reasons() {
    let s = signer();
    let leaf = s.leaves["web"].issued.as_ref().unwrap().cert.clone();
    // 365-day leaf, 20% refresh: due at 292 days.
    let quiet = plan(&s, &s.policy, T0 + Duration::days(200), None).unwrap();
    assert!(quiet.leaves.is_empty());
    let due = plan(&s, &s.policy, leaf.not_after() - Duration::days(10), None).unwrap();
    assert!(matches!(
        due.leaves[0].reason,
        LeafReason::NearExpiry { .. }
    ));

    let mut changed = s.clone();
    changed
        .request_leaf(
            "web",
            LeafRequest::server(vec!["web.ns.svc".into(), "web.ns.svc.cluster.local".into()]),
        )
        .unwrap();
    let p = plan(&changed, &changed.policy, T0 + Duration::days(1), None).unwrap();
    assert_eq!(p.leaves.len(), 1);
    assert_eq!(p.leaves[0].reason, LeafReason::RequestChanged);
}

#[test]
fn leaf_from_another_ca_is_reissued_with_lineage_reason() {
    let s = signer();
    let other = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(50)).unwrap();
    let mut mixed = s.clone();
    mixed.ca = other.ca.clone();
    mixed.bundle = other.bundle.clone();
    let p = plan(&mixed, &mixed.policy, T0 + Duration::days(1), None).unwrap();
    match &p.leaves[0].reason {
        LeafReason::WrongIssuer { lineage } => assert!(lineage.contains("differs"), "{lineage}"),
        r => panic!("unexpected reason {r:?}"),
    }
}

#[test]
fn next_check_is_the_rotation_point_or_an_earlier_leaf_refresh() {
    let s = signer();
    let p = plan(&s, &s.policy, T0 + Duration::days(1), None).unwrap();
    let leaf = &s.leaves["web"].issued.as_ref().unwrap().cert;
    let refresh = pki_rotate::refresh_at(leaf, 0.2);
    assert_eq!(p.next_check, refresh.min(rotation_point(&s)));
}

#[test]
fn leaves_of_different_lifetimes_are_each_due_at_their_own_refresh() {
    // One store, three leaves, the middle one (in name order) short-lived:
    // each refresh time is its own lifetime's fraction, whatever the
    // leaves checked before it.
    let mut s = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap();
    for (name, days) in [("a", 365), ("b", 30), ("c", 365)] {
        let mut request = LeafRequest::server(vec![format!("{name}.ns.svc")]);
        request.lifetime = Duration::days(days);
        s.request_leaf(name, request).unwrap();
    }
    let (s, _, _) = reconcile(&s, &s.policy.clone(), T0, None, &mut rng(2)).unwrap();
    let cert = |name: &str| s.leaves[name].issued.as_ref().unwrap().cert.clone();
    let refresh = |name: &str| pki_rotate::refresh_at(&cert(name), 0.2);
    assert!(refresh("b") < refresh("a") && refresh("a") == refresh("c"));

    let quiet = plan(&s, &s.policy, T0 + Duration::days(1), None).unwrap();
    assert!(quiet.leaves.is_empty(), "{:?}", quiet.leaves);
    assert_eq!(quiet.next_check, refresh("b"));

    let due = plan(&s, &s.policy, refresh("b"), None).unwrap();
    let names: Vec<&str> = due.leaves.iter().map(|l| l.name.as_str()).collect();
    assert_eq!(names, ["b"]);
    assert!(matches!(
        due.leaves[0].reason,
        LeafReason::NearExpiry { .. }
    ));
    assert_eq!(due.next_check, refresh("a"));
}

#[test]
fn a_leaf_whose_names_are_the_request_in_another_order_or_case_is_not_reissued() {
    let mut s = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap();
    let mut request = LeafRequest::server(vec!["web.ns.svc".into(), "web.example".into()]);
    request.ip_addresses = vec!["10.0.0.1".parse().unwrap(), "::1".parse().unwrap()];
    s.request_leaf("web", request.clone()).unwrap();
    let (s, _, _) = reconcile(&s, &s.policy.clone(), T0, None, &mut rng(2)).unwrap();
    let later = T0 + Duration::days(1);
    assert!(plan(&s, &s.policy, later, None).unwrap().leaves.is_empty());

    let mut reordered = s.clone();
    let leaf = reordered.leaves.get_mut("web").unwrap();
    let mut same = request.clone();
    same.dns_names = vec!["WEB.example".into(), "web.ns.svc".into()];
    same.ip_addresses.reverse();
    leaf.request = std::sync::Arc::new(same);
    let p = plan(&reordered, &reordered.policy, later, None).unwrap();
    assert!(p.leaves.is_empty(), "{:?}", p.leaves);

    // One IP address fewer, or one more, is another request.
    for ips in [vec!["10.0.0.1"], vec!["10.0.0.1", "::1", "10.0.0.2"]] {
        let mut other = request.clone();
        other.ip_addresses = ips.iter().map(|ip| ip.parse().unwrap()).collect();
        let mut changed = s.clone();
        changed.leaves.get_mut("web").unwrap().request = std::sync::Arc::new(other);
        let p = plan(&changed, &changed.policy, later, None).unwrap();
        assert_eq!(p.leaves.len(), 1, "{ips:?}");
        assert_eq!(p.leaves[0].reason, LeafReason::RequestChanged);
    }
}

#[test]
fn same_inputs_same_outputs() {
    let s = signer();
    let now = rotation_point(&s) + Duration::days(1);
    let (a, ea, _) = reconcile(&s, &s.policy, now, None, &mut rng(9)).unwrap();
    let (b, eb, _) = reconcile(&s, &s.policy, now, None, &mut rng(9)).unwrap();
    assert_eq!(ea, eb);
    assert_eq!(*a.to_json().unwrap(), *b.to_json().unwrap());
}

/// The files form keeps each leaf request in `leaf-requests/NAME.json`
/// and the state file none; the Secret form keeps them inside
/// `pki-state.json` (a Secret is read whole) and has no other new key.
/// Misplaced or malformed requests are refused, naming the file.
#[test]
fn leaf_requests_live_in_files_of_their_own_and_inside_the_secret_state() {
    use pki_rotate::{Document, File};
    let s = signer();
    let files = s.to_files().unwrap();
    let state = String::from_utf8(files.get("pki-state.json").unwrap().to_vec()).unwrap();
    assert!(!state.contains("web.ns.svc"), "{state}");
    let request: LeafRequest =
        serde_json::from_slice(files.get("leaf-requests/web.json").unwrap()).unwrap();
    assert_eq!(request, *s.leaves["web"].request);
    assert!(files.dirs().any(|d| d == "leaf-requests"));

    let data = s.to_secret_data().unwrap();
    assert!(
        data.keys().all(|k| !k.contains("leaf-requests")),
        "{:?}",
        data.keys()
    );
    let secret_state = String::from_utf8(data["pki-state.json"].to_vec()).unwrap();
    assert!(secret_state.contains("web.ns.svc"), "{secret_state}");
    let back = SignerState::from_secret_data(&data).unwrap();
    assert_eq!(back.to_files().unwrap(), files);

    // The files with one more (or another) file at `path`.
    let with = |path: &str, contents: &[u8]| {
        let mut changed = files.clone();
        changed
            .insert(path, File::public(contents.to_vec()))
            .unwrap();
        changed
    };
    let refused = |f: pki_rotate::Files| SignerState::from_files(&f).unwrap_err().to_string();
    let web = files.get("leaf-requests/web.json").unwrap();
    // Requests inside a version 3 state file are not this version's layout.
    let err = refused(with("pki-state.json", secret_state.as_bytes()));
    assert!(
        err.contains("pki-state.json") && err.contains("leaf-requests/"),
        "{err}"
    );
    assert!(refused(with("leaf-requests/web.json", b"{")).contains("leaf-requests/web.json"));
    assert!(refused(with("leaf-requests/Web.json", web)).contains("Web"));
    // A request with no certificate yet is a leaf still to issue.
    let read = SignerState::from_files(&with("leaf-requests/api.json", web)).unwrap();
    assert!(read.leaves["api"].issued.is_none());
}

/// The one-blob forms keep the requests inside the document: each is
/// checked when read as a request file is, and refused naming its leaf.
#[test]
fn a_stored_request_issue_would_refuse_is_refused_in_the_json_and_secret_forms() {
    let s = signer();
    let json = String::from_utf8(s.to_json().unwrap().to_vec()).unwrap();
    let zero = json.replacen("\"lifetime\": \"365d\"", "\"lifetime\": \"0s\"", 1);
    assert_ne!(zero, json);
    let err = SignerState::from_json(zero.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("leaves.web") && err.contains("lifetime must be positive"),
        "{err}"
    );
    let misspelt = json.replacen("\"ip_addresses\"", "\"ip_adresses\"", 1);
    let err = SignerState::from_json(misspelt.as_bytes())
        .unwrap_err()
        .to_string();
    assert!(err.contains("unknown field `ip_adresses`"), "{err}");

    let mut data = s.to_secret_data().unwrap();
    let state = String::from_utf8(data["pki-state.json"].to_vec()).unwrap();
    let nameless = state.replacen("\"web.ns.svc\"", "", 1);
    assert_ne!(nameless, state);
    data.insert("pki-state.json".into(), nameless.into_bytes().into());
    let err = SignerState::from_secret_data(&data)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("leaves.web") && err.contains("at least one DNS name"),
        "{err}"
    );
}

#[test]
fn json_state_roundtrips_and_unknown_version_is_refused() {
    let s = signer();
    let json = s.to_json().unwrap();
    let back = SignerState::from_json(&json).unwrap();
    assert_eq!(*back.to_json().unwrap(), *json);

    let text =
        String::from_utf8(json.to_vec())
            .unwrap()
            .replacen("\"version\": 3", "\"version\": 4", 1);
    let err = SignerState::from_json(text.as_bytes()).unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::Document(pki_rotate::DocumentError::Unsupported {
                version: 4,
                supported: 3,
                ..
            })
        ),
        "{err}"
    );
    let other_kind = String::from_utf8(json.to_vec()).unwrap().replacen(
        "\"kind\": \"signer\"",
        "\"kind\": \"key-ring\"",
        1,
    );
    let err = SignerState::from_json(other_kind.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("not a signer document"), "{err}");
}

#[test]
fn rsa_signer_rotates() {
    let policy = SignerPolicy {
        key_algorithm: KeyAlgorithm::Rsa2048,
        ..SignerPolicy::default()
    };
    let s = SignerState::new("rsa-ca", policy, T0, &mut rng(10)).unwrap();
    let now = rotation_point(&s) + Duration::days(1);
    let (next, _, _) = reconcile(&s, &policy, now, None, &mut rng(11)).unwrap();
    assert_eq!(next.ca.key.algorithm(), KeyAlgorithm::Rsa2048);
    assert_eq!(next.bundle.len(), 2);
}

#[test]
fn preflight_refuses_a_plan_whose_bridge_would_already_be_expired() {
    let s = signer();
    let now = rotation_point(&s) + Duration::days(1);
    let mut p = plan(&s, &s.policy, now, None).unwrap();
    // Break the plan: bridge A ends before the rotation even happens.
    p.rotation.as_mut().unwrap().bridge_until = Some(now - Duration::days(1));
    let err = apply(&s, p, &mut rng(12)).unwrap_err();
    match &err {
        RotateError::TrustCheckFailed {
            chain,
            bundle,
            source,
            ..
        } => {
            assert_eq!(*chain, pki_rotate::preflight::Side::Old);
            assert_eq!(*bundle, pki_rotate::preflight::Side::New);
            assert!(
                matches!(**source, pki_core::VerifyError::Expired { .. }),
                "{source}"
            );
        }
        other => panic!("unexpected {other}"),
    }
}

/// Apply builds what the plan names and refuses nothing: what its trust
/// checks found is the outcome's findings, and the one guard refuses them
/// (so a step with the same plan writes nothing).
#[test]
fn apply_hands_what_it_found_to_the_guard_which_refuses() {
    use pki_rotate::engines::Engine;
    use pki_rotate::engines::guard::Finding;
    let s = signer();
    let now = rotation_point(&s) + Duration::days(1);
    let mut p = plan(&s, &s.policy, now, None).unwrap();
    p.rotation.as_mut().unwrap().bridge_until = Some(now - Duration::days(1));
    let outcome = pki_rotate::SignerEngine::apply(&s, p, &mut rng(12)).unwrap();
    assert!(outcome.changed());
    let found: Vec<_> = outcome.findings.iter().collect();
    assert!(
        matches!(found.first(), Some(Finding::Untrusted(cell)) if cell.result.is_err()),
        "{found:?}"
    );
    let err = outcome.guarded().unwrap_err();
    assert!(matches!(err, RotateError::TrustCheckFailed { .. }), "{err}");
    // A plan whose checks all pass leaves the guard nothing to refuse.
    let good = plan(&s, &s.policy, now, None).unwrap();
    let outcome = pki_rotate::SignerEngine::apply(&s, good, &mut rng(12)).unwrap();
    assert!(outcome.findings.is_empty(), "{:?}", outcome.findings);
    assert!(outcome.guarded().is_ok());
}

#[test]
fn status_reports_a_green_trust_matrix_after_rotation() {
    let s = signer();
    let now = rotation_point(&s) + Duration::days(1);
    let (next, _, _) = reconcile(&s, &s.policy, now, None, &mut rng(14)).unwrap();
    let status = pki_rotate::status::SignerStatus::of(&next, now + Duration::hours(1)).unwrap();
    assert_eq!(status.trust.len(), 4, "{:?}", status.trust);
    assert!(
        status.trust.iter().all(|c| c.verified()),
        "{:?}",
        status.trust
    );
    // Once the previous CA has expired, consumers holding only its material
    // are broken by its expiry, not by the rotation: its cells are left out.
    let later = s.ca.cert.not_after() + Duration::days(1);
    let (next, _, _) = reconcile(&next, &next.policy, later, None, &mut rng(15)).unwrap();
    let status = pki_rotate::status::SignerStatus::of(&next, later).unwrap();
    let new_new = status
        .trust
        .iter()
        .find(|c| {
            c.chain == pki_rotate::preflight::Side::New
                && c.bundle == pki_rotate::preflight::Side::New
        })
        .unwrap();
    assert!(new_new.verified());
    assert_eq!(status.trust.len(), 1, "{:?}", status.trust);
    assert_eq!(
        status.health,
        pki_rotate::status::Health::Ok,
        "{:?}",
        status.problems
    );
}

#[test]
fn reconcile_wakes_up_for_the_leaf_it_just_issued() {
    let mut s = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap();
    s.request_leaf("web", LeafRequest::server(vec!["web.ns.svc".into()]))
        .unwrap();
    let (s, _, wake) = reconcile(&s, &s.policy.clone(), T0, None, &mut rng(2)).unwrap();
    let leaf = &s.leaves["web"].issued.as_ref().unwrap().cert;
    assert_eq!(wake, pki_rotate::refresh_at(leaf, 0.2));
    assert!(wake < rotation_point(&s));
}

#[test]
fn bundle_member_ending_at_the_last_encodable_second_does_not_overflow() {
    // Found by the state_file fuzz target: a bundle certificate with NotAfter
    // 9999-12-31T23:59:59Z made the wake-up computation overflow.
    let json = include_bytes!("data/bundle-member-not-after-9999.json");
    let state = SignerState::from_json(json).unwrap();
    let now = state.ca.cert.not_before() + Duration::days(1);
    let p = plan(&state, &state.policy, now, None).unwrap();
    assert!(p.next_check >= now);
    pki_rotate::status::SignerStatus::of(&state, now).unwrap();
    let last = datetime!(9999-12-31 23:59:59 UTC);
    assert!(plan(&state, &state.policy, last, None).is_err());
}

#[test]
fn external_leaf_is_kept_while_fresh_and_reissued_after_rotation() {
    use pki_rotate::signer::reconcile_external;
    let s = signer();
    let request = LeafRequest::server(vec!["ext.ns.svc".into()]);
    let first = reconcile_external(&s, &request, None, T0, &mut rng(20)).unwrap();
    assert_eq!(first.reason, Some(LeafReason::NotYetIssued));
    let kept = reconcile_external(
        &s,
        &request,
        Some(first.issued.clone()),
        T0 + Duration::days(10),
        &mut rng(21),
    )
    .unwrap();
    assert_eq!(kept.reason, None);
    assert_eq!(kept.issued.cert, first.issued.cert);

    let (rotated, _, _) = reconcile(
        &s,
        &s.policy,
        rotation_point(&s) + Duration::days(1),
        None,
        &mut rng(22),
    )
    .unwrap();
    let after = reconcile_external(
        &rotated,
        &request,
        Some(first.issued),
        rotation_point(&s) + Duration::days(1),
        &mut rng(23),
    )
    .unwrap();
    assert!(
        matches!(after.reason, Some(LeafReason::WrongIssuer { .. })),
        "{:?}",
        after.reason
    );
    assert_eq!(after.chain.len(), 2, "leaf + bridge B");
}

#[test]
fn plan_and_status_at_the_last_encodable_second_refuse_without_panicking() {
    let s = signer();
    let end = datetime!(9999-12-31 23:59:59 UTC);
    assert!(plan(&s, &s.policy, end, None).is_err());
    assert!(plan(&s, &s.policy, end, Some(&ForcedRotation::new("late"))).is_err());
    let mut f = ForcedRotation::new("late grace");
    f.grace = Some(Duration::days(30));
    assert!(plan(&s, &s.policy, end, Some(&f)).is_err());
    assert!(pki_rotate::status::SignerStatus::of(&s, end).is_err());
}

/// A leaf removed and requested again in one input is issued anew in that
/// step: its old certificate left the document with the removal.
#[test]
fn a_leaf_removed_and_requested_again_in_one_input_is_issued() {
    let s = signer();
    let old = s.leaves["web"].issued.as_ref().unwrap().cert.clone();
    let input = pki_rotate::SignerInput {
        leaves: vec![
            pki_rotate::LeafChange::Remove { name: "web".into() },
            pki_rotate::LeafChange::Request {
                name: "web".into(),
                request: LeafRequest::server(vec!["web.ns.svc".into()]),
            },
        ],
        ..pki_rotate::SignerInput::default()
    };
    let now = T0 + Duration::days(1);
    let p = pki_rotate::signer::plan(&s, &input, now).unwrap();
    let next = pki_rotate::signer::apply(&s, p, &mut rng(3))
        .unwrap()
        .into_document();
    let issued = next.leaves["web"].issued.as_ref().expect("issued again");
    assert_ne!(issued.cert, old);
    assert!(issued.cert.not_before() > old.not_before());
}
