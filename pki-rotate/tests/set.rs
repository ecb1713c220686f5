#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The CA set engine's state machine (StarlingX `kube-rootca-update`,
//! GEP-18): each step only from its predecessor, gates on acknowledgements,
//! failure and retry, one target at a time, the 24 h rule and the
//! pre-flight matrix.

use pki_core::{Bundle, Certificate, CertificateAuthority, KeyAlgorithm};
mod support;

use pki_rotate::Document as _;
use pki_rotate::set::{ImportedCa, fingerprint, material};
use pki_rotate::{Engine, SetEngine, SetError, SetInput, SetState, SetStep};
use std::collections::BTreeSet;
use time::Duration;

use support::set::*;

#[test]
fn full_rotation_moves_client_certs_then_serving_certs_then_trust() {
    let mut r = rng(1);
    let s0 = gep18(1);
    let old_cluster = s0.cas()["cluster"].current.signer.cert.clone();
    let t1 = T0 + Duration::days(30);
    let s = start(&s0, false, t1, &mut r);
    assert_eq!(s.step(), SetStep::TrustBoth);
    let next = s.cas()["cluster"].next.as_ref().unwrap();
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
    let err = set_error(advance(&s, t1, &mut r));
    assert!(matches!(err, SetError::StepBlocked { .. }), "{err}");
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
    assert_eq!(s.rotation().unwrap().completed_at(), Some(t2));
    assert!(s.cas().values().all(|c| c.next.is_none()));
    assert_eq!(s.cas()["cluster"].current.signer.cert, next.signer.cert);
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
        let err = set_error(step(&s, input, T0, &mut r));
        assert!(
            matches!(
                err,
                SetError::WrongStep {
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
    let err = set_error(step(
        &s,
        SetInput::Ack {
            target: "node-1".into(),
            fingerprint: fp.clone(),
        },
        T0,
        &mut r,
    ));
    assert!(matches!(err, SetError::TargetFailed { .. }), "{err}");
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
    let err = set_error(advance(&s, T0, &mut r));
    assert!(matches!(err, SetError::StepBlocked { .. }), "{err}");
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
    let err = set_error(step(
        &s,
        SetInput::Ack {
            target: "node-1".into(),
            fingerprint: old_fp,
        },
        T0,
        &mut r,
    ));
    assert!(matches!(err, SetError::StaleFingerprint { .. }), "{err}");
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
    let err = set_error(step(
        &s,
        SetInput::Ack {
            target: "nobody".into(),
            fingerprint: "x".into(),
        },
        T0,
        &mut r,
    ));
    assert!(matches!(err, SetError::UnknownTarget(_)), "{err}");
}

#[test]
fn one_at_a_time_updates_serving_targets_in_turn() {
    let mut r = rng(5);
    let s = start(&gep18(5), true, T0, &mut r);
    let s = ack_all(&s, T0, &mut r);
    let s = advance(&s, T0, &mut r).unwrap();
    let updated = |s: &SetState| s.rotation().unwrap().updated_targets().clone();
    // Serving targets: control-plane, etcd, metrics (name order).
    assert_eq!(updated(&s), set_of(&["control-plane"]));
    assert!(!s.leaves()["etcd-server"].on_next);
    let s = ack(&s, "etcd", T0, &mut r);
    assert_eq!(
        updated(&s),
        set_of(&["control-plane"]),
        "waits for control-plane"
    );
    let s = ack(&s, "control-plane", T0, &mut r);
    assert_eq!(updated(&s), set_of(&["control-plane", "etcd"]));
    assert!(s.leaves()["etcd-server"].on_next);
    let err = advance(&s, T0, &mut r).unwrap_err();
    assert!(err.to_string().contains("not yet updated"), "{err}");
    let s = ack_all(&s, T0, &mut r);
    assert_eq!(updated(&s), set_of(&["control-plane", "etcd", "metrics"]));
    let s = advance(&s, T0, &mut r).unwrap();
    assert_eq!(s.step(), SetStep::TrustNew);
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
    let err = set_error(step(
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
    ));
    assert!(matches!(err, SetError::CaRefused { .. }), "{err}");
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
    assert_eq!(
        s.cas()["etcd"].next.as_ref().unwrap().signer.cert,
        good.cert
    );
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
    // to the new client CA while the control plane still held its idle
    // client-ca bundle, the control plane would reject it. Only an
    // override moves it that early; the pre-flight names the break.
    let mut r = rng(8);
    // Every target holds its idle files, acknowledged.
    let s0 = ack_all(&gep18(8), T0, &mut r);
    let started = start(&s0, false, T0, &mut r);
    // The engine's own transition is green.
    material::preflight(&s0, &started, T0).unwrap();
    let s = ["etcd", "metrics", "node-1"]
        .iter()
        .fold(started, |s, t| ack(&s, t, T0, &mut r));
    assert!(!s.leaves()["kubelet"].on_next, "the gate holds the kubelet");
    let moved = step(
        &s,
        SetInput::Advance {
            from: None,
            override_reason: Some("control-plane is being replaced".into()),
        },
        T0,
        &mut r,
    )
    .unwrap();
    assert!(moved.leaves()["kubelet"].on_next);
    let err = material::preflight(&s0, &moved, T0).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("control-plane") && text.contains("kubelet"),
        "{text}"
    );
    assert!(text.contains("client-ca/cluster.crt"), "{text}");
    let record = &moved.rotation().unwrap().overrides()[0];
    assert!(
        record
            .red_cells
            .iter()
            .any(|c| c.contains("control-plane") && c.contains("kubelet")),
        "{:?}",
        record.red_cells
    );
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
        target("t", Some(&["front-proxy"]), None),
        target("t", None, Some(&["unknown"])),
    ];
    for input in bad {
        let err = set_error(step(&s, input.clone(), T0, &mut r));
        assert!(
            matches!(err, SetError::UnknownCa(_) | SetError::Invalid(_)),
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
    for t in s.targets().keys() {
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

#[test]
fn new_ca_subjects_stay_unique_for_rotations_in_the_same_second() {
    let mut r = rng(30);
    let cn = |c: &Certificate| c.common_name().unwrap();
    // Start, abort, revert and start again, all in one second.
    let s = start(&gep18(30), false, T0, &mut r);
    let first = cn(&s.cas()["cluster"].next.as_ref().unwrap().signer.cert);
    let s = step(&s, abort(), T0, &mut r).unwrap();
    let s = advance(&ack_all(&s, T0, &mut r), T0, &mut r).unwrap();
    let s = start(&s, false, T0, &mut r);
    let next = s.cas()["cluster"].next.as_ref().unwrap();
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
    let ca = &s.cas()["cluster"];
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
fn set_leaf_dns_names_follow_the_signers_rules() {
    let mut r = rng(32);
    let s = gep18(32);
    for (dns, why) in [
        ("*", "bare wildcard"),
        ("*.com", "top-level domain"),
        ("10.0.0.1", "IP address"),
        ("a\u{7}b.example", "control character"),
    ] {
        let err = set_error(step(
            &s,
            SetInput::Issue {
                replace: false,
                name: "x".into(),
                spec: spec("metrics", true, false, dns, "metrics"),
            },
            T0,
            &mut r,
        ));
        assert!(matches!(err, SetError::Invalid(_)), "{dns}: {err}");
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
        !s.rotation()
            .as_ref()
            .unwrap()
            .clients_moved()
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
