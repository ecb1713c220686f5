//! What a newcomer reads: the README's synopsis against the command
//! line, usage hints (a mistyped flag, the init a store is missing), and
//! what `pki demo` prints being true.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::cli::{exited_with, pki, refused, stdout};

/// The README's CLI synopsis: the lines of the first `text` block under
/// `## CLI` that start with `pki `.
fn readme_synopsis_lines() -> Vec<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md")).unwrap();
    let section = &readme[readme.find("\n## CLI\n").expect("a ## CLI section")..];
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
        "not in the README synopsis: {missing:?}"
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
