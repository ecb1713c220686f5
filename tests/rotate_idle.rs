//! `pki rotate` with nothing due decides from the summary the store keeps
//! with the document, and prints exactly what the full step prints, in
//! text and as JSON; without a summary (a store an older build wrote) it
//! reads the document as before.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::cli::{exited_with, ok, pki};
use support::schema::validate;

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-02-01T00:00:00Z";

fn live_generation(dir: &std::path::Path) -> std::path::PathBuf {
    dir.join(std::fs::read_link(dir.join(".data")).unwrap())
}

#[test]
fn rotate_with_nothing_due_prints_the_same_from_the_summary_as_from_the_document() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    ok(&["init", d, "--now", T0]);
    ok(&["issue", d, "web", "--dns", "web.example", "--now", T0]);
    ok(&["issue", d, "api", "--dns", "api.example", "--now", T0]);
    let index = live_generation(dir.path()).join(".index.json");
    assert!(index.is_file(), "every commit writes the index");

    let text = ["rotate", d, "--now", T1];
    let json = ["rotate", d, "--now", T1, "--json"];
    let quiet = ["rotate", d, "--now", T1, "--quiet"];
    let from_summary = [ok(&text), ok(&json), ok(&quiet)];
    assert!(
        from_summary[0].starts_with("nothing to do\n"),
        "{}",
        from_summary[0]
    );
    assert!(
        from_summary[0].contains("next rotation"),
        "{}",
        from_summary[0]
    );
    assert_eq!(from_summary[2], "");
    validate(
        "rotate.schema.json",
        &from_summary[1],
        "pki rotate --json (idle)",
    );

    // The store as an older build leaves it: no index, so no summary.
    std::fs::remove_file(&index).unwrap();
    let from_document = [ok(&text), ok(&json), ok(&quiet)];
    assert_eq!(from_summary, from_document);
}

/// What an idle step does not read, it does not check: a leaf's file
/// damaged in place is found by the next command that reads the document
/// (`status --check`, any write), not by `rotate` with nothing due.
#[test]
fn rotate_with_nothing_due_reads_no_leaf() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    ok(&["init", d, "--now", T0]);
    ok(&["issue", d, "web", "--dns", "web.example", "--now", T0]);
    let leaf = live_generation(dir.path()).join("certs/web/tls.crt");
    let mut bytes = std::fs::read(&leaf).unwrap();
    bytes.extend_from_slice(b"\n");
    std::fs::write(&leaf, bytes).unwrap();

    let out = ok(&["rotate", d, "--now", T1]);
    assert!(out.starts_with("nothing to do\n"), "{out}");
    let args = ["status", d, "--check", "--now", T1];
    let err = exited_with(1, &args, &pki(&args));
    assert!(err.contains("certs/web/tls.crt"), "{err}");
    let args = ["rotate", d, "--now", T1, "--force", "drill"];
    let err = exited_with(1, &args, &pki(&args));
    assert!(err.contains("certs/web/tls.crt"), "{err}");
}
