//! `pki cred` against a real Redis with hooks that misbehave: a hanging or
//! failing hook is killed, recorded, retried with backoff and reported; a
//! mint that minted before it failed, hung or flooded its output has what
//! it printed revoked before the retry.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::cli::{mode, stderr};
use support::redis::{DUE, Setup, T0, check_no_leak, ok, recorded, recorded_lines, user};

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn a_hanging_or_failing_hook_is_killed_recorded_retried_with_backoff_and_reported() {
    let s = Setup::new();
    ok(&s.init(&[]));
    let first = s.file("current").unwrap();

    assert_eq!(s.check(T0), 0, "nothing due");
    assert_eq!(s.check(DUE), 3, "a step is due");
    s.knob("mint-hangs", true);
    let started = Instant::now();
    let o = s.reconcile(DUE, &["--hook-timeout", "1s"]);
    let e = recorded(&o);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(e.contains("timed out after 1s"), "{e}");
    assert!(e.contains("retry after 2026-01-01T02:00:30Z"), "{e}");
    let st = s.status(DUE);
    let c = &st["credentials"][0];
    assert_eq!(c["state"], "failing");
    assert_eq!(c["failure"]["action"], "mint");
    assert_eq!(c["failure"]["failures"], 1);
    assert_eq!(c["next_at"], "2026-01-01T02:00:30Z");
    assert_eq!(c["health"], "failing");
    assert_eq!(s.check(DUE), 4, "a hook is failing");
    // The hook's process group was killed: no sleeping hook is left.
    let ps = Command::new("pgrep")
        .args(["-f", "sleep 1000"])
        .output()
        .expect("pgrep is not installed; install it with `apt-get install procps` (Debian) or run scripts/test.sh");
    assert!(ps.stdout.is_empty(), "hook left running");

    // Within the backoff nothing runs.
    s.knob("mint-hangs", false);
    s.knob("mint-fails", true);
    ok(&s.reconcile("2026-01-01T02:00:10Z", &[]));
    assert_eq!(s.mint_runs(), 2);
    // Then it retries; a failing hook doubles the wait and says why.
    let e = recorded(&s.reconcile("2026-01-01T02:00:30Z", &[]));
    assert!(e.contains("exited with status 3: cloud API said no"), "{e}");
    assert!(e.contains("retry after 2026-01-01T02:01:30Z"), "{e}");
    let text = String::from_utf8(
        s.pki(&["cred", "status", &s.dir, "--now", "2026-01-01T02:00:31Z"])
            .stdout,
    )
    .unwrap();
    assert!(
        text.contains("cloud API said no") && text.contains("2 in a row"),
        "{text}"
    );
    assert_eq!(
        s.file("current").as_deref(),
        Some(first.as_str()),
        "current untouched"
    );

    // A hook that prints nothing is a failure too, and changes no credential.
    s.knob("mint-fails", false);
    s.knob("mint-prints-nothing", true);
    let e = recorded(&s.reconcile("2026-01-01T02:01:30Z", &[]));
    assert!(e.contains("printed nothing"), "{e}");
    assert_eq!(s.file("current").as_deref(), Some(first.as_str()));
    s.knob("mint-prints-nothing", false);
    ok(&s.reconcile("2026-01-01T02:03:30Z", &[]));
    let second = s.file("current").unwrap();
    assert_ne!(second, first);

    // A failing revoke keeps the old credential and retries.
    s.knob("revoke-fails", true);
    let e = recorded(&s.reconcile("2026-01-01T02:13:30Z", &[]));
    assert!(
        e.contains("revoke") && e.contains("revocation API down"),
        "{e}"
    );
    assert!(s.redis.logs_in(&first), "not revoked");
    assert_eq!(s.file("old").as_deref(), Some(first.as_str()));
    s.knob("revoke-fails", false);
    s.knob("revoke-hangs", true);
    let e = recorded(&s.reconcile("2026-01-01T02:14:00Z", &["--hook-timeout", "1s"]));
    assert!(e.contains("revoke hook timed out"), "{e}");
    s.knob("revoke-hangs", false);
    let o = s.reconcile("2026-01-01T02:20:00Z", &[]);
    ok(&o);
    assert_eq!(stderr(&o), "", "a success reports no failure");
    assert!(!s.redis.logs_in(&first));
    assert_eq!(s.redis.cred_users().len(), 1);
    assert_eq!(s.check("2026-01-01T02:20:00Z"), 0);
}

