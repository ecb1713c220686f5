//! The edges of the `pki` binary (issue 17, "Safety by construction"): a
//! directory store under any umask, refused commands that leave the file
//! system as they found it, inputs that are not regular files, and the
//! messages and outputs of commands at the edge of what a store holds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::etcd;

use support::cli::{mode, modes, ok, pki, refused, refused_output, snapshot, succeeded, text};

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

// 2026-01-01: the simulated creation time of every store here.
const T0: &str = "2026-01-01T00:00:00Z";
// T0 + 31 days: a credential that expires after 720h is due.
const CRED_DUE: &str = "2026-02-01T00:00:00Z";
// A mint hook that prints a new credential each time (sh has no $RANDOM).
const MINT: &str = "echo secret-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \\n')";
const REVOKE: &str = "cat >/dev/null";

fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_pki")
}

/// `pki ARGS` started by a shell that set `umask` first.
fn pki_umask(umask: &str, args: &[&str]) -> Output {
    Command::new("sh")
        .arg("-c")
        .arg(format!("umask {umask}; exec \"$0\" \"$@\""))
        .arg(bin())
        .args(args)
        .output()
        .expect("run pki")
}

/// Every directory of the store is 0700, no file is writable by group or
/// others, and the private files and the bookkeeping are 0600.
fn assert_store_modes(dir: &Path, umask: &str, private: &[&str]) {
    for (path, m) in modes(dir) {
        match m.as_bytes()[0] {
            b'l' => {}
            b'd' => assert_eq!(m, "d0700", "umask {umask}: {path}"),
            _ => assert!(m == "-0600" || m == "-0644", "umask {umask}: {path} is {m}"),
        }
    }
    for path in private {
        assert_eq!(mode(&dir.join(path)), 0o600, "umask {umask}: {path}");
    }
}

#[test]
fn every_write_of_a_directory_store_succeeds_under_any_umask_with_its_own_modes() {
    for umask in ["000", "077"] {
        let tmp = tempfile::tempdir().unwrap();
        let other = tmp.path().join("other");
        ok(&["init", other.to_str().unwrap(), "--now", T0]);
        let ca = other.join("signer/tls.crt");
        let key = other.join("signer/tls.key");
        let dir = tmp.path().join("pki");
        let d = dir.to_str().unwrap();
        let commands: Vec<Vec<&str>> = vec![
            vec!["init", d, "--now", T0],
            vec!["issue", d, "web", "--dns", "web.ns.svc", "--now", T0],
            vec!["issue", d, "api", "--dns", "api.ns.svc", "--now", T0],
            vec!["keys", "init", d, "--now", T0],
            vec!["keys", "rotate", d, "--force", "drill", "--now", T0],
            vec!["set", "init", d, "--ca", "cluster:serving", "--now", T0],
            vec![
                "set",
                "issue",
                d,
                "apiserver",
                "--ca",
                "cluster",
                "--serving",
                "--dns",
                "api.cluster",
                "--target",
                "master",
                "--now",
                T0,
            ],
            vec![
                "cred",
                "init",
                d,
                "db",
                "--expire",
                "720h",
                "--grace",
                "10m",
                "--mint-cmd",
                MINT,
                "--revoke-cmd",
                REVOKE,
                "--now",
                T0,
            ],
            vec!["cred", "reconcile", d, "--now", CRED_DUE],
            vec![
                "rotate",
                d,
                "--to",
                ca.to_str().unwrap(),
                "--key-file",
                key.to_str().unwrap(),
                "--force",
                "move to the other CA",
                "--now",
                T0,
            ],
            vec![
                "issue",
                d,
                "metrics",
                "--dns",
                "metrics.ns.svc",
                "--now",
                T0,
            ],
        ];
        for args in &commands {
            succeeded(args, pki_umask(umask, args));
        }
        // A rotation happened in `cred reconcile`: both credentials are live.
        assert!(dir.join("creds/db/old").exists());
        assert!(dir.join(".spare/.mirrors").exists());
        assert_store_modes(
            &dir,
            umask,
            &[
                ".lock",
                ".spare/.mirrors",
                "certs/web/tls.key",
                "certs/metrics/tls.key",
                "keys/active.key",
                "targets/master/certs/apiserver/tls.key",
                "creds/db/current",
                "creds/db/old",
                ".cred-capture/db/.lock",
            ],
        );
        ok(&["status", d, "--now", T0]);
        ok(&["cred", "status", d, "--now", CRED_DUE]);
    }
}

