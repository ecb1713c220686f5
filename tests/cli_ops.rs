//! The operations-grade behaviour of the `pki` binary: `status --check`
//! exit codes and wording, guarded leaf changes (`issue --replace`, `renew`,
//! `remove`), refused trust-breaking rotations, a closed stdout, one-line
//! errors, leaf name rules, capped inputs, time errors, `inspect`,
//! completions and the checked-in man page.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};

// 2026-01-01: the simulated creation time of every store here.
const T0: &str = "2026-01-01T00:00:00Z";
// T0 + 396 days: just past the rotation point of the default policy (D - M = 395d).
const AFTER_ROTATION_POINT: &str = "2027-02-01T00:00:00Z";
// A month after that automatic rotation.
const MONTH_LATER: &str = "2027-03-01T00:00:00Z";
// T0 + 304 days: web (365 days, renewed with 20% left) is due for renewal.
const LEAF_DUE: &str = "2026-11-01T00:00:00Z";
// T0 + 800 days: the first CA (790 days) has expired.
const AFTER_CA_EXPIRY: &str = "2028-03-10T00:00:00Z";

fn pki(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pki"))
        .args(args)
        .output()
        .expect("run pki")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(args: &[&str]) -> String {
    let o = pki(args);
    assert!(o.status.success(), "pki {args:?} failed: {}", stderr(&o));
    stdout(&o)
}

/// Exit `code`, exactly one line on stderr, no panic text.
fn fails_with(code: i32, args: &[&str]) -> String {
    let o = pki(args);
    assert_eq!(
        o.status.code(),
        Some(code),
        "pki {args:?}: {}{}",
        stdout(&o),
        stderr(&o)
    );
    let err = stderr(&o);
    if code == 1 {
        assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
        assert!(err.starts_with("pki: "), "{err}");
    }
    assert!(
        !err.contains("panicked") && !err.contains("internal error"),
        "{err}"
    );
    err
}

fn refused(args: &[&str]) -> String {
    fails_with(1, args)
}

/// Every file under `dir` (following links), for before/after comparisons.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            let rel = path.strip_prefix(base).unwrap().display().to_string();
            if rel.starts_with(".lock") {
                continue;
            }
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

/// A store created at T0 with `web` (server, two names) issued.
fn store(extra_init: &[&str]) -> (tempfile::TempDir, String) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki").display().to_string();
    let mut init = vec!["init", dir.as_str(), "--now", T0];
    init.extend_from_slice(extra_init);
    ok(&init);
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

fn status_json(dir: &str, now: &str) -> serde_json::Value {
    serde_json::from_str(&ok(&["status", dir, "--json", "--now", now])).unwrap()
}

#[test]
fn status_check_exits_0_when_nothing_is_due_3_when_an_action_is_and_4_when_broken() {
    let (_tmp, dir) = store(&[]);
    let code = |now: &str| {
        pki(&["status", &dir, "--check", "--now", now])
            .status
            .code()
    };
    assert_eq!(code("2026-02-01T00:00:00Z"), Some(0));
    // web is due for renewal: `pki rotate` has work to do.
    assert_eq!(code(LEAF_DUE), Some(3));
    // The leaf (365 days) has expired: clients reject the server.
    assert_eq!(code("2027-01-15T00:00:00Z"), Some(4));
    // The CA itself has expired.
    assert_eq!(code(AFTER_CA_EXPIRY), Some(4));
    // Without --check, status reports and exits 0 whatever it finds.
    assert_eq!(
        pki(&["status", &dir, "--now", AFTER_CA_EXPIRY])
            .status
            .code(),
        Some(0)
    );
    // --json carries the same verdict.
    let json = status_json(&dir, LEAF_DUE);
    assert_eq!(json["health"], "action-due");
    assert_eq!(json["pending"][0]["action"], "issue-leaf");
    assert_eq!(status_json(&dir, AFTER_CA_EXPIRY)["health"], "broken");
}

#[test]
fn status_check_is_not_broken_by_a_previous_ca_distrusted_on_purpose() {
    // 2026-02-01: a month after T0, the emergency; checked a week later,
    // long before the old CA would have expired (2028-03-01).
    let (at, week_later) = ("2026-02-01T00:00:00Z", "2026-02-08T00:00:00Z");
    let code = |dir: &str, now: &str| pki(&["status", dir, "--check", "--now", now]).status.code();
    let (_tmp, dir) = store(&[]);
    ok(&[
        "rotate",
        &dir,
        "--force",
        "key leaked",
        "--compromised",
        "--now",
        at,
    ]);
    assert_eq!(code(&dir, week_later), Some(0));
    let json = status_json(&dir, week_later);
    let retired = json["trust"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["retired"] == true)
        .count();
    assert_eq!(retired, 3, "{json}");
    let text = ok(&["status", &dir, "--now", week_later]);
    assert!(text.contains("as intended: retired"), "{text}");

    let (_tmp, dir) = store(&[]);
    ok(&[
        "rotate", &dir, "--force", "drill", "--grace", "1d", "--now", at,
    ]);
    // The expired bridge A is still to be pruned: due, not broken.
    assert_eq!(code(&dir, week_later), Some(3));
    ok(&["rotate", &dir, "--now", week_later]);
    assert_eq!(code(&dir, week_later), Some(0));
}

#[test]
fn status_marks_expired_certificates_and_words_past_dates_as_past() {
    let (_tmp, dir) = store(&[]);
    let text = ok(&["status", &dir, "--now", AFTER_CA_EXPIRY]);
    let web = text.lines().find(|l| l.contains("web.ns.svc")).unwrap();
    assert!(web.contains("EXPIRED"), "{web}");
    assert!(text.contains("BROKEN: the CA"), "{text}");
    assert!(text.contains("CA expired"), "{text}");
    assert!(
        !text.contains("left, less than"),
        "negative time left: {text}"
    );
    assert!(!text.contains("expires soon"), "{text}");
    assert!(!text.contains("-1d") && !text.contains("has -"), "{text}");
    assert!(text.contains("rotation due since"), "{text}");
    // A leaf past its NotAfter is "expired", never "expires soon".
    let json = status_json(&dir, "2027-01-15T00:00:00Z");
    assert_eq!(json["leaves"][0]["state"], "expired");
    assert_eq!(json["leaves"][0]["reissue"]["kind"], "expired");
}

#[test]
fn issue_refuses_a_kind_change_or_dropped_names_without_replace_and_says_why() {
    let (tmp, dir) = store(&[]);
    let before = tree(tmp.path());
    let err = refused(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.ns.svc",
        "--dns",
        "web.ns.svc.cluster.local",
        "--client",
        "--now",
        T0,
    ]);
    assert!(
        err.contains("kind would change from server to client") && err.contains("--replace"),
        "{err}"
    );
    let err = refused(&["issue", &dir, "web", "--dns", "web.ns.svc", "--now", T0]);
    assert!(err.contains("would lose web.ns.svc.cluster.local"), "{err}");
    assert_eq!(
        before,
        tree(tmp.path()),
        "a refused issue changed the store"
    );

    // Adding a name is an ordinary change.
    let out = ok(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.ns.svc",
        "--dns",
        "web.ns.svc.cluster.local",
        "--dns",
        "web.example.org",
        "--now",
        T0,
    ]);
    assert!(out.contains("requested names changed"), "{out}");

    let out = ok(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.ns.svc",
        "--dns",
        "web.ns.svc.cluster.local",
        "--dns",
        "web.example.org",
        "--client",
        "--replace",
        "--now",
        T0,
    ]);
    assert!(
        out.contains("requested kind changed from server to client"),
        "{out}"
    );
    let out = ok(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.ns.svc",
        "--client",
        "--replace",
        "--now",
        T0,
    ]);
    assert!(out.contains("requested names changed"), "{out}");
    let json = status_json(&dir, T0);
    assert_eq!(json["leaves"][0]["kind"], "client");
    assert_eq!(
        json["leaves"][0]["names"],
        serde_json::json!(["web.ns.svc"])
    );
}

