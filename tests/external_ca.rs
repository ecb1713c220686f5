//! CAs signed by someone else's root, end to end through the `pki` binary:
//! an organisation root → intermediate → cluster CA made with `openssl req`
//! and `openssl x509` (the k3s custom-CA topology), imported; leaves
//! verified by OpenSSL, Go and a rustls handshake against a bundle holding
//! only the organisation root; each validation check of a replacement
//! failing on its own; rotation to a supplied CA; same-key renewal; pins.
//!
//! The certificates OpenSSL makes are valid from the real current time,
//! so these tests act at the real time (no `--now`) except where a check
//! needs a later time, which is then computed from the clock.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/maker.rs"]
mod maker;
#[path = "../src/tls.rs"]
#[allow(dead_code)]
mod tls;

use maker::{Maker, openssl, openssl_verifies_serving_chain};

use pki_core::{Bundle, Certificate, PrivateKey};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};
use time::{Duration, OffsetDateTime};

fn pki(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pki"))
        .args(args)
        .output()
        .expect("run pki")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn ok(args: &[&str]) -> String {
    let o = pki(args);
    assert!(
        o.status.success(),
        "pki {args:?} failed: {}",
        text(&o.stderr)
    );
    text(&o.stdout)
}

/// Exit 1 with exactly one line on stderr.
fn refused(args: &[&str]) -> String {
    let o = pki(args);
    let err = text(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(1),
        "pki {args:?}: {}{err}",
        text(&o.stdout)
    );
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(
        !err.contains("panicked") && !err.contains("internal error"),
        "{err}"
    );
    err
}

/// Every file under `dir` (links as their targets), to prove a refusal wrote nothing.
fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            let rel = path.strip_prefix(base).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                out.insert(
                    rel,
                    std::fs::read_link(&path)
                        .unwrap()
                        .display()
                        .to_string()
                        .into_bytes(),
                );
            } else if meta.is_dir() {
                walk(base, &path, out);
            } else {
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn cert(path: &str) -> Vec<Certificate> {
    Certificate::all_from_pem(&std::fs::read(path).unwrap()).unwrap()
}

/// The rotation history as `pki status --json` reports it at `now`.
fn history(dir: &str, now: &str) -> Vec<serde_json::Value> {
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["status", dir, "--json", "--now", now])).unwrap();
    json["history"].as_array().cloned().unwrap()
}

/// An imported k3s-style store with one leaf, `web`.
fn imported(tmp: &Path) -> (Maker, String) {
    let m = Maker::org(tmp);
    // One file with key and certificates, as StarlingX uploads it.
    let upload = m.bundle(
        "upload.pem",
        &["cluster.crt", "cluster.key", "int.crt", "root.crt"],
    );
    let dir = tmp.join("pki").display().to_string();
    let out = ok(&["init", &dir, "--import", &upload, "--reload-interval", "7d"]);
    assert!(out.contains("imported CA"), "{out}");
    let state: serde_json::Value =
        serde_json::from_slice(&std::fs::read(Path::new(&dir).join("pki-state.json")).unwrap())
            .unwrap();
    assert_eq!(
        state["policy"]["rotation"]["reload_interval"], "7d",
        "init --import keeps --reload-interval"
    );
    ok(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.example.test",
        "--lifetime",
        "3650d",
    ]);
    (m, dir)
}

fn root_only_bundle(m: &Maker) -> Bundle {
    Bundle::from_pem(m.read("root.crt").as_bytes()).unwrap()
}

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
    go_verify(
        tmp.path(),
        &m.path("root.crt"),
        &d.join("certs/web/tls.crt"),
        "web.example.test",
    );
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

fn go_verify(tmp: &Path, roots: &str, chain: &Path, dns: &str) {
    let src = tmp.join("goverify");
    std::fs::create_dir_all(&src).unwrap();
    std::fs::write(src.join("go.mod"), "module goverify\n\ngo 1.22\n").unwrap();
    std::fs::write(
        src.join("main.go"),
        r#"package main

import (
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
)

func certs(path string) []*x509.Certificate {
	data, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			panic(err)
		}
		out = append(out, c)
	}
}

