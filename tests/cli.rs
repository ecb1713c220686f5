//! The `pki` binary end to end: the CLI contract of DESIGN.md, exit codes,
//! and bad input that must fail with one line and change nothing on disk.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::collections::BTreeMap;
use std::path::Path;
use support::cli::{ok, pki, refused, stderr, stdout};
use support::tree::copy_tree;

// 2026-01-01: the simulated creation time of every store here.
const T0: &str = "2026-01-01T00:00:00Z";
// T0 + 396 days: just past the rotation point of the default policy (D - M = 395d).
const AFTER_ROTATION_POINT: &str = "2027-02-01T00:00:00Z";

#[path = "../pki-rotate/tests/support/committed.rs"]
mod committed;

/// Replaces a committed file and records its SHA-256 in the generation's
/// manifest, as another build could have written it: the document's own
/// checks are under test, not the store's (see tests/store_hardening.rs).
fn commit_tampered(dir: &str, file: &str, contents: &[u8]) {
    committed::rewrite_committed(Path::new(dir), "signer", file, contents);
}

/// Every file under `dir` (following links), for before/after comparisons.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            let rel = path.strip_prefix(base).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                out.insert(
                    rel,
                    std::fs::read_link(&path)
                        .unwrap()
                        .display()
                        .to_string()
                        .into_bytes(),
                );
            } else if meta.is_dir() {
                walk(base, &path, out);
            } else {
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn store() -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki").display().to_string();
    ok(&["init", &dir, "--cn", "service-ca", "--now", T0]);
    ok(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.ns.svc",
        "--dns",
        "web.ns.svc.cluster.local",
        "--now",
        T0,
    ]);
    (tmp, dir)
}

