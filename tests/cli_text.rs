//! What a newcomer reads: the book's synopsis against the command
//! line, usage hints (a mistyped flag, the init a store is missing), and
//! what `pki demo` prints being true.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::cli::{exited_with, pki, refused, stdout};

/// The book's CLI synopsis: the lines of the first `text` block of its
/// command-line chapter that start with `pki `.
fn readme_synopsis_lines() -> Vec<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/book/src/cli.md"))
            .unwrap();
    let section = &readme[readme
        .find("# The command line\n")
        .expect("the chapter's title")..];
    let block = &section[section.find("```text\n").unwrap() + 8..];
    let block = &block[..block.find("```").unwrap()];
    block
        .lines()
        .filter(|l| l.starts_with("pki "))
        .map(str::to_string)
        .collect()
}

/// The subcommands `pki ARGS --help` lists (`help` aside).
fn subcommands(args: &[&str]) -> Vec<String> {
    let mut with_help = args.to_vec();
    with_help.push("--help");
    let help = support::cli::ok(&with_help);
    help.lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| *name != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn every_command_appears_in_the_readme_synopsis() {
    let synopsis = readme_synopsis_lines();
    let typed = |words: &str| {
        synopsis.iter().any(|l| {
            let mut it = l.split_whitespace();
            words.split(' ').all(|w| it.next() == Some(w))
        })
    };
    let mut commands = Vec::new();
    for name in subcommands(&[]) {
        let children = subcommands(&[name.as_str()]);
        if children.is_empty() {
            commands.push(format!("pki {name}"));
        }
        commands.extend(children.iter().map(|c| format!("pki {name} {c}")));
    }
    assert!(commands.len() > 30, "{commands:?}");
    // `pki demo set` is a value of `demo`, not a subcommand.
    commands.push("pki demo set".into());
    let missing: Vec<_> = commands.iter().filter(|c| !typed(c)).collect();
    assert!(
        missing.is_empty(),
        "not in the synopsis of docs/book/src/cli.md: {missing:?}"
    );
}

#[test]
fn a_transposed_flag_suggests_the_flag_meant() {
    for (args, meant) in [
        (vec!["issue", "DIR", "web", "--dsn", "x"], "'--dns'"),
        (
            vec!["verify", "--bundle", "b", "--chain", "c", "--dsn=x"],
            "'--dns'",
        ),
        (vec!["status", "DIR", "--jsno"], "'--json'"),
        (
            vec!["set", "issue", "DIR", "n", "--ca", "c", "--taget", "t"],
            "'--target'",
        ),
    ] {
        let err = exited_with(2, &args, &pki(&args));
        assert!(
            err.contains(&format!("a similar argument exists: {meant}")),
            "{args:?}: {err}"
        );
        // The usage line is the subcommand's, not one built around the
        // wrong suggestion.
        assert!(err.contains(&format!("Usage: pki {}", args[0])), "{err}");
    }
    // Nothing one edit away: clap's own suggestion stays.
    let err = exited_with(
        2,
        &["issue", "DIR", "web", "--jason"],
        &pki(&["issue", "DIR", "web", "--jason"]),
    );
    assert!(err.contains("'--json'"), "{err}");
}

#[test]
fn a_store_without_the_document_names_its_own_init() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing").display().to_string();
    let signer_only = tmp.path().join("signer").display().to_string();
    support::cli::ok(&["init", &signer_only, "--now", "2026-01-01T00:00:00Z"]);
    for dir in [&missing, &signer_only] {
        for (args, init) in [
            (vec!["set", "status", dir], "pki set init"),
            (vec!["cred", "reconcile", dir, "db"], "pki cred init"),
            (vec!["keys", "status", dir], "pki keys init"),
            (vec!["keys", "rotate", dir], "pki keys init"),
            (vec!["set", "advance", dir], "pki set init"),
        ] {
            let err = refused(&args);
            assert!(
                err.contains(&format!("run `{init}` first")),
                "{args:?}: {err}"
            );
        }
    }
    // A store with no credential lists none (exit 0); no store at all:
    let err = refused(&["cred", "status", &missing]);
    assert!(err.contains("run `pki cred init` first"), "{err}");
    for args in [vec!["status", &missing], vec!["rotate", &missing]] {
        let err = refused(&args);
        assert!(err.contains("run `pki init` first"), "{args:?}: {err}");
    }
}

