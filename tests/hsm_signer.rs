//! The signer with its CA keys in a real PKCS#11 token (SoftHSM2, a token
//! of each test's own), driven through the `pki` binary and read back with
//! OpenSC's `pkcs11-tool`, an independent reader: every CA private key is
//! sensitive and never extractable, the token holds exactly the key
//! objects the document names after every step (an orphan or a missing key
//! fails), OpenSSL trusts every serving chain across the rotations, and a
//! `kill -9` anywhere in a forced rotation leaves what the rerun completes.
//! The book's token commands run here as written
//! (docs/book/src/hardware-keys.md).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_core::{Bundle, Certificate};
use std::collections::BTreeSet;
use support::hsm::{Hsm, RandomKills, quickest, text};
use support::hsm_operator::Operator;
use support::openssl::{Verdict, verify};
use support::softhsm::LABEL;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

const DNS: &str = "web.ns.svc";
const T0: &str = "2026-01-01T00:00:00Z";

fn at(time: &str) -> OffsetDateTime {
    OffsetDateTime::parse(time, &Rfc3339).unwrap()
}

/// OpenSSL (`-x509_strict`) trusts the serving `chain` under `bundle` at `time`.
fn assert_trusted(bundle: &[u8], chain: &[u8], time: &str, context: &str) {
    let bundle = Bundle::from_pem(bundle).unwrap();
    let chain = Certificate::all_from_pem(chain).unwrap();
    assert_eq!(
        verify(&bundle, &chain, at(time), "sslserver"),
        Ok(Verdict::Verified),
        "{context}"
    );
}

#[test]
fn a_signer_keeps_its_ca_keys_in_the_token_through_rotations() {
    let hsm = Hsm::new();
    let dir = hsm.store();
    let key_store = format!("pkcs11:token={LABEL}");
    hsm.ok(&["init", dir, "--key-store", &key_store, "--now", T0]);
    hsm.ok(&["issue", dir, "web", "--dns", DNS, "--now", T0]);
    assert!(!hsm.store.join("signer/tls.key").exists());
    let first_key = hsm.named_ids();
    assert_eq!(hsm.private_key_ids(), first_key);
    assert_trusted(
        &hsm.read("ca-bundle.crt"),
        &hsm.read("certs/web/tls.crt"),
        T0,
        "init",
    );

    // A forced rotation: the new key is made in the token, the old one
    // stays while its CA is trusted, and trust holds both ways.
    let (old_bundle, old_chain) = (hsm.read("ca-bundle.crt"), hsm.read("certs/web/tls.crt"));
    let t1 = "2026-02-01T00:00:00Z";
    let out = hsm.ok(&["rotate", dir, "--force", "r1", "--now", t1]);
    assert!(out.contains("recorded the new CA key"), "{out}");
    assert!(out.contains("rotated CA"), "{out}");
    assert_eq!(hsm.private_key_ids().len(), 2);
    hsm.assert_token_matches("after a forced rotation");
    let (new_bundle, new_chain) = (hsm.read("ca-bundle.crt"), hsm.read("certs/web/tls.crt"));
    assert_trusted(&old_bundle, &new_chain, t1, "old bundle, new chain");
    assert_trusted(&new_bundle, &old_chain, t1, "new bundle, old chain");
    assert_trusted(&new_bundle, &new_chain, t1, "new bundle, new chain");

    // Once the previous CA's trust ends, its key is destroyed, in one
    // step (the step that rotates again, as the CA is due by then).
    let state: serde_json::Value = serde_json::from_slice(&hsm.read("pki-state.json")).unwrap();
    let until = state["previous"]["trusted_until"]
        .as_str()
        .unwrap()
        .to_string();
    let out = hsm.ok(&["rotate", dir, "--now", &until]);
    assert!(out.contains("retired the CA key"), "{out}");
    assert!(out.contains("destroyed the CA key"), "{out}");
    assert!(hsm.private_key_ids().is_disjoint(&first_key), "{out}");
    hsm.assert_token_matches("after the previous CA's trust ended");

    // A compromise distrusts the previous CA at once: its key goes too.
    let out = hsm.ok(&[
        "rotate",
        dir,
        "--force",
        "leaked",
        "--compromised",
        "--now",
        &until,
    ]);
    assert!(out.contains("destroyed the CA key"), "{out}");
    assert_eq!(hsm.private_key_ids().len(), 1, "{out}");
    hsm.assert_token_matches("after a compromise");
    assert_trusted(
        &hsm.read("ca-bundle.crt"),
        &hsm.read("certs/web/tls.crt"),
        &until,
        "after the compromise",
    );
}