#[test]
fn init_issue_rotate_status_pin_follow_the_cli_contract() {
    let (_tmp, dir) = store();
    let d = Path::new(&dir);
    for f in [
        "signer/tls.crt",
        "signer/tls.key",
        "ca-bundle.crt",
        "certs/web/tls.crt",
        "certs/web/tls.key",
    ] {
        assert!(d.join(f).is_file(), "{f} missing");
    }
    assert!(!d.join("signer/intermediate-ca.crt").exists());

    let status = ok(&["status", &dir, "--now", "2026-02-01T00:00:00Z"]);
    assert!(
        status.contains("web") && status.contains("next action: none now"),
        "{status}"
    );

    let out = ok(&["rotate", &dir, "--now", AFTER_ROTATION_POINT]);
    assert!(out.contains("rotated CA"), "{out}");
    assert!(out.contains("issued web"), "{out}");
    assert!(d.join("signer/intermediate-ca.crt").is_file());
    let chain = std::fs::read(d.join("certs/web/tls.crt")).unwrap();
    assert_eq!(
        pki_core::Certificate::all_from_pem(&chain).unwrap().len(),
        2,
        "leaf + bridge B"
    );
    let bundle =
        pki_core::Bundle::from_pem(&std::fs::read(d.join("ca-bundle.crt")).unwrap()).unwrap();
    assert_eq!(bundle.len(), 2, "new CA + bridge A");

    let again = ok(&["rotate", &dir, "--now", AFTER_ROTATION_POINT]);
    assert!(again.contains("nothing to do"), "{again}");

    // A day after the automatic rotation, clients may still hold the bundle
    // of two rotations ago: the operator accepts that on purpose.
    let forced = ok(&[
        "rotate",
        &dir,
        "--force",
        "key ceremony 2027",
        "--allow-trust-break",
        "drill, every consumer reloaded",
        "--now",
        "2027-02-02T00:00:00Z",
    ]);
    assert!(forced.contains("forced: key ceremony 2027"), "{forced}");
    let same = ok(&[
        "rotate",
        &dir,
        "--force",
        "key ceremony 2027",
        "--now",
        "2027-02-02T00:10:00Z",
    ]);
    assert!(same.contains("nothing to do"), "{same}");

    let json: serde_json::Value = serde_json::from_str(&ok(&[
        "status",
        &dir,
        "--json",
        "--now",
        "2027-02-03T00:00:00Z",
    ]))
    .unwrap();
    assert_eq!(json["rotations"], 2);
    assert_eq!(json["forced_rotation_reason"], "key ceremony 2027");
    assert_eq!(json["leaves"][0]["name"], "web");

    let pin = ok(&["pin", &format!("{dir}/ca-bundle.crt")]);
    let ca =
        pki_core::Certificate::from_pem(&std::fs::read(d.join("signer/tls.crt")).unwrap()).unwrap();
    assert_eq!(
        pin.trim(),
        format!("sha256:{}", hex(&ca.fingerprint_sha256()))
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["frobnicate"],
        vec!["init"],
        vec!["issue", "/tmp/x", "web"],
        vec!["init", "/tmp/x", "--lifetime", "ten days"],
        vec!["init", "/tmp/x", "--key", "dsa"],
        vec!["status", "/tmp/x", "--now", "yesterday"],
        vec!["status", "ftp://host/prefix"],
        vec!["status", "etcd://127.0.0.1:2379"],
        vec!["export", "gopher://x/y", "/tmp/out"],
    ] {
        let o = pki(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}

#[test]
fn invalid_policy_is_refused_with_the_timeline() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki").display().to_string();
    let err = refused(&[
        "init",
        &dir,
        "--lifetime",
        "300d",
        "--min-trust",
        "200d",
        "--now",
        T0,
    ]);
    assert!(err.contains("R = D - M = 100d"), "{err}");
    assert!(!Path::new(&dir).join("signer").exists());
    refused(&["init", &dir, "--lifetime", "10d", "--min-trust", "10d"]);
}

#[test]
fn now_before_the_ca_is_refused_and_changes_nothing() {
    let (tmp, dir) = store();
    let before = tree(tmp.path());
    let err = refused(&["rotate", &dir, "--now", "2025-06-01T00:00:00Z"]);
    assert!(err.contains("before the current CA's NotBefore"), "{err}");
    assert_eq!(tree(tmp.path()), before);
}

#[test]
fn corrupt_or_missing_store_files_fail_with_one_line_and_change_nothing() {
    let garbage = b"-----BEGIN CERTIFICATE-----\nAAAA!!\n-----END CERTIFICATE-----\n";
    for (file, contents) in [
        ("signer/tls.crt", &garbage[..]),
        (
            "signer/tls.key",
            &b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"[..],
        ),
        ("ca-bundle.crt", &b"not pem at all"[..]),
        ("certs/web/tls.crt", &garbage[..]),
        ("certs/web/tls.key", &b""[..]),
        ("pki-state.json", &b"{\"version\": 1"[..]),
    ] {
        let (tmp, dir) = store();
        let path = std::fs::canonicalize(Path::new(&dir).join(file)).unwrap();
        let committed = std::fs::read(&path).unwrap();
        std::fs::remove_file(&path).unwrap();
        std::fs::write(&path, contents).unwrap();
        let before = tree(tmp.path());
        let issue = [
            "issue",
            dir.as_str(),
            "api",
            "--dns",
            "api.ns.svc",
            "--now",
            T0,
        ];
        // Issuing another leaf reads the CA's files, the bundle and the
        // state, not the other leaves' files.
        let issue_reads_it = !file.starts_with("certs/");
        for args in [
            &["rotate", dir.as_str(), "--now", AFTER_ROTATION_POINT][..],
            &["status", dir.as_str(), "--now", AFTER_ROTATION_POINT][..],
            &issue[..],
        ] {
            if args[0] == "issue" && !issue_reads_it {
                continue;
            }
            let err = refused(args);
            let short = file.rsplit('/').next().unwrap();
            assert!(err.contains(short), "{file}: {err}");
        }
        assert_eq!(tree(tmp.path()), before, "{file}: store changed");
        if !issue_reads_it {
            // The commit of that one leaf starts from the spare, the copy
            // of the store before the damage: the next generation has the
            // committed file again.
            ok(&issue);
            let published = Path::new(&dir).join(file);
            assert_eq!(std::fs::read(published).unwrap(), committed, "{file}");
            ok(&["status", dir.as_str(), "--now", T0]);
        }
    }
    // A missing file.
    let (tmp, dir) = store();
    std::fs::remove_file(std::fs::canonicalize(Path::new(&dir).join("signer/tls.key")).unwrap())
        .unwrap();
    let before = tree(tmp.path());
    let err = refused(&["rotate", &dir, "--now", AFTER_ROTATION_POINT]);
    assert!(
        err.contains("signer/tls.key") && err.contains("missing"),
        "{err}"
    );
    assert_eq!(tree(tmp.path()), before);
}

#[test]
fn key_that_does_not_match_the_ca_is_refused() {
    let (tmp, dir) = store();
    let (_other_tmp, other) = store();
    let key = std::fs::read(Path::new(&other).join("signer/tls.key")).unwrap();
    commit_tampered(&dir, "signer/tls.key", &key);
    let before = tree(tmp.path());
    let err = refused(&["rotate", &dir, "--now", AFTER_ROTATION_POINT]);
    assert!(err.contains("does not match"), "{err}");
    assert_eq!(tree(tmp.path()), before);
}

#[test]
fn unknown_state_version_is_refused() {
    let (tmp, dir) = store();
    let path = std::fs::canonicalize(Path::new(&dir).join("pki-state.json")).unwrap();
    let text = std::fs::read_to_string(&path).unwrap().replacen(
        &format!("\"version\": {}", pki_rotate::signer::document::VERSION),
        "\"version\": 42",
        1,
    );
    commit_tampered(&dir, "pki-state.json", text.as_bytes());
    let before = tree(tmp.path());
    let err = refused(&["status", &dir]);
    assert!(err.contains("version 42 is not supported"), "{err}");
    assert_eq!(tree(tmp.path()), before);
}

#[test]
fn missing_store_and_bad_pin_input_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("nothing").display().to_string();
    assert!(refused(&["status", &dir]).contains("pki init"));
    let file = tmp.path().join("bundle.pem");
    std::fs::write(
        &file,
        "-----BEGIN PRIVATE KEY-----\nAAEC\n-----END PRIVATE KEY-----\n",
    )
    .unwrap();
    let err = refused(&["pin", &file.display().to_string()]);
    assert!(err.contains("block 1"), "{err}");
}