#[test]
fn cred_status_of_a_store_without_credentials_says_how_to_create_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki").display().to_string();
    support::cli::ok(&["init", &dir, "--now", "2026-01-01T00:00:00Z"]);
    let out = support::cli::ok(&["cred", "status", &dir]);
    assert!(
        out.contains("no credentials in") && out.contains("`pki cred init`"),
        "{out}"
    );
}

#[test]
fn the_demo_says_why_each_certificate_is_issued_truthfully() {
    let o = pki(&["demo"]);
    let out = stdout(&o);
    assert!(o.status.success(), "{out}");
    let step = |n: u32| {
        let start = out.find(&format!("\n== {n}. ")).unwrap();
        let rest = &out[start + 1..];
        rest[..rest.find("\n== ").unwrap_or(rest.len())].to_string()
    };
    let issue = step(2);
    assert!(!issue.contains("no certificate issued"), "{issue}");
    assert_eq!(
        issue.matches("first certificate for this name").count(),
        2,
        "{issue}"
    );
    // Step 3 refreshes the leaves before their end, as its heading says.
    let refresh = step(3);
    assert!(
        refresh.contains("refreshed once less than 20% is left"),
        "{refresh}"
    );
    assert_eq!(
        refresh
            .matches("the previous certificate has less than the refresh fraction")
            .count(),
        2,
        "{refresh}"
    );
    assert!(!refresh.contains("expired"), "{refresh}");
}

/// A `sh` block of the book's chapter `chapter`, the first after `marker`.
fn book_sh_block(chapter: &str, marker: &str) -> String {
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("docs/book/src")
            .join(chapter),
    )
    .unwrap();
    let block = &readme[readme.find(marker).expect("the marker")..];
    let start = block.find("```sh\n").expect("its sh block") + "```sh\n".len();
    block[start..start + block[start..].find("```").unwrap()].to_string()
}

