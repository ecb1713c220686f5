//! Inputs people have: DER certificates and PKCS#8 DER keys are read
//! wherever PEM is (pki-core detects the encoding), and a trust anchor
//! given as the chain verifies, as `openssl verify -CAfile ROOT ROOT` does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::process::Command;
use support::cli::{ok, openssl_root, refused};

/// `openssl ARGS`, which must succeed.
fn openssl(args: &[&str]) {
    let o = Command::new("openssl").args(args).output().unwrap();
    assert!(
        o.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
}

/// `pem` (a certificate) as DER in `dir/name`.
fn cert_der(dir: &Path, pem: &str, name: &str) -> String {
    let out = dir.join(name).display().to_string();
    openssl(&["x509", "-in", pem, "-outform", "DER", "-out", &out]);
    out
}

#[test]
fn der_certificates_are_read_by_pin_inspect_and_verify() {
    let (tmp, dir) = support::store::store(&[]);
    let bundle_pem = format!("{dir}/ca-bundle.crt");
    let leaf_pem = format!("{dir}/certs/web/tls.crt");
    let bundle_der = cert_der(tmp.path(), &bundle_pem, "bundle.der");
    let leaf_der = cert_der(tmp.path(), &leaf_pem, "leaf.der");
    assert_eq!(ok(&["pin", &bundle_der]), ok(&["pin", &bundle_pem]));
    let inspected = ok(&["inspect", &leaf_der, "--now", support::store::T0]);
    assert!(inspected.contains("web.ns.svc"), "{inspected}");
    let out = ok(&[
        "verify",
        "--bundle",
        &bundle_der,
        "--chain",
        &leaf_der,
        "--dns",
        "web.ns.svc",
        "--at",
        support::store::T0,
    ]);
    assert!(
        out.starts_with("verified for serverAuth DNS:web.ns.svc"),
        "{out}"
    );
    // Two DER certificates one after the other, as `cat` makes them.
    let two = tmp.path().join("two.der");
    let mut both = std::fs::read(&leaf_der).unwrap();
    both.extend(std::fs::read(&bundle_der).unwrap());
    std::fs::write(&two, both).unwrap();
    let inspected = ok(&[
        "inspect",
        two.to_str().unwrap(),
        "--now",
        support::store::T0,
    ]);
    assert!(inspected.contains("CN=service-ca"), "{inspected}");
    // Binary that is not DER is one clear line, not "not UTF-8 text".
    let junk = tmp.path().join("junk.der");
    std::fs::write(&junk, [0x30, 0x82, 0xff, 0xff, 0x00]).unwrap();
    let err = refused(&["pin", junk.to_str().unwrap()]);
    assert!(err.contains("DER object 1: not valid DER"), "{err}");
}

#[test]
fn a_der_ca_and_pkcs8_der_key_are_imported_like_pem() {
    let tmp = tempfile::tempdir().unwrap();
    let (crt, key) = openssl_root(tmp.path(), "Org", 800);
    let crt_der = cert_der(tmp.path(), &crt, "org.der");
    let key_der = tmp.path().join("org.key.der").display().to_string();
    openssl(&[
        "pkcs8", "-topk8", "-nocrypt", "-in", &key, "-outform", "DER", "-out", &key_der,
    ]);
    let store = tmp.path().join("s").display().to_string();
    let out = ok(&["init", &store, "--import", &crt_der, "--key-file", &key_der]);
    assert!(out.contains("imported CA"), "{out}");
    ok(&["issue", &store, "web", "--dns", "web.example"]);
    let o = Command::new("openssl")
        .args(["verify", "-x509_strict", "-CAfile", &crt])
        .arg(format!("{store}/certs/web/tls.crt"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // validate --to and rotate --to read DER too.
    let (next, next_key) = openssl_root(tmp.path(), "Next", 800);
    let next_der = cert_der(tmp.path(), &next, "next.der");
    let report = ok(&[
        "validate",
        &store,
        "--to",
        &next_der,
        "--key-file",
        &next_key,
        "--json",
    ]);
    let report: serde_json::Value = serde_json::from_str(&report).unwrap();
    let readable = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["name"] != "inputs-readable");
    assert!(readable, "{report}");
}

#[test]
fn a_trust_anchor_given_as_the_chain_verifies_as_openssl_and_go_say() {
    let tmp = tempfile::tempdir().unwrap();
    let (root, _) = openssl_root(tmp.path(), "Root", 800);
    openssl(&["verify", "-CAfile", &root, &root]);
    let out = ok(&["verify", "--bundle", &root, "--chain", &root]);
    assert!(
        out.contains("CA certificate is itself in the bundle: trusted as an anchor"),
        "{out}"
    );
    let json: serde_json::Value = serde_json::from_str(&ok(&[
        "verify", "--bundle", &root, "--chain", &root, "--json",
    ]))
    .unwrap();
    assert_eq!(json["verified"], true);
    assert_eq!(json["path"].as_array().unwrap().len(), 1);
    // Another root is still not trusted by this bundle, and the anchor's
    // own checks still apply: a name it does not carry fails.
    let (other, _) = openssl_root(tmp.path(), "Other", 800);
    let err = refused(&["verify", "--bundle", &root, "--chain", &other]);
    assert!(err.contains("not verified"), "{err}");
    let err = refused(&[
        "verify",
        "--bundle",
        &root,
        "--chain",
        &root,
        "--dns",
        "x.example",
    ]);
    assert!(err.contains("not verified"), "{err}");
}
