//! The key ring with its signing keys in a real PKCS#11 token (SoftHSM2, a
//! token of each test's own), driven through the `pki` binary and read
//! back with OpenSC's `pkcs11-tool`, an independent reader: every key
//! object is sensitive and never extractable, the token holds exactly the
//! key objects the document names after every step (an orphan or a
//! missing key fails), no private key file is written, tokens signed in
//! the token verify with `pki keys verify` and with PyJWT (an independent
//! JOSE implementation) across rotations and until the grace ends, a
//! refused command writes nothing, a `kill -9` anywhere in a forced
//! rotation leaves what the rerun completes, and on etcd as on a directory
//! the store keeps only the keys' URIs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::process::{Command, Output};
use support::hsm::{Hsm, RandomKills, quickest, text};
use support::softhsm::LABEL;

// 2026-01-01T00:00:00Z: every ring here is created then.
const T0: &str = "2026-01-01T00:00:00Z";
const T0_UNIX: i64 = 1_767_225_600;
const HOUR: i64 = 3600;
const DAY: i64 = 86_400;

fn at(seconds_after_t0: i64) -> String {
    let t = time::OffsetDateTime::from_unix_timestamp(T0_UNIX + seconds_after_t0).unwrap();
    pki_core::datetime::rfc3339(t)
}

fn key_store() -> String {
    format!("pkcs11:token={LABEL}")
}

/// A file beside the store holding `contents`.
fn write(hsm: &Hsm, name: &str, contents: &str) -> String {
    let path = hsm.store.with_file_name(name);
    std::fs::write(&path, contents).unwrap();
    path.display().to_string()
}

/// `pki keys sign` of claims expiring `lifetime` seconds after `now`
/// (seconds after T0): the token, written to a file beside the store.
fn sign(hsm: &Hsm, name: &str, now: i64, lifetime: i64) -> String {
    let claims = format!(
        r#"{{"iss":"pki-test","sub":"{name}","exp":{}}}"#,
        T0_UNIX + now + lifetime
    );
    let claims = write(hsm, &format!("{name}.json"), &claims);
    let out = hsm.ok(&[
        "keys",
        "sign",
        hsm.store(),
        "--claims",
        &claims,
        "--now",
        &at(now),
    ]);
    assert_eq!(out.lines().count(), 1, "one line: {out}");
    write(hsm, &format!("{name}.jwt"), out.trim_end())
}

/// `pki keys verify`'s verdict on the token in `token` at `now`.
fn pki_accepts(hsm: &Hsm, token: &str, now: i64) -> bool {
    let o = hsm
        .bare(&[
            "keys",
            "verify",
            hsm.store(),
            "--token",
            token,
            "--now",
            &at(now),
        ])
        .output()
        .unwrap();
    match o.status.code() {
        Some(0) => true,
        Some(1) => false,
        other => panic!("keys verify exited {other:?}: {}", text(&o)),
    }
}

/// PyJWT's verdict on the token in `token` against the store's published
/// `keys/jwks.json` at `now` (seconds after T0), after it recomputed every
/// `kid` there as an RFC 7638 thumbprint.
fn pyjwt_accepts(hsm: &Hsm, token: &str, now: i64) -> bool {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/jose/verify_with_pyjwt.py");
    let o: Output = Command::new(support::cli::python_with_pyjwt())
        .arg(script)
        .arg(hsm.store.join("keys/jwks.json"))
        .arg(token)
        .arg((T0_UNIX + now).to_string())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("Traceback"), "the PyJWT check failed: {err}");
    assert_ne!(o.status.code(), Some(2), "{err}");
    o.status.success()
}

/// Both verifiers agree on the token, and their verdict is `accepted`.
fn assert_verdict(hsm: &Hsm, token: &str, now: i64, accepted: bool, context: &str) {
    assert_eq!(
        pki_accepts(hsm, token, now),
        accepted,
        "pki keys verify: {context}"
    );
    assert_eq!(pyjwt_accepts(hsm, token, now), accepted, "PyJWT: {context}");
}

fn state(hsm: &Hsm) -> serde_json::Value {
    serde_json::from_slice(&hsm.read("keys/key-ring.json")).unwrap()
}