func main() {
	roots := x509.NewCertPool()
	for _, c := range certs(os.Args[1]) {
		roots.AddCert(c)
	}
	chain := certs(os.Args[2])
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	if _, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: os.Args[3]}); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}
"#,
    )
    .unwrap();
    let o = Command::new("go")
        .current_dir(&src)
        .env("GOFLAGS", "-mod=mod")
        .args(["run", ".", roots])
        .arg(chain)
        .arg(dns)
        .output()
        .expect("go is installed (Go 1.22 or later)");
    assert!(
        o.status.success(),
        "go: {}{}",
        text(&o.stdout),
        text(&o.stderr)
    );
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

/// What each validation check needs to fail alone, and whether `--force`
/// may override it.
struct Case {
    check: &'static str,
    /// `rotate --to` arguments after the store.
    args: Vec<String>,
    /// `--service-account-keys` and the key ring a store keeps.
    forceable: bool,
    now: Option<OffsetDateTime>,
}

#[test]
fn each_validation_check_fails_alone_refuses_the_rotation_and_changes_nothing_unless_forced() {
    let tmp = tempfile::tempdir().unwrap();
    let (m, _dir) = imported(tmp.path());
    // Candidates, all under the same intermediate unless said otherwise.
    m.signed("good", "cluster-ca-2", "int", "ca0", 700);
    m.signed("notca", "cluster-ca-3", "int", "notca", 700);
    m.signed("short", "cluster-ca-4", "int", "ca0", 1);
    let other = Maker::new(&tmp.path().join("other"));
    other.root("root", "Other Root", 3650);
    other.signed("int", "Other Intermediate", "root", "ca1", 1825);
    other.signed("cluster", "cluster-ca-5", "int", "ca0", 700);
    m.key("stranger");

    let chain = m.bundle("chain.pem", &["int.crt", "root.crt"]);
    let good = m.bundle("good.pem", &["good.crt", "good.key"]);
    let sa_old = m.path("sa-old.pem");
    let sa_new = m.path("stranger.key");
    m.key("sa-old");
    let arg = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();

    // The good candidate passes every check.
    let store = |name: &str| -> String {
        let d = tmp.path().join(name).display().to_string();
        let upload = m.bundle(
            "upload.pem",
            &["cluster.crt", "cluster.key", "int.crt", "root.crt"],
        );
        ok(&["init", &d, "--import", &upload]);
        ok(&["issue", &d, "web", "--dns", "web.example.test"]);
        // A service-account key ring in the same store, holding sa-old.
        let public = PrivateKey::from_pem(m.read("sa-old.key").as_bytes())
            .unwrap()
            .public_key_der()
            .unwrap();
        let mut files = pki_rotate::Files::new();
        files
            .insert(
                "keys/public.pem",
                pki_rotate::File::public(pki_core::pem::encode("PUBLIC KEY", &public)),
            )
            .unwrap();
        use pki_rotate::Store;
        pki_rotate::FsStore::open_or_create(Path::new(&d))
            .unwrap()
            .put("keys", None, &files)
            .unwrap();
        d
    };
    let d = store("good-store");
    let out = ok(&["validate", &d, "--to", &good, "--chain", &chain, "--json"]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["ok"], true, "{out}");
    assert_eq!(report["checks"].as_array().unwrap().len(), 7, "{out}");

    let cases = [
        Case {
            check: "key-matches",
            args: arg(&[
                "--to",
                &m.path("good.crt"),
                "--key-file",
                &m.path("stranger.key"),
                "--chain",
                &chain,
            ]),
            forceable: false,
            now: None,
        },
        Case {
            check: "is-ca",
            args: arg(&[
                "--to",
                &m.path("notca.crt"),
                "--key-file",
                &m.path("notca.key"),
                "--chain",
                &chain,
            ]),
            forceable: false,
            now: None,
        },
        Case {
            check: "chains-to-current-trust",
            args: arg(&[
                "--to",
                &other.bundle("c.pem", &["cluster.crt", "cluster.key"]),
                "--chain",
                &other.bundle("ch.pem", &["int.crt", "root.crt"]),
            ]),
            forceable: true,
            now: None,
        },
        Case {
            check: "chain-supplied",
            args: arg(&["--to", &good]),
            forceable: true,
            now: None,
        },
        Case {
            check: "valid-for-24h",
            args: arg(&[
                "--to",
                &m.bundle("s.pem", &["short.crt", "short.key"]),
                "--chain",
                &chain,
            ]),
            forceable: true,
            // 23 hours from now, one hour before the candidate expires.
            now: Some(OffsetDateTime::now_utc() + Duration::hours(23)),
        },
        Case {
            check: "service-account-key-kept",
            args: arg(&[
                "--to",
                &good,
                "--chain",
                &chain,
                "--service-account-keys",
                &sa_new,
            ]),
            forceable: true,
            now: None,
        },
    ];
    let _ = &sa_old;
    for (i, case) in cases.iter().enumerate() {
        let d = store(&format!("store-{i}"));
        let now = case
            .now
            .map(pki_core::datetime::rfc3339)
            .unwrap_or_else(|| "now".into());
        let mut validate = vec!["validate".to_string(), d.clone()];
        validate.extend(case.args.iter().filter(|a| !a.is_empty()).cloned());
        validate.extend(["--json".into(), "--now".into(), now.clone()]);
        let v: Vec<&str> = validate.iter().map(String::as_str).collect();
        let o = pki(&v);
        assert_eq!(
            o.status.code(),
            Some(1),
            "{}: {}",
            case.check,
            text(&o.stderr)
        );
        let report: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(report["ok"], false);
        let failed: Vec<&str> = report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["ok"] == false)
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(failed, [case.check], "{}: {report}", case.check);

        let before = tree(Path::new(&d));
        let mut rotate = vec!["rotate".to_string(), d.clone()];
        rotate.extend(case.args.iter().cloned());
        rotate.extend(["--now".into(), now.clone()]);
        let r: Vec<&str> = rotate.iter().map(String::as_str).collect();
        let err = refused(&r);
        assert!(err.contains(case.check), "{}: {err}", case.check);
        if case.check == "chains-to-current-trust" {
            assert!(
                err.contains("new serving chain x old bundle")
                    && err.contains("from the rotation until 20"),
                "{err}"
            );
        }
        assert_eq!(
            tree(Path::new(&d)),
            before,
            "{}: a refusal wrote something",
            case.check
        );

        rotate.extend(["--force".into(), format!("change window {i}")]);
        let r: Vec<&str> = rotate.iter().map(String::as_str).collect();
        if case.forceable {
            let out = ok(&r);
            assert!(
                out.contains("overridden check") && out.contains(case.check),
                "{out}"
            );
            assert!(
                out.contains("issued web"),
                "leaves re-issued in the same command: {out}"
            );
            let last = history(&d, &now).pop().unwrap();
            assert_eq!(
                last["reason"]["reason"],
                format!("change window {i}"),
                "{last}"
            );
            assert_eq!(last["overridden"][0]["name"], case.check, "{last}");
        } else {
            let err = refused(&r);
            assert!(err.contains("cannot be forced"), "{err}");
            assert_eq!(tree(Path::new(&d)), before);
        }
    }
}

