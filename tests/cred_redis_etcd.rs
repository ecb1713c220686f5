//! `pki cred` with the credential in a real etcd and its hooks against a
//! real Redis: two reconcilers racing under two URL spellings mint once and
//! leak nothing, the capture directory of a store URL is private, and a
//! mint that floods its output into etcd is capped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::cli::{mode, stderr};
use support::etcd;
use support::redis::{DUE, Setup, T0, check_no_leak, ok, recorded_lines};

use std::process::{Child, Command, Output, Stdio};

/// The credential document as the store holds it, read without the CLI.
fn load_from_etcd(server: &etcd::Etcd, prefix: &str) -> pki_rotate::CredentialState {
    let driver = pki_rotate::Driver::new(server.store(prefix));
    driver
        .load::<pki_rotate::CredentialEngine>("creds/db")
        .unwrap()
        .0
}

/// Runs `pki cred reconcile URL db --now NOW` for each URL at once.
fn race(s: &Setup, urls: &[&str], now: &str) -> Vec<Output> {
    let children: Vec<Child> = urls
        .iter()
        .map(|url| {
            s.command(&["cred", "reconcile", url, "db", "--now", now])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}

#[test]
fn two_reconcilers_on_one_etcd_store_under_two_url_spellings_mint_once_and_leak_nothing() {
    let server = etcd::Etcd::start();
    let s = Setup::new();
    let ip = server.url("p");
    let name = ip.replace("127.0.0.1", "localhost");
    let mint = format!("{}/mint.sh", s.root.display());
    let revoke = format!("{}/revoke.sh", s.root.display());
    ok(&s.pki(&[
        "cred",
        "init",
        &ip,
        "db",
        "--expire",
        "2h",
        "--grace",
        "10m",
        "--mint-cmd",
        &mint,
        "--revoke-cmd",
        &revoke,
        "--now",
        T0,
    ]));
    // Both hooks would run at once: each mint takes half a second.
    s.knob("mint-slow", true);
    let mut owners_told_to_wait = 0;
    for round in 1..=3i64 {
        let due = format!("2026-01-01T{:02}:00:00Z", 2 * round);
        let grace_end = format!("2026-01-01T{:02}:10:00Z", 2 * round);
        let urls = if round % 2 == 0 {
            [ip.as_str(), name.as_str()]
        } else {
            [name.as_str(), ip.as_str()]
        };
        for o in race(&s, &urls, &due) {
            ok(&o);
            let out = String::from_utf8_lossy(&o.stdout);
            owners_told_to_wait += usize::from(out.contains("minted by another reconciler"));
        }
        let doc = load_from_etcd(&server, "p");
        check_no_leak(&s, &doc, &format!("round {round}, in the grace"));
        assert_eq!(
            s.mint_runs(),
            1 + round as usize,
            "round {round}: one mint per rotation, whoever won"
        );
        assert_eq!(doc.current.as_ref().unwrap().rotation, 1 + round as u64);
        // Both at the end of the grace: both may revoke (idempotent).
        for o in race(&s, &urls, &grace_end) {
            ok(&o);
        }
        let doc = load_from_etcd(&server, "p");
        check_no_leak(&s, &doc, &format!("round {round}, after the grace"));
        assert!(doc.old.is_none() && doc.strays.is_empty() && doc.mint.is_none());
        assert_eq!(s.redis.cred_users().len(), 1, "round {round}");
    }
    // At least once the loser saw the winner's recorded mint and left it
    // alone (the hooks take long enough for the race to be real).
    assert!(owners_told_to_wait >= 1, "the race never happened");
}

#[test]
fn the_capture_directory_lock_and_owner_are_private_whatever_the_umask() {
    // A store URL: its captures live under XDG_STATE_HOME, made by pki
    // alone (a directory store refuses to work under umask 000 at all).
    let server = etcd::Etcd::start();
    let s = Setup::new();
    let url = server.url("p");
    let mint = format!("{}/mint.sh", s.root.display());
    let revoke = format!("{}/revoke.sh", s.root.display());
    let state = s.root.join("state");
    let o = Command::new("sh")
        .arg("-c")
        .arg(r#"umask 000; exec "$@""#)
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_pki"))
        .args([
            "cred",
            "init",
            &url,
            "db",
            "--expire",
            "2h",
            "--grace",
            "10m",
            "--mint-cmd",
            &mint,
            "--revoke-cmd",
            &revoke,
            "--now",
            T0,
        ])
        .env("XDG_STATE_HOME", &state)
        .output()
        .unwrap();
    ok(&o);
    let base = state.join("pki/cred-capture");
    let urls: Vec<_> = std::fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(urls.len(), 1, "{urls:?}");
    let capture = urls[0].join("db");
    for dir in [
        state.join("pki"),
        base.clone(),
        urls[0].clone(),
        capture.clone(),
    ] {
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    }
    for f in [".lock", ".owner"] {
        assert_eq!(mode(&capture.join(f)), 0o600, "{f}");
    }
    let owner = std::fs::read_to_string(capture.join(".owner")).unwrap();
    assert!(
        pki_rotate::credential::validate_owner(owner.trim()).is_ok(),
        "{owner:?}"
    );
}

#[test]
fn a_mint_hook_that_prints_megabytes_into_etcd_is_capped_and_later_reconciles_work() {
    let server = etcd::Etcd::start();
    let s = Setup::new();
    let url = server.url("p");
    let mint = format!("{}/mint.sh", s.root.display());
    let revoke = format!("{}/revoke.sh", s.root.display());
    ok(&s.pki(&[
        "cred",
        "init",
        &url,
        "db",
        "--expire",
        "2h",
        "--grace",
        "10m",
        "--mint-cmd",
        &mint,
        "--revoke-cmd",
        &revoke,
        "--now",
        T0,
    ]));
    std::fs::write(s.root.join("mint-floods"), "4000000").unwrap();
    let o = s.pki(&["cred", "reconcile", &url, "--now", DUE]);
    let e = recorded_lines(&o);
    assert!(e[0].contains("printed more than 64 KiB"), "{e:?}");
    s.knob("mint-floods", false);
    for now in ["2026-01-01T02:01:00Z", "2026-01-01T02:12:00Z"] {
        let o = s.pki(&["cred", "reconcile", &url, "--now", now]);
        ok(&o);
        assert_eq!(stderr(&o), "", "{now}");
    }
    let doc = load_from_etcd(&server, "p");
    assert_eq!(doc.current.as_ref().unwrap().rotation, 2);
    check_no_leak(&s, &doc, "etcd");
    assert_eq!(s.redis.cred_users().len(), 1);
}
