//! What the `pki` binary reads and prints: a closed stdout, one-line
//! errors, leaf name rules, capped inputs, time errors, `inspect`,
//! completions, the checked-in man pages, and the cron and systemd
//! examples run as written.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::cli::{fails_with, ok, refused, stderr, stdout, tree};
use support::store::{AFTER_ROTATION_POINT, LEAF_DUE, T0, status_json, store};

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output, Stdio};

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
fn names_and_reasons_with_bidi_overrides_or_zero_width_characters_are_refused_and_shown_escaped() {
    let (tmp, dir) = store(&[]);
    let fingerprint = status_json(&dir, T0)["bundle_fingerprint"]
        .as_str()
        .unwrap()
        .to_string();
    let before = tree(tmp.path());
    let other = tmp.path().join("other").display().to_string();
    for (invisible, escaped) in [
        ('\u{202e}', "\\u{202e}"),
        ('\u{200b}', "\\u{200b}"),
        ('\u{2067}', "\\u{2067}"),
        ('\u{feff}', "\\u{feff}"),
    ] {
        let name = format!("web{invisible}1");
        let err = refused(&[
            "ack",
            &dir,
            &name,
            "--fingerprint",
            &fingerprint,
            "--now",
            T0,
        ]);
        assert!(err.contains("invalid consumer name"), "{err}");
        assert!(err.contains(escaped) && !err.contains(invisible), "{err}");
        let reason = format!("key leaked {invisible}tsrif");
        let err = refused(&["rotate", &dir, "--force", &reason, "--now", T0]);
        assert!(err.contains("control character"), "{err}");
        assert!(!err.contains(invisible), "{err}");
        let err = refused(&["init", &other, "--cn", &name, "--now", T0]);
        assert!(err.contains("invisible character"), "{err}");
        assert!(err.contains(escaped) && !err.contains(invisible), "{err}");
    }
    assert_eq!(before, tree(tmp.path()));
    assert!(!Path::new(&other).join("signer").exists());
    // Other scripts are names like any.
    ok(&[
        "ack",
        &dir,
        "東京-1",
        "--fingerprint",
        &fingerprint,
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
    // The SYNOPSIS shows what a user types, not the page's name.
    assert!(rotate.contains("\\fBpki rotate\\fR ["), "{rotate}");
    assert!(fresh["pki-set-ack.1"].contains("\\fBpki set ack\\fR "));
    // Every page a SUBCOMMANDS section refers to exists.
    for (file, page) in &fresh {
        for line in page.lines() {
            if let Some(name) = line.strip_suffix("(1)").filter(|l| l.starts_with("pki")) {
                let target = format!("{}.1", name.replace("\\-", "-"));
                assert!(fresh.contains_key(&target), "{file} refers to {target}");
            }
        }
    }
    assert!(
        fresh == checked_in,
        "docs/man/ is out of date: run `PKI_UPDATE_DOCS=1 cargo test --test cli_io the_checked_in_man_pages` and commit it"
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
    // One line saying what is refused, then who breaks, indented.
    assert!(
        out.is_empty()
            && err.starts_with("pki: rotation refused: the CA being replaced has expired")
            && err.trim_end().lines().skip(1).all(|l| l.starts_with("  ")),
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