#[test]
fn without_the_token_a_step_that_signs_is_refused_and_writes_nothing() {
    let hsm = Hsm::new();
    let dir = hsm.store();
    let key_store = format!("pkcs11:token={LABEL}");
    hsm.ok(&["init", dir, "--key-store", &key_store, "--now", T0]);
    let before = support::cli::tree(&hsm.store);
    for args in [
        vec!["issue", dir, "api", "--dns", "api.ns.svc", "--now", T0],
        vec!["rotate", dir, "--force", "r", "--now", T0],
    ] {
        let o = hsm.bare(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("PKI_PKCS11_MODULE"), "{err}");
        assert_eq!(support::cli::tree(&hsm.store), before, "{args:?} wrote");
    }
    // A wrong PIN: one line, nothing written.
    let wrong = hsm.store.with_file_name("wrong-pin");
    std::fs::write(&wrong, "0000").unwrap();
    let o = hsm
        .command(&["issue", dir, "api", "--dns", "api.ns.svc", "--now", T0])
        .env("PKI_PKCS11_PIN_FILE", &wrong)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).to_lowercase().contains("pin"), "{}", text(&o));
    assert_eq!(support::cli::tree(&hsm.store), before);
    hsm.assert_token_matches("after the refusals");
}

/// Forced rotations killed (SIGKILL) at random points, each followed by
/// the same command run to completion: after every rerun the token holds
/// exactly the keys the document names and the leaf's chain verifies.
#[test]
fn a_forced_rotation_killed_anywhere_leaves_no_orphan_after_its_rerun() {
    const KILLS: usize = 50;
    let hsm = Hsm::new();
    let dir = hsm.store();
    let key_store = format!("pkcs11:token={LABEL}");
    hsm.ok(&["init", dir, "--key-store", &key_store, "--now", T0]);
    hsm.ok(&["issue", dir, "web", "--dns", DNS, "--now", T0]);
    let now = "2026-04-11T00:00:00Z";
    let rotate = |reason: &str| {
        [
            "rotate",
            dir,
            "--force",
            reason,
            "--allow-trust-break",
            "kill -9 test",
            "--now",
            now,
        ]
        .map(str::to_string)
    };
    let mut kills = RandomKills::new(quickest(3, |run| {
        hsm.ok(&rotate(&format!("measure {run}"))
            .each_ref()
            .map(String::as_str));
    }));
    for run in 0..KILLS {
        let reason = format!("crash {run}");
        let args = rotate(&reason);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (token_file, delay) = kills.run(&hsm, &args);
        hsm.assert_no_orphan(&format!("run {run}, killed after {delay:?}"));
        let out = hsm.ok_after_kill_with(&args, &token_file);
        let context = format!("run {run}, killed after {delay:?}: rerun said {out}");
        hsm.assert_token_matches(&context);
        let state: serde_json::Value = serde_json::from_slice(&hsm.read("pki-state.json")).unwrap();
        assert!(state["token_keys"]["pending"].is_null(), "{context}");
        assert!(state["token_keys"]["retiring"].is_null(), "{context}");
        assert_eq!(
            state["history"].as_array().unwrap().last().unwrap()["reason"]["reason"],
            reason.as_str(),
            "{context}"
        );
        if run % 10 == 0 {
            assert_trusted(
                &hsm.read("ca-bundle.crt"),
                &hsm.read("certs/web/tls.crt"),
                now,
                &context,
            );
        }
    }
    kills.assert_most_landed(KILLS, "the rotation");
}

