#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The CA set's requests are safe to repeat and to race, and its guard
//! takes every target to hold what it last acknowledged: an override is
//! applied once, in the step it was given in; moving a leaf to another
//! target needs `replace`; the gate that moves client certificates waits
//! for every server that verifies them.

mod support;

use pki_core::KeyAlgorithm;
use pki_rotate::{
    Driver, Engine, MemoryStore, RotateError, SetEngine, SetError, SetEvent, SetInput, SetState,
    SetStep,
};
use std::collections::BTreeSet;
use support::set::*;
use time::Duration;

fn advance_with(reason: &str) -> SetInput {
    SetInput::Advance {
        override_reason: Some(reason.into()),
        from: None,
    }
}

fn already_done(events: &[SetEvent]) -> bool {
    events
        .iter()
        .any(|e| matches!(e, SetEvent::AlreadyDone { .. }))
}

/// One client CA verified by two server targets: `api` and `proxy` both
/// load `client-ca/cluster.crt`; `node-1` holds the kubelet's client
/// certificate.
fn two_verifiers(seed: u64) -> SetState {
    let mut r = rng(seed);
    let cas = [("cluster".to_string(), roles("serving+client"))];
    let s = SetState::new(
        &cas,
        KeyAlgorithm::EcdsaP256,
        Duration::days(730),
        T0,
        &mut r,
    )
    .unwrap();
    let inputs = vec![
        SetInput::Issue {
            replace: false,
            name: "apiserver".into(),
            spec: spec("cluster", true, false, "api.example", "api"),
        },
        SetInput::Issue {
            replace: false,
            name: "kubelet".into(),
            spec: spec("cluster", false, true, "", "node-1"),
        },
        target("api", None, Some(&["cluster"])),
        target("proxy", None, Some(&["cluster"])),
        target("node-1", Some(&["cluster"]), None),
    ];
    let mut s = s;
    for input in inputs {
        s = step(&s, input, T0, &mut r).unwrap();
    }
    ack_all(&s, T0, &mut r)
}

#[test]
fn client_certificates_move_only_once_every_server_verifying_them_loaded_trust_both() {
    let mut r = rng(1);
    let s = start(&two_verifiers(1), false, T0, &mut r);
    let kubelet_issuer = |s: &SetState| s.leaves()["kubelet"].issued.cert.issuer().to_string();
    let old_issuer = kubelet_issuer(&s);
    // The node and one of the two servers load their trust-both files.
    let s = ack(&s, "node-1", T0, &mut r);
    let s = ack(&s, "api", T0, &mut r);
    assert_eq!(
        kubelet_issuer(&s),
        old_issuer,
        "the kubelet moved while proxy, which verifies it, still holds only the old client CA"
    );
    assert_eq!(s.status(T0).half, Some("trust"));
    assert!(
        !s.rotation()
            .as_ref()
            .unwrap()
            .clients_moved()
            .contains("cluster")
    );
    // The second server loads them: now the kubelet moves to the new
    // client CA, which both servers accept.
    let s = ack(&s, "proxy", T0, &mut r);
    assert_ne!(kubelet_issuer(&s), old_issuer);
    assert_eq!(s.status(T0).half, Some("clients"));
    let client_ca = s.cas()["cluster"]
        .next
        .as_ref()
        .unwrap()
        .client_signer
        .as_ref()
        .unwrap();
    assert_eq!(kubelet_issuer(&s), client_ca.cert.subject().to_string());
}

#[test]
fn the_guard_takes_a_pending_server_to_hold_what_it_last_acknowledged() {
    // An override moves the kubelet to the new client CA when only `api`
    // loaded trust-both. `proxy`, still holding its idle client-ca bundle,
    // would reject it: the document's own files for proxy already trust
    // both, so only what proxy acknowledged shows the break.
    let mut r = rng(2);
    let s = start(&two_verifiers(2), false, T0, &mut r);
    let s = ack(&s, "api", T0, &mut r);
    let s = step(&s, advance_with("proxy restarts later"), T0, &mut r).unwrap();
    let cells = &s.rotation().unwrap().overrides()[0].red_cells;
    assert!(
        cells
            .iter()
            .any(|c| c.contains("\"proxy\" (holding what it loaded at")
                && c.contains("kubelet")
                && c.contains("client-ca/cluster.crt")),
        "{cells:?}"
    );
    assert!(
        !cells.iter().any(|c| c.contains("server target \"api\"")),
        "api loaded trust-both and accepts the kubelet: {cells:?}"
    );
    // Without an override nothing moves the kubelet early: the same
    // request refused is the guard, shown by the gate.
    let blocked = set_error(step(
        &start(&two_verifiers(2), false, T0, &mut r),
        SetInput::Advance {
            override_reason: None,
            from: None,
        },
        T0,
        &mut r,
    ));
    assert!(matches!(blocked, SetError::StepBlocked { .. }), "{blocked}");
}