#[test]
fn the_mint_hooks_capture_files_are_private_under_any_umask() {
    for umask in ["000", "077"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("pki");
        let d = dir.to_str().unwrap();
        let slow = tmp.path().join("slow");
        // Slow once the flag exists: pki is killed while the hook runs, so
        // every capture file is there to look at.
        let mint = format!("if [ -e '{}' ]; then sleep 2; fi; {MINT}", slow.display());
        let init = [
            "cred",
            "init",
            d,
            "db",
            "--expire",
            "720h",
            "--grace",
            "10m",
            "--mint-cmd",
            &mint,
            "--revoke-cmd",
            REVOKE,
            "--now",
            T0,
        ];
        succeeded(&init, pki_umask(umask, &init));
        std::fs::write(&slow, "").unwrap();
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!("umask {umask}; exec \"$0\" \"$@\""))
            .arg(bin())
            .args(["cred", "reconcile", d, "--now", CRED_DUE])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let capture = dir.join(".cred-capture/db");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        let has = |ext: &str| {
            std::fs::read_dir(&capture)
                .map(|entries| {
                    entries
                        .flatten()
                        .any(|e| e.file_name().to_string_lossy().ends_with(ext))
                })
                .unwrap_or(false)
        };
        while !has(".pid") {
            assert!(std::time::Instant::now() < deadline, "no .pid file");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // The hook goes on without pki; its wrapper records its status.
        while !has(".status") {
            assert!(std::time::Instant::now() < deadline, "no .status file");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let found = modes(&dir.join(".cred-capture"));
        for ext in [".out", ".err", ".pid", ".status"] {
            assert!(found.keys().any(|p| p.ends_with(ext)), "{ext}: {found:?}");
        }
        for (path, m) in &found {
            let expected = if m.starts_with('d') { "d0700" } else { "-0600" };
            assert_eq!(m, expected, "umask {umask}: .cred-capture/{path}");
        }
        // The next run adopts what the killed one captured.
        let reconcile = ["cred", "reconcile", d, "--now", CRED_DUE];
        succeeded(&reconcile, pki_umask(umask, &reconcile));
        assert!(dir.join("creds/db/old").exists());
    }
}

#[test]
fn a_refused_init_leaves_the_file_system_as_it_found_it() {
    let tmp = tempfile::tempdir().unwrap();
    // A directory holding a file where a store publishes a link.
    for (planted, command) in [
        ("signer", vec!["init"]),
        ("ca-bundle.crt", vec!["init"]),
        ("keys", vec!["keys", "init"]),
        ("targets", vec!["set", "init", "--ca", "cluster:serving"]),
    ] {
        let dir = tmp.path().join(format!("with-{planted}"));
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::write(dir.join(planted), "not pki's").unwrap();
        let before = snapshot(tmp.path());
        let mut args = command.clone();
        let d = dir.to_str().unwrap();
        args.insert(if command[0] == "init" { 1 } else { 2 }, d);
        args.extend(["--now", T0]);
        let err = refused(&args);
        assert!(err.contains(planted), "{args:?}: {err}");
        assert_eq!(snapshot(tmp.path()), before, "{args:?} left something");
    }
    // A time certificates cannot encode: the directory is not created.
    for now in ["1969-12-31T00:00:00Z", "9999-06-01T00:00:00Z"] {
        let before = snapshot(tmp.path());
        let dir = tmp.path().join("new");
        let err = refused(&["init", dir.to_str().unwrap(), "--now", now]);
        assert!(err.contains("1970 to 9999"), "{err}");
        assert!(!dir.exists(), "{now}: created {}", dir.display());
        assert_eq!(snapshot(tmp.path()), before, "{now}");
    }
}

/// `pki ARGS`, killed (and the test failed) if it runs longer than 20 s.
fn pki_within_deadline(args: &[&str]) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("pki {args:?} still ran after 20 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn a_fifo_or_a_directory_given_as_an_input_file_is_refused_without_waiting() {
    let tmp = tempfile::tempdir().unwrap();
    let t = |p: &str| tmp.path().join(p).display().to_string();
    let fifo = t("input.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let (d, keys, set, new) = (t("pki"), t("keys"), t("set"), t("new"));
    ok(&["init", &d, "--now", T0]);
    ok(&["keys", "init", &keys, "--now", T0]);
    ok(&["set", "init", &set, "--ca", "cluster:serving", "--now", T0]);
    let (ca, key) = (t("pki/signer/tls.crt"), t("pki/signer/tls.key"));
    let before = snapshot(tmp.path());
    let import = format!("cluster={fifo}");
    let with = |head: &[&str], tail: &[&str]| -> Vec<String> {
        head.iter().chain(tail).map(|s| s.to_string()).collect()
    };
    let ca_args = |flag: &str, input: &str| -> Vec<Vec<String>> {
        vec![
            with(&[flag, input], &[]),
            with(&[flag, &ca, "--key-file", input], &[]),
            with(&[flag, &ca, "--key-file", &key, "--chain", input], &[]),
        ]
    };
    for input in [fifo.as_str(), tmp.path().to_str().unwrap()] {
        let mut commands: Vec<Vec<String>> = Vec::new();
        for (head, flag) in [
            (vec!["init", new.as_str()], "--import"),
            (vec!["rotate", d.as_str()], "--to"),
            (vec!["validate", d.as_str()], "--to"),
        ] {
            for tail in ca_args(flag, input) {
                commands.push(with(
                    &head,
                    &tail.iter().map(String::as_str).collect::<Vec<_>>(),
                ));
            }
        }
        let sa = ["--service-account-keys", input];
        commands.push(with(&["rotate", &d, "--to", &ca, "--key-file", &key], &sa));
        commands.push(with(
            &["validate", &d, "--to", &ca, "--key-file", &key],
            &sa,
        ));
        commands.push(with(&["keys", "init", &new, "--import", input], &[]));
        let import = if input == fifo {
            import.clone()
        } else {
            format!("cluster={input}")
        };
        commands.push(with(&["set", "start", &set, "--import", &import], &[]));
        for args in &commands {
            let mut args: Vec<&str> = args.iter().map(String::as_str).collect();
            args.extend(["--now", T0]);
            let err = refused_output(&args, &pki_within_deadline(&args));
            assert!(
                err.contains(input) && err.contains("not a regular file"),
                "{args:?}: {err}"
            );
        }
    }
    assert_eq!(snapshot(tmp.path()), before, "a refused read changed files");
}

#[test]
fn set_commands_on_a_store_without_a_set_name_pki_set_init() {
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("pki").display().to_string();
    let missing = tmp.path().join("missing").display().to_string();
    ok(&["init", &d, "--now", T0]);
    for dir in [d.as_str(), missing.as_str()] {
        for args in [
            vec!["set", "status", dir],
            vec!["set", "status", dir, "--json"],
            vec!["set", "advance", dir],
            vec!["set", "abort", dir],
            vec!["set", "start", dir],
            vec!["set", "target", dir, "master", "--trusts", "cluster"],
            vec!["set", "ack", dir, "master", "--fingerprint", "x"],
            vec![
                "set",
                "issue",
                dir,
                "web",
                "--ca",
                "cluster",
                "--serving",
                "--dns",
                "web",
                "--target",
                "master",
            ],
        ] {
            let err = refused(&args);
            assert!(
                err.contains("no CA set") && err.contains("`pki set init`"),
                "{args:?}: {err}"
            );
            assert!(!err.contains("`pki init`"), "{args:?}: {err}");
        }
    }
    assert!(!Path::new(&missing).exists());
}

#[test]
fn validate_json_reports_an_input_it_cannot_read_as_a_failed_check() {
    let tmp = tempfile::tempdir().unwrap();
    let t = |p: &str| tmp.path().join(p).display().to_string();
    let (d, other) = (t("pki"), t("other"));
    ok(&["init", &d, "--now", T0]);
    ok(&["init", &other, "--now", T0]);
    let (ca, key) = (t("other/signer/tls.crt"), t("other/signer/tls.key"));
    let missing = t("missing.pem");
    let garbage = t("garbage.pem");
    std::fs::write(&garbage, "not PEM at all").unwrap();
    for (bad, flags) in [
        (&missing, vec!["--to", missing.as_str()]),
        (&garbage, vec!["--to", garbage.as_str()]),
        (
            &missing,
            vec!["--to", ca.as_str(), "--key-file", missing.as_str()],
        ),
        (
            &missing,
            vec![
                "--to",
                ca.as_str(),
                "--key-file",
                key.as_str(),
                "--chain",
                missing.as_str(),
            ],
        ),
        (
            &missing,
            vec![
                "--to",
                ca.as_str(),
                "--key-file",
                key.as_str(),
                "--service-account-keys",
                missing.as_str(),
            ],
        ),
    ] {
        let mut args = vec!["validate", d.as_str()];
        args.extend(&flags);
        args.extend(["--json", "--now", T0]);
        let o = pki(&args);
        let err = refused_output(&args, &o);
        assert!(err.contains(bad.as_str()), "{args:?}: {err}");
        let report: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: stdout is not JSON ({e}): {}", text(&o.stdout)));
        assert_eq!(report["ok"], false, "{report}");
        let checks = report["checks"].as_array().unwrap();
        let failed: Vec<_> = checks.iter().filter(|c| c["ok"] == false).collect();
        assert_eq!(failed.len(), 1, "{report}");
        assert!(failed[0]["name"].is_string(), "{report}");
        let detail = failed[0]["detail"].as_str().unwrap();
        assert!(detail.contains(bad.as_str()), "{report}");
    }
}

/// `cred init STORE NAME` with the test hooks, its capture files in `capture`.
fn cred_init(store: &str, name: &str, capture: &Path) {
    ok(&[
        "cred",
        "init",
        store,
        name,
        "--expire",
        "720h",
        "--grace",
        "10m",
        "--mint-cmd",
        MINT,
        "--revoke-cmd",
        REVOKE,
        "--capture-dir",
        capture.to_str().unwrap(),
        "--now",
        T0,
    ]);
}

/// What `pki export` wrote for credential `name`: current and old, 0600.
fn exported_credential(out: &Path, name: &str) -> (String, String) {
    let read = |file: &str| {
        let path = out.join("creds").join(name).join(file);
        assert_eq!(mode(&path), 0o600, "{}", path.display());
        std::fs::read_to_string(&path).unwrap()
    };
    let (current, old) = (read("current"), read("old"));
    assert!(current.starts_with("secret-") && old.starts_with("secret-"));
    assert_ne!(current, old);
    (current, old)
}

#[test]
fn export_writes_credentials_also_from_an_etcd_store_that_holds_only_credentials() {
    let tmp = tempfile::tempdir().unwrap();
    let capture = tmp.path().join("capture");
    // A directory store: the signer's files and the credential's.
    let dir = tmp.path().join("pki");
    let d = dir.to_str().unwrap();
    ok(&["init", d, "--now", T0]);
    cred_init(d, "db", &capture);
    ok(&["cred", "reconcile", d, "--now", CRED_DUE]);
    let out = tmp.path().join("out-dir");
    ok(&["export", d, out.to_str().unwrap()]);
    assert!(out.join("ca-bundle.crt").exists());
    let (current, old) = exported_credential(&out, "db");
    assert_eq!(
        current,
        std::fs::read_to_string(dir.join("creds/db/current")).unwrap()
    );
    assert_eq!(
        old,
        std::fs::read_to_string(dir.join("creds/db/old")).unwrap()
    );

    // An etcd store with two credentials and nothing else.
    let server = etcd::Etcd::start();
    let url = server.url("creds-only");
    cred_init(&url, "db", &capture);
    cred_init(&url, "queue", &capture);
    for name in ["db", "queue"] {
        ok(&[
            "cred",
            "reconcile",
            &url,
            name,
            "--capture-dir",
            capture.to_str().unwrap(),
            "--now",
            CRED_DUE,
        ]);
    }
    let out = tmp.path().join("out-etcd");
    let printed = ok(&["export", &url, out.to_str().unwrap()]);
    assert!(
        printed.contains("creds/db") && printed.contains("creds/queue"),
        "{printed}"
    );
    exported_credential(&out, "db");
    exported_credential(&out, "queue");
    assert!(!out.join("ca-bundle.crt").exists());
}

#[test]
fn cred_commands_on_a_store_with_others_nested_under_its_prefix_see_only_its_credentials() {
    let tmp = tempfile::tempdir().unwrap();
    let capture = tmp.path().join("capture");
    let cap = capture.to_str().unwrap();
    let server = etcd::Etcd::start();
    let outer = server.url("p");
    cred_init(&outer, "db", &capture);
    // Stores nested under the outer one's prefix: at p/creds its signer's
    // key is the outer store's creds/signer; at p/inner its keys are
    // inner/…; a third sits under the credential's own key.
    for inner in ["p/creds", "p/inner", "p/creds/db"] {
        let url = server.url(inner);
        ok(&["init", &url, "--now", T0]);
        cred_init(&url, "nested", &capture);
    }
    let out = ok(&["cred", "status", &outer, "--now", T0]);
    assert!(out.starts_with("db: "), "{out}");
    assert!(!out.contains("signer") && !out.contains("nested"), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["cred", "status", &outer, "--json", "--now", T0])).unwrap();
    let names: Vec<&str> = json["credentials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["db"], "{json}");
    ok(&[
        "cred",
        "reconcile",
        &outer,
        "--capture-dir",
        cap,
        "--now",
        CRED_DUE,
    ]);
    let exported = tmp.path().join("out");
    ok(&["export", &outer, exported.to_str().unwrap()]);
    exported_credential(&exported, "db");
    assert!(!exported.join("creds/signer").exists());
    // Asked for by name, the nested signer is refused naming it.
    let err = refused(&["cred", "reconcile", &outer, "signer", "--capture-dir", cap]);
    assert!(err.contains("\"signer\"") && !err.contains("NAME"), "{err}");
    // The nested stores still work.
    ok(&["cred", "status", &server.url("p/creds"), "--now", T0]);
    ok(&["status", &server.url("p/creds"), "--now", T0]);

    // A directory store with another one inside it.
    let dir = tmp.path().join("pki");
    let d = dir.to_str().unwrap();
    cred_init(d, "db", &capture);
    let inner = dir.join("inner");
    ok(&["init", inner.to_str().unwrap(), "--now", T0]);
    cred_init(inner.to_str().unwrap(), "nested", &capture);
    let out = ok(&["cred", "status", d, "--now", T0]);
    assert!(out.starts_with("db: ") && !out.contains("nested"), "{out}");
    ok(&[
        "cred",
        "reconcile",
        d,
        "--capture-dir",
        cap,
        "--now",
        CRED_DUE,
    ]);
}

#[test]
fn init_inside_another_directory_stores_published_files_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let capture = tmp.path().join("capture");
    let dir = tmp.path().join("pki");
    let d = dir.to_str().unwrap();
    cred_init(d, "db", &capture);
    let before = snapshot(tmp.path());
    for (command, inside, extra) in [
        (vec!["init"], "creds/inner", vec![]),
        (vec!["keys", "init"], "creds/db/inner", vec![]),
        (
            vec!["set", "init"],
            "creds/inner",
            vec!["--ca", "cluster:serving"],
        ),
    ] {
        let inside = dir.join(inside);
        let mut args = command.clone();
        args.push(inside.to_str().unwrap());
        args.extend(extra);
        args.extend(["--now", T0]);
        let err = refused(&args);
        assert!(
            err.contains("inside the directory store") && err.contains(d),
            "{args:?}: {err}"
        );
    }
    assert_eq!(snapshot(tmp.path()), before);
    ok(&[
        "cred",
        "reconcile",
        d,
        "--capture-dir",
        capture.to_str().unwrap(),
        "--now",
        CRED_DUE,
    ]);
}

#[test]
fn cred_commands_where_there_is_no_store_name_pki_cred_init() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing").display().to_string();
    for args in [
        vec!["cred", "status", missing.as_str()],
        vec!["cred", "status", missing.as_str(), "--json"],
        vec!["cred", "reconcile", missing.as_str()],
        vec!["cred", "reconcile", missing.as_str(), "db"],
    ] {
        let err = refused(&args);
        assert!(err.contains("`pki cred init`"), "{args:?}: {err}");
        assert!(!err.contains("`pki init`"), "{args:?}: {err}");
    }
    assert!(!Path::new(&missing).exists());
}
