//! A CA set (GEP-18's gated steps) with its CA keys in a real PKCS#11 token
//! (SoftHSM2), driven through the `pki` binary and read back with OpenSC's
//! `pkcs11-tool`: the token holds exactly the key objects the set's state
//! names after every step of a rotation, the old keys are destroyed at
//! completion and the new ones at the end of a revert, OpenSSL trusts the
//! targets' chains, and a `kill -9` anywhere in `set start` or `set
//! advance` leaves what the rerun completes, no orphan.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_core::{Bundle, Certificate};
use support::hsm::{Hsm, RandomKills, quickest};
use support::openssl::{Verdict, verify};
use support::softhsm::LABEL;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-03-01T00:00:00Z";

/// A set of two CAs (one signing serving and client certificates, which a
/// rotation splits in two) and two targets, its keys in the token.
fn set_up(hsm: &Hsm) {
    let dir = hsm.store();
    let key_store = format!("pkcs11:token={LABEL}");
    hsm.ok(&[
        "set",
        "init",
        dir,
        "--ca",
        "cluster:serving+client",
        "--ca",
        "metrics:serving",
        "--key-store",
        &key_store,
        "--now",
        T0,
    ]);
    hsm.ok(&[
        "set",
        "issue",
        dir,
        "kube-apiserver",
        "--ca",
        "cluster",
        "--serving",
        "--dns",
        "api.example",
        "--target",
        "control-plane",
        "--now",
        T0,
    ]);
    hsm.ok(&[
        "set", "issue", dir, "kubelet", "--ca", "cluster", "--client", "--target", "node-1",
        "--now", T0,
    ]);
    hsm.ok(&[
        "set", "target", dir, "node-1", "--trusts", "cluster", "--now", T0,
    ]);
    hsm.ok(&[
        "set",
        "target",
        dir,
        "control-plane",
        "--client-ca",
        "cluster",
        "--now",
        T0,
    ]);
}

fn ack(hsm: &Hsm, target: &str) {
    let dir = hsm.store();
    let files = hsm.store.join("targets").join(target);
    let fp = hsm.ok(&["fingerprint", files.to_str().unwrap()]);
    hsm.ok(&[
        "set",
        "ack",
        dir,
        target,
        "--fingerprint",
        fp.trim(),
        "--now",
        T1,
    ]);
}

/// The set's step after a kill, once SoftHSM2's token file is whole
/// (see `Hsm::ok_after_kill_with`).
fn step_after_kill(hsm: &Hsm, saved: &[u8]) -> String {
    hsm.ok_after_kill_with(&["set", "status", hsm.store(), "--now", T1], saved);
    step(hsm)
}

fn step(hsm: &Hsm) -> String {
    let status = hsm.ok(&["set", "status", hsm.store(), "--json", "--now", T1]);
    let status: serde_json::Value = serde_json::from_str(&status).unwrap();
    status["step"].as_str().unwrap().to_string()
}

/// OpenSSL trusts the API server's chain under node-1's bundle.
fn assert_node_trusts_api_server(hsm: &Hsm, context: &str) {
    let target = hsm.store.join("targets");
    let bundle = std::fs::read(target.join("node-1/trust/cluster.crt")).unwrap();
    let chain = std::fs::read(target.join("control-plane/certs/kube-apiserver/tls.crt")).unwrap();
    let at = OffsetDateTime::parse(T1, &Rfc3339).unwrap();
    assert_eq!(
        verify(
            &Bundle::from_pem(&bundle).unwrap(),
            &Certificate::all_from_pem(&chain).unwrap(),
            at,
            "sslserver"
        ),
        Ok(Verdict::Verified),
        "{context}"
    );
}

/// Acks every target, then advances, until the rotation completed (the
/// last acks complete it on their own), checking the token and the trust
/// after each step.
fn rotate_to_completion(hsm: &Hsm, mut advance: impl FnMut(&Hsm)) {
    for _ in 0..6 {
        if step(hsm) == "completed" {
            return;
        }
        ack(hsm, "control-plane");
        ack(hsm, "node-1");
        if step(hsm) != "completed" {
            advance(hsm);
        }
        hsm.assert_token_matches(&format!("after advancing to {}", step(hsm)));
        assert_node_trusts_api_server(hsm, &step(hsm));
    }
    panic!("the rotation did not complete: {}", step(hsm));
}

