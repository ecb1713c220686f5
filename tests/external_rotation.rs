//! Replacing a CA signed by someone else's root, end to end through the
//! `pki` binary: each validation check of a replacement failing on its
//! own, rotation to a supplied CA (an intermediate under the same root, or
//! a self-signed CA bridged both ways), and same-key renewal.
//!
//! The certificates OpenSSL makes are valid from the real current time,
//! so these tests act at the real time (no `--now`) except where a check
//! needs a later time, which is then computed from the clock.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::cli::{ok, pki, refused, text, tree_with_lock as tree};
use support::external::{cert, history, imported, root_only_bundle};
use support::maker::{Maker, openssl_verifies_serving_chain};
use support::tls;

use pki_core::{Bundle, PrivateKey};
use std::path::Path;
use std::process::Command;
use time::{Duration, OffsetDateTime};

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
            .expect("openssl is not installed or cannot run; install it with `apt-get install openssl` (Debian) or run scripts/test.sh");
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