#[test]
fn rotation_to_a_new_intermediate_under_the_same_root_keeps_the_root_pin() {
    let tmp = tempfile::tempdir().unwrap();
    let (m, dir) = imported(tmp.path());
    let d = Path::new(&dir);
    let bundle_file = d.join("ca-bundle.crt").display().to_string();
    let pin = ok(&["pin", &bundle_file]);
    let old_chain = std::fs::read(d.join("certs/web/tls.crt")).unwrap();

    m.signed("int2", "Org Intermediate 2", "root", "ca1", 1825);
    m.signed("cluster2", "cluster-ca", "int2", "ca0", 700);
    let to = m.bundle(
        "to.pem",
        &["cluster2.crt", "cluster2.key", "int2.crt", "root.crt"],
    );
    let out = ok(&["rotate", &dir, "--to", &to]);
    assert!(
        out.contains("rotated CA") && out.contains("issued web"),
        "{out}"
    );
    assert_eq!(ok(&["pin", &bundle_file]), pin, "root pin changed");
    assert_ne!(
        std::fs::read(d.join("certs/web/tls.crt")).unwrap(),
        old_chain
    );
    let chain = cert(&d.join("certs/web/tls.crt").display().to_string());
    assert_eq!(chain[1], cert(&m.path("cluster2.crt"))[0]);
    assert_eq!(chain[2], cert(&m.path("int2.crt"))[0]);
    let key = PrivateKey::from_pem(&std::fs::read(d.join("certs/web/tls.key")).unwrap()).unwrap();
    tls::handshake(
        &chain,
        &key,
        &root_only_bundle(&m),
        "web.example.test",
        OffsetDateTime::now_utc(),
    )
    .unwrap();
    let last = history(&dir, "now").pop().unwrap();
    assert_eq!(last["reason"]["kind"], "supplied", "{last}");
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
fn a_supplied_chain_with_an_intermediate_cross_signed_by_the_current_root_is_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let (m, dir) = imported(tmp.path());
    let d = Path::new(&dir);
    let pin = ok(&["pin", &d.join("ca-bundle.crt").display().to_string()]);
    // The organisation moves to a new root; its new intermediate is also
    // cross-signed by the old root, which is what today's clients trust.
    m.root("root2", "Org Root 2", 3650);
    m.signed("int2", "Org Intermediate 2", "root2", "ca1", 1825);
    m.cross("int2x", "int2", "root", "ca1", 1825);
    m.signed("cluster2", "cluster-ca-2", "int2", "ca0", 700);
    let int2x = cert(&m.path("int2x.crt")).remove(0);
    let int2 = cert(&m.path("int2.crt")).remove(0);
    assert_eq!(int2x.subject(), int2.subject());
    assert_ne!(int2x.issuer(), int2.issuer());
    let to = m.bundle("to.pem", &["cluster2.crt", "cluster2.key"]);
    let chain = m.bundle("chain2.pem", &["int2x.crt", "root.crt"]);

    let out = ok(&["validate", &dir, "--to", &to, "--chain", &chain, "--json"]);
    let report: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["ok"], true, "{out}");
    let trust = report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "chains-to-current-trust")
        .unwrap();
    assert!(
        trust["detail"]
            .as_str()
            .unwrap()
            .contains("verifies through"),
        "{trust}"
    );
    ok(&["rotate", &dir, "--to", &to, "--chain", &chain]);
    let served = cert(&d.join("certs/web/tls.crt").display().to_string());
    assert_eq!(
        served[1..],
        [cert(&m.path("cluster2.crt")).remove(0), int2x]
    );
    assert_eq!(
        ok(&["pin", &d.join("ca-bundle.crt").display().to_string()]),
        pin
    );
    let key = PrivateKey::from_pem(&std::fs::read(d.join("certs/web/tls.key")).unwrap()).unwrap();
    tls::handshake(
        &served,
        &key,
        &root_only_bundle(&m),
        "web.example.test",
        OffsetDateTime::now_utc(),
    )
    .unwrap();
    assert_eq!(
        history(&dir, "now").pop().unwrap()["reason"]["kind"],
        "supplied"
    );
}

