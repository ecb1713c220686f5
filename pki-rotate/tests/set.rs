#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The CA set engine's state machine (StarlingX `kube-rootca-update`,
//! GEP-18): each step only from its predecessor, gates on acknowledgements,
//! failure and retry, one target at a time, abort to the safe target, the
//! 24 h rule, the pre-flight matrix, crash safety at every store write, and
//! a property test over random operation sequences.

use pki_core::{
    Bundle, Certificate, CertificateAuthority, KeyAlgorithm, Purpose, VerifyOptions, verify_chain,
};
mod support;

use pki_rotate::Document as _;
use pki_rotate::set::{ImportedCa, SetEvent, fingerprint, material};
use pki_rotate::{
    Driver, Engine, FsStore, MemoryStore, RotateError, SetEngine, SetInput, SetState, SetStep,
    Store,
};
use proptest::prelude::*;
use rand_chacha::ChaCha20Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use time::{Duration, OffsetDateTime, macros::datetime};

use support::set::*;

fn issuer_of(s: &SetState, leaf: &str) -> Certificate {
    let cert = &s.leaves[leaf].issued.cert;
    s.cas
        .values()
        .flat_map(|ca| {
            let mut v = vec![ca.current.signer.cert.clone()];
            v.extend(ca.current.client_signer.as_ref().map(|c| c.cert.clone()));
            if let Some(n) = &ca.next {
                v.push(n.signer.cert.clone());
                v.extend(n.client_signer.as_ref().map(|c| c.cert.clone()));
            }
            v
        })
        .find(|c| pki_core::issued_by(cert, c).issued_by)
        .expect("an issuer in the set")
}

#[test]
fn full_rotation_moves_client_certs_then_serving_certs_then_trust() {
    let mut r = rng(1);
    let s0 = gep18(1);
    let old_cluster = s0.cas["cluster"].current.signer.cert.clone();
    let t1 = T0 + Duration::days(30);
    let s = start(&s0, false, t1, &mut r);
    assert_eq!(s.step(), SetStep::TrustBoth);
    let next = s.cas["cluster"].next.as_ref().unwrap();
    let new_client = next
        .client_signer
        .as_ref()
        .expect("a new cluster client CA")
        .cert
        .clone();
    // Bundles trust old + new; client-ca/cluster.crt = old cluster CA + new client CA.
    let files = s.target_files().unwrap();
    let cc =
        Bundle::from_pem(files["control-plane"].get("client-ca/cluster.crt").unwrap()).unwrap();
    assert!(cc.contains(&old_cluster) && cc.contains(&new_client));
    assert_eq!(cc.len(), 2);
    // The kubelet's client certificate waits for the control plane's ack.
    assert_eq!(issuer_of(&s, "kubelet"), old_cluster);
    let s = ack(&s, "control-plane", t1, &mut r);
    assert_eq!(
        issuer_of(&s, "kubelet"),
        new_client,
        "moved once its server loaded"
    );
    // Serving certificates stay on the old CAs in trust-both.
    assert_eq!(issuer_of(&s, "kube-apiserver"), old_cluster);
    // Advance is gated.
    let err = advance(&s, t1, &mut r).unwrap_err();
    assert!(matches!(err, RotateError::SetStepBlocked { .. }), "{err}");
    assert!(err.to_string().contains("node-1"), "{err}");
    let s = ack_all(&s, t1, &mut r);
    let s = advance(&s, t1, &mut r).unwrap();
    assert_eq!(s.step(), SetStep::UpdateCerts);
    assert_eq!(issuer_of(&s, "kube-apiserver"), next.signer.cert);
    let s = ack_all(&s, t1, &mut r);
    let s = advance(&s, t1, &mut r).unwrap();
    assert_eq!(s.step(), SetStep::TrustNew);
    let files = s.target_files().unwrap();
    let trust = Bundle::from_pem(files["node-1"].get("trust/cluster.crt").unwrap()).unwrap();
    assert!(!trust.contains(&old_cluster) && trust.contains(&next.signer.cert));
    let s = ack_all(&s, t1, &mut r);
    let t2 = t1 + Duration::days(1);
    let s = advance(&s, t2, &mut r).unwrap();
    assert_eq!(s.step(), SetStep::Completed);
    assert_eq!(s.rotation.as_ref().unwrap().completed_at, Some(t2));
    assert!(s.cas.values().all(|c| c.next.is_none()));
    assert_eq!(s.cas["cluster"].current.signer.cert, next.signer.cert);
    // Old keys are gone from the files too.
    let files = SetState::to_files(&s).unwrap();
    let old_pem = old_cluster.to_pem();
    assert!(
        files
            .iter()
            .all(|(_, f)| f.contents.as_slice() != old_pem.as_bytes())
    );
    // Only the CA's own names appear in trust/ and client-ca/.
    let tf = s.target_files().unwrap();
    let names: Vec<&str> = tf["control-plane"].iter().map(|(p, _)| p).collect();
    assert_eq!(
        names,
        [
            "certs/aggregator/tls.crt",
            "certs/aggregator/tls.key",
            "certs/apiserver-etcd-client/tls.crt",
            "certs/apiserver-etcd-client/tls.key",
            "certs/kube-apiserver/tls.crt",
            "certs/kube-apiserver/tls.key",
            "client-ca/cluster.crt",
            "trust/etcd.crt",
            "trust/metrics.crt",
        ]
    );
    // A second rotation can start after completion.
    let s = start(&s, false, t2, &mut r);
    assert_eq!(s.step(), SetStep::TrustBoth);
}

#[test]
fn each_step_only_from_its_predecessor() {
    let mut r = rng(2);
    let s = gep18(2);
    for input in [
        SetInput::Advance {
            from: None,
            override_reason: None,
        },
        abort(),
        SetInput::Fail {
            target: "node-1".into(),
            reason: "x".into(),
        },
    ] {
        let err = step(&s, input, T0, &mut r).unwrap_err();
        assert!(
            matches!(
                err,
                RotateError::SetWrongStep {
                    step: SetStep::Idle,
                    ..
                }
            ),
            "{err}"
        );
    }
    let s = start(&s, false, T0, &mut r);
    let err = step(
        &s,
        SetInput::Start {
            reason: "again".into(),
            imports: vec![],
            one_at_a_time: false,
        },
        T0,
        &mut r,
    )
    .unwrap_err();
    assert!(err.to_string().contains("already running"), "{err}");
    // Advance without acks is refused, with an override it passes and is recorded.
    assert!(advance(&s, T0, &mut r).is_err());
    let s = step(
        &s,
        SetInput::Advance {
            from: None,
            override_reason: Some("node-1 is being replaced".into()),
        },
        T0,
        &mut r,
    )
    .unwrap();
    assert_eq!(s.step(), SetStep::UpdateCerts);
    let status = s.status(T0);
    assert_eq!(status.overrides.len(), 1);
    assert_eq!(status.overrides[0].reason, "node-1 is being replaced");
    assert!(status.overrides[0].waiting.iter().any(|w| w == "node-1"));
}