#[test]
fn renew_reissues_one_certificate_now_and_remove_deletes_one() {
    let (tmp, dir) = store(&[]);
    ok(&["issue", &dir, "api", "--dns", "api.ns.svc", "--now", T0]);
    let d = tmp.path().join("pki");
    let web = std::fs::read(d.join("certs/web/tls.crt")).unwrap();
    let web_key = std::fs::read(d.join("certs/web/tls.key")).unwrap();
    let api = std::fs::read(d.join("certs/api/tls.crt")).unwrap();

    let out = ok(&["renew", &dir, "web", "--now", "2026-02-01T00:00:00Z"]);
    assert!(
        out.contains("issued web") && out.contains("renewed on request"),
        "{out}"
    );
    assert_ne!(web, std::fs::read(d.join("certs/web/tls.crt")).unwrap());
    assert_ne!(web_key, std::fs::read(d.join("certs/web/tls.key")).unwrap());
    assert_eq!(api, std::fs::read(d.join("certs/api/tls.crt")).unwrap());
    let json = status_json(&dir, "2026-02-01T00:00:00Z");
    // Issued now (backdated a few minutes for clock skew), not at T0.
    assert!(
        json["leaves"][1]["cert"]["not_before"].as_str().unwrap() > "2026-01-31",
        "{json}"
    );

    let before = tree(tmp.path());
    let err = refused(&["renew", &dir, "nope", "--now", "2026-02-01T00:00:00Z"]);
    assert!(err.contains("no certificate named \"nope\""), "{err}");
    assert_eq!(before, tree(tmp.path()));

    let out = ok(&["remove", &dir, "api", "--now", "2026-02-01T00:00:00Z"]);
    assert!(out.contains("removed api"), "{out}");
    assert!(!d.join("certs/api").exists());
    assert!(d.join("certs/web/tls.crt").exists());
    let json = status_json(&dir, "2026-02-01T00:00:00Z");
    assert_eq!(json["leaves"].as_array().unwrap().len(), 1);
    let err = refused(&["remove", &dir, "api", "--now", "2026-02-01T00:00:00Z"]);
    assert!(err.contains("no certificate named \"api\""), "{err}");
}

