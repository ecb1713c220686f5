//! `pki lint`: every finding code from certificates OpenSSL makes here
//! (`openssl req`/`openssl x509`, with the extensions each case needs), a
//! store's own rotated bundle and bridged chain giving no finding, the
//! exit statuses, and `--json` against `docs/lint.schema.json`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::PathBuf;
use std::process::Command;
use support::cli::{exited_with, ok, pki, stdout};

// 2026-01-01: when the test store is made.
const T0: &str = "2026-01-01T00:00:00Z";

/// Makes keys and certificates with the `openssl` command in a directory.
struct Maker {
    dir: tempfile::TempDir,
}

impl Maker {
    fn new() -> Self {
        Maker {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn openssl(&self, args: &[&str]) {
        let out = Command::new("openssl")
            .args(args)
            .current_dir(self.dir.path())
            .output()
            .expect("openssl is needed to make the test certificates");
        assert!(
            out.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn key(&self, name: &str) {
        self.openssl(&[
            "genpkey",
            "-algorithm",
            "EC",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-out",
            &format!("{name}.key"),
        ]);
    }

    /// Writes an extension section `[ext]` with `lines`, and a `[req]`
    /// section with `string_mask`.
    fn config(&self, name: &str, string_mask: &str, lines: &[&str]) -> String {
        let file = format!("{name}.cnf");
        let text = format!(
            "[req]\ndistinguished_name = dn\nstring_mask = {string_mask}\n[dn]\n[ext]\n{}\n",
            lines.join("\n")
        );
        std::fs::write(self.path(&file), text).unwrap();
        file
    }

    /// A self-signed CA `name` on the key `key` (made when missing).
    fn root(&self, name: &str, key: &str, subject: &str, days: u32, ext: &[&str]) {
        self.root_with_mask(name, key, subject, days, "utf8only", ext);
    }

    fn root_with_mask(
        &self,
        name: &str,
        key: &str,
        subject: &str,
        days: u32,
        mask: &str,
        ext: &[&str],
    ) {
        if !self.path(&format!("{key}.key")).exists() {
            self.key(key);
        }
        let cnf = self.config(name, mask, ext);
        self.openssl(&[
            "req",
            "-x509",
            "-new",
            "-key",
            &format!("{key}.key"),
            "-subj",
            subject,
            "-days",
            &days.to_string(),
            "-config",
            &cnf,
            "-extensions",
            "ext",
            "-out",
            &format!("{name}.pem"),
        ]);
    }

    /// A certificate `name` on a new key, signed by the CA `ca` (its
    /// certificate `ca.pem`, its key `cakey.key`), with serial `serial`.
    #[allow(clippy::too_many_arguments)]
    fn signed(
        &self,
        name: &str,
        subject: &str,
        ca: &str,
        cakey: &str,
        serial: &str,
        days: u32,
        ext: &[&str],
    ) {
        self.key(name);
        let cnf = self.config(name, "utf8only", ext);
        self.openssl(&[
            "req",
            "-new",
            "-key",
            &format!("{name}.key"),
            "-subj",
            subject,
            "-config",
            &cnf,
            "-out",
            &format!("{name}.csr"),
        ]);
        self.openssl(&[
            "x509",
            "-req",
            "-in",
            &format!("{name}.csr"),
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{cakey}.key"),
            "-set_serial",
            serial,
            "-days",
            &days.to_string(),
            "-extfile",
            &cnf,
            "-extensions",
            "ext",
            "-out",
            &format!("{name}.pem"),
        ]);
    }

    /// Concatenates certificates into one file.
    fn file(&self, name: &str, parts: &[&str]) -> String {
        let text: String = parts
            .iter()
            .map(|p| std::fs::read_to_string(self.path(&format!("{p}.pem"))).unwrap())
            .collect();
        let path = self.path(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    }
}

const CA_EXT: &[&str] = &[
    "basicConstraints = critical, CA:TRUE",
    "keyUsage = critical, keyCertSign, cRLSign",
    "subjectKeyIdentifier = hash",
    "authorityKeyIdentifier = keyid:always",
];
const LEAF_EXT: &[&str] = &[
    "basicConstraints = critical, CA:FALSE",
    "keyUsage = critical, digitalSignature",
    "extendedKeyUsage = serverAuth",
    "subjectAltName = DNS:web.example",
    "subjectKeyIdentifier = hash",
    "authorityKeyIdentifier = keyid:always",
];

/// `pki lint ARGS`: exit status, and the (code, severity, cert) of each line.
fn lint(args: &[&str]) -> (i32, Vec<(String, String, String)>) {
    let mut full = vec!["lint"];
    full.extend_from_slice(args);
    let out = pki(&full);
    let code = out.status.code().unwrap();
    exited_with(code, &full, &out);
    let lines = stdout(&out)
        .lines()
        .map(|l| {
            let (head, _detail) = l.split_once(": ").unwrap();
            let mut words = head.split(' ');
            let severity = words.next().unwrap().to_string();
            let code = words.next().unwrap().to_string();
            let cert = words.next().unwrap().to_string();
            (code, severity, cert)
        })
        .collect();
    (code, lines)
}

fn finding(code: &str, severity: &str, cert: &str) -> (String, String, String) {
    (code.into(), severity.into(), cert.into())
}

/// A CA `ca` with a leaf `web` under it, the usual way.
fn ca_and_leaf(m: &Maker) {
    m.root("ca", "ca", "/CN=lint-ca", 3650, CA_EXT);
    m.signed("web", "/CN=web", "ca", "ca", "0x1001", 365, LEAF_EXT);
}

#[test]
fn a_rotated_store_bundle_and_bridged_chain_give_no_finding() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki").display().to_string();
    ok(&["init", &dir, "--now", T0]);
    ok(&["issue", &dir, "web", "--dns", "web.ns.svc", "--now", T0]);
    // After the rotation: bundle = new CA + bridge A, chain = leaf + bridge B.
    let later = "2027-02-01T00:00:00Z";
    ok(&["rotate", &dir, "--now", later]);
    let bundle = format!("{dir}/ca-bundle.crt");
    let chain = format!("{dir}/certs/web/tls.crt");
    let out = ok(&["lint", &bundle, &chain, "--now", later]);
    assert_eq!(out, "", "a clean bundle prints nothing");
    let json = ok(&["lint", &bundle, &chain, "--now", later, "--json"]);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["findings"], serde_json::json!([]));
    validate_lint_schema(&json);
}

#[test]
fn an_aki_naming_issuer_and_serial_is_an_error() {
    let m = Maker::new();
    m.root("ca", "ca", "/CN=lint-ca", 3650, CA_EXT);
    let mut ext = LEAF_EXT.to_vec();
    ext.retain(|l| !l.starts_with("authorityKeyIdentifier"));
    ext.push("authorityKeyIdentifier = keyid:always, issuer:always");
    m.signed("web", "/CN=web", "ca", "ca", "0x1001", 365, &ext);
    let bundle = m.file("bundle.pem", &["ca"]);
    let chain = m.file("chain.pem", &["web"]);
    let (code, found) = lint(&[&bundle, &chain]);
    assert_eq!(
        found,
        [finding("aki-issuer-serial", "error", &format!("{chain}#1"))]
    );
    assert_eq!(code, 1);
}

#[test]
fn a_serial_used_twice_under_one_issuer_is_an_error() {
    let m = Maker::new();
    ca_and_leaf(&m);
    m.signed("api", "/CN=api", "ca", "ca", "0x1001", 365, LEAF_EXT);
    let bundle = m.file("bundle.pem", &["ca"]);
    let chains = m.file("leaves.pem", &["web", "api"]);
    let (code, found) = lint(&[&bundle, &chains]);
    assert_eq!(
        found,
        [finding("serial-reused", "error", &format!("{chains}#2"))]
    );
    assert_eq!(code, 1);
}

#[test]
fn one_key_under_two_subjects_or_two_skis_is_a_cross_sign_mismatch() {
    let m = Maker::new();
    m.root("a", "shared", "/CN=shared-ca", 3650, CA_EXT);
    m.root("renamed", "shared", "/CN=other-name", 3650, CA_EXT);
    let mut ext = CA_EXT.to_vec();
    ext.retain(|l| {
        !l.starts_with("subjectKeyIdentifier") && !l.starts_with("authorityKeyIdentifier")
    });
    ext.push("subjectKeyIdentifier = 0102030405060708090a0b0c0d0e0f1011121314");
    m.root("other-ski", "shared", "/CN=shared-ca", 3650, &ext);
    let bundle = m.file("bundle.pem", &["a", "renamed", "other-ski"]);
    let (code, found) = lint(&[&bundle]);
    assert_eq!(
        found,
        [
            finding("cross-sign-mismatch", "error", &format!("{bundle}#2")),
            finding("cross-sign-mismatch", "error", &format!("{bundle}#3")),
        ]
    );
    assert_eq!(code, 1);
}

#[test]
fn a_ca_without_ski_is_an_error() {
    let m = Maker::new();
    m.root(
        "ca",
        "ca",
        "/CN=no-ski",
        3650,
        &[
            "basicConstraints = critical, CA:TRUE",
            "keyUsage = critical, keyCertSign, cRLSign",
            "subjectKeyIdentifier = none",
            "authorityKeyIdentifier = none",
        ],
    );
    let bundle = m.file("bundle.pem", &["ca"]);
    let (code, found) = lint(&[&bundle]);
    assert_eq!(
        found,
        [finding("missing-ski", "error", &format!("{bundle}#1"))]
    );
    assert_eq!(code, 1);
}

#[test]
fn anchors_are_checked_at_now() {
    let m = Maker::new();
    m.root("ca", "ca", "/CN=lint-ca", 30, CA_EXT);
    let bundle = m.file("bundle.pem", &["ca"]);
    assert_eq!(lint(&[&bundle]), (0, vec![]));
    let (code, found) = lint(&[&bundle, "--now", "2099-01-01T00:00:00Z"]);
    assert_eq!(
        found,
        [finding("anchor-expired", "error", &format!("{bundle}#1"))]
    );
    assert_eq!(code, 1);
    let (code, found) = lint(&[&bundle, "--now", "2000-01-01T00:00:00Z"]);
    assert_eq!(
        found,
        [finding(
            "anchor-not-yet-valid",
            "warning",
            &format!("{bundle}#1")
        )]
    );
    assert_eq!(code, 0, "a warning alone exits 0");
}

#[test]
fn a_leaf_outliving_its_issuer_is_a_warning() {
    let m = Maker::new();
    m.root("ca", "ca", "/CN=short-ca", 30, CA_EXT);
    m.signed("web", "/CN=web", "ca", "ca", "0x1001", 365, LEAF_EXT);
    let bundle = m.file("bundle.pem", &["ca"]);
    let chain = m.file("chain.pem", &["web"]);
    let (code, found) = lint(&[&bundle, &chain]);
    assert_eq!(
        found,
        [finding(
            "leaf-outlives-issuer",
            "warning",
            &format!("{chain}#1")
        )]
    );
    assert_eq!(code, 0);
}

#[test]
fn a_ca_below_a_pathlen_zero_ca_is_an_error() {
    let m = Maker::new();
    let mut constrained = CA_EXT.to_vec();
    constrained[0] = "basicConstraints = critical, CA:TRUE, pathlen:0";
    m.root("root", "root", "/CN=root", 3650, CA_EXT);
    m.signed(
        "issuing",
        "/CN=issuing",
        "root",
        "root",
        "0x2001",
        3000,
        &constrained,
    );
    m.signed(
        "deeper",
        "/CN=deeper",
        "issuing",
        "issuing",
        "0x2002",
        2000,
        CA_EXT,
    );
    m.signed(
        "web", "/CN=web", "deeper", "deeper", "0x2003", 365, LEAF_EXT,
    );
    let bundle = m.file("bundle.pem", &["root"]);
    let chain = m.file("chain.pem", &["web", "deeper", "issuing"]);
    let (code, found) = lint(&[&bundle, &chain]);
    assert_eq!(
        found,
        [finding("pathlen-violation", "error", &format!("{chain}#2"))]
    );
    assert_eq!(code, 1);
    // OpenSSL agrees that the path is broken.
    let out = Command::new("openssl")
        .args([
            "verify",
            "-CAfile",
            &bundle,
            "-untrusted",
            &chain,
            &m.file("leaf.pem", &["web"]),
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
}

#[test]
fn a_ca_renewed_with_printable_string_names_is_a_name_string_type_error() {
    let m = Maker::new();
    ca_and_leaf(&m);
    // The same key and name, the CN now a PrintableString.
    m.root_with_mask("renewed", "ca", "/CN=lint-ca", 3650, "default", CA_EXT);
    let der = |name: &str| {
        let out = Command::new("openssl")
            .args(["asn1parse", "-in", &format!("{name}.pem")])
            .current_dir(m.dir.path())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(
        der("renewed").contains("PRINTABLESTRING"),
        "{}",
        der("renewed")
    );
    assert!(der("web").contains("UTF8STRING"));
    let bundle = m.file("bundle.pem", &["renewed"]);
    let chain = m.file("chain.pem", &["web"]);
    let (code, found) = lint(&[&bundle, &chain]);
    assert_eq!(
        found,
        [finding("name-string-type", "error", &format!("{chain}#1"))]
    );
    assert_eq!(code, 1);
}

#[test]
fn a_certificate_given_twice_is_a_duplicate_warning() {
    let m = Maker::new();
    ca_and_leaf(&m);
    let bundle = m.file("bundle.pem", &["ca", "ca"]);
    let (code, found) = lint(&[&bundle]);
    assert_eq!(
        found,
        [finding("duplicate-cert", "warning", &format!("{bundle}#2"))]
    );
    assert_eq!(code, 0);
}

#[test]
fn every_code_in_one_json_report_matches_the_schema() {
    let m = Maker::new();
    m.root("ca", "ca", "/CN=short-ca", 30, CA_EXT);
    m.signed("web", "/CN=web", "ca", "ca", "0x1001", 365, LEAF_EXT);
    m.signed("api", "/CN=api", "ca", "ca", "0x1001", 20, LEAF_EXT);
    let bundle = m.file("bundle.pem", &["ca", "ca"]);
    let chain = m.file("chain.pem", &["web", "api"]);
    let out = pki(&[
        "lint",
        &bundle,
        &chain,
        "--json",
        "--now",
        "2099-01-01T00:00:00Z",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let json = stdout(&out);
    validate_lint_schema(&json);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    let codes: Vec<&str> = v["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["code"].as_str().unwrap())
        .collect();
    assert_eq!(
        codes,
        [
            "anchor-expired",
            "duplicate-cert",
            "leaf-outlives-issuer",
            "serial-reused"
        ]
    );
}

#[test]
fn unreadable_input_is_one_line_and_exit_1_and_no_file_is_bad_usage() {
    let m = Maker::new();
    let missing = m.path("missing.pem").display().to_string();
    let out = pki(&["lint", &missing]);
    let err = exited_with(1, &["lint"], &out);
    assert!(err.contains("missing.pem"), "{err}");
    let empty = m.path("empty.pem");
    std::fs::write(&empty, "no certificate here\n").unwrap();
    let out = pki(&["lint", &empty.display().to_string()]);
    let err = exited_with(1, &["lint"], &out);
    assert!(err.contains("no certificate"), "{err}");
    exited_with(2, &["lint"], &pki(&["lint"]));
    exited_with(
        2,
        &["lint"],
        &pki(&["lint", &missing, "--now", "yesterday"]),
    );
}

/// Validates `json` against docs/lint.schema.json with Python's jsonschema.
fn validate_lint_schema(json: &str) {
    support::schema::validate("lint.schema.json", json, "lint --json");
}