#[test]
fn failed_target_blocks_until_retried_and_acked() {
    let mut r = rng(3);
    let s = start(&gep18(3), false, T0, &mut r);
    let s = ack_all(&s, T0, &mut r);
    let s = step(
        &s,
        SetInput::Fail {
            target: "node-1".into(),
            reason: "puppet apply failed".into(),
        },
        T0,
        &mut r,
    )
    .unwrap();
    let err = advance(&s, T0, &mut r).unwrap_err();
    assert!(err.to_string().contains("puppet apply failed"), "{err}");
    let fp = s.expected_fingerprint("node-1").unwrap();
    let err = step(
        &s,
        SetInput::Ack {
            target: "node-1".into(),
            fingerprint: fp.clone(),
        },
        T0,
        &mut r,
    )
    .unwrap_err();
    assert!(matches!(err, RotateError::SetTargetFailed { .. }), "{err}");
    let s = step(
        &s,
        SetInput::Retry {
            target: "node-1".into(),
        },
        T0,
        &mut r,
    )
    .unwrap();
    // Retried, it is pending again: its ack from before the failure no
    // longer counts, even though its files did not change.
    assert!(!s.is_loaded("node-1"));
    assert_eq!(s.status(T0).targets["node-1"].progress, "pending");
    let err = advance(&s, T0, &mut r).unwrap_err();
    assert!(matches!(err, RotateError::SetStepBlocked { .. }), "{err}");
    assert!(err.to_string().contains("node-1"), "{err}");
    let s = ack(&s, "node-1", T0, &mut r);
    assert!(s.is_loaded("node-1"));
    let s = advance(&s, T0, &mut r).unwrap();
    assert_eq!(s.step(), SetStep::UpdateCerts);
    let err = step(
        &s,
        SetInput::Retry {
            target: "node-1".into(),
        },
        T0,
        &mut r,
    )
    .unwrap_err();
    assert!(err.to_string().contains("has not failed"), "{err}");
}

#[test]
fn stale_fingerprint_is_refused_and_current_ack_is_idempotent() {
    let mut r = rng(4);
    let s0 = gep18(4);
    let old_fp = s0.expected_fingerprint("node-1").unwrap();
    let s = start(&s0, false, T0, &mut r);
    let err = step(
        &s,
        SetInput::Ack {
            target: "node-1".into(),
            fingerprint: old_fp,
        },
        T0,
        &mut r,
    )
    .unwrap_err();
    assert!(
        matches!(err, RotateError::SetStaleFingerprint { .. }),
        "{err}"
    );
    let s = ack(&s, "node-1", T0, &mut r);
    let fp = s.expected_fingerprint("node-1").unwrap();
    let again = SetEngine::step(
        &s,
        &SetInput::Ack {
            target: "node-1".into(),
            fingerprint: fp,
        },
        T0,
        &mut r,
    )
    .unwrap();
    assert!(!again.changed(), "a repeated ack changes nothing");
    let err = step(
        &s,
        SetInput::Ack {
            target: "nobody".into(),
            fingerprint: "x".into(),
        },
        T0,
        &mut r,
    )
    .unwrap_err();
    assert!(matches!(err, RotateError::SetUnknownTarget(_)), "{err}");
}

#[test]
fn one_at_a_time_updates_serving_targets_in_turn() {
    let mut r = rng(5);
    let s = start(&gep18(5), true, T0, &mut r);
    let s = ack_all(&s, T0, &mut r);
    let s = advance(&s, T0, &mut r).unwrap();
    let updated = |s: &SetState| s.rotation.as_ref().unwrap().updated_targets.clone();
    // Serving targets: control-plane, etcd, metrics (name order).
    assert_eq!(updated(&s), set_of(&["control-plane"]));
    assert!(!s.leaves["etcd-server"].on_next);
    let s = ack(&s, "etcd", T0, &mut r);
    assert_eq!(
        updated(&s),
        set_of(&["control-plane"]),
        "waits for control-plane"
    );
    let s = ack(&s, "control-plane", T0, &mut r);
    assert_eq!(updated(&s), set_of(&["control-plane", "etcd"]));
    assert!(s.leaves["etcd-server"].on_next);
    let err = advance(&s, T0, &mut r).unwrap_err();
    assert!(err.to_string().contains("not yet updated"), "{err}");
    let s = ack_all(&s, T0, &mut r);
    assert_eq!(updated(&s), set_of(&["control-plane", "etcd", "metrics"]));
    let s = advance(&s, T0, &mut r).unwrap();
    assert_eq!(s.step(), SetStep::TrustNew);
}

