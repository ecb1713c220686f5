#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Aborting a CA set rotation: each step lands on its safe target, what
//! moved is reverted, and an abort that would strand a target is refused.

use pki_core::Bundle;
mod support;

use pki_rotate::Document as _;
use pki_rotate::{Driver, MemoryStore, SetEngine, SetError, SetInput, SetState, SetStep, Store};
use time::Duration;

use support::set::*;

fn all_on_old(s: &SetState) -> bool {
    s.leaves().iter().all(|(name, l)| {
        let ca = &s.cas()[&l.spec.ca].current;
        let issuer = issuer_of(s, name);
        !l.on_next
            && (issuer == ca.signer.cert
                || Some(&issuer) == ca.client_signer.as_ref().map(|c| &c.cert))
    })
}

#[test]
fn abort_from_each_step_lands_on_its_safe_target() {
    for (advances, expect) in [
        (0, SetStep::Reverting),
        (1, SetStep::Reverting),
        (2, SetStep::Completed),
    ] {
        let mut r = rng(6);
        let s0 = gep18(6);
        let mut s = start(&s0, false, T0, &mut r);
        for _ in 0..advances {
            s = ack_all(&s, T0, &mut r);
            s = advance(&s, T0, &mut r).unwrap();
        }
        assert_eq!(s.abort_target(), Some(expect));
        // Trust-new's abort waits for what its advance waits for.
        let s = ack_all(&s, T0, &mut r);
        let s = step(&s, abort(), T0, &mut r).unwrap();
        assert_eq!(s.step(), expect, "abort after {advances} advances");
        assert_eq!(s.abort_target(), None);
        let err = set_error(step(&s, abort(), T0, &mut r));
        assert!(
            matches!(err, SetError::WrongStep { .. }),
            "abort twice: {err}"
        );
        if expect == SetStep::Reverting {
            assert!(all_on_old(&s), "every leaf back on the old CAs");
            // Bundles still trust both until every target acked.
            let tf = s.target_files().unwrap();
            assert_eq!(
                Bundle::from_pem(tf["node-1"].get("trust/cluster.crt").unwrap())
                    .unwrap()
                    .len(),
                2
            );
            assert!(advance(&s, T0, &mut r).is_err());
            let s = ack_all(&s, T0, &mut r);
            let s = advance(&s, T0, &mut r).unwrap();
            assert_eq!(s.step(), SetStep::Idle);
            assert!(all_on_old(&s));
            assert!(s.cas().values().all(|c| c.next.is_none()));
            // Back to the files of before the rotation, except the leaves' new keys.
            assert_eq!(
                s.target_files().unwrap()["node-1"].get("trust/cluster.crt"),
                s0.target_files().unwrap()["node-1"].get("trust/cluster.crt")
            );
            assert_eq!(s.history().last().unwrap().outcome, "reverted");
        }
    }
}

/// Every leaf is signed by the CA (or separate client CA) in use now, and
/// the CA of its name: what "back on the old CAs" means, by signature.
fn assert_issued_by_current(s: &SetState, old: &SetState) {
    for (name, leaf) in s.leaves() {
        let ca = &s.cas()[&leaf.spec.ca].current;
        let old_ca = &old.cas()[&leaf.spec.ca].current;
        let issuer = issuer_of(s, name);
        let expected = if leaf.spec.serving {
            &old_ca.signer.cert
        } else {
            &old_ca.client_issuer().cert
        };
        assert_eq!(&issuer, expected, "{name} is signed by its old CA");
        assert!(
            issuer == ca.signer.cert || Some(&issuer) == ca.client_signer.as_ref().map(|c| &c.cert),
            "{name}"
        );
        assert!(!leaf.on_next, "{name}");
    }
}