#[test]
fn double_init_is_refused() {
    let (_tmp, dir) = store();
    assert!(refused(&["init", &dir]).contains("already exists"));
}

#[test]
fn demo_runs_the_whole_lifecycle() {
    let o = pki(&["demo"]);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("done: trust held"), "{out}");
    assert!(!out.contains("FAIL"), "{out}");
}

#[test]
fn extreme_times_and_durations_are_refused_without_panicking() {
    let (tmp, dir) = store();
    let before = tree(tmp.path());
    for args in [
        vec!["rotate", dir.as_str(), "--now", "9999-12-31T23:59:59Z"],
        vec!["status", dir.as_str(), "--now", "9999-12-31T23:59:59Z"],
        vec![
            "issue",
            dir.as_str(),
            "api",
            "--dns",
            "a.b",
            "--lifetime",
            "36500d",
            "--now",
            "9990-01-01T00:00:00Z",
        ],
        vec!["rotate", dir.as_str(), "--now", "1970-01-01T00:00:00Z"],
    ] {
        refused(&args);
    }
    assert_eq!(tree(tmp.path()), before);
    let fresh = tmp.path().join("fresh").display().to_string();
    refused(&["init", &fresh, "--now", "9999-12-01T00:00:00Z"]);
    refused(&["init", &fresh, "--now", "1969-12-31T23:59:00Z"]);
    refused(&[
        "init",
        &fresh,
        "--lifetime",
        "36600d",
        "--min-trust",
        "1d",
        "--now",
        "9950-01-01T00:00:00Z",
    ]);
}