fn all_on_old(s: &SetState) -> bool {
    s.leaves.iter().all(|(name, l)| {
        let ca = &s.cas[&l.spec.ca].current;
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
        let err = step(&s, abort(), T0, &mut r).unwrap_err();
        assert!(
            matches!(err, RotateError::SetWrongStep { .. }),
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
            assert!(s.cas.values().all(|c| c.next.is_none()));
            // Back to the files of before the rotation, except the leaves' new keys.
            assert_eq!(
                s.target_files().unwrap()["node-1"].get("trust/cluster.crt"),
                s0.target_files().unwrap()["node-1"].get("trust/cluster.crt")
            );
            assert_eq!(s.history.last().unwrap().outcome, "reverted");
        }
    }
}

/// Every leaf is signed by the CA (or separate client CA) in use now, and
/// the CA of its name: what "back on the old CAs" means, by signature.
fn assert_issued_by_current(s: &SetState, old: &SetState) {
    for (name, leaf) in &s.leaves {
        let ca = &s.cas[&leaf.spec.ca].current;
        let old_ca = &old.cas[&leaf.spec.ca].current;
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
        let new = s.cas[&s.leaves[leaf].spec.ca].next.as_ref().unwrap();
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
    assert!(reverting.cas.values().all(|c| c.next.is_some()));
    let err = step(&reverting, abort(), T0, &mut r).unwrap_err();
    assert!(err.to_string().contains("already reverting"), "{err}");
    let err = advance(&reverting, T0, &mut r).unwrap_err();
    assert!(matches!(err, RotateError::SetStepBlocked { .. }), "{err}");
    let acked = ack_all(&reverting, T0, &mut r);
    let idle = advance(&acked, T0, &mut r).unwrap();
    assert_eq!(idle.step(), SetStep::Idle);
    assert_issued_by_current(&idle, &s0);
    for (name, ca) in &idle.cas {
        assert_eq!(ca.current.signer.cert, s0.cas[name].current.signer.cert);
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
    assert_eq!(idle.history.last().unwrap().outcome, "reverted");
}

#[test]
fn abort_in_update_certs_one_at_a_time_reverts_the_serving_certs_that_moved() {
    let mut r = rng(21);
    let s0 = gep18(21);
    let s = ack_all(&start(&s0, true, T0, &mut r), T0, &mut r);
    let s = advance(&s, T0, &mut r).unwrap();
    let s = ack(&s, "control-plane", T0, &mut r);
    // control-plane's and etcd's serving certificates moved, metrics' did not.
    let updated = s.rotation.as_ref().unwrap().updated_targets.clone();
    assert_eq!(updated, set_of(&["control-plane", "etcd"]));
    let next_of = |ca: &str| s.cas[ca].next.as_ref().unwrap().signer.cert.clone();
    assert_eq!(issuer_of(&s, "kube-apiserver"), next_of("cluster"));
    assert_eq!(issuer_of(&s, "etcd-server"), next_of("etcd"));
    assert_eq!(
        issuer_of(&s, "metrics-server"),
        s0.cas["metrics"].current.signer.cert
    );
    let reverting = step(&s, abort(), T0, &mut r).unwrap();
    assert_eq!(reverting.step(), SetStep::Reverting);
    assert_issued_by_current(&reverting, &s0);
    assert!(
        reverting
            .rotation
            .as_ref()
            .unwrap()
            .updated_targets
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
    let err = step(&s, abort(), T0, &mut r).unwrap_err();
    let RotateError::SetAbortStrands { stranded, to, .. } = &err else {
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
    let err = step(&s, abort(), T0, &mut r).unwrap_err();
    assert!(
        matches!(&err, RotateError::SetAbortStrands { stranded, .. } if stranded == "node-1"),
        "{err}"
    );
    let err = step(
        &s,
        SetInput::Abort {
            override_reason: Some("  ".into()),
        },
        T0,
        &mut r,
    )
    .unwrap_err();
    assert!(matches!(err, RotateError::SetInvalid(_)), "{err}");
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
    let rot = done.rotation.as_ref().unwrap();
    assert_eq!(rot.completed_at, Some(t2));
    let o = rot.overrides.last().unwrap();
    assert_eq!((o.from, o.to), (SetStep::TrustNew, SetStep::Completed));
    assert_eq!(o.reason, "node-1 is decommissioned");
    assert_eq!(o.waiting, ["node-1"]);
    assert!(rot.timeline.last().unwrap().note.contains("abort"));
    assert_eq!(done.history.last().unwrap().outcome, "completed");
    // The old CA keys are destroyed: in no file of the document.
    let files = SetState::to_files(&done).unwrap();
    for (name, ca) in &old.cas {
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
        assert!(done.cas[name].next.is_none());
    }
    assert!(files.iter().all(|(p, _)| !p.contains("/next-")));
    // Abort twice: nothing runs any more.
    let err = step(&done, abort(), T0, &mut r).unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::SetWrongStep {
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
    let err = driver
        .step::<SetEngine, _>("set", &abort(), T0, &mut r)
        .unwrap_err();
    assert!(matches!(err, RotateError::SetAbortStrands { .. }), "{err}");
    assert_eq!(store.get("set").unwrap().unwrap(), before);
}

#[test]
fn a_new_ca_valid_for_less_than_a_day_is_refused() {
    let mut r = rng(7);
    let s = gep18(7);
    let short = CertificateAuthority::generate_root(
        "short",
        KeyAlgorithm::EcdsaP256,
        T0,
        Duration::hours(12),
        &mut r,
    )
    .unwrap();
    let err = step(
        &s,
        SetInput::Start {
            reason: "import".into(),
            imports: vec![ImportedCa {
                ca: "etcd".into(),
                authority: short,
                chain: vec![],
            }],
            one_at_a_time: false,
        },
        T0,
        &mut r,
    )
    .unwrap_err();
    assert!(matches!(err, RotateError::SetCaRefused { .. }), "{err}");
    assert!(err.to_string().contains("more than 24 hours"), "{err}");
    // Valid for 30 days: more than a day but not longer than the 90-day leaves.
    let month = CertificateAuthority::generate_root(
        "month",
        KeyAlgorithm::EcdsaP256,
        T0,
        Duration::days(30),
        &mut r,
    )
    .unwrap();
    let err = step(
        &s,
        SetInput::Start {
            reason: "import".into(),
            imports: vec![ImportedCa {
                ca: "etcd".into(),
                authority: month,
                chain: vec![],
            }],
            one_at_a_time: false,
        },
        T0,
        &mut r,
    )
    .unwrap_err();
    assert!(err.to_string().contains("not longer than"), "{err}");
    // A good import is used as the new etcd CA.
    let good = CertificateAuthority::generate_root(
        "etcd-2027",
        KeyAlgorithm::EcdsaP256,
        T0,
        Duration::days(400),
        &mut r,
    )
    .unwrap();
    let s = step(
        &s,
        SetInput::Start {
            reason: "import".into(),
            imports: vec![ImportedCa {
                ca: "etcd".into(),
                authority: good.clone(),
                chain: vec![],
            }],
            one_at_a_time: false,
        },
        T0,
        &mut r,
    )
    .unwrap();
    assert_eq!(s.cas["etcd"].next.as_ref().unwrap().signer.cert, good.cert);
    let err = SetState::new(
        &[("x".into(), roles("serving"))],
        KeyAlgorithm::EcdsaP256,
        Duration::hours(20),
        T0,
        &mut r,
    )
    .unwrap_err();
    assert!(err.to_string().contains("longer than"), "{err}");
}

#[test]
fn moving_client_certs_before_servers_loaded_is_a_red_cell() {
    // What the pre-flight exists for: had the kubelet's certificate moved
    // to the new client CA at start, a control plane still on its idle
    // client-ca bundle would reject it.
    let mut r = rng(8);
    let s0 = gep18(8);
    let started = start(&s0, false, T0, &mut r);
    let mut moved = started.clone();
    moved
        .rotation
        .as_mut()
        .unwrap()
        .clients_moved
        .insert("cluster".into());
    let moved = step(&moved, SetInput::Nothing, T0, &mut r).unwrap();
    let kubelet_new = {
        let mut m = moved.clone();
        // Re-issue happens on the next material change; force it through an
        // unrelated target change.
        m = step(
            &m,
            SetInput::Target {
                name: "spare".into(),
                trusts: None,
                client_ca: None,
            },
            T0,
            &mut r,
        )
        .unwrap();
        m
    };
    assert!(kubelet_new.leaves["kubelet"].on_next);
    let err = material::preflight(&s0, &kubelet_new, T0).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("control-plane") && text.contains("kubelet"),
        "{text}"
    );
    assert!(text.contains("client-ca/cluster.crt"), "{text}");
    // The engine's own transition is green.
    material::preflight(&s0, &started, T0).unwrap();
}

#[test]
fn unknown_ca_role_mismatch_and_bad_names_are_typed_errors() {
    let mut r = rng(9);
    let s = gep18(9);
    let bad = [
        SetInput::Issue {
            replace: false,
            name: "x".into(),
            spec: spec("nope", true, false, "x.example", "t"),
        },
        SetInput::Issue {
            replace: false,
            name: "x".into(),
            spec: spec("metrics", false, true, "", "t"),
        },
        SetInput::Issue {
            replace: false,
            name: "Bad Name".into(),
            spec: spec("metrics", true, false, "x.example", "t"),
        },
        SetInput::Target {
            name: "t".into(),
            trusts: Some(set_of(&["front-proxy"])),
            client_ca: None,
        },
        SetInput::Target {
            name: "t".into(),
            trusts: None,
            client_ca: Some(set_of(&["unknown"])),
        },
    ];
    for input in bad {
        let err = step(&s, input.clone(), T0, &mut r).unwrap_err();
        assert!(
            matches!(
                err,
                RotateError::SetUnknownCa(_) | RotateError::SetInvalid(_)
            ),
            "{input:?}: {err}"
        );
    }
}

#[test]
fn files_round_trip_and_fingerprints_match_the_published_tree() {
    let mut r = rng(10);
    let s = start(&gep18(10), false, T0, &mut r);
    let s = ack(&s, "control-plane", T0, &mut r);
    let files = SetState::to_files(&s).unwrap();
    let back = SetState::from_files(&files).unwrap();
    assert_eq!(SetState::to_files(&back).unwrap(), files);
    for t in s.targets.keys() {
        let prefix = format!("targets/{t}/");
        let fp = fingerprint(
            files
                .iter()
                .filter_map(|(p, f)| p.strip_prefix(&prefix).map(|p| (p, f.contents.as_slice()))),
        );
        assert_eq!(fp, s.expected_fingerprint(t).unwrap());
    }
    assert!(files.file("set/cas/cluster/ca.key").unwrap().secret);
    assert!(
        files
            .file("set/cas/cluster/next-client-ca.key")
            .unwrap()
            .secret
    );
    assert!(
        files
            .file("targets/node-1/certs/kubelet/tls.key")
            .unwrap()
            .secret
    );
    let data = SetState::files_to_secret_data(&files).unwrap();
    let from_secret = SetState::files_from_secret_data(&data).unwrap();
    let again = SetState::to_files(&SetState::from_files(&from_secret).unwrap()).unwrap();
    assert_eq!(again, files);
}

type InputFor = Box<dyn Fn(&SetState) -> SetInput>;
type CheckFor = Box<dyn Fn(&SetState, &[SetEvent])>;

fn ack_of(t: &'static str) -> InputFor {
    Box::new(move |doc| SetInput::Ack {
        target: t.into(),
        fingerprint: doc.expected_fingerprint(t).unwrap(),
    })
}

fn overridden(reason: &str) -> SetInput {
    SetInput::Advance {
        from: None,
        override_reason: Some(reason.into()),
    }
}

fn reissued(events: &[SetEvent], leaf: &str) -> bool {
    events
        .iter()
        .any(|e| matches!(e, SetEvent::Issued { name, .. } if name == leaf))
}

/// Opens the store with a write hook that fails the `fail_at`-th write
/// (counting from 0) and counts every write in `count`.
fn failing_store(dir: &std::path::Path, fail_at: usize, count: Arc<AtomicUsize>) -> FsStore {
    let mut store = FsStore::open(dir).unwrap();
    store.set_write_hook(Some(Box::new(move |_what| {
        if count.fetch_add(1, Ordering::SeqCst) == fail_at {
            Err(std::io::Error::other("injected crash"))
        } else {
            Ok(())
        }
    })));
    store
}

/// Every store write of every kind of step fails once in turn: each time
/// the store reads back the old document, or the new one (a failure after
/// the switch), exactly; then the step succeeds. The steps: start, an ack
/// that re-issues a client certificate, abort to reverting (re-issues),
/// acks, reverting → idle, start again, both advances that re-issue, and
/// the write that completes (destroying the old keys).
#[test]
fn crash_at_every_store_write_leaves_old_or_new_document() {
    let dir = scratch_dir();
    let mut r = rng(11);
    let s0 = gep18(11);
    let start_op: InputFor = Box::new(|_| SetInput::Start {
        reason: "yearly".into(),
        imports: vec![],
        one_at_a_time: false,
    });
    let no_check: CheckFor = Box::new(|_, _| {});
    let step_is =
        |want: SetStep| -> CheckFor { Box::new(move |doc, _| assert_eq!(doc.step(), want)) };
    let ops: Vec<(&str, InputFor, CheckFor)> = vec![
        ("start", start_op, step_is(SetStep::TrustBoth)),
        (
            "ack that moves the kubelet's client certificate",
            ack_of("control-plane"),
            Box::new(|_, events| assert!(reissued(events, "kubelet"))),
        ),
        (
            "abort to reverting",
            Box::new(|_| abort()),
            Box::new(|doc, events| {
                assert_eq!(doc.step(), SetStep::Reverting);
                assert!(reissued(events, "kubelet"));
            }),
        ),
        // control-plane's files are those it acked in trust-both.
        ("ack etcd", ack_of("etcd"), no_check),
        ("ack node-1", ack_of("node-1"), Box::new(|_, _| {})),
        ("ack metrics", ack_of("metrics"), Box::new(|_, _| {})),
        (
            "reverting to idle",
            Box::new(|_| SetInput::Advance {
                from: None,
                override_reason: None,
            }),
            step_is(SetStep::Idle),
        ),
        (
            "start again",
            Box::new(|_| SetInput::Start {
                reason: "again".into(),
                imports: vec![],
                one_at_a_time: false,
            }),
            step_is(SetStep::TrustBoth),
        ),
        (
            "advance to update-certs",
            Box::new(|_| overridden("crash test")),
            Box::new(|doc, events| {
                assert_eq!(doc.step(), SetStep::UpdateCerts);
                assert!(reissued(events, "kube-apiserver"));
            }),
        ),
        (
            "advance to trust-new",
            Box::new(|_| SetInput::Advance {
                from: Some(SetStep::UpdateCerts),
                override_reason: Some("crash test".into()),
            }),
            step_is(SetStep::TrustNew),
        ),
        (
            "abort rolling forward to completed",
            Box::new(|_| SetInput::Abort {
                override_reason: Some("crash test".into()),
            }),
            Box::new(|doc, events| {
                assert_eq!(doc.step(), SetStep::Completed);
                assert!(
                    events
                        .iter()
                        .any(|e| matches!(e, SetEvent::OldKeysDestroyed { .. }))
                );
            }),
        ),
    ];
    {
        let store = FsStore::open_or_create(dir.path()).unwrap();
        Driver::new(&store).create::<SetEngine>("set", &s0).unwrap();
    }
    for (label, op, check) in &ops {
        let mut fail_at = 0;
        loop {
            let before = FsStore::open(dir.path())
                .unwrap()
                .get("set")
                .unwrap()
                .unwrap();
            let doc = SetState::from_files(&before.0).unwrap();
            let input = op(&doc);
            // The document this step writes, from the same RNG state.
            let mut same = r.clone();
            let outcome = SetEngine::step(&doc, &input, T0, &mut same).unwrap();
            let events = outcome.events.clone();
            let expected = SetState::to_files(&outcome.into_document()).unwrap();
            let count = Arc::new(AtomicUsize::new(0));
            let store = failing_store(dir.path(), fail_at, count.clone());
            let result = Driver::new(&store).step::<SetEngine, _>("set", &input, T0, &mut r);
            let (files, _) = FsStore::open(dir.path())
                .unwrap()
                .get("set")
                .unwrap()
                .unwrap();
            let after = SetState::from_files(&files).unwrap();
            let crashed = count.load(Ordering::SeqCst) > fail_at;
            if result.is_err() {
                assert!(crashed, "{label}: {:?}", result.err());
                assert_eq!(
                    files, before.0,
                    "{label}: a crash at write {fail_at} left the old document"
                );
                keys_intact(&after).unwrap();
                fail_at += 1;
                assert!(
                    fail_at < 500,
                    "{label}: the write hook never let the step through"
                );
                continue;
            }
            // Past the switch a failure is a warning: the new document is live.
            assert_eq!(
                files, expected,
                "{label}: write {fail_at} left the new document"
            );
            keys_intact(&after).unwrap();
            if !crashed {
                assert!(fail_at > 0, "{label} never wrote");
                check(&after, &events);
                break;
            }
            // The step went through despite the crash: put the old document
            // back and try the next write.
            let reset = FsStore::open(dir.path()).unwrap();
            let (_, rev) = reset.get("set").unwrap().unwrap();
            reset.put("set", Some(&rev), &before.0).unwrap();
            fail_at += 1;
        }
    }
}

// --- property test -------------------------------------------------------

#[derive(Debug, Clone)]
enum Op {
    Start(bool),
    Ack(usize),
    Advance,
    Fail(usize),
    Retry(usize),
    Abort,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => any::<bool>().prop_map(Op::Start),
        6 => (0usize..4).prop_map(Op::Ack),
        3 => Just(Op::Advance),
        1 => (0usize..4).prop_map(Op::Fail),
        1 => (0usize..4).prop_map(Op::Retry),
        1 => Just(Op::Abort),
    ]
}

/// An operation and, for one in four, the store write at which the
/// process dies while carrying it out (a set document is about 40-60
/// writes; an index past the last write lets the operation through).
fn op_and_crash() -> impl Strategy<Value = (Op, Option<usize>)> {
    (op(), proptest::option::weighted(0.25, 0usize..64))
}

/// What a target holds once it acknowledged: its trust and client-ca
/// bundles and leaves, parsed from the files it was given.
#[derive(Clone)]
struct Loaded {
    trust: BTreeMap<String, Bundle>,
    client_ca: BTreeMap<String, Bundle>,
    serving: Vec<(String, Certificate)>,
    client: Vec<(String, Certificate)>,
}

fn loaded(s: &SetState, t: &str) -> Loaded {
    let m = material::target_material(s, t);
    Loaded {
        trust: m.trust,
        client_ca: m.client_ca,
        serving: m
            .leaves
            .iter()
            .filter(|l| l.serving)
            .map(|l| (l.ca.clone(), l.cert.clone()))
            .collect(),
        client: m
            .leaves
            .iter()
            .filter(|l| l.client)
            .map(|l| (l.ca.clone(), l.cert.clone()))
            .collect(),
    }
}

fn verifies(cert: &Certificate, bundle: &Bundle, purpose: Purpose, at: OffsetDateTime) -> bool {
    let mut opts = VerifyOptions::new(at, purpose);
    if purpose == Purpose::ServerAuth {
        opts.name = cert
            .dns_names()
            .into_iter()
            .next()
            .map(pki_core::ExpectedName::Dns);
    }
    verify_chain(cert, &[], bundle, &opts).is_ok()
}

fn check_pairs(held: &BTreeMap<String, Loaded>, at: OffsetDateTime) -> Result<(), String> {
    for (c, client) in held {
        for (s, server) in held {
            for (ca, cert) in &server.serving {
                if let Some(b) = client.trust.get(ca)
                    && !verifies(cert, b, Purpose::ServerAuth, at)
                {
                    return Err(format!("{c} rejects {s}'s {ca} serving cert"));
                }
            }
            for (ca, cert) in &client.client {
                if let Some(b) = server.client_ca.get(ca)
                    && !verifies(cert, b, Purpose::ClientAuth, at)
                {
                    return Err(format!("{s} rejects {c}'s {ca} client cert"));
                }
            }
        }
    }
    Ok(())
}

fn keys_intact(s: &SetState) -> Result<(), String> {
    for (name, ca) in &s.cas {
        for pair in std::iter::once(&ca.current).chain(ca.next.as_ref()) {
            if !pair.signer.key.matches(pair.signer.cert.public_key()) {
                return Err(format!("{name}: signer key lost"));
            }
        }
        if s.running().is_some() != ca.next.is_some() {
            return Err(format!("{name}: new CA missing or kept outside a rotation"));
        }
    }
    for (name, l) in &s.leaves {
        if !l.issued.key.matches(l.issued.cert.public_key()) {
            return Err(format!("{name}: leaf key lost"));
        }
    }
    Ok(())
}

/// The ids of every CA certificate the document holds a key for.
fn ca_keys(s: &SetState) -> BTreeSet<String> {
    let mut ids = BTreeSet::new();
    for ca in s.cas.values() {
        for pair in std::iter::once(&ca.current).chain(ca.next.as_ref()) {
            ids.insert(pair.signer.cert.id());
            ids.extend(pair.client_signer.as_ref().map(|c| c.cert.id()));
        }
    }
    ids
}

/// The CA keys a step from `before` to `after` may drop: the old
/// generation at completion, the new one when a revert reaches idle.
fn may_drop(before: &SetState, after: &SetState) -> BTreeSet<String> {
    let retired = |pair: &pki_rotate::set::CaPair| {
        let mut ids = vec![pair.signer.cert.id()];
        ids.extend(pair.client_signer.as_ref().map(|c| c.cert.id()));
        ids
    };
    match (before.step(), after.step()) {
        (SetStep::TrustNew, SetStep::Completed) => before
            .cas
            .values()
            .flat_map(|ca| retired(&ca.current))
            .collect(),
        (SetStep::Reverting, SetStep::Idle) => before
            .cas
            .values()
            .filter_map(|ca| ca.next.as_ref())
            .flat_map(retired)
            .collect(),
        _ => BTreeSet::new(),
    }
}

const TARGETS: [&str; 4] = ["control-plane", "etcd", "node-1", "metrics"];

proptest! {
    #![proptest_config(ProptestConfig { cases: property_cases(), ..ProptestConfig::default() })]

    /// Random start/ack/advance/fail/retry/abort sequences over a directory
    /// store, some dying at a random store write: the store always holds
    /// the document of before the operation or the one it computed,
    /// exactly; no CA key disappears except the generation a completion or
    /// a finished revert retires; and every pair of targets, each holding
    /// what it loaded last, keeps verifying in both directions.
    #[test]
    fn acked_pairs_always_verify_and_no_key_is_lost(ops in proptest::collection::vec(op_and_crash(), 1..24)) {
        let mut r = rng(12);
        let tmp = scratch_dir();
        let s0 = gep18(12);
        {
            let store = FsStore::open_or_create(tmp.path()).unwrap();
            Driver::new(&store).create::<SetEngine>("set", &s0).unwrap();
        }
        let mut held: BTreeMap<String, Loaded> =
            TARGETS.iter().map(|t| (t.to_string(), loaded(&s0, t))).collect();
        let mut now = T0;
        for (op, crash) in ops {
            now += Duration::hours(1);
            let plain = FsStore::open(tmp.path()).unwrap();
            let (before_files, _) = plain.get("set").unwrap().unwrap();
            let s = SetState::from_files(&before_files).unwrap();
            let input = match &op {
                Op::Start(one) => SetInput::Start { reason: "p".into(), imports: vec![], one_at_a_time: *one },
                Op::Ack(i) => SetInput::Ack { target: TARGETS[*i].into(), fingerprint: s.expected_fingerprint(TARGETS[*i]).unwrap() },
                Op::Advance => SetInput::Advance {
 from: None, override_reason: None },
                Op::Fail(i) => SetInput::Fail { target: TARGETS[*i].into(), reason: "f".into() },
                Op::Retry(i) => SetInput::Retry { target: TARGETS[*i].into() },
                Op::Abort => abort(),
            };
            // What the step decides, from the same RNG state as the driver's.
            let mut same = r.clone();
            let expected = SetEngine::step(&s, &input, now, &mut same)
                .map(|o| SetState::to_files(&o.into_document()).unwrap());
            let count = Arc::new(AtomicUsize::new(0));
            let store = match crash {
                Some(k) => failing_store(tmp.path(), k, count.clone()),
                None => FsStore::open(tmp.path()).unwrap(),
            };
            let result = Driver::new(&store).step::<SetEngine, _>("set", &input, now, &mut r);
            drop(store);
            let (files, _) = plain.get("set").unwrap().unwrap();
            let after = SetState::from_files(&files).unwrap();
            let crashed = crash.is_some_and(|k| count.load(Ordering::SeqCst) > k);
            // A commit that fails leaves the old document; one that fails
            // after the switch is live and reports success.
            match (&result, &expected) {
                (Ok(_), Ok(new)) => prop_assert!(files == *new, "{:?}: not the document the step computed", op),
                (Err(e), Ok(_)) => {
                    prop_assert!(crashed && !e.is_conflict(), "{:?} failed without a crash: {}", op, e);
                    prop_assert!(files == before_files, "{:?}: a failed commit changed the store", op);
                }
                (Err(_), Err(_)) => prop_assert!(files == before_files, "{:?}: a refused step changed the store", op),
                (Ok(_), Err(e)) => prop_assert!(false, "{:?}: the driver accepted what the engine refused: {}", op, e),
            }
            keys_intact(&after).map_err(TestCaseError::fail)?;
            let lost: Vec<String> = ca_keys(&s)
                .difference(&ca_keys(&after))
                .filter(|id| !may_drop(&s, &after).contains(*id))
                .cloned()
                .collect();
            prop_assert!(lost.is_empty(), "{:?} lost CA keys {:?}", op, lost);
            // A target that acknowledged (recorded or not: the process died
            // after the agent loaded the files) holds what it was given.
            if let (Op::Ack(i), Ok(_)) = (&op, &expected) {
                held.insert(TARGETS[*i].to_string(), loaded(&s, TARGETS[*i]));
            }
            check_pairs(&held, now).map_err(TestCaseError::fail)?;
        }
    }
}

/// Cases of the property test: each is up to 23 operations on a directory
/// store; 192 keep the test near 35 s in the dev profile on two shared
/// cores. `PKI_SET_PROPERTY_CASES=N` changes it (a longer soak run).
fn property_cases() -> u32 {
    std::env::var("PKI_SET_PROPERTY_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(192)
}

/// A scratch directory for a store: in memory (/dev/shm) where there is
/// one, as a directory store fsyncs every file it writes.
fn scratch_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(d) = tempfile::tempdir_in(shm)
    {
        return d;
    }
    tempfile::tempdir().unwrap()
}

#[test]
fn new_ca_subjects_stay_unique_for_rotations_in_the_same_second() {
    let mut r = rng(30);
    let cn = |c: &Certificate| c.common_name().unwrap();
    // Start, abort, revert and start again, all in one second.
    let s = start(&gep18(30), false, T0, &mut r);
    let first = cn(&s.cas["cluster"].next.as_ref().unwrap().signer.cert);
    let s = step(&s, abort(), T0, &mut r).unwrap();
    let s = advance(&ack_all(&s, T0, &mut r), T0, &mut r).unwrap();
    let s = start(&s, false, T0, &mut r);
    let next = s.cas["cluster"].next.as_ref().unwrap();
    assert_ne!(cn(&next.signer.cert), first);
    assert!(
        cn(&next.signer.cert).starts_with("cluster-"),
        "{}",
        cn(&next.signer.cert)
    );
    // Complete and start again in that second: the new CA and the one in
    // use (and their client CAs) have four different subjects.
    let mut s = s;
    for _ in 0..3 {
        s = advance(&ack_all(&s, T0, &mut r), T0, &mut r).unwrap();
    }
    assert_eq!(s.step(), SetStep::Completed);
    let s = start(&s, false, T0, &mut r);
    let ca = &s.cas["cluster"];
    let next = ca.next.as_ref().unwrap();
    let names: BTreeSet<String> = [
        &ca.current.signer.cert,
        &ca.current.client_signer.as_ref().unwrap().cert,
        &next.signer.cert,
        &next.client_signer.as_ref().unwrap().cert,
    ]
    .into_iter()
    .map(cn)
    .collect();
    assert_eq!(names.len(), 4, "{names:?}");
}

#[test]
fn importing_the_ca_in_use_as_the_new_one_is_refused() {
    let mut r = rng(31);
    let s = gep18(31);
    let current = s.cas["etcd"].current.signer.clone();
    let import = |authority: CertificateAuthority| SetInput::Start {
        reason: "import".into(),
        imports: vec![ImportedCa {
            ca: "etcd".into(),
            authority,
            chain: vec![],
        }],
        one_at_a_time: false,
    };
    let err = step(&s, import(current.clone()), T0, &mut r).unwrap_err();
    assert!(matches!(err, RotateError::SetCaRefused { .. }), "{err}");
    assert!(err.to_string().contains("key of the CA in use"), "{err}");
    // A new certificate on the same key is the same CA for this purpose.
    let cert = pki_core::CertificateParams::new(
        pki_core::Profile::RootCa,
        "etcd-renewed",
        T0,
        Duration::days(700),
    )
    .unwrap()
    .self_signed(&current.key, &mut r)
    .unwrap();
    let renewed = CertificateAuthority::new(cert, current.key.clone()).unwrap();
    let err = step(&s, import(renewed), T0, &mut r).unwrap_err();
    assert!(matches!(err, RotateError::SetCaRefused { .. }), "{err}");
    // After a rotation the split client CA is in use too.
    let mut done = start(&s, false, T0, &mut r);
    for _ in 0..3 {
        done = advance(&ack_all(&done, T0, &mut r), T0, &mut r).unwrap();
    }
    let client = done.cas["etcd"].current.client_signer.clone().unwrap();
    let err = step(&done, import(client), T0, &mut r).unwrap_err();
    assert!(matches!(err, RotateError::SetCaRefused { .. }), "{err}");
}

#[test]
fn set_leaf_dns_names_follow_the_signers_rules() {
    let mut r = rng(32);
    let s = gep18(32);
    for (dns, why) in [
        ("*", "bare wildcard"),
        ("*.com", "top-level domain"),
        ("10.0.0.1", "IP address"),
        ("a\u{7}b.example", "control character"),
    ] {
        let err = step(
            &s,
            SetInput::Issue {
                replace: false,
                name: "x".into(),
                spec: spec("metrics", true, false, dns, "metrics"),
            },
            T0,
            &mut r,
        )
        .unwrap_err();
        assert!(matches!(err, RotateError::SetInvalid(_)), "{dns}: {err}");
        assert!(err.to_string().contains(why), "{dns}: {err}");
    }
    step(
        &s,
        SetInput::Issue {
            replace: false,
            name: "x".into(),
            spec: spec("metrics", true, false, "*.metrics.example", "metrics"),
        },
        T0,
        &mut r,
    )
    .unwrap();
}

#[test]
fn an_override_that_moves_client_certs_early_warns_in_status() {
    let mut r = rng(33);
    let s = start(&gep18(33), false, T0, &mut r);
    // etcd and metrics loaded trust-both; control-plane, which verifies the
    // kubelet's cluster client certificate, did not.
    let s = ["etcd", "metrics", "node-1"]
        .iter()
        .fold(s, |s, t| ack(&s, t, T0, &mut r));
    assert!(s.status(T0).warnings.is_empty());
    assert!(
        !s.rotation
            .as_ref()
            .unwrap()
            .clients_moved
            .contains("cluster")
    );
    let s = step(
        &s,
        SetInput::Advance {
            from: None,
            override_reason: Some("control-plane reloads later".into()),
        },
        T0,
        &mut r,
    )
    .unwrap();
    assert_eq!(s.step(), SetStep::UpdateCerts);
    let status = s.status(T0);
    let o = &status.overrides[0];
    assert_eq!(o.warnings.len(), 1, "{:?}", o.warnings);
    assert!(
        o.warnings[0].contains("CA cluster") && o.warnings[0].contains("control-plane"),
        "{:?}",
        o.warnings
    );
    assert_eq!(status.warnings.len(), 1, "{:?}", status.warnings);
    assert!(status.warnings[0].contains("control-plane"));
    // Once control-plane loads its files (which trust both), it accepts
    // them: the live warning goes, the record stays.
    let s = ack(&s, "control-plane", T0, &mut r);
    let status = s.status(T0);
    assert!(status.warnings.is_empty(), "{:?}", status.warnings);
    assert_eq!(status.overrides[0].warnings.len(), 1);
}

#[test]
fn engine_is_deterministic() {
    let a = start(&gep18(13), false, T0, &mut rng(99));
    let b = start(&gep18(13), false, T0, &mut rng(99));
    assert_eq!(
        SetState::to_files(&a).unwrap(),
        SetState::to_files(&b).unwrap()
    );
}

/// An organisation's root, valid `root_days` from `at`, and under it an
/// intermediate CA (pathLen 0) for the set to import: the k3s custom-CA
/// topology. The intermediate is valid for 700 days, past its root (a
/// cross-sign sets any NotAfter, as an outside CA may), so what bounds its
/// leaves is the root.
fn org_intermediate(
    at: OffsetDateTime,
    root_days: i64,
    cn: &str,
    r: &mut ChaCha20Rng,
) -> (CertificateAuthority, ImportedCa) {
    let root = CertificateAuthority::generate_root(
        "Org Root",
        KeyAlgorithm::EcdsaP256,
        at,
        Duration::days(root_days),
        r,
    )
    .unwrap();
    let key = pki_core::PrivateKey::generate(KeyAlgorithm::EcdsaP256, r).unwrap();
    let template = pki_core::CertificateParams::new(
        pki_core::Profile::IntermediateCa { path_len: Some(0) },
        cn,
        at,
        Duration::days(700),
    )
    .unwrap()
    .self_signed(&key, r)
    .unwrap();
    let cert = pki_core::cross_sign(&template, &root, at + Duration::days(700), r).unwrap();
    assert_eq!(cert.basic_constraints().unwrap().path_len, Some(0));
    let import = ImportedCa {
        ca: "cluster".into(),
        authority: CertificateAuthority::new(cert, key).unwrap(),
        chain: vec![root.cert.clone()],
    };
    (root, import)
}

fn start_with(imports: Vec<ImportedCa>) -> SetInput {
    SetInput::Start {
        reason: "org CA".into(),
        imports,
        one_at_a_time: false,
    }
}

/// The published files of every target, as a client and a server read
/// them: every serving chain (`tls.crt`, leaf first) against every
/// `trust/CA.crt` for that CA, every client chain against every
/// `client-ca/CA.crt`, across the targets of `states` (before and after a
/// step). Independent of the engine's own pre-flight: it reads bytes.
fn published_matrix_holds(states: &[&SetState], at: OffsetDateTime) -> Result<usize, String> {
    let mut servers = Vec::new(); // (who, ca, chain, serving, client)
    let mut trusts = Vec::new(); // (who, ca, bundle)
    let mut client_cas = Vec::new();
    for (i, s) in states.iter().enumerate() {
        for (t, files) in s.target_files().unwrap() {
            for (path, f) in files.iter() {
                let who = format!("{t} (state {i}, {path})");
                if let Some(ca) = path
                    .strip_prefix("trust/")
                    .and_then(|p| p.strip_suffix(".crt"))
                {
                    trusts.push((who, ca.to_string(), Bundle::from_pem(&f.contents).unwrap()));
                } else if let Some(ca) = path
                    .strip_prefix("client-ca/")
                    .and_then(|p| p.strip_suffix(".crt"))
                {
                    client_cas.push((who, ca.to_string(), Bundle::from_pem(&f.contents).unwrap()));
                } else if let Some(name) = path
                    .strip_prefix("certs/")
                    .and_then(|p| p.strip_suffix("/tls.crt"))
                {
                    let leaf = &s.leaves[name];
                    let chain = Certificate::all_from_pem(&f.contents).unwrap();
                    servers.push((who, leaf.spec.clone(), chain));
                }
            }
        }
    }
    let mut checked = 0;
    for (who, spec, chain) in &servers {
        let (leaf, rest) = chain.split_first().unwrap();
        let verifiers = if spec.serving { &trusts } else { &client_cas };
        for (v, ca, bundle) in verifiers.iter().filter(|(_, ca, _)| *ca == spec.ca) {
            let purpose = if spec.serving {
                Purpose::ServerAuth
            } else {
                Purpose::ClientAuth
            };
            verify_chain(leaf, rest, bundle, &VerifyOptions::new(at, purpose))
                .map_err(|e| format!("{v} rejects {who} of CA {ca}: {e}"))?;
            checked += 1;
        }
    }
    Ok(checked)
}

#[test]
fn an_imported_intermediate_under_an_external_root_rotates_with_every_published_pair_verifying() {
    let mut r = rng(40);
    let s0 = gep18(40);
    let t1 = T0 + Duration::days(10);
    // The root ends at T0 + 120 d, the intermediate long after: leaves
    // issued late in the rotation are cut at the root.
    let (root, import) = org_intermediate(t1, 110, "cluster-org", &mut r);
    let intermediate = import.authority.cert.clone();
    let old_cluster = s0.cas["cluster"].current.signer.cert.clone();
    let mut states = vec![(s0.clone(), T0)];
    let mut s = step(&s0, start_with(vec![import]), t1, &mut r).unwrap();
    assert_eq!(s.step(), SetStep::TrustBoth);
    let next = s.cas["cluster"].next.as_ref().unwrap();
    assert_eq!(next.chain, vec![root.cert.clone()]);
    assert!(next.client_signer.is_some(), "the client CA is split off");
    // Trust-both: the bundle for cluster holds the old CA and the external
    // root, never the imported intermediate itself.
    let files = s.target_files().unwrap();
    let trust = Bundle::from_pem(files["node-1"].get("trust/cluster.crt").unwrap()).unwrap();
    assert_eq!(trust.len(), 2);
    assert!(trust.contains(&old_cluster) && trust.contains(&root.cert));
    assert!(!trust.contains(&intermediate));
    states.push((s.clone(), t1));
    let t2 = T0 + Duration::days(70);
    for (ack_at, at, want) in [
        (t1, t2, SetStep::UpdateCerts),
        (t2, t2, SetStep::TrustNew),
        (t2, t2, SetStep::Completed),
    ] {
        s = ack_all(&s, ack_at, &mut r);
        states.push((s.clone(), ack_at));
        s = advance(&s, at, &mut r).unwrap();
        assert_eq!(s.step(), want);
        states.push((s.clone(), at));
    }
    let mut checked = 0;
    for w in states.windows(2) {
        let ((before, _), (after, at)) = (&w[0], &w[1]);
        checked += published_matrix_holds(&[before, after], *at)
            .unwrap_or_else(|e| panic!("{} -> {}: {e}", before.step(), after.step()));
    }
    assert!(checked > 50, "{checked} cells");
    // Completed: the imported CA is the cluster CA, its chain kept; the
    // serving chain is leaf + intermediate; the bundle is the root alone.
    let cluster = &s.cas["cluster"];
    assert_eq!(cluster.current.signer.cert, intermediate);
    assert_eq!(cluster.current.chain, vec![root.cert.clone()]);
    let files = s.target_files().unwrap();
    let trust = Bundle::from_pem(files["node-1"].get("trust/cluster.crt").unwrap()).unwrap();
    assert_eq!(trust.certs().to_vec(), vec![root.cert.clone()]);
    let served = Certificate::all_from_pem(
        files["control-plane"]
            .get("certs/kube-apiserver/tls.crt")
            .unwrap(),
    )
    .unwrap();
    assert_eq!(served.len(), 2, "leaf, then the imported intermediate");
    assert_eq!(served[1], intermediate);
    // Re-issued at T0 + 70 d for 90 days, the leaf is cut at the root's
    // NotAfter (T0 + 120 d), not the intermediate's.
    assert_eq!(served[0].not_after(), root.cert.not_after());
    assert!(served[0].not_after() < intermediate.not_after());
    // Client certificates of the split-off client CA carry no chain.
    let kubelet =
        Certificate::all_from_pem(files["node-1"].get("certs/kubelet/tls.crt").unwrap()).unwrap();
    assert_eq!(kubelet.len(), 1);
    let status = s.status(t2);
    assert_eq!(status.cas["cluster"].current_root, Some(root.cert.id()));
    assert_eq!(status.cas["etcd"].current_root, None);
    // The document keeps the chain through files and Secret data.
    let doc = SetState::to_files(&s).unwrap();
    assert!(doc.get("set/cas/cluster/ca-chain.crt").is_some());
    let back = SetState::from_files(&doc).unwrap();
    assert_eq!(back.cas["cluster"].current.chain, vec![root.cert.clone()]);
    assert_eq!(SetState::to_files(&back).unwrap(), doc);
    let data = SetState::files_to_secret_data(&doc).unwrap();
    let from_secret = SetState::files_from_secret_data(&data).unwrap();
    assert_eq!(
        SetState::to_files(&SetState::from_files(&from_secret).unwrap()).unwrap(),
        doc
    );
}

#[test]
fn an_imported_ca_with_the_chain_in_the_document_mid_rotation_round_trips() {
    let mut r = rng(41);
    let s0 = gep18(41);
    let (root, import) = org_intermediate(T0, 400, "cluster-org", &mut r);
    let s = step(&s0, start_with(vec![import]), T0, &mut r).unwrap();
    let doc = SetState::to_files(&s).unwrap();
    let state: serde_json::Value =
        serde_json::from_slice(doc.get("set/state.json").unwrap()).unwrap();
    assert_eq!(state["cas"]["cluster"]["next"]["chain"], true);
    assert!(state["cas"]["cluster"].get("chain").is_none(), "{state}");
    assert!(
        state["cas"]["etcd"]["next"].get("chain").is_none(),
        "{state}"
    );
    let back = SetState::from_files(&doc).unwrap();
    assert_eq!(
        back.cas["cluster"].next.as_ref().unwrap().chain,
        vec![root.cert]
    );
    // A chain file that is not the CA's chain is corruption, not a root.
    let mut bad = pki_rotate::Files::new();
    for (p, f) in doc.iter() {
        let f = if p == "set/cas/cluster/next-ca-chain.crt" {
            pki_rotate::File::public(s.cas["etcd"].current.signer.cert.to_pem())
        } else {
            f.clone()
        };
        bad.insert(p, f).unwrap();
    }
    let err = SetState::from_files(&bad).unwrap_err();
    assert!(err.to_string().contains("next-ca-chain.crt"), "{err}");
}

#[test]
fn imports_the_engine_cannot_use_are_refused_naming_the_ca() {
    let mut r = rng(42);
    let s = gep18(42);
    let refused = |import: ImportedCa, r: &mut ChaCha20Rng| {
        let err = step(&s, start_with(vec![import]), T0, r).unwrap_err();
        assert!(matches!(err, RotateError::SetCaRefused { .. }), "{err}");
        assert!(err.to_string().contains("\"cluster\""), "{err}");
        err.to_string()
    };
    // No root: the chain stops at the intermediate's issuer's issuer.
    let (_, good) = org_intermediate(T0, 400, "cluster-org", &mut r);
    let mut no_chain = good.clone();
    no_chain.chain.clear();
    let err = refused(no_chain, &mut r);
    assert!(err.contains("root"), "{err}");
    // Not in issuing order: a stranger's root after the real one.
    let stranger = CertificateAuthority::generate_root(
        "stranger",
        KeyAlgorithm::EcdsaP256,
        T0,
        Duration::days(400),
        &mut r,
    )
    .unwrap();
    let mut disordered = good.clone();
    disordered.chain.insert(0, stranger.cert.clone());
    let err = refused(disordered, &mut r);
    assert!(err.contains("certificate 2"), "{err}");
    // A root that ends within a day: the leaves would stop verifying then.
    let (_, short) = org_intermediate(T0, 1, "cluster-org", &mut r);
    let err = refused(short, &mut r);
    assert!(err.contains("more than 24 hours"), "{err}");
    // Its root ends before the 90-day leaves it would sign.
    let (_, month) = org_intermediate(T0, 30, "cluster-org", &mut r);
    let err = refused(month, &mut r);
    assert!(err.contains("not longer than"), "{err}");
    // The chain does not verify at the start: its root is not valid yet.
    let (_, later) = org_intermediate(T0 + Duration::days(5), 400, "cluster-org", &mut r);
    let err = refused(later, &mut r);
    assert!(err.contains("not valid"), "{err}");
    // And the good one starts the rotation.
    let started = step(&s, start_with(vec![good]), T0, &mut r).unwrap();
    assert_eq!(started.step(), SetStep::TrustBoth);
}

#[test]
fn a_set_document_written_before_imported_chains_loads_finishes_and_is_written_the_same() {
    let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/set-v1");
    let mut files = pki_rotate::Files::new();
    fn walk(base: &std::path::Path, dir: &std::path::Path, files: &mut pki_rotate::Files) {
        for e in std::fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                walk(base, &p, files);
                continue;
            }
            let rel = p.strip_prefix(base).unwrap().to_str().unwrap().to_string();
            if rel == "README.md" {
                continue;
            }
            let bytes = std::fs::read(&p).unwrap();
            let f = if rel.ends_with(".key") {
                pki_rotate::File::secret(bytes)
            } else {
                pki_rotate::File::public(bytes)
            };
            files.insert(rel, f).unwrap();
        }
    }
    walk(&base, &base, &mut files);
    let s = SetState::from_files(&files).unwrap();
    assert_eq!(s.step(), SetStep::TrustBoth);
    assert!(s.cas.values().all(|c| c.current.chain.is_empty()));
    assert!(
        s.cas["cluster"]
            .next
            .as_ref()
            .unwrap()
            .client_signer
            .is_some()
    );
    // Written back: the same state and target files, byte for byte.
    let again = SetState::to_files(&s).unwrap();
    for (path, f) in files.iter() {
        assert_eq!(again.get(path), Some(f.contents.as_slice()), "{path}");
    }
    assert_eq!(again.iter().count(), files.iter().count());
    // And its rotation finishes.
    let mut r = rng(43);
    let at = datetime!(2026-03-02 00:00 UTC);
    let mut s = s;
    for _ in 0..3 {
        s = advance(&ack_all(&s, at, &mut r), at, &mut r).unwrap();
    }
    assert_eq!(s.step(), SetStep::Completed);
}

#[test]
fn a_document_whose_target_loads_bundles_of_an_unknown_ca_is_refused() {
    let s = gep18(90);
    let mut files = SetState::to_files(&s).unwrap();
    let state = "set/state.json";
    let mut doc: serde_json::Value = serde_json::from_slice(files.get(state).unwrap()).unwrap();
    let target = doc["targets"]
        .as_object_mut()
        .unwrap()
        .values_mut()
        .next()
        .unwrap();
    target["trusts"] = serde_json::json!(["c luster"]);
    files
        .insert(
            state.to_string(),
            pki_rotate::File::public(serde_json::to_vec(&doc).unwrap()),
        )
        .unwrap();
    let err = SetState::from_files(&files).unwrap_err().to_string();
    assert!(err.contains("unknown CA \"c luster\""), "{err}");
}

#[test]
fn a_document_whose_leaf_names_a_target_it_does_not_have_is_refused() {
    let s = gep18(91);
    let mut files = SetState::to_files(&s).unwrap();
    let state = "set/state.json";
    let mut doc: serde_json::Value = serde_json::from_slice(files.get(state).unwrap()).unwrap();
    let leaf = doc["leaves"].as_object().unwrap().values().next().unwrap();
    let target = leaf["spec"]["target"].as_str().unwrap().to_string();
    doc["targets"].as_object_mut().unwrap().remove(&target);
    files
        .insert(
            state.to_string(),
            pki_rotate::File::public(serde_json::to_vec(&doc).unwrap()),
        )
        .unwrap();
    let err = SetState::from_files(&files).unwrap_err().to_string();
    assert!(
        err.contains(&format!("unknown target \"{target}\"")),
        "{err}"
    );
}
