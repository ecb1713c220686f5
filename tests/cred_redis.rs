//! `pki cred` against a real service (see `support::redis`): a rotation
//! whose old and new credentials both log in during the grace and only the
//! new one after it, bad input refused with one line and nothing changed,
//! and hook text with terminal escapes stored and printed escaped.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::cli::{mode, stderr};
use support::redis::{DUE, GRACE_END, IN_GRACE, Setup, T0, ok, recorded, refused};

use std::path::Path;

#[test]
fn during_grace_old_and_new_log_in_and_after_it_only_the_new_one() {
    let s = Setup::new();
    ok(&s.init(&[]));
    let first = s.file("current").expect("init mints the first credential");
    assert!(s.redis.logs_in(&first));
    assert_eq!(s.file("old"), None);
    assert_eq!(
        std::fs::read_to_string(s.root.join("mint.log"))
            .unwrap()
            .trim(),
        "db",
        "PKI_CRED_NAME"
    );
    for f in ["current", "state.json"] {
        assert_eq!(
            mode(&Path::new(&s.dir).join("creds/db").join(f)),
            0o600,
            "{f}"
        );
    }
    assert_eq!(mode(&Path::new(&s.dir).join(".cred-capture")), 0o700);

    // Not due yet: nothing runs.
    ok(&s.reconcile("2026-01-01T01:00:00Z", &[]));
    assert_eq!(s.file("current").as_deref(), Some(first.as_str()));
    assert_eq!(s.mint_runs(), 1);

    // Due: the old one is kept, a new one minted; both log in.
    ok(&s.reconcile(DUE, &[]));
    let second = s.file("current").unwrap();
    assert_ne!(second, first);
    assert_eq!(s.file("old").as_deref(), Some(first.as_str()));
    assert_eq!(mode(&Path::new(&s.dir).join("creds/db/old")), 0o600);
    assert!(s.redis.logs_in(&first) && s.redis.logs_in(&second));
    let st = s.status(IN_GRACE);
    assert_eq!(st["credentials"][0]["state"], "grace");
    assert_eq!(st["credentials"][0]["old"]["until"], GRACE_END);

    ok(&s.reconcile(IN_GRACE, &[]));
    assert!(s.redis.logs_in(&first), "still in grace");

    // Grace over: the old one is revoked, only the new one works.
    ok(&s.reconcile(GRACE_END, &[]));
    assert!(!s.redis.logs_in(&first));
    assert!(s.redis.logs_in(&second));
    assert_eq!(s.file("old"), None);
    assert_eq!(s.redis.cred_users().len(), 1);
    assert_eq!(s.mint_runs(), 2);
    // Nothing of the credentials stays in the capture directory.
    let leftovers: Vec<_> = std::fs::read_dir(Path::new(&s.dir).join(".cred-capture/db"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let st = s.status(GRACE_END);
    assert_eq!(st["schema_version"], 1);
    let c = &st["credentials"][0];
    assert_eq!(c["state"], "idle");
    assert_eq!(c["current"]["rotation"], 2);
    assert_eq!(c["history"][0]["revoked_at"], GRACE_END);
    assert!(
        !st.to_string().contains(&second),
        "status never prints a credential"
    );
}

#[test]
fn bad_input_is_one_line_exit_1_and_changes_nothing() {
    let s = Setup::new();
    ok(&s.init(&[]));
    let before = s.snapshot();
    let mint = format!("{}/mint.sh", s.root.display());
    let init = |name: &str, expire: &str, grace: &str| {
        s.pki(&[
            "cred",
            "init",
            &s.dir,
            name,
            "--expire",
            expire,
            "--grace",
            grace,
            "--mint-cmd",
            &mint,
            "--revoke-cmd",
            "true",
            "--now",
            T0,
        ])
    };
    let e = refused(&s.reconcile(DUE, &["nosuch"]));
    assert!(e.contains("no credential \"nosuch\""), "{e}");
    // A malformed DUR is bad usage (exit 2), as everywhere in the CLI.
    for (expire, grace, flag) in [("ten days", "10m", "--expire"), ("2h", "5 min", "--grace")] {
        let o = init("other", expire, grace);
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", stderr(&o));
        assert!(stderr(&o).contains(flag), "{flag}: {}", stderr(&o));
    }
    for (name, expire, grace, expect) in [
        ("other", "2h", "2h", "must be shorter than the expiry"),
        ("Bad/Name", "2h", "10m", "invalid credential name"),
        ("db", "2h", "10m", "already exists"),
    ] {
        let e = refused(&init(name, expire, grace));
        assert!(e.contains(expect), "{expect}: {e}");
    }
    assert!(!Path::new(&s.dir).join("creds/other").exists());
    let e = refused(&s.pki(&[
        "cred",
        "reconcile",
        &s.root.join("nothing-here").display().to_string(),
    ]));
    assert!(e.contains("nothing-here"), "{e}");
    assert_eq!(s.snapshot(), before);
    assert_eq!(s.mint_runs(), 1);

    // A first mint that fails: the credential is recorded (exit 0), the
    // failure is one line on stderr, and there is no current credential
    // until a reconcile succeeds.
    s.knob("mint-prints-nothing", true);
    let o = init("empty", "2h", "10m");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(
        e.contains("cred empty: mint") && e.contains("printed nothing"),
        "{e}"
    );
    assert!(Path::new(&s.dir).join("creds/empty/state.json").exists());
    assert!(!Path::new(&s.dir).join("creds/empty/current").exists());
    assert_eq!(s.snapshot(), before, "the other credential is untouched");
    s.knob("mint-prints-nothing", false);
    ok(&s.reconcile("2026-01-01T00:00:30Z", &["empty"]));
    assert!(Path::new(&s.dir).join("creds/empty/current").exists());
}

#[test]
fn hook_text_with_terminal_escapes_is_stored_and_printed_escaped_and_bad_names_refused() {
    let s = Setup::new();
    ok(&s.init(&[]));
    s.knob("mint-fails-escapes", true);
    let o = s.reconcile(DUE, &[]);
    let e = recorded(&o);
    let clean = |text: &str| {
        !text
            .chars()
            .any(|c| c.is_control() && c != '\n' || c == '\u{202e}')
    };
    assert!(clean(&e), "{e:?}");
    assert!(e.contains("\\u{1b}[2J"), "{e}");
    let state = std::fs::read_to_string(Path::new(&s.dir).join("creds/db/state.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&state).unwrap();
    let message = doc["failure"]["message"].as_str().unwrap();
    assert!(clean(message), "stored: {message:?}");
    for args in [
        vec!["cred", "status", s.dir.as_str(), "--now", DUE],
        vec!["cred", "status", s.dir.as_str(), "--json", "--now", DUE],
    ] {
        let o = s.pki(&args);
        ok(&o);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(clean(&text), "{args:?}: {text:?}");
        assert!(!text.contains("\\u001b"), "{args:?}: {text}");
        assert_eq!(
            text.lines().filter(|l| l.contains("fake line")).count(),
            1,
            "{text}"
        );
    }
    // Names with control characters never get that far.
    let mint = format!("{}/mint.sh", s.root.display());
    for name in ["db\u{1b}[2J", "db\nfake", "db\r"] {
        let e = refused(&s.pki(&[
            "cred",
            "init",
            &s.dir,
            name,
            "--expire",
            "2h",
            "--grace",
            "10m",
            "--mint-cmd",
            &mint,
            "--revoke-cmd",
            "true",
            "--now",
            T0,
        ]));
        assert!(clean(&e) && e.contains("invalid credential name"), "{e:?}");
        let e = refused(&s.reconcile(DUE, &[name]));
        assert!(clean(&e), "{e:?}");
    }
}