#[test]
fn an_override_passes_the_gate_it_was_given_for_once_and_records_the_red_cells() {
    let mut r = rng(3);
    let s = start(&two_verifiers(3), false, T0, &mut r);
    // Nobody loaded trust-both: an override moves every client certificate.
    let once = SetEngine::step(&s, &advance_with("proxy down"), T0, &mut r).unwrap();
    let s = once.into_document();
    assert_eq!(s.step(), SetStep::UpdateCerts);
    let record = &s.rotation().unwrap().overrides()[0];
    assert_eq!(record.reason, "proxy down");
    assert!(
        record.red_cells.iter().any(|c| c.contains("kubelet")),
        "the override records what it let break: {:?}",
        record.red_cells
    );
    // The same request again, and again: nothing to do, the old keys stay.
    for _ in 0..2 {
        let again = SetEngine::step(&s, &advance_with("proxy down"), T0, &mut r).unwrap();
        assert!(!again.changed());
        assert!(already_done(&again.events), "{:?}", again.events);
        assert_eq!(again.document.step(), SetStep::UpdateCerts);
    }
    // Passing the next gate takes another reason, or the step it leaves.
    let next = step(
        &s,
        SetInput::Advance {
            override_reason: Some("proxy down".into()),
            from: Some(SetStep::UpdateCerts),
        },
        T0,
        &mut r,
    )
    .unwrap();
    assert_eq!(next.step(), SetStep::TrustNew);
}

#[test]
fn advance_from_a_step_already_left_is_nothing_to_do_and_from_a_future_step_is_refused() {
    let mut r = rng(4);
    let s = start(&two_verifiers(4), false, T0, &mut r);
    let s = ack_all(&s, T0, &mut r);
    let from_trust_both = SetInput::Advance {
        override_reason: None,
        from: Some(SetStep::TrustBoth),
    };
    let s = step(&s, from_trust_both.clone(), T0, &mut r).unwrap();
    assert_eq!(s.step(), SetStep::UpdateCerts);
    let s = ack_all(&s, T0, &mut r);
    // Every target loaded update-certs: a plain rerun would advance again;
    // the rerun of the request as it was given does nothing.
    let rerun = SetEngine::step(&s, &from_trust_both, T0, &mut r).unwrap();
    assert!(!rerun.changed());
    assert!(already_done(&rerun.events));
    let err = set_error(step(
        &s,
        SetInput::Advance {
            override_reason: None,
            from: Some(SetStep::TrustNew),
        },
        T0,
        &mut r,
    ));
    assert!(matches!(err, SetError::WrongStep { .. }), "{err}");
}

#[test]
fn eight_racing_identical_overrides_advance_the_set_once() {
    let store = MemoryStore::new();
    let mut r = rng(5);
    let s = start(&two_verifiers(5), false, T0, &mut r);
    Driver::new(&store).create::<SetEngine>("set", &s).unwrap();
    std::thread::scope(|scope| {
        for i in 0..8u64 {
            let store = &store;
            scope.spawn(move || {
                let mut r = rng(100 + i);
                Driver::new(store)
                    .with_max_attempts(16)
                    .step::<SetEngine, _>("set", &advance_with("t1 down"), T0, &mut r)
                    .unwrap();
            });
        }
    });
    let (doc, _) = Driver::new(&store).load::<SetEngine>("set").unwrap();
    assert_eq!(doc.step(), SetStep::UpdateCerts);
    let r = doc.rotation().unwrap();
    assert_eq!(r.overrides().len(), 1, "{:?}", r.overrides());
    assert!(
        doc.cas().values().all(|ca| ca.next.is_some()),
        "old keys kept"
    );
}

