//! CAs signed by someone else's root, end to end through the `pki` binary:
//! an organisation root → intermediate → cluster CA made with `openssl req`
//! and `openssl x509` (the k3s custom-CA topology), imported; leaves
//! verified by OpenSSL, Go and a rustls handshake against a bundle holding
//! only the organisation root; pins; `status --check` before the imported
//! CA expires; bad import files.
//!
//! The certificates OpenSSL makes are valid from the real current time,
//! so these tests act at the real time (no `--now`) except where a check
//! needs a later time, which is then computed from the clock.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::cli::{ok, pki, refused};
use support::external::{cert, imported, root_only_bundle};
use support::maker::{Maker, openssl, openssl_verifies_serving_chain};
use support::tls;

use pki_core::PrivateKey;
use std::path::Path;
use time::{Duration, OffsetDateTime};

#[test]
fn imported_external_ca_signs_leaves_that_openssl_go_and_rustls_verify_against_the_root_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let (m, dir) = imported(tmp.path());
    let d = Path::new(&dir);
    let root = cert(&m.path("root.crt")).remove(0);

    // The bundle published to clients is the organisation root.
    let published = cert(&d.join("ca-bundle.crt").display().to_string());
    assert_eq!(published, std::slice::from_ref(&root));
    // The serving chain: leaf, the imported CA, the external intermediate.
    let chain = cert(&d.join("certs/web/tls.crt").display().to_string());
    let cluster = cert(&m.path("cluster.crt")).remove(0);
    let int = cert(&m.path("int.crt")).remove(0);
    assert_eq!(chain[1..], [cluster.clone(), int]);
    // The imported CA (pathlen 0) signed the leaf directly, within its own validity.
    assert!(pki_core::issued_by(&chain[0], &cluster).issued_by);
    assert_eq!(chain[0].not_after(), cluster.not_after());

    let now = OffsetDateTime::now_utc();
    // OpenSSL.
    openssl_verifies_serving_chain(&m.path("root.crt"), &d.join("certs/web/tls.crt"));
    // rustls, over a real TLS connection.
    let key = PrivateKey::from_pem(&std::fs::read(d.join("certs/web/tls.key")).unwrap()).unwrap();
    tls::handshake(&chain, &key, &root_only_bundle(&m), "web.example.test", now).unwrap();
    // Go's crypto/x509.
    let go = support::go_x509::verify(
        Path::new(&m.path("root.crt")),
        &d.join("certs/web/tls.crt"),
        "web.example.test",
        now,
    );
    assert_eq!(go, Ok(()), "go's crypto/x509");
    // And pki itself.
    ok(&[
        "verify",
        "--bundle",
        &m.path("root.crt"),
        "--chain",
        &d.join("certs/web/tls.crt").display().to_string(),
        "--dns",
        "web.example.test",
    ]);

    // The import is recorded; service-CA rotation leaves the imported CA alone.
    let state = std::fs::read_to_string(d.join("pki-state.json")).unwrap();
    assert!(state.contains("\"external\""), "{state}");
    let err = refused(&["rotate", &dir, "--force", "try"]);
    assert!(
        err.contains("was imported") && err.contains("--to"),
        "{err}"
    );
}

#[test]
fn a_leaf_never_outlives_any_certificate_of_the_imported_chain() {
    let tmp = tempfile::tempdir().unwrap();
    // OpenSSL, unlike pki, lets a certificate outlive its issuer: an
    // intermediate that expires (day 100) long before the CA (day 730), and
    // a root that expires (day 60) before both.
    for (label, root_days, int_days, expect) in [
        ("intermediate", 3650, 100, "int.crt"),
        ("root", 60, 100, "root.crt"),
    ] {
        let m = Maker::new(&tmp.path().join(label));
        m.root("root", "Org Root", root_days);
        m.signed("int", "Org Intermediate", "root", "ca1", int_days);
        m.signed("cluster", "cluster-ca", "int", "ca0", 730);
        let upload = m.bundle(
            "upload.pem",
            &["cluster.crt", "cluster.key", "int.crt", "root.crt"],
        );
        let dir = tmp.path().join(label).join("pki").display().to_string();
        ok(&["init", &dir, "--import", &upload]);
        ok(&[
            "issue",
            &dir,
            "web",
            "--dns",
            "web.example.test",
            "--lifetime",
            "3650d",
        ]);
        let leaf = cert(
            &Path::new(&dir)
                .join("certs/web/tls.crt")
                .display()
                .to_string(),
        )
        .remove(0);
        let first_to_expire = cert(&m.path(expect)).remove(0);
        assert_eq!(
            leaf.not_after(),
            first_to_expire.not_after(),
            "{label}: the leaf must end with the {label}"
        );
    }
}