fn status(hsm: &Hsm, now: i64) -> serde_json::Value {
    let o = hsm
        .bare(&["keys", "status", hsm.store(), "--json", "--now", &at(now)])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    serde_json::from_slice(&o.stdout).unwrap()
}

/// The token's private key ids, as `pkcs11-tool` lists them.
fn held(hsm: &Hsm) -> std::collections::BTreeSet<String> {
    hsm.private_key_ids()
}

/// A ring made in the token, its tokens signed there, rotated twice: the
/// published keys and the token's objects follow, and the key rotated out
/// is destroyed once its grace has ended.
fn walkthrough(key: &str) {
    let hsm = Hsm::new();
    let dir = hsm.store();
    let out = hsm.ok(&[
        "keys",
        "init",
        dir,
        "--key",
        key,
        "--key-store",
        &key_store(),
        "--now",
        T0,
    ]);
    assert!(out.contains("(in the token)"), "{out}");
    assert!(!hsm.store.join("keys/active.key").exists());
    assert!(hsm.store.join("keys/public.pem").exists());
    let first = held(&hsm);
    assert_eq!(first.len(), 1);
    hsm.assert_token_matches("after init");
    let report = status(&hsm, 0);
    let uri = report["active"]["uri"].as_str().unwrap().to_string();
    assert!(uri.starts_with(&format!("pkcs11:token={LABEL};")), "{uri}");
    assert_eq!(state(&hsm)["token_keys"]["active"], uri.as_str());

    // Signed in the token: both verifiers accept it.
    let old = sign(&hsm, "old", HOUR, 4 * HOUR);
    assert_verdict(&hsm, &old, HOUR, true, "signed at init");

    // A forced rotation: the new key is made in the token, the old one
    // stays there while it is accepted.
    let t1 = 2 * HOUR;
    let out = hsm.ok(&["keys", "rotate", dir, "--force", "r1", "--now", &at(t1)]);
    assert!(out.contains("recorded the new signing key"), "{out}");
    assert!(out.contains("rotated signing key"), "{out}");
    assert_eq!(held(&hsm).len(), 2, "{out}");
    hsm.assert_token_matches("after a forced rotation");
    assert!(!hsm.store.join("keys/active.key").exists());
    let report = status(&hsm, t1);
    assert_eq!(report["accepted"][0]["uri"], uri.as_str());
    assert_ne!(report["active"]["uri"], uri.as_str());
    let new = sign(&hsm, "new", t1, HOUR);
    assert_verdict(&hsm, &new, t1, true, "signed by the new key");
    assert_verdict(&hsm, &old, t1, true, "the old key's token during the grace");

    // Once the grace has ended the old key leaves the ring, and its object
    // the token, in that one step.
    let end = t1 + DAY;
    let out = hsm.ok(&["keys", "rotate", dir, "--now", &at(end)]);
    assert!(out.contains("retired the signing key"), "{out}");
    assert!(out.contains("destroyed the signing key"), "{out}");
    assert!(held(&hsm).is_disjoint(&first), "{out}");
    assert_eq!(held(&hsm).len(), 1, "{out}");
    hsm.assert_token_matches("after the grace");
    assert!(state(&hsm)["token_keys"]["retiring"].is_null());
    let old_again = sign(&hsm, "old-again", end, HOUR);
    assert_verdict(&hsm, &old_again, end, true, "the remaining key still signs");
    assert!(
        !pki_accepts(&hsm, &old, end),
        "a token of the destroyed key"
    );
}

#[test]
fn an_es256_ring_signs_in_the_token_and_destroys_a_key_after_its_grace() {
    walkthrough("p256");
}

#[test]
fn an_rs256_ring_signs_in_the_token_and_destroys_a_key_after_its_grace() {
    walkthrough("rsa2048");
}

/// A second `init` is refused before the token makes a key.
#[test]
fn a_second_init_is_refused_and_makes_no_key() {
    let hsm = Hsm::new();
    let dir = hsm.store();
    let args = [
        "keys",
        "init",
        dir,
        "--key-store",
        &key_store(),
        "--now",
        T0,
    ];
    hsm.ok(&args);
    let before = (support::cli::tree(&hsm.store), held(&hsm));
    let o = hsm.command(&args).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("already exists"), "{}", text(&o));
    assert_eq!((support::cli::tree(&hsm.store), held(&hsm)), before);
}

