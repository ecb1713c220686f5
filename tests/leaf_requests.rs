//! A signer store's leaf requests (`leaf-requests/NAME.json`) are checked
//! when read, as `pki issue` checks what it is asked: a stored request
//! that `pki issue` would refuse makes every command that reads it fail
//! with one line naming the file, instead of `status` saying "health: ok"
//! while every later rotation fails, or a misspelt field being dropped.
//! The requests are written through the store itself, as any writer of
//! the store could, so that every digest is consistent.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_rotate::{File, Store};
use support::cli::{self, ok, refused, tree};

const T0: &str = "2026-01-01T00:00:00Z";
const T1: &str = "2026-01-02T00:00:00Z";

/// A store at `dir` with `web` and `api` issued at T0.
fn store(tmp: &tempfile::TempDir) -> String {
    let dir = tmp.path().join("pki").display().to_string();
    ok(&["init", &dir, "--now", T0]);
    for (name, dns) in [("web", "web.ns.svc"), ("api", "api.ns.svc")] {
        ok(&["issue", &dir, name, "--dns", dns, "--now", T0]);
    }
    dir
}

/// Writes `contents` as the store file `path` of the signer, through the store.
fn write_request(dir: &str, path: &str, contents: &str) {
    let store = pki_rotate::FsStore::open(dir).unwrap();
    let (mut files, revision) = store.get("signer").unwrap().unwrap();
    files
        .insert(path, File::public(contents.as_bytes().to_vec()))
        .unwrap();
    store.put("signer", Some(&revision), &files).unwrap();
}

/// Stored requests of `web` that `pki issue` refuses, and what the
/// refusal must say besides the file's name.
const BAD_REQUESTS: &[(&str, &str, &str)] = &[
    (
        "zero lifetime",
        r#"{"kind": "server", "dns_names": ["web.ns.svc"], "ip_addresses": [], "lifetime": "0s"}"#,
        "lifetime must be positive",
    ),
    (
        "negative lifetime",
        r#"{"kind": "server", "dns_names": ["web.ns.svc"], "ip_addresses": [], "lifetime": "-1d"}"#,
        "duration",
    ),
    (
        "no names",
        r#"{"kind": "server", "dns_names": [], "ip_addresses": [], "lifetime": "365d"}"#,
        "at least one DNS name or IP address",
    ),
    (
        "unknown field",
        r#"{"kind": "server", "dns_names": ["web.ns.svc"], "ip_addresses": [], "lifetime": "365d", "owner": "team-a"}"#,
        "unknown field `owner`",
    ),
    (
        "misspelt field",
        r#"{"kind": "server", "dns_names": ["web.ns.svc"], "ip_adresses": ["10.0.0.7"], "lifetime": "365d"}"#,
        "unknown field `ip_adresses`",
    ),
    (
        "a name that is not the file's",
        r#"{"name": "api", "kind": "server", "dns_names": ["web.ns.svc"], "ip_addresses": [], "lifetime": "365d"}"#,
        "unknown field `name`",
    ),
    (
        "unknown kind",
        r#"{"kind": "sever", "dns_names": ["web.ns.svc"], "ip_addresses": [], "lifetime": "365d"}"#,
        "unknown variant `sever`",
    ),
    (
        "a DNS name no certificate can carry",
        r#"{"kind": "server", "dns_names": ["web ns"], "ip_addresses": [], "lifetime": "365d"}"#,
        "is not a valid DNS name",
    ),
    (
        "a wildcard over a top-level domain",
        r#"{"kind": "server", "dns_names": ["*.com"], "ip_addresses": [], "lifetime": "365d"}"#,
        "top-level domain",
    ),
    (
        "a common name longer than 64 characters",
        r#"{"kind": "server", "dns_names": ["a-very-long-host-name-that-is-fine-in-dns.but-not-as-a-common-name.example"], "ip_addresses": [], "lifetime": "365d"}"#,
        "longer than 64 characters",
    ),
    ("not JSON", "kind: server", "expected value"),
];

/// The commands that read the whole signer, each of which must refuse.
fn readers(d: &str) -> Vec<Vec<&str>> {
    vec![
        vec!["status", d, "--now", T1],
        vec!["status", d, "--check", "--now", T1],
        vec!["status", d, "--check", "--verify", "--now", T1],
        vec!["rotate", d, "--now", T1],
        vec!["rotate", d, "--force", "drill", "--now", T1],
        vec!["issue", d, "db", "--dns", "db.ns.svc", "--now", T1],
    ]
}

#[test]
fn a_stored_request_that_issue_would_refuse_is_refused_by_every_read_naming_its_file() {
    for (what, contents, says) in BAD_REQUESTS {
        let tmp = tempfile::tempdir().unwrap();
        let dir = store(&tmp);
        let d = dir.as_str();
        write_request(d, "leaf-requests/web.json", contents);
        let before = tree(tmp.path());
        for args in readers(d) {
            let err = refused(&args);
            assert!(
                err.contains("leaf-requests/web.json") && err.contains(says),
                "{what}: pki {args:?}: {err}"
            );
        }
        assert!(tree(tmp.path()) == before, "{what}: a refusal wrote");
    }
}

/// The other side of the same check: what a read refuses, `pki issue`
/// refuses when asked (a zero lifetime already as bad usage).
#[test]
fn issue_refuses_each_request_that_a_read_refuses() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = store(&tmp);
    let d = dir.as_str();
    let before = tree(tmp.path());
    let zero = ["issue", d, "db", "--dns", "db.ns.svc", "--lifetime", "0s"];
    cli::fails_with(2, &zero);
    for args in [
        vec!["issue", d, "db", "--dns", "web ns"],
        vec!["issue", d, "db", "--dns", "*.com"],
        vec![
            "issue",
            d,
            "db",
            "--dns",
            "a-very-long-host-name-that-is-fine-in-dns.but-not-as-a-common-name.example",
        ],
    ] {
        refused(&args);
    }
    assert!(tree(tmp.path()) == before, "a refused issue wrote");
}

#[test]
fn a_request_file_whose_name_is_no_leaf_name_is_refused_by_every_read() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = store(&tmp);
    let d = dir.as_str();
    write_request(
        d,
        "leaf-requests/Web.json",
        r#"{"kind": "server", "dns_names": ["web.ns.svc"], "ip_addresses": [], "lifetime": "365d"}"#,
    );
    let before = tree(tmp.path());
    for args in readers(d) {
        let err = refused(&args);
        assert!(err.contains("\"Web\""), "pki {args:?}: {err}");
    }
    assert!(tree(tmp.path()) == before, "a refusal wrote");
}

#[test]
fn a_good_request_written_into_the_store_still_reads_and_is_issued() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = store(&tmp);
    let d = dir.as_str();
    write_request(
        d,
        "leaf-requests/web.json",
        r#"{"kind": "server", "dns_names": ["web.ns.svc"], "ip_addresses": ["10.0.0.7"], "lifetime": "30d"}"#,
    );
    let out = ok(&["status", d, "--now", T1]);
    assert!(out.contains("web"), "{out}");
    ok(&["issue", d, "db", "--dns", "db.ns.svc", "--now", T1]);
    // The changed names are what a rotation re-issues the leaf with.
    ok(&["rotate", d, "--now", T1]);
    let inspected = ok(&["inspect", &format!("{d}/certs/web/tls.crt")]);
    assert!(inspected.contains("10.0.0.7"), "{inspected}");
    let o = cli::pki(&["status", d, "--check", "--now", T1]);
    assert_eq!(o.status.code(), Some(0), "{}", cli::text(&o.stdout));
}