#[test]
fn rotating_an_expired_ca_is_refused_unless_the_trust_break_is_allowed_and_recorded() {
    let (tmp, dir) = store(&[]);
    let before = tree(tmp.path());
    let err = refused(&["rotate", &dir, "--now", AFTER_CA_EXPIRY]);
    assert!(
        err.contains("expired at 2028-03-01T00:00:00Z")
            && err.contains("no bridge can be made")
            && err.contains("--allow-trust-break"),
        "{err}"
    );
    assert_eq!(before, tree(tmp.path()), "a refused rotation wrote");

    let out = ok(&[
        "rotate",
        &dir,
        "--allow-trust-break",
        "CA lapsed over the holidays",
        "--now",
        AFTER_CA_EXPIRY,
    ]);
    assert!(
        out.contains("trust break allowed: previous-ca-expired"),
        "{out}"
    );
    let json = status_json(&dir, AFTER_CA_EXPIRY);
    let record = &json["history"][0];
    assert_eq!(record["reason"]["kind"], "expiring");
    assert_eq!(record["previous_trusted_until"], serde_json::Value::Null);
    assert_eq!(record["overridden"][0]["name"], "previous-ca-expired");
    let detail = record["overridden"][0]["detail"].as_str().unwrap();
    assert!(detail.contains("CA lapsed over the holidays"), "{detail}");
}