/// `pki plan` of a store whose CA key and signing keys are in the token
/// simulates their rotations with keys of its own: the token makes no
/// object and the store is byte for byte as it was.
#[test]
fn a_plan_of_token_held_keys_makes_no_key_and_writes_nothing() {
    let hsm = Hsm::new();
    let dir = hsm.store();
    let now = ["--now", T0];
    let in_token = ["--key-store", &key_store()];
    hsm.ok(&[&["init", dir][..], &in_token, &now].concat());
    hsm.ok(&[&["issue", dir, "web", "--dns", "web.ns.svc"][..], &now].concat());
    hsm.ok(&[&["keys", "init", dir][..], &in_token, &now].concat());
    let before = (support::cli::tree(&hsm.store), held(&hsm));
    assert_eq!(before.1.len(), 2, "the CA's key and the ring's");
    let plan = hsm.ok(&[&["plan", dir, "--until", "900d", "--json"][..], &now].concat());
    let plan: serde_json::Value = serde_json::from_str(&plan).unwrap();
    let kinds: Vec<&str> = plan["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"rotation") && kinds.contains(&"key-rotation"),
        "{kinds:?}"
    );
    assert!(
        plan["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["ok"] == true),
        "{plan:#}"
    );
    assert_eq!((support::cli::tree(&hsm.store), held(&hsm)), before);
}

/// A signer and a key ring on etcd with every key in the token: the store
/// keeps URIs and public keys only (an export holds no CA or signing key),
/// tokens are signed in the token and verify, and after each rotation the
/// token holds exactly the keys the documents name.
#[test]
fn on_etcd_the_documents_name_exactly_the_tokens_keys() {
    let server = support::etcd::Etcd::start();
    let url = server.url("pki");
    let hsm = Hsm::new();
    let now = ["--now", T0];
    let in_token = ["--key-store", &key_store()];
    // The documents, exported where the token checks read them.
    let exported = |context: &str| {
        let _ = std::fs::remove_dir_all(&hsm.store);
        hsm.ok(&["export", &url, hsm.store()]);
        assert!(!hsm.store.join("signer/tls.key").exists(), "{context}");
        assert!(!hsm.store.join("keys/active.key").exists(), "{context}");
        hsm.assert_token_matches(context);
    };
    hsm.ok(&[&["init", &url][..], &in_token, &now].concat());
    hsm.ok(&[&["issue", &url, "web", "--dns", "web.ns.svc"][..], &now].concat());
    hsm.ok(&[&["keys", "init", &url][..], &in_token, &now].concat());
    exported("after init");

    let claims = write(&hsm, "claims.json", r#"{"iss":"pki-test","sub":"etcd"}"#);
    let jws = hsm.ok(&[&["keys", "sign", &url, "--claims", &claims][..], &now].concat());
    let token = write(&hsm, "token.jws", jws.trim());
    hsm.ok(&[&["keys", "verify", &url, "--token", &token][..], &now].concat());

    let later = ["--now", "2026-01-02T00:00:00Z"];
    hsm.ok(&[&["keys", "rotate", &url, "--force", "drill"][..], &later].concat());
    hsm.ok(&[&["rotate", &url, "--force", "drill"][..], &later].concat());
    exported("after both rotations");
    assert_eq!(held(&hsm).len(), 4, "both CA keys and both signing keys");
    // The previous signing key is still accepted in its grace.
    hsm.ok(&[&["keys", "verify", &url, "--token", &token][..], &later].concat());
}

/// Exit 1 with one line of error naming `want`, and nothing written.
fn assert_refused(hsm: &Hsm, mut command: Command, want: &str) {
    let before = support::cli::tree(&hsm.store);
    let o = command.output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{command:?}: {}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.to_lowercase().contains(want), "{command:?}: {err}");
    assert_eq!(support::cli::tree(&hsm.store), before, "{command:?} wrote");
}

#[test]
fn without_the_token_with_a_wrong_pin_or_without_its_key_nothing_is_written() {
    let hsm = Hsm::new();
    let dir = hsm.store();
    // No module: init refuses before it makes a store.
    let init = [
        "keys",
        "init",
        dir,
        "--key-store",
        &key_store(),
        "--now",
        T0,
    ];
    let o = hsm.bare(&init).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("PKI_PKCS11_MODULE"), "{}", text(&o));
    assert!(!hsm.store.exists());
    hsm.ok(&init);
    let claims = write(&hsm, "claims.json", r#"{"sub":"a"}"#);
    let sign = ["keys", "sign", dir, "--claims", &claims, "--now", T0];
    let rotate = ["keys", "rotate", dir, "--force", "r", "--now", T0];
    for args in [&sign, &rotate] {
        assert_refused(&hsm, hsm.bare(args), "pki_pkcs11_module");
    }
    let wrong = write(&hsm, "wrong-pin", "0000");
    for args in [&sign, &rotate] {
        let mut command = hsm.command(args);
        command.env("PKI_PKCS11_PIN_FILE", &wrong);
        assert_refused(&hsm, command, "pin");
    }
    hsm.assert_token_matches("after the refusals");
    // What needs no private key works without the token.
    assert!(status(&hsm, 0)["active"]["uri"].is_string());
    // The key object gone (destroyed behind pki's back): signing names it.
    let id = hsm.named_ids().into_iter().next().unwrap();
    hsm.token
        .pkcs11_tool(&["--delete-object", "--type", "privkey", "--id", &id]);
    assert_refused(&hsm, hsm.command(&sign), "holds no private key");
}

/// Forced rotations killed (SIGKILL) at random points, each followed by
/// the same command run to completion. Each rotation is one grace after
/// the one before, so its step records the new key, makes it and rotates
/// (retiring the key rotated out by the run before), then destroys that
/// key: a kill lands in any of the three. Right after each kill the token
/// holds no key the document does not name; after each rerun exactly
/// those it names, and a token signed then verifies.
#[test]
fn a_forced_key_rotation_killed_anywhere_leaves_no_orphan_after_its_rerun() {
    const KILLS: usize = 50;
    let hsm = Hsm::new();
    let dir = hsm.store();
    let grace = HOUR;
    hsm.ok(&[
        "keys",
        "init",
        dir,
        "--key-store",
        &key_store(),
        "--grace",
        "1h",
        "--now",
        T0,
    ]);
    const MEASURES: usize = 3;
    let now = |run: usize| (run as i64 + 1) * (grace + 1);
    let rotate = |reason: &str, now: i64| {
        ["keys", "rotate", dir, "--force", reason, "--now", &at(now)].map(str::to_string)
    };
    let mut kills = RandomKills::new(quickest(MEASURES, |run| {
        let args = rotate(&format!("measure {run}"), now(run));
        hsm.ok(&args.each_ref().map(String::as_str));
    }));
    let (mut left_intent, mut left_retiring) = (0, 0);
    for run in MEASURES..MEASURES + KILLS {
        let reason = format!("crash {run}");
        let args = rotate(&reason, now(run));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (token_file, delay) = kills.run(&hsm, &args);
        hsm.assert_no_orphan(&format!("run {run}, killed after {delay:?}"));
        // Where the kill left the ring: an intent recorded, a key listed
        // for destruction, or neither (before the first commit or after the
        // last).
        let left = state(&hsm);
        if !left["token_keys"]["pending"].is_null() {
            left_intent += 1;
        } else if !left["token_keys"]["retiring"].is_null() {
            left_retiring += 1;
        }
        let out = hsm.ok_after_kill_with(&args, &token_file);
        let context = format!("run {run}, killed after {delay:?}: rerun said {out}");
        hsm.assert_token_matches(&context);
        let state = state(&hsm);
        assert!(state["token_keys"]["pending"].is_null(), "{context}");
        assert!(state["token_keys"]["retiring"].is_null(), "{context}");
        assert_eq!(
            state["history"].as_array().unwrap().last().unwrap()["reason"]["reason"],
            reason.as_str(),
            "{context}"
        );
        // The active key and the one rotated out by this run.
        assert_eq!(held(&hsm).len(), 2, "{context}");
        if run % 10 == 0 {
            let token = sign(&hsm, &format!("run-{run}"), now(run), 60);
            assert_verdict(&hsm, &token, now(run), true, &context);
        }
    }
    kills.assert_most_landed(
        KILLS,
        &format!("the rotation ({left_intent} left an intent, {left_retiring} a key to destroy)"),
    );
}
