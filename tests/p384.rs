//! `--key p384` on the command line: a signer and a CA set whose CAs have
//! P-384 keys issue leaves that OpenSSL verifies, and the key ring, which
//! signs ES256 and RS256 tokens only, refuses P-384 with a clear reason.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::process::Command;
use support::cli::{ok, pki};

fn openssl(args: &[&str]) -> String {
    let o = Command::new("openssl")
        .args(args)
        .output()
        .expect("openssl is not installed or cannot run; install it with `apt-get install openssl` (Debian) or run scripts/test.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(o.status.success(), "openssl {args:?}: {text}");
    text
}

/// `openssl verify -x509_strict` of the serving chain file `chain` (leaf,
/// then what it carries) against `bundle`, for `purpose`.
fn openssl_verifies(bundle: &Path, chain: &Path, purpose: &str) {
    let (bundle, chain) = (bundle.to_str().unwrap(), chain.to_str().unwrap());
    openssl(&[
        "verify",
        "-x509_strict",
        "-purpose",
        purpose,
        "-CAfile",
        bundle,
        "-untrusted",
        chain,
        chain,
    ]);
}

fn is_p384_signed_with_sha384(cert: &Path) {
    let text = openssl(&["x509", "-in", cert.to_str().unwrap(), "-noout", "-text"]);
    assert!(text.contains("NIST CURVE: P-384"), "{text}");
    assert!(text.contains("ecdsa-with-SHA384"), "{text}");
}

#[test]
fn init_with_key_p384_makes_a_p384_ca_whose_leaves_openssl_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("signer");
    let d = dir.to_str().unwrap();
    let out = ok(&["init", d, "--key", "p384"]);
    assert!(out.contains("p384"), "{out}");
    is_p384_signed_with_sha384(&dir.join("signer/tls.crt"));

    ok(&["issue", d, "web", "--dns", "web.example"]);
    ok(&["issue", d, "agent", "--dns", "agent.example", "--client"]);
    let bundle = dir.join("ca-bundle.crt");
    openssl_verifies(&bundle, &dir.join("certs/web/tls.crt"), "sslserver");
    openssl_verifies(&bundle, &dir.join("certs/agent/tls.crt"), "sslclient");

    // pki's own verifier agrees.
    let chain = dir.join("certs/web/tls.crt");
    ok(&[
        "verify",
        "--bundle",
        bundle.to_str().unwrap(),
        "--chain",
        chain.to_str().unwrap(),
        "--dns",
        "web.example",
    ]);
}

#[test]
fn set_init_with_key_p384_makes_p384_cas_whose_leaves_openssl_verifies() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("set");
    let d = dir.to_str().unwrap();
    ok(&["set", "init", d, "--ca", "cluster:serving", "--key", "p384"]);
    ok(&[
        "set",
        "issue",
        d,
        "apiserver",
        "--ca",
        "cluster",
        "--serving",
        "--dns",
        "api.example",
        "--target",
        "control-plane",
    ]);
    ok(&["set", "target", d, "node-1", "--trusts", "cluster"]);
    let leaf = dir.join("targets/control-plane/certs/apiserver/tls.crt");
    let bundle = dir.join("targets/node-1/trust/cluster.crt");
    is_p384_signed_with_sha384(&bundle);
    openssl_verifies(&bundle, &leaf, "sslserver");
}

#[test]
fn the_key_ring_refuses_p384_with_the_reason() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("keys");
    let o = pki(&["keys", "init", dir.to_str().unwrap(), "--key", "p384"]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("ES384") && err.contains("p256"), "{err}");
    assert!(!dir.exists());
}
