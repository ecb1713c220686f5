//! `pki cred` against a real Redis, killed or cut off at each point: kill
//! -9 while a hook runs, a failed store write at every step, a capture
//! whose report never landed. The next run adopts what was captured, never
//! mints twice for one attempt, and converges without a leak.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::redis::{DUE, GRACE_END, Setup, ok, recorded, refused, user};

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// Runs `pki cred reconcile` in the background with its pid where the
/// hooks can find it.
fn spawn_reconcile(s: &Setup, now: &str) -> Child {
    let child = s
        .command(&["cred", "reconcile", &s.dir, "--now", now])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::fs::write(s.root.join("pki.pid"), child.id().to_string()).unwrap();
    child
}

fn converge_and_check(s: &Setup, now: &str) {
    ok(&s.reconcile(now, &[]));
    ok(&s.reconcile(GRACE_END, &[]));
    let current = s.file("current").unwrap();
    assert!(s.redis.logs_in(&current));
    assert_eq!(s.file("old"), None);
    let users = s.redis.cred_users();
    assert_eq!(
        users.len(),
        1,
        "exactly one live credential, no leak: {users:?}"
    );
    assert!(users.contains(current.split(':').next().unwrap()));
}

#[test]
fn kill_9_while_the_mint_hook_sleeps_adopts_what_it_printed_without_minting_again() {
    let s = Setup::new();
    ok(&s.init(&[]));
    let first = s.file("current").unwrap();
    s.knob("mint-sleeps", true);
    let mut pki = spawn_reconcile(&s, DUE);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !s.root.join("mint-sleeping").exists() {
        assert!(Instant::now() < deadline, "the mint hook did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    pki.kill().unwrap(); // SIGKILL
    pki.wait().unwrap();
    // The hook lives on in its own process group; wake it while a new
    // pki waits for it on the capture file's lock.
    let waker = {
        let knob = s.root.join("mint-sleeps");
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            std::fs::remove_file(knob).unwrap();
        })
    };
    ok(&s.reconcile(DUE, &[]));
    waker.join().unwrap();
    assert_eq!(
        s.mint_runs(),
        2,
        "the mint hook never ran twice for one rotation"
    );
    let second = s.file("current").unwrap();
    assert_ne!(second, first);
    assert!(s.redis.logs_in(&first) && s.redis.logs_in(&second));
    converge_and_check(&s, DUE);
}

#[test]
fn kill_9_at_each_hook_point_resumes_and_converges_without_a_leak() {
    for knob in [
        "mint-kills-pki-before-print",
        "mint-kills-pki-after-print",
        "revoke-kills-pki",
    ] {
        let s = Setup::new();
        ok(&s.init(&[]));
        if knob.starts_with("mint") {
            s.knob(knob, true);
            let mut pki = spawn_reconcile(&s, DUE);
            let status = pki.wait().unwrap();
            assert_eq!(status.code(), None, "{knob}: pki was killed");
            s.knob(knob, false);
            ok(&s.reconcile(DUE, &[]));
            assert_eq!(s.mint_runs(), 2, "{knob}: adopted, not minted again");
            assert_eq!(s.redis.cred_users().len(), 2, "{knob}");
        } else {
            ok(&s.reconcile(DUE, &[]));
            s.knob(knob, true);
            let mut pki = spawn_reconcile(&s, GRACE_END);
            assert_eq!(pki.wait().unwrap().code(), None, "{knob}: pki was killed");
            s.knob(knob, false);
            // The old one is gone from Redis but still recorded: revoking
            // it again must succeed.
            assert!(s.file("old").is_some());
        }
        converge_and_check(&s, DUE);
    }
}

#[test]
fn a_failed_store_write_at_every_step_changes_nothing_and_the_next_run_converges() {
    let s = Setup::new();
    ok(&s.init(&[]));
    // A rotation is four committed steps: keep old, start mint, record the
    // mint, record the revocation. Fail each one in turn, then let it pass.
    let mut steps_done = 0;
    let mut now = DUE;
    while steps_done < 4 {
        if steps_done == 3 {
            now = GRACE_END;
        }
        let before = s.snapshot();
        s.block_next_write(true);
        let o = s.reconcile(now, &["--max-steps", "1"]);
        s.block_next_write(false);
        let e = refused(&o);
        assert!(e.contains(".gen-"), "{e}");
        assert_eq!(
            s.snapshot(),
            before,
            "step {steps_done}: the store is unchanged"
        );
        ok(&s.reconcile(now, &["--max-steps", "1"]));
        assert_ne!(s.snapshot(), before, "step {steps_done} committed");
        steps_done += 1;
        assert!(s.mint_runs() <= 2, "never a second mint for rotation 2");
        assert!(
            s.redis.cred_users().len() <= 2,
            "never more than old and new"
        );
    }
    assert_eq!(s.mint_runs(), 2);
    converge_and_check(&s, GRACE_END);
}

#[test]
fn kill_9_after_a_failed_mint_printed_adopts_the_failure_and_revokes_what_it_printed() {
    let s = Setup::new();
    ok(&s.init(&[]));
    let first = s.file("current").unwrap();
    // The hook prints, pki dies, then the hook fails: the next run adopts
    // the failure with what it printed.
    s.knob("mint-kills-pki-after-print", true);
    s.knob("mint-fails-after-minting", true);
    let mut pki = spawn_reconcile(&s, DUE);
    assert_eq!(pki.wait().unwrap().code(), None, "pki was killed");
    s.knob("mint-kills-pki-after-print", false);
    s.knob("mint-fails-after-minting", false);
    let stray = s.minted()[1].clone();
    let e = recorded(&s.reconcile(DUE, &[]));
    assert!(e.contains("exited with status 5"), "{e}");
    assert_eq!(s.mint_runs(), 2, "adopted, not minted again");
    assert!(!s.redis.logs_in(&stray), "revoked in the same run");
    assert!(s.redis.logs_in(&first));
    ok(&s.reconcile("2026-01-01T02:01:00Z", &[]));
    assert_eq!(s.mint_runs(), 3);
    ok(&s.reconcile("2026-01-01T02:12:00Z", &[]));
    let current = s.file("current").unwrap();
    assert!(s.redis.logs_in(&current));
    let users = s.redis.cred_users();
    assert_eq!(users, BTreeSet::from([user(&current).to_string()]));
}

#[test]
fn a_capture_whose_report_never_landed_is_recorded_and_revoked_not_deleted() {
    let s = Setup::new();
    ok(&s.init(&[]));
    // A credential the mint hook made for attempt 1/1, whose report lost
    // to another one: it is only in the capture file.
    let lost = "cred-lostreport:0123456789abcdef";
    assert_eq!(
        s.redis.cli(&[
            "ACL",
            "SETUSER",
            user(lost),
            "on",
            ">0123456789abcdef",
            "~*",
            "+@all"
        ]),
        "OK"
    );
    assert!(s.redis.logs_in(lost));
    let capture = Path::new(&s.dir).join(".cred-capture/db");
    std::fs::write(capture.join("1-1.out"), format!("{lost}\n")).unwrap();
    std::fs::write(capture.join("1-1.status"), "0\n").unwrap();
    let o = s.reconcile("2026-01-01T01:00:00Z", &[]);
    ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("reported after the document moved on") && out.contains("revoked the stray"),
        "{out}"
    );
    assert!(!s.redis.logs_in(lost), "revoked, not forgotten");
    assert!(s.revoked().iter().any(|r| r == lost));
    assert!(!capture.join("1-1.out").exists());
    assert_eq!(s.redis.cred_users().len(), 1);
    assert_eq!(s.mint_runs(), 1);
}