#[test]
fn a_mint_that_fails_or_hangs_after_minting_has_its_credential_revoked_before_the_retry() {
    for knob in ["mint-fails-after-minting", "mint-hangs-after-minting"] {
        let s = Setup::new();
        ok(&s.init(&[]));
        let first = s.file("current").unwrap();
        s.knob(knob, true);
        // The stray's revocation fails at first: it stays recorded, and
        // no new mint runs while it may be live.
        s.knob("revoke-fails", true);
        let o = s.reconcile(DUE, &["--hook-timeout", "1s"]);
        let lines = recorded_lines(&o);
        assert_eq!(lines.len(), 2, "{knob}: {lines:?}");
        assert!(
            lines[0].contains("mint of rotation 2 failed"),
            "{knob}: {lines:?}"
        );
        assert!(
            lines[1].contains("revoke of the stray credential of rotation 2 failed"),
            "{knob}: {lines:?}"
        );
        s.knob(knob, false);
        let stray = s.minted()[1].clone();
        assert!(s.redis.logs_in(&stray), "{knob}: the hook did mint");
        let st = s.status(DUE);
        let c = &st["credentials"][0];
        assert_eq!(c["strays"][0]["rotation"], 2, "{knob}: {st}");
        assert_eq!(c["strays"][0]["failure"]["action"], "revoke-stray");
        assert!(!st.to_string().contains(user(&stray)), "never printed");
        let stray_file = Path::new(&s.dir).join("creds/db/stray-2-1");
        assert_eq!(std::fs::read_to_string(&stray_file).unwrap(), stray);
        assert_eq!(mode(&stray_file), 0o600);
        assert_eq!(s.file("current").as_deref(), Some(first.as_str()));
        // Past both backoffs (30s): the stray's revocation is retried and
        // fails again; still no mint while it may be live.
        let lines = recorded_lines(&s.reconcile("2026-01-01T02:00:31Z", &[]));
        assert_eq!(lines.len(), 1, "{knob}: {lines:?}");
        assert!(lines[0].contains("(2 in a row)"), "{knob}: {lines:?}");
        assert_eq!(
            s.mint_runs(),
            2,
            "{knob}: no mint while a stray may be live"
        );
        assert_eq!(s.check("2026-01-01T02:00:45Z"), 4);
        // The revocation works again: the stray is revoked, then the mint
        // retried, in one run.
        s.knob("revoke-fails", false);
        let o = s.reconcile("2026-01-01T02:01:31Z", &[]);
        ok(&o);
        assert_eq!(stderr(&o), "");
        assert!(!s.redis.logs_in(&stray), "{knob}: the stray is revoked");
        assert!(s.revoked().contains(&stray));
        assert!(!stray_file.exists());
        let second = s.file("current").unwrap();
        assert_ne!(second, first);
        assert_ne!(second, stray);
        // During the grace the old and the new credential log in, and only
        // they exist.
        assert!(s.redis.logs_in(&first) && s.redis.logs_in(&second));
        let live: BTreeSet<String> = [user(&first), user(&second)].map(str::to_string).into();
        assert_eq!(s.redis.cred_users(), live, "{knob}");
        ok(&s.reconcile("2026-01-01T02:12:00Z", &[]));
        assert!(!s.redis.logs_in(&first) && !s.redis.logs_in(&stray));
        assert!(s.redis.logs_in(&second));
        assert_eq!(s.redis.cred_users().len(), 1, "{knob}: nothing leaked");
        assert_eq!(s.check("2026-01-01T02:12:00Z"), 0);
    }
}

// ---- Capped mint output ----

#[test]
fn a_mint_hook_that_floods_its_output_is_capped_failed_and_what_it_printed_is_revoked() {
    let s = Setup::new();
    ok(&s.init(&[]));
    let first = s.file("current").unwrap();
    // 100 MB after the credential.
    std::fs::write(s.root.join("mint-floods"), "100000000").unwrap();
    let started = Instant::now();
    let e = recorded_lines(&s.reconcile(DUE, &[]));
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(
        e[0].contains("printed more than 64 KiB (--max-output)"),
        "{e:?}"
    );
    // What it printed up to the cap was revoked through the revoke hook,
    // in the same run; the current credential is untouched.
    let flooded = s.minted()[1].clone();
    assert!(!s.redis.logs_in(&flooded), "revoked");
    let revoked = std::fs::read_to_string(s.root.join("revoke.log")).unwrap();
    assert!(revoked.contains(&flooded));
    assert_eq!(s.file("current").as_deref(), Some(first.as_str()));
    for entry in std::fs::read_dir(Path::new(&s.dir).join("creds/db")).unwrap() {
        let len = entry.unwrap().metadata().unwrap().len();
        assert!(len <= 64 * 1024, "nothing over the cap is stored: {len}");
    }
    let capture_bytes: u64 = std::fs::read_dir(Path::new(&s.dir).join(".cred-capture/db"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(capture_bytes <= 64 * 1024 + 4096, "{capture_bytes}");
    // A smaller cap counts too; within it the mint works.
    std::fs::write(s.root.join("mint-floods"), "2000").unwrap();
    let e = recorded_lines(&s.reconcile("2026-01-01T02:00:30Z", &["--max-output", "1K"]));
    assert!(e[0].contains("more than 1 KiB"), "{e:?}");
    let o = s.reconcile("2026-01-01T02:01:30Z", &[]);
    ok(&o);
    let second = s.file("current").unwrap();
    assert!(second.starts_with("cred-") && second.len() > 2000);
    // Bad sizes are bad usage.
    let o = s.reconcile(DUE, &["--max-output", "lots"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    s.knob("mint-floods", false);
    ok(&s.reconcile("2026-01-01T02:12:00Z", &[]));
    check_no_leak_dir(&s);
}

/// `check_no_leak` for the directory store of `s`.
fn check_no_leak_dir(s: &Setup) {
    let store = pki_rotate::FsStore::open(Path::new(&s.dir)).unwrap();
    let doc = pki_rotate::Driver::new(store)
        .load::<pki_rotate::CredentialEngine>("creds/db")
        .unwrap()
        .0;
    check_no_leak(s, &doc, "directory store");
}