#[test]
fn emergency_grace_and_compromise_modes_shape_the_bundle() {
    let (_tmp, dir) = store();
    let d = Path::new(&dir);
    ok(&[
        "rotate",
        &dir,
        "--force",
        "leak",
        "--grace",
        "2d",
        "--now",
        "2026-03-01T00:00:00Z",
    ]);
    let bundle =
        pki_core::Bundle::from_pem(&std::fs::read(d.join("ca-bundle.crt")).unwrap()).unwrap();
    assert_eq!(bundle.len(), 2);
    assert_eq!(
        pki_core::datetime::rfc3339(bundle.certs()[1].not_after()),
        "2026-03-03T00:00:00Z"
    );

    ok(&[
        "rotate",
        &dir,
        "--force",
        "stolen key",
        "--compromised",
        "--now",
        "2026-03-02T00:00:00Z",
    ]);
    let bundle =
        pki_core::Bundle::from_pem(&std::fs::read(d.join("ca-bundle.crt")).unwrap()).unwrap();
    assert_eq!(bundle.len(), 1, "no bridge A after a compromise");
    assert!(
        !d.join("signer/intermediate-ca.crt").exists(),
        "no bridge B after a compromise"
    );

    let o = pki(&["rotate", &dir, "--grace", "2d"]);
    assert_eq!(o.status.code(), Some(2), "--grace needs --force");
}

fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn export_writes_the_published_files_in_the_directory_layout() {
    let (tmp, dir) = store();
    ok(&["rotate", &dir, "--now", AFTER_ROTATION_POINT]);
    let out = tmp.path().join("exported");
    let printed = ok(&["export", &dir, &out.display().to_string()]);
    assert!(printed.contains("exported signer"), "{printed}");
    let d = Path::new(&dir);
    for f in [
        "signer/tls.crt",
        "signer/tls.key",
        "signer/intermediate-ca.crt",
        "ca-bundle.crt",
        "certs/web/tls.crt",
        "certs/web/tls.key",
        "pki-state.json",
    ] {
        assert_eq!(
            std::fs::read(out.join(f)).unwrap(),
            std::fs::read(d.join(f)).unwrap(),
            "{f}"
        );
    }
    assert_eq!(mode(&out.join("signer/tls.key")), 0o600);
    assert_eq!(mode(&out.join("certs/web/tls.key")), 0o600);
    assert_eq!(mode(&out.join("certs/web")), 0o700);
    // Exported files are plain files, not a store: no links, no generations.
    assert!(!out.join(".data").exists());
    assert!(
        !std::fs::symlink_metadata(out.join("ca-bundle.crt"))
            .unwrap()
            .file_type()
            .is_symlink()
    );
    // Exporting over a directory store would clobber it: refused.
    let err = refused(&["export", &dir, &dir]);
    assert!(err.contains("is a pki directory store"), "{err}");
    // A directory without a store is not exported from.
    let err = refused(&["export", &out.display().to_string(), "/tmp/unused"]);
    assert!(err.contains("pki init"), "{err}");
}

#[test]
fn a_store_written_by_the_first_release_keeps_working() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki");
    copy_tree(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("pki-rotate/tests/data/v1/store"),
        &dir,
    );
    let d = dir.display().to_string();
    let json: serde_json::Value = serde_json::from_str(&ok(&[
        "status",
        &d,
        "--json",
        "--now",
        "2027-03-02T00:00:00Z",
    ]))
    .unwrap();
    assert_eq!(json["rotations"], 2);
    assert_eq!(json["forced_rotation_reason"], "key ceremony");
    // The first release's serving chain still verifies for a client that
    // holds the bundle from before the forced rotation.
    let chain = dir.join("certs/web/tls.crt");
    let ca_before = tmp.path().join("ca-before.crt");
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("pki-state.json")).unwrap()).unwrap();
    std::fs::write(
        &ca_before,
        state["previous"]["certificate"].as_str().unwrap(),
    )
    .unwrap();
    ok(&[
        "verify",
        "--bundle",
        &ca_before.display().to_string(),
        "--chain",
        &chain.display().to_string(),
        "--dns",
        "web.ns.svc",
        "--at",
        "2027-03-02T00:00:00Z",
    ]);
    // Writing works and migrates the document.
    let out = ok(&[
        "issue",
        &d,
        "api",
        "--dns",
        "api.ns.svc",
        "--now",
        "2027-03-02T00:00:00Z",
    ]);
    assert!(out.contains("issued api"), "{out}");
    let doc = std::fs::read_to_string(dir.join("pki-state.json")).unwrap();
    assert!(doc.contains("\"kind\": \"signer\""), "{doc}");
    assert!(dir.join("certs/api/tls.key").is_file());
    assert!(refused(&["init", &d, "--now", T0]).contains("already exists"));
}
