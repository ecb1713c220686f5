//! `pki rotate` with nothing due decides from the summary the store keeps
//! with the document, and prints exactly what the full step prints, in
//! text and as JSON; without a summary (a store an older build wrote) it
//! reads the document as before. `pki status --check` answers from the
//! same summary, with the exit status the full report gives.

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
/// (`status`, `status --check --verify`, `status --check` once no summary
/// covers the time, any write), not by `rotate` or `status --check` with
/// nothing due.
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
    // `status --check` answers from the summary too, but it looks at every
    // file consumers read (each against what its commit recorded), so it
    // notices the damaged leaf; with --verify, or without --check, it
    // reads every certificate.
    for args in [
        &["status", d, "--check", "--now", T1][..],
        &["status", d, "--check", "--verify", "--now", T1][..],
        &["status", d, "--now", T1][..],
    ] {
        let err = exited_with(1, args, &pki(args));
        assert!(err.contains("certs/web/tls.crt"), "{err}");
    }
    let args = ["status", d, "--check", "--now", T1];
    std::fs::remove_file(live_generation(dir.path()).join(".index.json")).unwrap();
    let err = exited_with(1, &args, &pki(&args));
    assert!(err.contains("certs/web/tls.crt"), "{err}");
    let args = ["rotate", d, "--now", T1, "--force", "drill"];
    let err = exited_with(1, &args, &pki(&args));
    assert!(err.contains("certs/web/tls.crt"), "{err}");
}

/// Over a store's life (a leaf due, a consumer lagging, expiry, a forced
/// rotation), `status --check` exits as the full report does: from the
/// summary where its promise covers the time, which is only where that is
/// 0, with a short report; elsewhere the full table.
#[test]
fn status_check_from_the_summary_exits_as_the_full_report() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap();
    ok(&["init", d, "--now", T0, "--reload-interval", "7d"]);
    ok(&["issue", d, "web", "--dns", "web.example", "--now", T0]);
    let fingerprint = ok(&["status", d, "--json", "--now", T0]);
    let fingerprint: serde_json::Value = serde_json::from_str(&fingerprint).unwrap();
    let fingerprint = fingerprint["bundle_fingerprint"]
        .as_str()
        .unwrap()
        .to_string();
    ok(&[
        "ack",
        d,
        "web-1",
        "--fingerprint",
        &fingerprint,
        "--now",
        T0,
    ]);
    let check = |now: &str, extra: &[&str]| {
        let mut args = vec!["status", d, "--check", "--now", now];
        args.extend_from_slice(extra);
        let out = pki(&args);
        (out.status.code(), String::from_utf8(out.stdout).unwrap())
    };
    let timeline = [
        "2026-01-01T00:00:00Z",
        "2026-03-01T00:00:00Z",
        "2026-10-01T00:00:00Z",
        "2026-12-20T00:00:00Z",
        "2027-01-15T00:00:00Z",
        "2028-06-01T00:00:00Z",
    ];
    let mut from_summary = 0;
    let mut walk = |after: &str| {
        for now in timeline.iter().filter(|t| **t >= after) {
            let (code, out) = check(now, &[]);
            let (full_code, full) = check(now, &["--verify"]);
            assert_eq!(code, full_code, "at {now}:\n{out}\n{full}");
            if out.contains("from the store's summary") {
                from_summary += 1;
                assert_eq!(code, Some(0), "{out}");
                assert!(out.contains("health: ok"), "{out}");
                assert!(!out.contains("web"), "no leaf is listed: {out}");
            } else {
                assert_eq!(out, full, "at {now}");
            }
        }
    };
    walk(T0);
    // A forced rotation: the consumer holds the previous bundle and lags
    // a week later, so the summary's promise ends there.
    ok(&[
        "rotate",
        d,
        "--force",
        "drill",
        "--now",
        "2026-03-01T00:00:00Z",
    ]);
    let (code, out) = check("2026-03-05T00:00:00Z", &[]);
    assert_eq!(code, Some(0));
    assert!(out.contains("from the store's summary"), "{out}");
    let (code, out) = check("2026-03-09T00:00:00Z", &[]);
    assert_eq!(code, Some(3), "{out}");
    assert!(out.contains("LAGS"), "{out}");
    walk("2026-03-01T00:00:00Z");
    assert!(from_summary >= 2, "{from_summary}");

    // A summary an older build wrote promised nothing about the status:
    // the full report answers.
    let index = live_generation(dir.path()).join(".index.json");
    let mut value: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&index).unwrap()).unwrap();
    let summary = value["keys"]["signer"]["summary"].as_str().unwrap();
    let mut older: serde_json::Value = serde_json::from_str(summary).unwrap();
    older["report"]
        .as_object_mut()
        .unwrap()
        .retain(|k, _| k == "ca_id" || k == "next_rotation");
    value["keys"]["signer"]["summary"] = older.to_string().into();
    std::fs::remove_file(&index).unwrap();
    std::fs::write(&index, value.to_string()).unwrap();
    let now = "2026-03-05T00:00:00Z";
    let (code, out) = check(now, &[]);
    assert_eq!(code, Some(0));
    assert!(!out.contains("from the store's summary"), "{out}");
    assert_eq!(out, check(now, &["--verify"]).1);
    assert!(ok(&["rotate", d, "--now", now]).starts_with("nothing to do"));
}