#[test]
fn pin_hashes_the_root_der_of_a_multi_cert_bundle_whatever_the_pem_layout() {
    let tmp = tempfile::tempdir().unwrap();
    let (m, dir) = imported(tmp.path());
    let d = Path::new(&dir);
    let root = cert(&m.path("root.crt")).remove(0);
    let expected = format!("sha256:{}\n", hex(&root.fingerprint_sha256()));
    assert_eq!(
        ok(&["pin", &d.join("ca-bundle.crt").display().to_string()]),
        expected
    );
    // A serving chain (leaf, CA, intermediate) plus the root: its chain's root.
    let full = m.bundle("full.pem", &["cluster.crt", "int.crt", "root.crt"]);
    assert_eq!(ok(&["pin", &full]), expected);
    // CRLF, 76-column base64 and text between blocks change no DER byte.
    let der = root.der();
    let b64 = base64_encode(der);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(76)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    let odd = format!(
        "Org Root, as some tool printed it\r\n-----BEGIN CERTIFICATE-----\r\n{}\r\n-----END CERTIFICATE-----\r\ntrailing words\r\n",
        lines.join("\r\n")
    );
    let odd_path = tmp.path().join("odd.pem");
    std::fs::write(&odd_path, format!("{}{odd}", m.read("int.crt"))).unwrap();
    assert_eq!(ok(&["pin", &odd_path.display().to_string()]), expected);
    // The whole base64 body on one line, as some tools write it.
    assert!(b64.len() > 76);
    let one_line = format!("-----BEGIN CERTIFICATE-----\n{b64}\n-----END CERTIFICATE-----\n");
    let one_line_path = tmp.path().join("one-line.pem");
    std::fs::write(&one_line_path, one_line).unwrap();
    assert_eq!(ok(&["pin", &one_line_path.display().to_string()]), expected);
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn base64_encode(der: &[u8]) -> String {
    let pem = pki_core::pem::encode("X", der);
    pem.lines().filter(|l| !l.starts_with("-----")).collect()
}

#[test]
fn status_check_says_a_replacement_is_due_before_an_imported_ca_expires() {
    let tmp = tempfile::tempdir().unwrap();
    let (_m, dir) = imported(tmp.path());
    let at =
        |days: i64| pki_core::datetime::rfc3339(OffsetDateTime::now_utc() + Duration::days(days));
    let check = |days: i64| {
        pki(&["status", &dir, "--check", "--now", &at(days)])
            .status
            .code()
    };
    assert_eq!(check(1), Some(0));
    // The cluster CA (730 days) has less than M (395 days) left after day
    // 335: pki will not replace it on its own, so it is due now.
    assert_eq!(check(340), Some(3));
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["status", &dir, "--json", "--now", &at(340)])).unwrap();
    assert_eq!(json["health"], "action-due");
    let pending = &json["pending"][0];
    assert_eq!(pending["action"], "supply-replacement", "{json}");
    assert_eq!(pending["ca_id"], json["ca"]["id"]);
    let text = ok(&["status", &dir, "--now", &at(340)]);
    assert!(
        text.contains("supply a replacement CA") && text.contains("pki rotate DIR --to FILE"),
        "{text}"
    );
    // `pki rotate` alone does not take it: still due afterwards.
    ok(&["rotate", &dir, "--now", &at(340)]);
    assert_eq!(check(340), Some(3));
    assert_eq!(check(731), Some(4));
}

#[test]
fn bad_import_files_are_refused_with_one_line_and_create_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let m = Maker::org(tmp.path());
    m.key("extra");
    openssl(
        &m.dir,
        &[
            "pkcs8",
            "-topk8",
            "-v2",
            "aes-256-cbc",
            "-passout",
            "pass:secret",
            "-in",
            "cluster.key",
            "-out",
            "enc.key",
        ],
    );
    let cases = [
        (
            "two keys",
            m.bundle(
                "two.pem",
                &[
                    "cluster.crt",
                    "cluster.key",
                    "extra.key",
                    "int.crt",
                    "root.crt",
                ],
            ),
            "two private keys",
        ),
        (
            "key alone",
            m.bundle("alone.pem", &["cluster.key"]),
            "without a certificate",
        ),
        (
            "out of order",
            m.bundle(
                "order.pem",
                &["cluster.crt", "cluster.key", "root.crt", "int.crt"],
            ),
            "out of order",
        ),
        (
            "encrypted",
            m.bundle(
                "enc.pem",
                &["cluster.crt", "enc.key", "int.crt", "root.crt"],
            ),
            "openssl pkcs8",
        ),
        (
            "no chain",
            m.bundle("nochain.pem", &["cluster.crt", "cluster.key"]),
            "chain-supplied",
        ),
    ];
    for (label, file, expect) in cases {
        let dir = tmp.path().join(label.replace(' ', "-"));
        let err = refused(&["init", &dir.display().to_string(), "--import", &file]);
        // The file's path is in the message too: look at what follows it.
        let reason = err.rsplit(file.as_str()).next().unwrap();
        assert!(reason.contains(expect), "{label}: {err}");
        if label == "no chain" {
            assert!(reason.contains("came alone"), "{err}");
        }
        assert!(
            !dir.join("pki-state.json").exists(),
            "{label}: a store was created"
        );
    }
    // Key and chain from separate files work.
    let dir = tmp.path().join("separate").display().to_string();
    ok(&[
        "init",
        &dir,
        "--import",
        &m.path("cluster.crt"),
        "--key-file",
        &m.path("cluster.key"),
        "--chain",
        &m.bundle("ch.pem", &["int.crt", "root.crt"]),
    ]);
}
