//! `pki issue`, `renew` and `remove` while nothing else is due step over
//! the document's head and the one leaf: they print what the whole step
//! prints (a store an older build wrote, without a summary, takes the
//! whole step), and what they do not read they do not check, until the
//! next command that reads the whole document.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::cli::{exited_with, ok, pki};
use support::schema::validate;

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-02-01T00:00:00Z";

fn live_generation(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join(std::fs::read_link(dir.join(".data")).unwrap())
}

/// `text` with every certificate id (`<hex>-<hex serial>`) replaced: ids
/// come from fresh keys and serials, different in each run.
fn masked(text: &str) -> String {
    let is_id = |t: &str| {
        t.split_once('-').is_some_and(|(a, b)| {
            a.len() >= 8
                && b.len() >= 8
                && a.bytes().all(|c| c.is_ascii_hexdigit())
                && b.bytes().all(|c| c.is_ascii_hexdigit())
        })
    };
    let mut out = String::new();
    let mut token = String::new();
    for c in text.chars().chain(std::iter::once('\n')) {
        if c.is_ascii_hexdigit() || c == '-' {
            token.push(c);
            continue;
        }
        out.push_str(if is_id(&token) { "ID" } else { &token });
        token.clear();
        out.push(c);
    }
    out.pop();
    out
}

fn store(dir: &std::path::Path) {
    let d = dir.to_str().unwrap();
    ok(&["init", d, "--now", T0]);
    for name in ["web", "api", "db"] {
        ok(&[
            "issue",
            d,
            name,
            "--dns",
            &format!("{name}.example"),
            "--now",
            T0,
        ]);
    }
}

#[test]
fn leaf_commands_print_the_same_by_parts_as_whole() {
    let by_parts = tempfile::tempdir().unwrap();
    let whole = tempfile::tempdir().unwrap();
    store(by_parts.path());
    store(whole.path());
    let commands: [&[&str]; 5] = [
        &["issue", "new", "--dns", "new.example", "--now", T1],
        &[
            "issue",
            "web",
            "--dns",
            "web.example",
            "--dns",
            "www.example",
            "--now",
            T1,
            "--json",
        ],
        &["issue", "api", "--dns", "api.example", "--now", T1],
        &["renew", "db", "--now", T1],
        &["remove", "api", "--now", T1],
    ];
    for command in commands {
        // The store as an older build leaves it: no index, so no summary.
        // (A command that changed nothing left the last one without it.)
        let _ = std::fs::remove_file(live_generation(whole.path()).join(".index.json"));
        let run = |dir: &std::path::Path| {
            let mut args = vec![command[0], dir.to_str().unwrap()];
            args.extend_from_slice(&command[1..]);
            ok(&args)
        };
        let (part, full) = (run(by_parts.path()), run(whole.path()));
        assert_eq!(
            masked(&part).replace(by_parts.path().to_str().unwrap(), "DIR"),
            masked(&full).replace(whole.path().to_str().unwrap(), "DIR"),
            "{command:?}"
        );
        if command.contains(&"--json") {
            validate("issue.schema.json", &part, "pki issue --json (by parts)");
        }
    }
    let status = |dir: &std::path::Path| {
        let out = ok(&[
            "status",
            dir.to_str().unwrap(),
            "--json",
            "--check",
            "--now",
            T1,
        ]);
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["leaves"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| (l["name"].clone(), l["names"].clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(status(by_parts.path()), status(whole.path()));
    assert_eq!(status(by_parts.path()).len(), 3);
}

/// A change by parts reads and checks the head and the one leaf, and
/// commits from the store's spare without reading the other leaves' files:
/// a leaf's file damaged in place is refused, naming it, by a change of
/// that leaf (nothing written) and by every whole read, not by changes of
/// other leaves, which leave it as it is.
#[test]
fn a_change_by_parts_refuses_a_damaged_leaf_it_reads_and_leaves_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    store(dir.path());
    let leaf = live_generation(dir.path()).join("certs/web/tls.crt");
    let mut bytes = std::fs::read(&leaf).unwrap();
    bytes.extend_from_slice(b"\n");
    std::fs::write(&leaf, &bytes).unwrap();
    let generation = live_generation(dir.path());

    let args = ["renew", d, "web", "--now", T1];
    let err = exited_with(1, &args, &pki(&args));
    assert!(err.contains("certs/web/tls.crt"), "{err}");
    assert_eq!(live_generation(dir.path()), generation);

    ok(&["issue", d, "new", "--dns", "new.example", "--now", T1]);
    ok(&["renew", d, "api", "--now", T1]);
    assert_ne!(live_generation(dir.path()), generation);
    assert_eq!(
        std::fs::read(dir.path().join("certs/web/tls.crt")).unwrap(),
        bytes
    );
    for args in [
        ["status", d, "--now", T1].as_slice(),
        &["status", d, "--check", "--verify", "--now", T1],
        &["rotate", d, "--force", "drill", "--now", T1],
    ] {
        let err = exited_with(1, args, &pki(args));
        assert!(err.contains("certs/web/tls.crt"), "{args:?}: {err}");
    }
}