#[test]
fn a_forced_rotation_soon_after_another_is_refused_naming_who_breaks_and_until_when() {
    let (tmp, dir) = store(&[]);
    ok(&["rotate", &dir, "--now", AFTER_ROTATION_POINT]);
    let before = tree(tmp.path());
    let err = refused(&[
        "rotate",
        &dir,
        "--force",
        "key ceremony",
        "--now",
        MONTH_LATER,
    ]);
    // Without a reload interval, consumers may hold old files for up to M
    // (395d) after the rotation at 2027-02-01; the first CA expires before.
    assert!(
        err.contains(
            "clients still holding the bundle from before the rotation at 2027-02-01T00:00:00Z"
        ) && err.contains("servers still presenting certificates of CA")
            && err.contains("until 2028-03-01T00:00:00Z"),
        "{err}"
    );
    assert_eq!(before, tree(tmp.path()), "a refused rotation wrote");

    let json: serde_json::Value = serde_json::from_str(&ok(&[
        "rotate",
        &dir,
        "--force",
        "key ceremony",
        "--allow-trust-break",
        "all consumers restarted",
        "--json",
        "--now",
        MONTH_LATER,
    ]))
    .unwrap();
    assert_eq!(json["rotated"], true);
    let record = &json["rotation"];
    assert_eq!(record["reason"]["kind"], "forced");
    assert_eq!(record["reason"]["reason"], "key ceremony");
    let overridden = record["overridden"].as_array().unwrap();
    assert_eq!(overridden.len(), 2, "{overridden:?}");
    assert!(
        overridden
            .iter()
            .all(|o| o["name"] == "bundle-of-two-rotations-ago")
    );
    assert_eq!(status_json(&dir, MONTH_LATER)["history"][1], *record);
}

#[test]
fn a_forced_rotation_after_the_reload_interval_needs_no_override() {
    let (_tmp, dir) = store(&["--reload-interval", "7d"]);
    ok(&["rotate", &dir, "--now", AFTER_ROTATION_POINT]);
    // Six days later a consumer may still hold the first bundle...
    let err = refused(&[
        "rotate",
        &dir,
        "--force",
        "early",
        "--now",
        "2027-02-07T00:00:00Z",
    ]);
    assert!(err.contains("until 2027-02-08T00:00:00Z"), "{err}");
    // ...a month later every one has reloaded.
    let out = ok(&[
        "rotate",
        &dir,
        "--force",
        "key ceremony",
        "--now",
        MONTH_LATER,
    ]);
    assert!(out.contains("forced: key ceremony"), "{out}");
    let json = status_json(&dir, MONTH_LATER);
    assert!(json["history"][1].get("overridden").is_none(), "{json}");
}

/// Runs pki with its stdout a pipe whose reading end is already closed.
fn with_closed_stdout(args: &[&str]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_pki"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    child.wait_with_output().unwrap()
}

#[test]
fn a_closed_stdout_ends_quietly_without_a_panic() {
    let (_tmp, dir) = store(&[]);
    for args in [
        vec!["status", dir.as_str(), "--now", T0],
        vec!["status", dir.as_str(), "--json", "--now", T0],
        vec!["completions", "bash"],
        vec!["demo"],
    ] {
        let o = with_closed_stdout(&args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o), "", "{args:?}");
    }
    // The check's verdict survives a closed stdout.
    let o = with_closed_stdout(&["status", &dir, "--check", "--now", LEAF_DUE]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
}

#[test]
fn errors_with_control_characters_stay_on_one_line_and_names_are_checked() {
    let (tmp, dir) = store(&[]);
    let before = tree(tmp.path());
    let err = refused(&["issue", &dir, "we\nb", "--dns", "x.ns.svc", "--now", T0]);
    assert!(err.contains("we\\nb"), "{err}");
    let other = tmp.path().join("other").display().to_string();
    let err = refused(&["init", &other, "--cn", "evil\nCN=root", "--now", T0]);
    assert!(err.contains("control character"), "{err}");
    assert!(!Path::new(&other).join("signer").exists());

    for (dns, why) in [
        ("*", "bare wildcard"),
        ("*.com", "top-level domain"),
        ("10.0.0.1", "IP address"),
        ("::1", "IP address"),
    ] {
        let err = refused(&["issue", &dir, "bad", "--dns", dns, "--now", T0]);
        assert!(err.contains("refused") && err.contains(why), "{dns}: {err}");
    }
    assert_eq!(before, tree(tmp.path()));
    ok(&[
        "issue",
        &dir,
        "wild",
        "--dns",
        "*.apps.example.com",
        "--now",
        T0,
    ]);
}

