//! The directory store's hardening as the `pki` binary shows it: a planted
//! lock link, a held lock, a permissive umask, a store others can write, a
//! missing published link.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use support::cli::{pki, refused, stderr};

// 2026-01-01: the simulated creation time of every store here.
const T0: &str = "2026-01-01T00:00:00Z";
// T0 + 396 days: just past the rotation point of the default policy (D - M = 395d).
const AFTER_ROTATION_POINT: &str = "2027-02-01T00:00:00Z";

fn ok(args: &[&str]) -> Output {
    let o = pki(args);
    assert!(o.status.success(), "pki {args:?} failed: {}", stderr(&o));
    o
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn init(dir: &Path) {
    let d = dir.to_str().unwrap();
    ok(&["init", d, "--now", T0]);
    ok(&["issue", d, "web", "--dns", "web.ns.svc", "--now", T0]);
}

#[test]
fn a_lock_link_is_refused_by_every_command_and_nothing_appears_at_its_target() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    init(&dir);
    let target = tmp.path().join("planted");
    std::fs::remove_file(dir.join(".lock")).unwrap();
    std::os::unix::fs::symlink(&target, dir.join(".lock")).unwrap();
    let d = dir.to_str().unwrap();
    for args in [
        vec!["status", d, "--now", T0],
        vec!["rotate", d, "--now", AFTER_ROTATION_POINT],
        vec!["issue", d, "api", "--dns", "api.ns.svc", "--now", T0],
        vec!["init", d, "--now", T0],
    ] {
        let err = refused(&args);
        assert!(
            err.contains(".lock") && err.contains("symbolic link"),
            "{args:?}: {err}"
        );
        assert!(!target.exists(), "{args:?} created the link's target");
    }
}

#[test]
fn a_held_lock_fails_writers_after_lock_timeout_naming_the_holder_and_status_still_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    init(&dir);
    let d = dir.to_str().unwrap();
    // Another run in the middle of a commit: it holds the lock and has
    // recorded itself the way pki does.
    let lock = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.join(".lock"))
        .unwrap();
    lock.lock().unwrap();
    std::fs::write(
        dir.join(".lock"),
        "pid 4242 (pki rotate /srv/pki) since 2026-01-01T00:00:00Z\n",
    )
    .unwrap();

    ok(&["status", d, "--now", T0]);
    let err = refused(&[
        "rotate",
        d,
        "--now",
        AFTER_ROTATION_POINT,
        "--lock-timeout",
        "1s",
    ]);
    assert!(err.contains("still locked after waiting"), "{err}");
    assert!(
        err.contains("held by pid 4242 (pki rotate /srv/pki)"),
        "{err}"
    );
    let err = refused(&[
        "issue",
        d,
        "--lock-timeout",
        "1s",
        "api",
        "--dns",
        "a.ns.svc",
        "--now",
        T0,
    ]);
    assert!(err.contains("held by pid 4242"), "{err}");

    drop(lock);
    ok(&[
        "rotate",
        d,
        "--now",
        AFTER_ROTATION_POINT,
        "--lock-timeout",
        "1s",
    ]);
}

#[test]
fn under_umask_000_every_directory_is_0700_and_keys_0600() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let d = dir.to_str().unwrap();
    let status = Command::new("sh")
        .arg("-c")
        .arg("umask 000 && \"$0\" init \"$1\" --now \"$2\" && \"$0\" issue \"$1\" web --dns web.ns.svc --now \"$2\"")
        .arg(env!("CARGO_BIN_EXE_pki"))
        .arg(d)
        .arg(T0)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let generation = dir.join(".data").canonicalize().unwrap();
    for path in [
        dir.clone(),
        generation.clone(),
        generation.join("signer"),
        generation.join("certs"),
        generation.join("certs/web"),
    ] {
        assert_eq!(mode(&path), 0o700, "{}", path.display());
    }
    for key in ["signer/tls.key", "certs/web/tls.key", "certs/web/tls.pem"] {
        assert_eq!(mode(&dir.join(key)), 0o600, "{key}");
    }
    assert_eq!(mode(&dir.join(".lock")), 0o600);
}

#[test]
fn a_store_others_can_write_is_refused_naming_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    init(&dir);
    let d = dir.to_str().unwrap();
    let generation = dir.join(".data").canonicalize().unwrap();
    std::fs::set_permissions(&generation, std::fs::Permissions::from_mode(0o777)).unwrap();
    for args in [
        vec!["status", d, "--now", T0],
        vec!["rotate", d, "--now", AFTER_ROTATION_POINT],
    ] {
        let err = refused(&args);
        assert!(err.contains(&generation.display().to_string()), "{err}");
        assert!(err.contains("writable by group and others"), "{err}");
    }
}

#[test]
fn a_notice_naming_a_path_with_a_newline_stays_on_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store\nsecond line");
    init(&dir);
    std::fs::remove_file(dir.join("ca-bundle.crt")).unwrap();
    let o = ok(&["status", dir.to_str().unwrap(), "--now", T0]);
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("pki: repaired ") && err.contains("store\\nsecond line"),
        "{err}"
    );
}

#[test]
fn a_missing_published_link_is_repaired_by_status_and_said_so() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    init(&dir);
    std::fs::remove_file(dir.join("ca-bundle.crt")).unwrap();
    let o = ok(&["status", dir.to_str().unwrap(), "--now", T0]);
    let err = stderr(&o);
    assert!(
        err.contains(&format!(
            "repaired {} (was missing)",
            dir.join("ca-bundle.crt").display()
        )),
        "{err}"
    );
    assert!(dir.join("ca-bundle.crt").is_file());
    assert!(dir.join("certs/web/tls.pem").is_file());
}