#[test]
fn abort_after_client_certs_moved_reverts_them_and_ends_idle_on_the_old_cas() {
    let mut r = rng(20);
    let s0 = gep18(20);
    let s = start(&s0, false, T0, &mut r);
    // Second half of trust-both: every server that verifies clients loaded
    // its trust-both bundle, so every client certificate moved.
    let s = ["control-plane", "etcd", "metrics"]
        .iter()
        .fold(s, |s, t| ack(&s, t, T0, &mut r));
    assert_eq!(s.status(T0).half, Some("clients"));
    for leaf in ["kubelet", "apiserver-etcd-client", "aggregator"] {
        let new = s.cas()[&s.leaves()[leaf].spec.ca].next.as_ref().unwrap();
        assert_eq!(
            issuer_of(&s, leaf),
            new.client_issuer().cert,
            "{leaf} moved"
        );
    }
    let reverting = step(&s, abort(), T0, &mut r).unwrap();
    assert_eq!(reverting.step(), SetStep::Reverting);
    assert_issued_by_current(&reverting, &s0);
    // The old CAs' keys and the new ones are both kept until idle.
    assert!(reverting.cas().values().all(|c| c.next.is_some()));
    let err = step(&reverting, abort(), T0, &mut r).unwrap_err();
    assert!(err.to_string().contains("already reverting"), "{err}");
    let err = set_error(advance(&reverting, T0, &mut r));
    assert!(matches!(err, SetError::StepBlocked { .. }), "{err}");
    let acked = ack_all(&reverting, T0, &mut r);
    let idle = advance(&acked, T0, &mut r).unwrap();
    assert_eq!(idle.step(), SetStep::Idle);
    assert_issued_by_current(&idle, &s0);
    for (name, ca) in idle.cas() {
        assert_eq!(ca.current.signer.cert, s0.cas()[name].current.signer.cert);
        assert!(
            ca.next.is_none() && ca.current.client_signer.is_none(),
            "{name}"
        );
    }
    // Every bundle is the one of before the rotation again.
    let (before, after) = (s0.target_files().unwrap(), idle.target_files().unwrap());
    for (t, files) in &after {
        for (path, file) in files.iter().filter(|(p, _)| !p.starts_with("certs/")) {
            assert_eq!(
                Some(file.contents.as_slice()),
                before[t].get(path),
                "{t}/{path}"
            );
        }
    }
    assert_eq!(idle.history().last().unwrap().outcome, "reverted");
}

#[test]
fn abort_in_update_certs_one_at_a_time_reverts_the_serving_certs_that_moved() {
    let mut r = rng(21);
    let s0 = gep18(21);
    let s = ack_all(&start(&s0, true, T0, &mut r), T0, &mut r);
    let s = advance(&s, T0, &mut r).unwrap();
    let s = ack(&s, "control-plane", T0, &mut r);
    // control-plane's and etcd's serving certificates moved, metrics' did not.
    let updated = s.rotation().unwrap().updated_targets().clone();
    assert_eq!(updated, set_of(&["control-plane", "etcd"]));
    let next_of = |ca: &str| s.cas()[ca].next.as_ref().unwrap().signer.cert.clone();
    assert_eq!(issuer_of(&s, "kube-apiserver"), next_of("cluster"));
    assert_eq!(issuer_of(&s, "etcd-server"), next_of("etcd"));
    assert_eq!(
        issuer_of(&s, "metrics-server"),
        s0.cas()["metrics"].current.signer.cert
    );
    let reverting = step(&s, abort(), T0, &mut r).unwrap();
    assert_eq!(reverting.step(), SetStep::Reverting);
    assert_issued_by_current(&reverting, &s0);
    assert!(
        reverting
            .rotation()
            .as_ref()
            .unwrap()
            .updated_targets()
            .is_empty()
    );
    let idle = advance(&ack_all(&reverting, T0, &mut r), T0, &mut r).unwrap();
    assert_eq!(idle.step(), SetStep::Idle);
    assert_issued_by_current(&idle, &s0);
}

