//! What can never verify is refused before it is written: every import and
//! every issue under an imported CA runs the pre-flight (a probe leaf
//! verified against what clients will trust), `validate` and `rotate --to`
//! share one list of checks, and status builds the chains it checks the
//! way clients do.
//!
//! The CAs are made by OpenSSL at the real current time, so these tests act
//! at the real time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use support::cli::{ok, pki, refused, text, tree};
use support::maker::{Maker, openssl_verifies_serving_chain};

/// The failed checks of `pki validate DIR --to FILE --json`.
fn failed_checks(dir: &str, to: &str) -> Vec<String> {
    let o = pki(&["validate", dir, "--to", to, "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("validate --json: {e}: {}", text(&o.stdout)));
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_ca_below_a_pathlen_zero_intermediate_is_refused_by_init_validate_rotate_to_and_set_start() {
    let tmp = tempfile::tempdir().unwrap();
    let m = Maker::new(tmp.path());
    m.root("root", "Org Root", 3650);
    // pathlen:0: no CA may sit below this intermediate.
    m.signed("int", "Org Intermediate", "root", "ca0", 1825);
    m.signed("cluster", "cluster-ca", "int", "ca0", 730);
    let upload = m.bundle(
        "upload.pem",
        &["cluster.crt", "cluster.key", "int.crt", "root.crt"],
    );

    let dir = tmp.path().join("pki");
    let d = dir.to_str().unwrap();
    let err = refused(&["init", d, "--import", &upload]);
    assert!(err.contains("issues-verifiable-leaves"), "{err}");
    assert!(!dir.exists(), "a refused init created {d}");

    // validate and rotate --to run the same list.
    ok(&["init", d, "--cn", "service-ca"]);
    let failed = failed_checks(d, &upload);
    assert!(
        failed.iter().any(|c| c == "issues-verifiable-leaves"),
        "{failed:?}"
    );
    let before = tree(&dir);
    let err = refused(&["rotate", d, "--to", &upload]);
    assert!(err.contains("issues-verifiable-leaves"), "{err}");
    assert!(tree(&dir) == before);

    // A CA set starting with it as the new cluster CA is refused, naming it.
    let set = tmp.path().join("set");
    let s = set.to_str().unwrap();
    ok(&["set", "init", s, "--ca", "cluster:serving"]);
    ok(&[
        "set",
        "issue",
        s,
        "api",
        "--ca",
        "cluster",
        "--serving",
        "--dns",
        "api.example",
        "--target",
        "cp",
    ]);
    let before = tree(&set);
    let err = refused(&["set", "start", s, "--import", &format!("cluster={upload}")]);
    assert!(
        err.contains("cluster") && err.contains("would not verify"),
        "{err}"
    );
    assert!(tree(&set) == before);
}

#[test]
fn a_ca_valid_for_a_day_is_refused_at_import() {
    let tmp = tempfile::tempdir().unwrap();
    let m = Maker::new(tmp.path());
    m.root("root", "Org Root", 3650);
    m.signed("int", "Org Intermediate", "root", "ca1", 1825);
    m.signed("cluster", "cluster-ca", "int", "ca0", 1);
    let upload = m.bundle(
        "upload.pem",
        &["cluster.crt", "cluster.key", "int.crt", "root.crt"],
    );
    let dir = tmp.path().join("pki");
    let err = refused(&["init", dir.to_str().unwrap(), "--import", &upload]);
    assert!(err.contains("valid-for-24h"), "{err}");
    assert!(!dir.exists());
}

#[test]
fn issuing_a_name_outside_the_imported_cas_name_constraints_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let m = Maker::new(tmp.path());
    m.root("root", "Org Root", 3650);
    // Permits example.com and its subdomains only.
    m.signed("int", "Org Intermediate", "root", "ca1nc", 1825);
    m.signed("cluster", "cluster-ca", "int", "ca0", 730);
    let upload = m.bundle(
        "upload.pem",
        &["cluster.crt", "cluster.key", "int.crt", "root.crt"],
    );
    let dir = tmp.path().join("pki");
    let d = dir.to_str().unwrap();
    ok(&["init", d, "--import", &upload]);
    ok(&["issue", d, "web", "--dns", "web.example.com"]);
    openssl_verifies_serving_chain(&m.path("root.crt"), &dir.join("certs/web/tls.crt"));
    let before = tree(&dir);
    let err = refused(&["issue", d, "evil", "--dns", "evil.test"]);
    assert!(
        err.contains("certificate evil refused") && err.contains("evil.test"),
        "{err}"
    );
    let err = refused(&[
        "issue",
        d,
        "web",
        "--dns",
        "web.example.com",
        "--dns",
        "other.org",
    ]);
    assert!(err.contains("other.org"), "{err}");
    assert!(tree(&dir) == before, "a refused issue wrote to the store");
}

#[test]
fn one_ca_imported_for_two_set_cas_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let m = Maker::new(tmp.path());
    m.root("root", "Org Root", 3650);
    m.signed("int", "Org Intermediate", "root", "ca1", 1825);
    m.signed("shared", "shared-ca", "int", "ca0", 730);
    let upload = m.bundle(
        "upload.pem",
        &["shared.crt", "shared.key", "int.crt", "root.crt"],
    );
    let set = tmp.path().join("set");
    let s = set.to_str().unwrap();
    ok(&[
        "set",
        "init",
        s,
        "--ca",
        "cluster:serving",
        "--ca",
        "etcd:serving",
    ]);
    let before = tree(&set);
    let err = refused(&[
        "set",
        "start",
        s,
        "--import",
        &format!("cluster={upload}"),
        "--import",
        &format!("etcd={upload}"),
    ]);
    assert!(err.contains("same key"), "{err}");
    assert!(tree(&set) == before);
}

#[test]
fn status_after_rotate_to_under_the_same_external_intermediate_reports_trust_intact() {
    let tmp = tempfile::tempdir().unwrap();
    let m = Maker::new(tmp.path());
    m.root("root", "Org Root", 3650);
    m.signed("int", "Org Intermediate", "root", "ca1", 1825);
    m.signed("cluster", "cluster-ca", "int", "ca0", 730);
    m.signed("cluster2", "cluster-ca-2", "int", "ca0", 720);
    let upload = m.bundle(
        "upload.pem",
        &["cluster.crt", "cluster.key", "int.crt", "root.crt"],
    );
    let to = m.bundle(
        "to.pem",
        &["cluster2.crt", "cluster2.key", "int.crt", "root.crt"],
    );
    let dir = tmp.path().join("pki");
    let d = dir.to_str().unwrap();
    ok(&["init", d, "--import", &upload]);
    ok(&["issue", d, "web", "--dns", "web.example"]);
    ok(&["rotate", d, "--to", &to]);
    let o = pki(&["status", d, "--check", "--json"]);
    let status: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(o.status.code(), Some(0), "{status}");
    for cell in status["trust"].as_array().unwrap() {
        assert_eq!(cell["result"]["status"], "verified", "{cell}");
    }
    openssl_verifies_serving_chain(&m.path("root.crt"), &Path::new(d).join("certs/web/tls.crt"));
}