#[test]
fn a_set_rotates_its_token_keys_through_every_step() {
    let hsm = Hsm::new();
    set_up(&hsm);
    let dir = hsm.store();
    assert!(!hsm.store.join("set/cas/cluster/ca.key").exists());
    let first = hsm.named_ids();
    assert_eq!(first.len(), 2, "one key per CA");
    hsm.assert_token_matches("after init");
    assert_node_trusts_api_server(&hsm, "after init");

    let out = hsm.ok(&["set", "start", dir, "--reason", "yearly", "--now", T1]);
    assert!(out.contains("recorded, to make in the token"), "{out}");
    // cluster's new CA and its new client CA, metrics' new CA.
    assert_eq!(hsm.private_key_ids().len(), 5, "{out}");
    hsm.assert_token_matches("after start");
    rotate_to_completion(&hsm, |hsm| {
        hsm.ok(&["set", "advance", hsm.store(), "--now", T1]);
    });
    let now = hsm.private_key_ids();
    assert_eq!(now.len(), 3, "the old keys are destroyed at completion");
    assert!(now.is_disjoint(&first));

    // A start reverted: its new keys go, the current ones stay.
    hsm.ok(&["set", "start", dir, "--reason", "again", "--now", T1]);
    assert_eq!(hsm.private_key_ids().len(), 6);
    hsm.ok(&["set", "abort", dir, "--now", T1]);
    for _ in 0..6 {
        if ["completed", "idle"].contains(&step(&hsm).as_str()) {
            break;
        }
        ack(&hsm, "control-plane");
        ack(&hsm, "node-1");
        if !["completed", "idle"].contains(&step(&hsm).as_str()) {
            hsm.ok(&["set", "advance", dir, "--now", T1]);
        }
    }
    assert_eq!(hsm.private_key_ids(), now);
    hsm.assert_token_matches("after the revert");
}

/// `set start` and each `set advance` killed (SIGKILL) at random points,
/// each followed by the same command run to completion: after every
/// rerun the token holds exactly the keys the state names.
#[test]
fn set_steps_killed_anywhere_leave_no_orphan_after_their_rerun() {
    const KILLS: usize = 50;
    let hsm = Hsm::new();
    set_up(&hsm);
    let dir = hsm.store().to_string();
    // Kills drawn from about three times what a command that reads the set
    // takes (a start or an advance takes about that), shrinking as they
    // miss.
    let reading = quickest(3, |_| {
        hsm.ok(&["set", "status", &dir, "--now", T1]);
    });
    let kills = std::cell::RefCell::new(RandomKills::new(reading * 2));
    let mut rotation = 0;
    let kill_then_rerun = |hsm: &Hsm, args: &[&str]| {
        let before = step(hsm);
        let (saved, delay) = kills.borrow_mut().run(hsm, args);
        let context = format!("{args:?} killed after {delay:?}");
        hsm.assert_no_orphan(&context);
        // Run again unless the killed command's step landed (a start or
        // an advance is refused once done: the set moved on); then the
        // next command (an ack here) is what finishes its upkeep.
        if step_after_kill(hsm, &saved) == before {
            hsm.ok_after_kill_with(args, &saved);
        } else {
            ack(hsm, "control-plane");
        }
        hsm.assert_token_matches(&context);
    };
    while kills.borrow().killed < KILLS && rotation < 40 {
        rotation += 1;
        let reason = format!("rotation {rotation}");
        kill_then_rerun(
            &hsm,
            &["set", "start", &dir, "--reason", &reason, "--now", T1],
        );
        rotate_to_completion(&hsm, |hsm| {
            kill_then_rerun(hsm, &["set", "advance", &dir, "--now", T1]);
        });
    }
    kills
        .borrow()
        .assert_most_landed(KILLS, &format!("the steps of {rotation} rotations"));
}