#[test]
fn abort_in_trust_new_rolls_forward_only_once_no_target_is_stranded() {
    let mut r = rng(22);
    let s0 = gep18(22);
    let mut s = start(&s0, false, T0, &mut r);
    for _ in 0..2 {
        s = advance(&ack_all(&s, T0, &mut r), T0, &mut r).unwrap();
    }
    assert_eq!(s.step(), SetStep::TrustNew);
    let old = s.clone();
    assert_eq!(s.abort_target(), Some(SetStep::Completed));
    // Nobody loaded trust-new: completing would strand every target.
    let err = set_error(step(&s, abort(), T0, &mut r));
    let SetError::AbortStrands { stranded, to, .. } = &err else {
        panic!("{err}");
    };
    assert_eq!(*to, SetStep::Completed);
    assert_eq!(stranded, "control-plane, etcd, metrics, node-1");
    assert!(err.to_string().contains("old CA keys"), "{err}");
    // Once all but node-1 loaded it, node-1 alone is named.
    let s = ["control-plane", "etcd", "metrics"]
        .iter()
        .fold(s, |s, t| ack(&s, t, T0, &mut r));
    assert_eq!(s.status(T0).abort_strands, ["node-1"]);
    let err = set_error(step(&s, abort(), T0, &mut r));
    assert!(
        matches!(&err, SetError::AbortStrands { stranded, .. } if stranded == "node-1"),
        "{err}"
    );
    let err = set_error(step(
        &s,
        SetInput::Abort {
            override_reason: Some("  ".into()),
        },
        T0,
        &mut r,
    ));
    assert!(matches!(err, SetError::Invalid(_)), "{err}");
    // With a reason it rolls forward, recorded like an advance override.
    let t2 = T0 + Duration::hours(5);
    let done = step(
        &s,
        SetInput::Abort {
            override_reason: Some("node-1 is decommissioned".into()),
        },
        t2,
        &mut r,
    )
    .unwrap();
    assert_eq!(done.step(), SetStep::Completed);
    let rot = done.rotation().unwrap();
    assert_eq!(rot.completed_at(), Some(t2));
    let o = rot.overrides().last().unwrap();
    assert_eq!((o.from, o.to), (SetStep::TrustNew, SetStep::Completed));
    assert_eq!(o.reason, "node-1 is decommissioned");
    assert_eq!(o.waiting, ["node-1"]);
    assert!(rot.timeline().last().unwrap().note.contains("abort"));
    assert_eq!(done.history().last().unwrap().outcome, "completed");
    // The old CA keys are destroyed: in no file of the document.
    let files = SetState::to_files(&done).unwrap();
    for (name, ca) in old.cas() {
        let mut old_keys = vec![ca.current.signer.key.to_pkcs8_pem().unwrap().to_string()];
        old_keys.push(ca.current.signer.cert.to_pem());
        for pem in old_keys {
            assert!(
                files
                    .iter()
                    .all(|(_, f)| f.contents.as_slice() != pem.as_bytes()),
                "{name}: an old CA certificate or key is still in the document"
            );
        }
        assert!(done.cas()[name].next.is_none());
    }
    assert!(files.iter().all(|(p, _)| !p.contains("/next-")));
    // Abort twice: nothing runs any more.
    let err = set_error(step(&done, abort(), T0, &mut r));
    assert!(
        matches!(
            err,
            SetError::WrongStep {
                step: SetStep::Completed,
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_refused_abort_leaves_the_store_unchanged() {
    let mut r = rng(23);
    let store = MemoryStore::new();
    let driver = Driver::new(&store);
    let mut s = start(&gep18(23), false, T0, &mut r);
    for _ in 0..2 {
        s = advance(&ack_all(&s, T0, &mut r), T0, &mut r).unwrap();
    }
    driver.create::<SetEngine>("set", &s).unwrap();
    let before = store.get("set").unwrap().unwrap();
    let err = set_error(driver.step::<SetEngine, _>("set", &abort(), T0, &mut r));
    assert!(matches!(err, SetError::AbortStrands { .. }), "{err}");
    assert_eq!(store.get("set").unwrap().unwrap(), before);
}