/// Runs `script` with `sh -e` from the repository root, this build's `pki`
/// first on the PATH; its stdout.
fn run_from_repository_root(script: &str) -> String {
    let bin = std::path::Path::new(env!("CARGO_BIN_EXE_pki"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = std::process::Command::new("sh")
        .args(["-e", "-c", script])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "the walkthrough failed:\n{script}\n{}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The credential walkthrough, run as written with the sample hooks of
/// examples/cred: the service ends holding exactly the current credential,
/// the first one minted revoked.
#[test]
fn readme_credential_walkthrough_runs_as_written() {
    let script = book_sh_block("credentials.md", "Walkthrough with the sample hooks");
    assert!(script.contains("examples/cred/mint.sh SERVICE"), "{script}");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("store");
    let service = tmp.path().join("service");
    let script = script
        .replace("SERVICE", service.to_str().unwrap())
        .replace("DIR", dir.to_str().unwrap());
    let out = run_from_repository_root(&script);
    let live = |d: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(d.join("db"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    let current = std::fs::read_to_string(dir.join("creds/db/current")).unwrap();
    assert_eq!(live(&service), std::slice::from_ref(&current));
    // The first credential (printed by `cat` before the rotation) is gone.
    let first = out
        .lines()
        .find(|l| l.len() == 32 && l.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(|| panic!("no credential printed: {out}"))
        .to_string();
    assert_ne!(first, current);
    assert!(!dir.join("creds/db/old").exists());
    // Revoking again (a rerun after a crash) succeeds, as pki requires.
    let revoke = std::process::Command::new("sh")
        .arg(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/cred/revoke.sh"
        ))
        .arg(&service)
        .env("PKI_CRED_NAME", "db")
        .stdin(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().unwrap().write_all(first.as_bytes())?;
            child.wait()
        })
        .unwrap();
    assert!(revoke.success());
}

/// A store made at T0 with the default policy (no reload interval), rotated
/// once when due: the next rotation within 395d is held by the guard.
fn rotated_store() -> (tempfile::TempDir, String) {
    let (tmp, dir) = support::store::store(&[]);
    support::cli::ok(&[
        "rotate",
        &dir,
        "--now",
        support::store::AFTER_ROTATION_POINT,
    ]);
    (tmp, dir)
}

#[test]
fn a_refused_rotation_says_in_one_short_line_what_is_refused_and_the_flag_that_allows_it() {
    let (tmp, dir) = rotated_store();
    let before = support::cli::tree(tmp.path());
    let args = [
        "rotate",
        dir.as_str(),
        "--force",
        "key ceremony",
        "--now",
        support::store::MONTH_LATER,
    ];
    let err = refused(&args);
    let first = err.lines().next().unwrap();
    assert_eq!(
        first,
        "pki: rotation refused: within the reload interval (assumed 395d) of the previous rotation; to rotate anyway, pass --allow-trust-break REASON"
    );
    assert!(first.len() < 160, "{first}");
    // Then who breaks and until when, why the interval is what it is, and
    // the emergency choices, one indented line each.
    let details: Vec<&str> = err.lines().skip(1).collect();
    assert!(
        details[0].starts_with("  clients still holding the bundle"),
        "{err}"
    );
    assert!(
        details[1].starts_with("  servers still presenting"),
        "{err}"
    );
    assert!(
        details.iter().any(|l| l.contains("--reload-interval")),
        "{err}"
    );
    assert!(details.iter().any(|l| l.contains("--grace DUR")), "{err}");
    assert_eq!(
        before,
        support::cli::tree(tmp.path()),
        "a refused rotation wrote"
    );
}

#[test]
fn an_emergency_rotation_within_the_reload_interval_goes_ahead_and_is_recorded() {
    for emergency in [vec!["--grace", "1h"], vec!["--compromised"]] {
        let (_tmp, dir) = rotated_store();
        let mut args = vec!["rotate", dir.as_str(), "--force", "key on a lost laptop"];
        args.extend(&emergency);
        args.extend(["--now", support::store::MONTH_LATER]);
        let out = support::cli::ok(&args);
        assert!(
            out.contains("trust break accepted: bundle-of-two-rotations-ago"),
            "{out}"
        );
        let status = support::store::status_json(&dir, support::store::MONTH_LATER);
        let record = &status["history"][1];
        assert_eq!(record["reason"]["reason"], "key on a lost laptop");
        let overridden = record["overridden"].as_array().unwrap();
        assert_eq!(overridden.len(), 2, "{record}");
        for o in overridden {
            assert_eq!(o["name"], "bundle-of-two-rotations-ago");
            let detail = o["detail"].as_str().unwrap();
            assert!(
                detail.starts_with("accepted by the ") && detail.contains("key on a lost laptop"),
                "{detail}"
            );
        }
    }
}

#[test]
fn init_and_status_show_the_reload_interval_the_guard_assumes() {
    let tmp = tempfile::tempdir().unwrap();
    let assumed = tmp.path().join("assumed").display().to_string();
    let set = tmp.path().join("set").display().to_string();
    let out = support::cli::ok(&["init", &assumed, "--now", support::store::T0]);
    assert!(
        out.contains("reload interval 395d (assumed: M, as no --reload-interval was set)"),
        "{out}"
    );
    let out = support::cli::ok(&[
        "init",
        &set,
        "--reload-interval",
        "7d",
        "--now",
        support::store::T0,
    ]);
    assert!(out.contains("reload interval 7d\n"), "{out}");
    let human = support::cli::ok(&["status", &assumed, "--now", support::store::T0]);
    assert!(human.contains("reload interval 395d (assumed"), "{human}");
    let human = support::cli::ok(&["status", &set, "--now", support::store::T0]);
    assert!(human.contains("reload interval 7d\n"), "{human}");
    let policy = &support::store::status_json(&assumed, support::store::T0)["policy"];
    assert_eq!(policy["reload_interval_seconds"], 395 * 86400);
    assert_eq!(policy["reload_interval_assumed"], true);
    assert_eq!(policy["min_trust_seconds"], 395 * 86400);
    assert_eq!(policy["lifetime_seconds"], 790 * 86400);
    let policy = &support::store::status_json(&set, support::store::T0)["policy"];
    assert_eq!(policy["reload_interval_seconds"], 7 * 86400);
    assert_eq!(policy["reload_interval_assumed"], false);
}