#[test]
fn inputs_are_read_with_a_size_cap() {
    let (_tmp, dir) = store(&[]);
    let bundle = format!("{dir}/ca-bundle.crt");
    let chain = format!("{dir}/certs/web/tls.crt");
    let ca = format!("{dir}/signer/tls.crt");
    let new_dir = format!("{dir}-imported");
    let before = tree(Path::new(&dir));
    for args in [
        vec!["verify", "--bundle", "/dev/zero", "--chain", chain.as_str()],
        vec![
            "verify",
            "--bundle",
            bundle.as_str(),
            "--chain",
            "/dev/zero",
        ],
        vec!["pin", "/dev/zero"],
        vec!["inspect", "/dev/zero"],
        vec!["init", new_dir.as_str(), "--import", "/dev/zero"],
        vec!["validate", dir.as_str(), "--to", "/dev/zero"],
        vec!["rotate", dir.as_str(), "--to", "/dev/zero"],
        vec![
            "rotate",
            dir.as_str(),
            "--to",
            ca.as_str(),
            "--key-file",
            "/dev/zero",
        ],
        vec![
            "validate",
            dir.as_str(),
            "--to",
            ca.as_str(),
            "--chain",
            "/dev/zero",
        ],
        vec![
            "validate",
            dir.as_str(),
            "--to",
            ca.as_str(),
            "--service-account-keys",
            "/dev/zero",
        ],
        vec![
            "rotate",
            dir.as_str(),
            "--to",
            ca.as_str(),
            "--service-account-keys",
            "/dev/zero",
        ],
    ] {
        let err = refused(&args);
        assert!(
            err.contains("/dev/zero: larger than the input limit of 16777216 bytes")
                && err.contains("--max-input-size"),
            "{args:?}: {err}"
        );
    }
    assert_eq!(tree(Path::new(&dir)), before);
    assert!(!Path::new(&new_dir).join("pki-state.json").exists());
    let err = refused(&["pin", &bundle, "--max-input-size", "100"]);
    assert!(err.contains("limit of 100 bytes"), "{err}");
    let err = refused(&["validate", &dir, "--to", &ca, "--max-input-size", "100"]);
    assert!(err.contains("limit of 100 bytes"), "{err}");
    ok(&["pin", &bundle, "--max-input-size", "1M"]);
    fails_with(2, &["pin", &bundle, "--max-input-size", "lots"]);
}

#[test]
fn a_bad_time_is_bad_usage_with_an_example_and_help_shows_one() {
    let (_tmp, dir) = store(&[]);
    for args in [
        vec!["status", dir.as_str(), "--now", "2027-02-01"],
        vec!["rotate", dir.as_str(), "--now", "tomorrow"],
        vec![
            "verify",
            "--bundle",
            "b",
            "--chain",
            "c",
            "--at",
            "2027-13-01T00:00:00Z",
        ],
    ] {
        let err = fails_with(2, &args);
        assert!(
            err.contains("is not a time") && err.contains("2027-02-01T00:00:00Z"),
            "{err}"
        );
    }
    for command in ["status", "validate", "rotate", "init", "issue", "inspect"] {
        let help = ok(&[command, "--help"]);
        assert!(
            help.contains("--now <TIME>") && help.contains("like 2027-02-01T00:00:00Z"),
            "{command}: {help}"
        );
    }
}

#[test]
fn inspect_shows_every_certificate_and_which_store_ca_issued_it() {
    let (_tmp, dir) = store(&[]);
    let chain = format!("{dir}/certs/web/tls.crt");
    let before_rotation = std::fs::read(&chain).unwrap();
    ok(&["rotate", &dir, "--now", AFTER_ROTATION_POINT]);
    let json = status_json(&dir, AFTER_ROTATION_POINT);
    let (current, previous) = (
        json["ca"]["id"].as_str().unwrap().to_string(),
        json["previous"]["id"].as_str().unwrap().to_string(),
    );

    let out = ok(&[
        "inspect",
        &chain,
        "--store",
        &dir,
        "--now",
        AFTER_ROTATION_POINT,
    ]);
    // Leaf then bridge B.
    assert!(
        out.contains("certificate 0:") && out.contains("certificate 1:"),
        "{out}"
    );
    for field in [
        "subject",
        "issuer",
        "SKI",
        "AKI",
        "not before",
        "not after",
        "sha256",
    ] {
        assert!(out.contains(field), "{field}: {out}");
    }
    assert!(
        out.contains("names        web.ns.svc, web.ns.svc.cluster.local"),
        "{out}"
    );
    assert!(
        out.contains(&format!("issued by    current CA {current}")),
        "{out}"
    );
    assert!(
        out.contains(&format!("issued by    previous CA {previous}")),
        "bridge B: {out}"
    );
    assert!(out.contains("(in 3"), "countdown: {out}");

    let old = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(old.path(), before_rotation).unwrap();
    let path = old.path().display().to_string();
    let out = ok(&[
        "inspect",
        &path,
        "--store",
        &dir,
        "--now",
        AFTER_ROTATION_POINT,
    ]);
    assert!(
        out.contains(&format!("issued by    previous CA {previous}")),
        "{out}"
    );
    let out = ok(&["inspect", &path, "--now", "2027-06-01T00:00:00Z"]);
    assert!(out.contains("EXPIRED"), "{out}");
}

