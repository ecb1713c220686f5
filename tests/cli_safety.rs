//! Every mutating command is safe to rerun, as an operator does after a
//! kill or a lost reply: a rerun of what was done is "nothing to do" (exit
//! 0, nothing written), and a second change within the reload interval is
//! refused by the guard every rotation runs unless forced for a reason.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::cli::{self, ok, openssl_root, refused, tree};

#[test]
fn rotate_to_the_ca_in_use_again_is_nothing_to_do_and_another_within_the_interval_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let d = dir.to_str().unwrap();
    ok(&["init", d, "--cn", "service-ca"]);
    ok(&["issue", d, "web", "--dns", "web.example"]);
    let (y, y_key) = openssl_root(tmp.path(), "Y", 800);
    let (z, z_key) = openssl_root(tmp.path(), "Z", 800);
    ok(&["rotate", d, "--to", &y, "--key-file", &y_key]);
    let before = tree(&dir);
    let out = ok(&["rotate", d, "--to", &y, "--key-file", &y_key]);
    assert!(out.contains("nothing to do"), "{out}");
    assert!(tree(&dir) == before, "a rerun of --to wrote to the store");

    let err = refused(&["rotate", d, "--to", &z, "--key-file", &z_key]);
    assert!(
        err.starts_with("pki: rotation refused: within the reload interval")
            && err.lines().next().unwrap().ends_with("pass --force REASON"),
        "{err}"
    );
    assert!(tree(&dir) == before, "a refused --to wrote to the store");

    ok(&[
        "rotate",
        d,
        "--to",
        &z,
        "--key-file",
        &z_key,
        "--force",
        "Y was issued in error",
    ]);
    let status: serde_json::Value = serde_json::from_str(&ok(&["status", d, "--json"])).unwrap();
    let last = status["history"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["reason"]["kind"], "forced", "{last}");
    assert!(
        last["overridden"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["name"] == "bundle-of-two-rotations-ago"),
        "{last}"
    );
}

#[test]
fn a_foreign_bridge_written_into_the_store_is_refused_and_status_check_says_broken() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let d = dir.to_str().unwrap();
    ok(&["init", d, "--cn", "service-ca"]);
    ok(&["issue", d, "web", "--dns", "web.example"]);
    ok(&["rotate", d, "--force", "yearly drill"]);
    assert!(dir.join("signer/intermediate-ca.crt").exists());
    // Any writer of the store: replace bridge B by another CA certificate,
    // through the store itself so that every digest is consistent.
    let (foreign, _) = openssl_root(tmp.path(), "service-ca", 800);
    let store = pki_rotate::FsStore::open(&dir).unwrap();
    let (mut files, revision) = pki_rotate::Store::get(&store, "signer").unwrap().unwrap();
    files
        .insert(
            "signer/intermediate-ca.crt",
            pki_rotate::File::public(std::fs::read(&foreign).unwrap()),
        )
        .unwrap();
    pki_rotate::Store::put(&store, "signer", Some(&revision), &files).unwrap();
    drop(store);
    let before = tree(&dir);

    let o = cli::pki(&["status", d, "--check"]);
    assert_eq!(o.status.code(), Some(4), "{}", cli::text(&o.stdout));
    assert!(
        cli::text(&o.stdout).contains("bridge B"),
        "{}",
        cli::text(&o.stdout)
    );
    let err = refused(&["issue", d, "api", "--dns", "api.example"]);
    assert!(
        err.contains("bridge B") && err.contains("inconsistent"),
        "{err}"
    );
    let err = refused(&["rotate", d]);
    assert!(err.contains("bridge B"), "{err}");
    assert!(tree(&dir) == before, "a refused command wrote to the store");
}

#[test]
fn repeated_and_racing_overrides_advance_a_set_once() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("set");
    let d = dir.to_str().unwrap();
    const T: &str = "2026-03-01T00:00:00Z";
    ok(&[
        "set",
        "init",
        d,
        "--ca",
        "cluster:serving+client",
        "--now",
        "2026-01-01T00:00:00Z",
    ]);
    ok(&[
        "set",
        "issue",
        d,
        "api",
        "--ca",
        "cluster",
        "--serving",
        "--dns",
        "api.example",
        "--target",
        "t1",
        "--now",
        "2026-01-01T00:00:00Z",
    ]);
    ok(&["set", "target", d, "t2", "--trusts", "cluster"]);
    ok(&["set", "start", d, "--reason", "yearly", "--now", T]);
    // Three identical commands in a row, then eight at once: t1 and t2 never
    // acknowledged anything, and the override passes one gate only.
    for _ in 0..3 {
        ok(&["set", "advance", d, "--override", "t1 down", "--now", T]);
    }
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let d = d.to_string();
            std::thread::spawn(move || {
                std::process::Command::new(env!("CARGO_BIN_EXE_pki"))
                    .args(["set", "advance", &d, "--override", "t1 down", "--now", T])
                    .output()
                    .unwrap()
            })
        })
        .collect();
    for h in handles {
        let o = h.join().unwrap();
        assert!(o.status.success(), "{}", cli::text(&o.stderr));
    }
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["set", "status", d, "--json", "--now", T])).unwrap();
    assert_eq!(status["step"], "update-certs", "{status}");
    assert_eq!(status["overrides"].as_array().unwrap().len(), 1, "{status}");
    assert!(
        status["cas"]["cluster"]["next"].is_string(),
        "the old CA keys are kept until completed: {status}"
    );
    let out = ok(&["set", "advance", d, "--override", "t1 down", "--now", T]);
    assert!(out.contains("nothing to do"), "{out}");
}