#[test]
fn same_key_renewal_is_refused_on_an_imported_ca() {
    let tmp = tempfile::tempdir().unwrap();
    let (_m, dir) = imported(tmp.path());
    let before = tree(Path::new(&dir));
    let err = refused(&["rotate", &dir, "--renew-same-key"]);
    assert!(
        err.contains("renewal needs the external signer") && err.contains("rotate --to"),
        "{err}"
    );
    assert_eq!(tree(Path::new(&dir)), before);
}

#[test]
fn same_key_renewal_reissues_nothing_and_keeps_the_spki_pin() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki").display().to_string();
    let d = Path::new(&dir);
    ok(&["init", &dir, "--now", "2026-01-01T00:00:00Z"]);
    ok(&[
        "issue",
        &dir,
        "web",
        "--dns",
        "web.ns.svc",
        "--now",
        "2026-01-01T00:00:00Z",
    ]);
    let leaf_before = std::fs::read(d.join("certs/web/tls.crt")).unwrap();
    let ca_before = cert(&d.join("signer/tls.crt").display().to_string()).remove(0);
    let old_bundle = tmp.path().join("old-bundle.crt");
    std::fs::copy(d.join("ca-bundle.crt"), &old_bundle).unwrap();

    let at = "2026-06-01T00:00:00Z";
    let out = ok(&["rotate", &dir, "--renew-same-key", "--now", at]);
    assert!(out.contains("renewed on the same key"), "{out}");
    assert!(!out.contains("issued web"), "{out}");
    assert_eq!(
        std::fs::read(d.join("certs/web/tls.crt")).unwrap(),
        leaf_before,
        "leaf re-issued"
    );
    let ca_after = cert(&d.join("signer/tls.crt").display().to_string()).remove(0);
    assert_ne!(ca_after, ca_before);
    assert_eq!(
        ca_after.spki_sha256(),
        ca_before.spki_sha256(),
        "SPKI pin changed"
    );
    assert_eq!(ca_after.ski(), ca_before.ski());
    assert_eq!(ca_after.subject(), ca_before.subject());
    assert!(ca_after.not_after() > ca_before.not_after());
    // The old leaf verifies under the new CA certificate, and the new bundle
    // under the old one's clients.
    let web = d.join("certs/web/tls.crt").display().to_string();
    // 2026-06-01T00:00:00Z, the renewal time, for OpenSSL.
    let at_epoch = "1780272000";
    for bundle in [d.join("ca-bundle.crt"), old_bundle] {
        ok(&[
            "verify",
            "--bundle",
            &bundle.display().to_string(),
            "--chain",
            &web,
            "--dns",
            "web.ns.svc",
            "--at",
            at,
        ]);
        let o = Command::new("openssl")
            .args(["verify", "-x509_strict", "-purpose", "sslserver"])
            .args([
                "-attime",
                at_epoch,
                "-verify_hostname",
                "web.ns.svc",
                "-CAfile",
            ])
            .arg(&bundle)
            .arg(&web)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "openssl, {}: {}{}",
            bundle.display(),
            text(&o.stdout),
            text(&o.stderr)
        );
    }
    // A later controller step does not re-issue the leaf either.
    let out = ok(&["rotate", &dir, "--now", "2026-06-02T00:00:00Z"]);
    assert!(!out.contains("issued web"), "{out}");
    assert_eq!(
        history(&dir, "2026-06-02T00:00:00Z").pop().unwrap()["reason"]["kind"],
        "renewed-same-key"
    );
}