#[test]
fn completions_are_generated_for_each_shell() {
    let bash = ok(&["completions", "bash"]);
    assert!(
        bash.contains("_pki") && bash.contains("--allow-trust-break"),
        "{bash}"
    );
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        assert!(ok(&["completions", shell]).contains("renew"), "{shell}");
    }
    fails_with(2, &["completions", "tcsh"]);
}

#[test]
fn the_checked_in_man_pages_are_generated_from_the_cli() {
    let page = ok(&["man"]);
    assert!(
        page.contains(".TH pki 1") && page.contains("pki\\-renew(1)"),
        "{page}"
    );
    let fresh = tempfile::tempdir().unwrap();
    ok(&["man", &fresh.path().display().to_string()]);
    let checked_in = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/man");
    if std::env::var_os("PKI_UPDATE_DOCS").is_some() {
        let _ = std::fs::remove_dir_all(&checked_in);
        std::fs::create_dir_all(&checked_in).unwrap();
        for e in std::fs::read_dir(fresh.path()).unwrap() {
            let e = e.unwrap();
            std::fs::copy(e.path(), checked_in.join(e.file_name())).unwrap();
        }
    }
    let read = |dir: &Path| -> BTreeMap<String, String> {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .map(|e| {
                        let e = e.unwrap();
                        (
                            e.file_name().to_string_lossy().into_owned(),
                            std::fs::read_to_string(e.path()).unwrap(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    let (fresh, checked_in) = (read(fresh.path()), read(&checked_in));
    let rotate = &fresh["pki-rotate.1"];
    assert!(rotate.contains("allow\\-trust\\-break"), "{rotate}");
    assert!(
        fresh == checked_in,
        "docs/man/ is out of date: run `PKI_UPDATE_DOCS=1 cargo test --test cli_ops the_checked_in_man_pages` and commit it"
    );
}

/// The command lines of `examples/cron/pki-rotate` (what follows the five
/// time fields and the user) and the `ExecStart=` of
/// `examples/systemd/pki-rotate.service`.
fn example_commands() -> (Vec<String>, String) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let cron = std::fs::read_to_string(root.join("cron/pki-rotate")).unwrap();
    let unit = std::fs::read_to_string(root.join("systemd/pki-rotate.service")).unwrap();
    let mut commands = Vec::new();
    for line in cron.lines().filter(|l| l.starts_with(char::is_numeric)) {
        let mut rest = line;
        for _ in 0..6 {
            rest = rest.trim_start();
            rest = &rest[rest.find(char::is_whitespace).unwrap()..];
        }
        commands.push(rest.trim().to_string());
    }
    let exec = unit
        .lines()
        .find_map(|l| l.strip_prefix("ExecStart="))
        .unwrap()
        .to_string();
    (commands, exec)
}

/// Runs a cron command line with `sh`, the store path replaced by `dir`
/// and `pki` found on PATH as cron would: (exit status, stdout, stderr).
fn run_cron(command: &str, dir: &str) -> (Option<i32>, String, String) {
    let bin = Path::new(env!("CARGO_BIN_EXE_pki")).parent().unwrap();
    let o = Command::new("sh")
        .arg("-c")
        .arg(command.replace("/var/lib/pki/service-ca", dir))
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .output()
        .unwrap();
    (o.status.code(), stdout(&o), stderr(&o))
}

/// `init` at `days_ago` days before the real time: cron runs at the clock.
fn store_made_days_ago(tmp: &Path, name: &str, days_ago: i64) -> String {
    let dir = tmp.join(name).display().to_string();
    let made = time::OffsetDateTime::now_utc() - time::Duration::days(days_ago);
    ok(&["init", &dir, "--now", &pki_core::datetime::rfc3339(made)]);
    dir
}

#[test]
fn the_cron_example_mails_only_when_something_happened_or_needs_a_human() {
    let (cron, _) = example_commands();
    let [rotate, check] = <[String; 2]>::try_from(cron).unwrap();
    let tmp = tempfile::tempdir().unwrap();

    // Nothing due: no output at all, so cron sends no mail.
    let fresh = store_made_days_ago(tmp.path(), "fresh", 1);
    assert_eq!(
        run_cron(&rotate, &fresh),
        (Some(0), String::new(), String::new())
    );
    assert_eq!(
        run_cron(&check, &fresh),
        (Some(0), String::new(), String::new())
    );

    // Due (400 of 790 days gone, less than M = 395 left): the daily check
    // says so in one line; the hourly rotate says what it did, and after
    // it nothing is due.
    let due = store_made_days_ago(tmp.path(), "due", 400);
    let (_, out, err) = run_cron(&check, &due);
    assert!(
        out.trim_end().lines().count() == 1 && out.contains("an action is due") && err.is_empty(),
        "{out}{err}"
    );
    let (code, out, err) = run_cron(&rotate, &due);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with("rotated CA") && err.is_empty(),
        "{out}{err}"
    );
    assert_eq!(
        run_cron(&check, &due),
        (Some(0), String::new(), String::new())
    );

    // Expired (800 days): trust is broken; rotating is refused on stderr.
    let expired = store_made_days_ago(tmp.path(), "expired", 800);
    let (_, out, err) = run_cron(&check, &expired);
    assert!(
        out.trim_end().lines().count() == 1 && out.contains("trust broken") && err.is_empty(),
        "{out}{err}"
    );
    let (code, out, err) = run_cron(&rotate, &expired);
    assert_eq!(code, Some(1));
    assert!(
        out.is_empty() && err.trim_end().lines().count() == 1,
        "{out}{err}"
    );

    // A store that cannot be read is not called "trust broken".
    let missing = tmp.path().join("missing").display().to_string();
    let (_, out, err) = run_cron(&check, &missing);
    assert!(
        out.contains("could not check") && !out.contains("trust broken"),
        "{out}"
    );
    assert!(err.starts_with("pki: "), "{err}");
}

#[test]
fn the_systemd_example_runs_as_written_and_its_timer_catches_up_after_downtime() {
    let (_, exec) = example_commands();
    let words: Vec<&str> = exec.split_whitespace().collect();
    assert!(words[0].ends_with("/pki"), "{exec}");
    let tmp = tempfile::tempdir().unwrap();
    let dir = store_made_days_ago(tmp.path(), "service-ca", 1);
    let args: Vec<&str> = words[1..]
        .iter()
        .map(|w| {
            if *w == "/var/lib/pki/service-ca" {
                dir.as_str()
            } else {
                w
            }
        })
        .collect();
    // The journal gets a line per run: what was done, or that nothing was.
    let out = ok(&args);
    assert!(
        out.contains("nothing to do") && out.contains("next rotation"),
        "{out}"
    );

    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/systemd");
    let timer = std::fs::read_to_string(root.join("pki-rotate.timer")).unwrap();
    let settings: Vec<&str> = timer
        .lines()
        .filter(|l| !l.starts_with('#') && l.contains('='))
        .collect();
    // Persistent= only applies to OnCalendar= timers (systemd.timer(5)).
    if settings.contains(&"Persistent=true") {
        assert!(
            settings.iter().any(|l| l.starts_with("OnCalendar=")),
            "{timer}"
        );
    }
    assert!(
        settings
            .iter()
            .any(|l| l.starts_with("OnCalendar=") || l.starts_with("OnUnitActiveSec=")),
        "the timer never fires: {timer}"
    );
}