/// `pki init --import --key-uri`: the CA's key is the operator's object in
/// the token (made here with `pkcs11-tool`, its certificate issued by an
/// OpenSSL root for that public key): pki signs leaves with it, OpenSSL
/// trusts them, and the object is never destroyed. A supplied CA whose key
/// is in a file is refused in its place, nothing written; one whose key is
/// the operator's next object in the token replaces it (`rotate --to
/// --key-uri`), every leaf re-issued and trusted, both objects kept.
#[test]
fn an_imported_ca_signs_with_the_operators_token_key_and_never_destroys_it() {
    let hsm = Hsm::new();
    let operator = Operator::new(&hsm);
    let uri = operator.token_ca("ca", "operator-ca", "0a0b");
    let dir = hsm.store();
    let (ca, root) = (operator.path("ca.crt"), operator.path("root.crt"));
    hsm.ok(&[
        "init",
        dir,
        "--import",
        &ca,
        "--chain",
        &root,
        "--key-uri",
        &uri,
    ]);
    assert!(!hsm.store.join("signer/tls.key").exists());
    hsm.ok(&["issue", dir, "web", "--dns", DNS]);
    let now = OffsetDateTime::now_utc().format(&Rfc3339).unwrap();
    let old_chain = hsm.read("certs/web/tls.crt");
    assert_trusted(&hsm.read("ca-bundle.crt"), &old_chain, &now, "imported");
    hsm.assert_token_matches("after the import");

    // A supplied CA whose key is in a file is refused: nothing written.
    operator.file_ca("next");
    let before = support::cli::tree(&hsm.store);
    let o = hsm
        .command(&["rotate", dir, "--to", &operator.path("next.pem")])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("--key-uri"), "{}", text(&o));
    assert_eq!(support::cli::tree(&hsm.store), before);
    hsm.ok(&["rotate", dir]);
    assert_eq!(hsm.private_key_ids(), BTreeSet::from(["0a0b".to_string()]));
    hsm.assert_token_matches("after the refusal");

    // The operator's next key in the token: validated, then rotated to.
    let next_uri = operator.token_ca("next-token", "operator-ca-2", "0c0d");
    let next = operator.path("next-token.crt");
    let to = ["--to", &next, "--chain", &root, "--key-uri", &next_uri];
    hsm.ok(&[&["validate", dir][..], &to[..]].concat());
    let out = hsm.ok(&[&["rotate", dir][..], &to[..]].concat());
    assert!(out.contains("rotated CA"), "{out}");
    assert!(!hsm.store.join("signer/tls.key").exists());
    let bundle = hsm.read("ca-bundle.crt");
    let new_chain = hsm.read("certs/web/tls.crt");
    assert_ne!(new_chain, old_chain, "web re-issued");
    // The operator's second CA begins when OpenSSL made it, seconds after
    // the first check's time: verify from a time after it.
    let now = OffsetDateTime::now_utc().format(&Rfc3339).unwrap();
    assert_trusted(&bundle, &new_chain, &now, "after the supplied token CA");
    assert_trusted(&bundle, &old_chain, &now, "the chain of before");
    // Both objects are the operator's: neither is destroyed.
    let both = BTreeSet::from(["0a0b".to_string(), "0c0d".to_string()]);
    assert_eq!(hsm.private_key_ids(), both);
    hsm.ok(&["issue", dir, "api", "--dns", "api.ns.svc"]);
    assert_trusted(
        &bundle,
        &hsm.read("certs/api/tls.crt"),
        &now,
        "signed by 0c0d",
    );
    assert_eq!(hsm.private_key_ids(), both);
}

/// The token commands of docs/book/src/hardware-keys.md, run as written in
/// the operator's directory (its root, and `ca.crt` and `next.crt` issued
/// for its token objects `ext-ca` and `ext-ca-2`), with this test's token
/// for the chapter's: no store holds a private key, the signer's rotation
/// keeps the old key beside the new, the imported CA's objects are both
/// kept, and the token holds exactly the keys the four documents name and
/// the operator's two.
#[test]
fn the_books_token_sequence_runs_as_written() {
    let hsm = Hsm::new();
    let operator = Operator::new(&hsm);
    operator.token_ca("ca", "ext-ca", "0a0b");
    operator.token_ca("next", "ext-ca-2", "0c0d");
    let script = support::book::sh_block("hardware-keys.md", "# CA keys in a PKCS#11 token");
    let module = hsm.token.module.to_str().unwrap();
    let script = support::book::substituted(
        &script,
        &[
            ("/usr/lib/softhsm/libsofthsm2.so", module),
            ("/run/hsm-pin", hsm.pin_file.to_str().unwrap()),
            ("token=ops-hsm", &format!("token={LABEL}")),
        ],
    );
    let o = support::book::command(&script, &operator.work)
        .env("SOFTHSM2_CONF", &hsm.token.conf)
        .output()
        .unwrap();
    support::book::ran(&script, o);

    let stores = ["ca", "ext", "cas", "sa"].map(|name| operator.work.join(name));
    let mut expected = BTreeSet::from(["0a0b".to_string(), "0c0d".to_string()]);
    for store in &stores {
        let named = support::hsm::named_ids_in(store);
        assert!(!named.is_empty(), "{}", store.display());
        for (file, content) in support::cli::tree(store) {
            let content = String::from_utf8_lossy(&content);
            assert!(
                !content.contains("PRIVATE KEY") && !content.starts_with("PKISEAL"),
                "{}/{file} holds a private key",
                store.display()
            );
        }
        if store.ends_with("ext") {
            // The operator's objects, by the labels the chapter gives:
            // the supplied one named, the replaced one forgotten (and
            // kept in the token: pki destroys no object it did not make).
            assert_eq!(named, BTreeSet::from(["object=ext-ca-2".to_string()]));
        } else {
            expected.extend(named);
        }
    }
    let signer = support::hsm::named_ids_in(&stores[0]);
    assert_eq!(signer.len(), 2, "the old CA key kept while trusted");
    assert_eq!(hsm.private_key_ids(), expected);
}