#[test]
fn rotation_to_a_supplied_self_signed_ca_bridges_so_all_four_cells_hold_over_tls() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki").display().to_string();
    let d = Path::new(&dir);
    ok(&["init", &dir]);
    ok(&["issue", &dir, "web", "--dns", "web.ns.svc"]);
    let read_chain = || cert(&d.join("certs/web/tls.crt").display().to_string());
    let read_key =
        || PrivateKey::from_pem(&std::fs::read(d.join("certs/web/tls.key")).unwrap()).unwrap();
    let read_bundle =
        || Bundle::from_pem(&std::fs::read(d.join("ca-bundle.crt")).unwrap()).unwrap();
    let (old_chain, old_key, old_bundle) = (read_chain(), read_key(), read_bundle());

    let m = Maker::new(tmp.path());
    m.root("newroot", "New Service Root", 800);
    let to = m.bundle("to.pem", &["newroot.crt", "newroot.key"]);
    let report = ok(&["validate", &dir, "--to", &to]);
    assert!(report.contains("cross-signs"), "{report}");
    let out = ok(&["rotate", &dir, "--to", &to]);
    assert!(
        out.contains("rotated CA") && out.contains("issued web"),
        "{out}"
    );
    let (new_chain, new_key, new_bundle) = (read_chain(), read_key(), read_bundle());
    assert_eq!(new_chain.len(), 2, "leaf + bridge B");

    let now = OffsetDateTime::now_utc();
    for (label, chain, key) in [("old", &old_chain, &old_key), ("new", &new_chain, &new_key)] {
        for (blabel, bundle) in [("old", &old_bundle), ("new", &new_bundle)] {
            tls::handshake(chain, key, bundle, "web.ns.svc", now)
                .unwrap_or_else(|e| panic!("{label} chain x {blabel} bundle: {e}"));
        }
    }
}