#[test]
fn issuing_a_leaf_another_target_loads_is_refused_unless_replace() {
    let mut r = rng(6);
    let s = two_verifiers(6);
    let moved = SetInput::Issue {
        replace: false,
        name: "apiserver".into(),
        spec: spec("cluster", true, false, "api.example", "proxy"),
    };
    let err = step(&s, moved, T0, &mut r).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("loaded by target \"api\"") && text.contains("replace"),
        "{text}"
    );
    let s = step(
        &s,
        SetInput::Issue {
            replace: true,
            name: "apiserver".into(),
            spec: spec("cluster", true, false, "api.example", "proxy"),
        },
        T0,
        &mut r,
    )
    .unwrap();
    assert_eq!(s.leaves()["apiserver"].spec.target, "proxy");
    let files = s.target_files().unwrap();
    assert!(files["api"].get("certs/apiserver/tls.key").is_none());
    assert!(files["proxy"].get("certs/apiserver/tls.key").is_some());
}

#[test]
fn repeating_an_issue_a_target_change_or_an_ack_changes_nothing() {
    let mut r = rng(7);
    let s = two_verifiers(7);
    let same_leaf = SetInput::Issue {
        replace: false,
        name: "kubelet".into(),
        spec: spec("cluster", false, true, "", "node-1"),
    };
    let same_target = target("api", None, Some(&["cluster"]));
    for input in [same_leaf, same_target] {
        let out = SetEngine::step(&s, &input, T0, &mut r).unwrap();
        assert!(!out.changed(), "{input:?}");
        assert!(already_done(&out.events), "{input:?}");
    }
    // A start while a rotation runs is refused, even the same one again.
    let started = start(&s, false, T0, &mut r);
    let again = SetInput::Start {
        reason: "yearly".into(),
        imports: vec![],
        one_at_a_time: false,
    };
    assert!(matches!(
        SetEngine::step(&started, &again, T0, &mut r).unwrap_err(),
        RotateError::Set(SetError::WrongStep { .. })
    ));
    let acked = ack(&started, "api", T0, &mut r);
    let fp = acked.expected_fingerprint("api").unwrap();
    let out = SetEngine::step(
        &acked,
        &SetInput::Ack {
            target: "api".into(),
            fingerprint: fp,
        },
        T0,
        &mut r,
    )
    .unwrap();
    assert!(!out.changed() && already_done(&out.events));
}

#[test]
fn reasons_with_control_characters_are_refused() {
    let mut r = rng(8);
    let s = two_verifiers(8);
    for bad in ["line\nforged: ok", "\u{1b}[2Jclear", "tab\t"] {
        let start = SetInput::Start {
            reason: bad.into(),
            imports: vec![],
            one_at_a_time: false,
        };
        let err = step(&s, start, T0, &mut r).unwrap_err();
        assert!(err.to_string().contains("control character"), "{err}");
    }
    let started = start(&s, false, T0, &mut r);
    let fail = SetInput::Fail {
        target: "api".into(),
        reason: "disk\nfull".into(),
    };
    assert!(step(&started, fail, T0, &mut r).is_err());
    assert!(step(&started, advance_with("x\u{7}"), T0, &mut r).is_err());
}

#[test]
fn one_at_a_time_holds_a_serving_move_away_from_a_client_that_trusts_only_the_old_ca() {
    // Two serving targets; node-1 (a client of both) never loaded
    // trust-both and the gate into update-certs was overridden. Moving a
    // server now would break node-1, so the move waits for it.
    let mut r = rng(9);
    let s = two_verifiers(9);
    let s = step(
        &s,
        SetInput::Issue {
            replace: false,
            name: "proxy-server".into(),
            spec: spec("cluster", true, false, "proxy.example", "proxy"),
        },
        T0,
        &mut r,
    )
    .unwrap();
    let s = ack_all(&s, T0, &mut r);
    let s = start(&s, true, T0, &mut r);
    let s = ["api", "proxy"]
        .iter()
        .fold(s, |s, t| ack(&s, t, T0, &mut r));
    let s = step(&s, advance_with("node-1 offline"), T0, &mut r).unwrap();
    assert_eq!(s.step(), SetStep::UpdateCerts);
    let updated =
        |s: &SetState| -> BTreeSet<String> { s.rotation().unwrap().updated_targets().clone() };
    assert!(updated(&s).is_empty(), "{:?}", updated(&s));
    // node-1 loads its update-certs files (which trust both): the servers
    // move in turn.
    let s = ack(&s, "node-1", T0, &mut r);
    assert_eq!(updated(&s).len(), 1, "{:?}", updated(&s));
}