#[test]
fn rotation_of_an_imported_intermediate_to_a_self_signed_ca_is_bridged_so_all_four_cells_hold_over_tls()
 {
    let tmp = tempfile::tempdir().unwrap();
    // An organisation that gives its cluster CA room for one CA below it
    // (pathlen 1), under an intermediate without a pathLenConstraint.
    let m = Maker::new(tmp.path());
    m.root("root", "Org Root", 3650);
    m.signed("int", "Org Intermediate", "root", "canolen", 1825);
    m.signed("cluster", "cluster-ca", "int", "ca1", 730);
    let upload = m.bundle(
        "upload.pem",
        &["cluster.crt", "cluster.key", "int.crt", "root.crt"],
    );
    let dir = tmp.path().join("pki").display().to_string();
    let d = Path::new(&dir);
    ok(&["init", &dir, "--import", &upload]);
    ok(&["issue", &dir, "web", "--dns", "web.example.test"]);
    let read_chain = || cert(&d.join("certs/web/tls.crt").display().to_string());
    let read_key =
        || PrivateKey::from_pem(&std::fs::read(d.join("certs/web/tls.key")).unwrap()).unwrap();
    let read_bundle =
        || Bundle::from_pem(&std::fs::read(d.join("ca-bundle.crt")).unwrap()).unwrap();
    let (old_chain, old_key, old_bundle) = (read_chain(), read_key(), read_bundle());
    assert_eq!(old_bundle, root_only_bundle(&m));

    m.root("newroot", "New Cluster Root", 800);
    let to = m.bundle("to.pem", &["newroot.crt", "newroot.key"]);
    let report = ok(&["validate", &dir, "--to", &to]);
    assert!(report.contains("cross-signs"), "{report}");
    let out = ok(&["rotate", &dir, "--to", &to]);
    assert!(
        out.contains("rotated CA") && out.contains("issued web"),
        "{out}"
    );
    let (new_chain, new_key, new_bundle) = (read_chain(), read_key(), read_bundle());
    // leaf, bridge B (the new root signed by the cluster CA's key), then
    // what links bridge B to the organisation root.
    let cluster = cert(&m.path("cluster.crt")).remove(0);
    let int = cert(&m.path("int.crt")).remove(0);
    assert_eq!(new_chain.len(), 4, "{new_chain:?}");
    assert!(pki_core::issued_by(&new_chain[1], &cluster).issued_by);
    assert_eq!(new_chain[2..], [cluster, int]);

    let now = OffsetDateTime::now_utc();
    for (label, chain, key) in [("old", &old_chain, &old_key), ("new", &new_chain, &new_key)] {
        for (blabel, bundle) in [("old", &old_bundle), ("new", &new_bundle)] {
            tls::handshake(chain, key, bundle, "web.example.test", now)
                .unwrap_or_else(|e| panic!("{label} chain x {blabel} bundle: {e}"));
        }
    }
    // OpenSSL agrees for the client that trusts only the organisation root.
    openssl_verifies_serving_chain(&m.path("root.crt"), &d.join("certs/web/tls.crt"));
}

#[test]
fn a_self_signed_replacement_of_a_sign_leaves_only_ca_is_refused_naming_the_cells_and_until_when() {
    let tmp = tempfile::tempdir().unwrap();
    // The k3s topology: the cluster CA has pathlen 0, no CA may sit below it.
    let (m, dir) = imported(tmp.path());
    let before = tree(Path::new(&dir));
    m.root("newroot", "New Cluster Root", 800);
    let to = m.bundle("to.pem", &["newroot.crt", "newroot.key"]);
    let err = refused(&["rotate", &dir, "--to", &to]);
    assert!(
        err.contains("chains-to-current-trust")
            && err.contains("pathLenConstraint 0")
            && err.contains("new serving chain x old bundle"),
        "{err}"
    );
    // Until the policy's reload interval (7d, set at init) after the rotation.
    let until = err
        .split("from the rotation until ")
        .nth(1)
        .and_then(|rest| rest.get(..20))
        .unwrap_or_else(|| panic!("no time in {err}"));
    let until = OffsetDateTime::parse(until, &time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|e| panic!("{until}: {e}"));
    let expected = OffsetDateTime::now_utc() + Duration::days(7);
    assert!((until - expected).abs() < Duration::minutes(5), "{err}");
    assert_eq!(tree(Path::new(&dir)), before);
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
