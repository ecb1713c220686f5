//! The walkthroughs the directory and etcd stores pass, on `kube://`
//! stores of one real kube-apiserver (started once for this file), sealed
//! with `PKI_STORE_KEY_FILE`, every check made on what `pki export` reads
//! back from the API server:
//!
//! - the signer's automatic rotation (simulated time) and a forced one,
//!   each with the four cells (old/new serving chain × old/new bundle)
//!   verified by `openssl verify -x509_strict` and by Go's crypto/x509
//!   just after the rotation and just before the old leaf expires, and
//!   refused once the old material has expired;
//! - a CA set through every step, acknowledged from the exported target
//!   files, each step's trust checked by OpenSSL;
//! - a key ring: a token signed before a forced rotation verifies during
//!   the grace and not after its expiry;
//! - a credential minted, rotated and revoked against a real Redis.
//!
//! Then every Secret and ConfigMap of the namespace is dumped: no private
//! key and no credential is in clear, save a leaf's `tls.key` in a
//! `kubernetes.io/tls` Secret (what a Pod mounts). The same check finds
//! the keys of a store written without the store key.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The etcd and kube-apiserver supports each include the one `free_port`
// (pki-etcd/tests/support/free_port.rs) by path.
#![allow(clippy::duplicate_mod)]

#[path = "../pki-kube/tests/support/mod.rs"]
mod kube_support;
#[path = "support/on_kube.rs"]
mod on_kube;
mod support;

use kube_support::admin::NAMESPACE;
use on_kube::{Cluster, dump, in_clear, private_files};
use pki_core::Certificate;
use std::path::{Path, PathBuf};
use support::cli::{self, ok, refused};
use support::openssl::{Verdict, verify_with_bundle_file};
use support::store::{AFTER_ROTATION_POINT, LEAF_DUE, T0};
use time::format_description::well_known::Rfc3339;
use time::{Duration, OffsetDateTime};

const DNS: &str = "web.ns.svc";

fn parse(at: &str) -> OffsetDateTime {
    OffsetDateTime::parse(at, &Rfc3339).unwrap()
}

/// What one side of a rotation publishes, as exported from the server.
struct Side {
    name: &'static str,
    bundle: PathBuf,
    chain_file: PathBuf,
    chain: Vec<Certificate>,
    ca: Certificate,
}

impl Side {
    fn read(name: &'static str, dir: &Path) -> Side {
        let certs = |path: &str| {
            Certificate::all_from_pem(&std::fs::read(dir.join(path)).unwrap()).unwrap()
        };
        Side {
            name,
            bundle: dir.join("ca-bundle.crt"),
            chain_file: dir.join("certs/web/tls.crt"),
            chain: certs("certs/web/tls.crt"),
            ca: certs("signer/tls.crt").remove(0),
        }
    }
}

/// OpenSSL's verdict on `chain` against the bundle of `trust` at `at`.
fn openssl(trust: &Side, chain: &[Certificate], at: OffsetDateTime) -> Result<(), String> {
    match verify_with_bundle_file(&trust.bundle, chain, at, "sslserver")? {
        Verdict::Verified => Ok(()),
        Verdict::Unavailable => {
            panic!("openssl is not installed: install it with `apt-get install openssl` (Debian)")
        }
    }
}

/// Go's crypto/x509 verdict on the serving chain of `chain` against the
/// bundle of `trust` at `at`, for [`DNS`].
fn go(trust: &Side, chain: &Side, at: OffsetDateTime) -> Result<(), String> {
    support::go_x509::verify(&trust.bundle, &chain.chain_file, DNS, at)
}

/// The four cells verify at both moments, by OpenSSL and by Go; the old
/// serving chain is refused by the new bundle once the old leaf and the
/// old CA have expired.
fn assert_trust_matrix(old: &Side, new: &Side, rotated_at: OffsetDateTime) {
    assert_eq!(old.chain.len(), 1, "before the first rotation: no bridge");
    assert_eq!(new.chain.len(), 2, "after a rotation: leaf + bridge B");
    assert_ne!(old.ca, new.ca, "the CA rotated");
    let old_leaf_end = old.chain[0].not_after();
    let moments = [
        ("just after the rotation", rotated_at + Duration::MINUTE),
        (
            "just before the old leaf expires",
            old_leaf_end - Duration::MINUTE,
        ),
    ];
    assert!(
        moments[0].1 < moments[1].1,
        "the old leaf outlives the rotation"
    );
    let mut failures = Vec::new();
    for (moment, at) in moments {
        for chain in [old, new] {
            for bundle in [old, new] {
                let verdicts = [
                    ("openssl", openssl(bundle, &chain.chain, at)),
                    ("go", go(bundle, chain, at)),
                ];
                for (verifier, verdict) in verdicts {
                    if let Err(e) = verdict {
                        failures.push(format!(
                            "{verifier}: {} serving chain x {} bundle {moment} ({at}): {e}",
                            chain.name, bundle.name
                        ));
                    }
                }
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    let expired = old_leaf_end.max(old.ca.not_after()) + Duration::DAY;
    assert!(
        openssl(new, &old.chain, expired).is_err(),
        "openssl accepted the old serving chain at {expired}"
    );
    assert!(
        go(new, old, expired).is_err(),
        "go accepted the old serving chain at {expired}"
    );
    assert!(
        openssl(old, &new.chain[..1], moments[0].1).is_err(),
        "openssl accepted the new leaf without bridge B against the old bundle"
    );
}

/// Automatic rotation: the leaf renewed when due, then the CA rotated
/// just past its rotation point.
fn automatic_rotation(cluster: &Cluster) {
    let url = cluster.url("automatic");
    ok(&["init", &url, "--now", T0]);
    ok(&["issue", &url, "web", "--dns", DNS, "--now", T0]);
    // The 365-day leaf ends before the rotation point: renewed first, so
    // an old server still serves a live leaf when the CA rotates.
    let out = ok(&["rotate", &url, "--now", LEAF_DUE]);
    assert!(!out.contains("rotated CA"), "{out}");
    let old = Side::read("old", &cluster.export(&url, "automatic-old"));
    assert!(old.chain[0].not_after() > parse(AFTER_ROTATION_POINT));
    let out = ok(&["rotate", &url, "--now", AFTER_ROTATION_POINT]);
    assert!(out.contains("rotated CA"), "{out}");
    let new = Side::read("new", &cluster.export(&url, "automatic-new"));
    assert_trust_matrix(&old, &new, parse(AFTER_ROTATION_POINT));
    ok(&["status", &url, "--check", "--now", AFTER_ROTATION_POINT]);
}

/// Forced rotation at day 100, when none is due.
fn forced_rotation(cluster: &Cluster) {
    let url = cluster.url("forced");
    let day_100 = "2026-04-11T00:00:00Z";
    ok(&["init", &url, "--now", T0]);
    ok(&["issue", &url, "web", "--dns", DNS, "--now", T0]);
    let out = ok(&["rotate", &url, "--now", day_100]);
    assert!(!out.contains("rotated CA"), "not due at day 100: {out}");
    let old = Side::read("old", &cluster.export(&url, "forced-old"));
    let reason = "key ceremony 2027";
    let out = ok(&["rotate", &url, "--force", reason, "--now", day_100]);
    assert!(out.contains("rotated CA"), "{out}");
    let new = Side::read("new", &cluster.export(&url, "forced-new"));
    assert_trust_matrix(&old, &new, parse(day_100));
    // Once per reason: the same one again is nothing to do.
    let out = ok(&["rotate", &url, "--force", reason, "--now", day_100]);
    assert!(out.contains("nothing to do"), "{out}");
    let status: serde_json::Value =
        serde_json::from_str(&ok(&["status", &url, "--json", "--now", day_100])).unwrap();
    assert_eq!(status["rotations"], 1, "{status}");
    assert_eq!(status["forced_rotation_reason"], reason, "{status}");
}

/// Node-1's trust for the cluster CA verifies the API server's serving
/// chain, in the files exported from the set's store.
fn assert_set_trust(exported: &Path, step: &str) {
    let serving = exported.join("targets/control-plane/certs/kube-apiserver/tls.crt");
    let chain = Certificate::all_from_pem(&std::fs::read(serving).unwrap()).unwrap();
    let trust = exported.join("targets/node-1/trust/cluster.crt");
    let at = parse(support::set::T1) + Duration::MINUTE;
    let verdict = verify_with_bundle_file(&trust, &chain, at, "sslserver");
    assert_eq!(verdict, Ok(Verdict::Verified), "{step}");
}

/// A CA set from idle through every step to completed, each target
/// acknowledging the files it was exported.
fn set_through_every_step(cluster: &Cluster) {
    use support::set::{T1, ack_exported, setup, status};
    let url = cluster.url("set");
    let out = cluster.tmp.path().join("exports/set");
    setup(&url);
    assert_eq!(status(&url)["step"], "idle");
    ok(&["set", "start", &url, "--reason", "yearly", "--now", T1]);
    let mut steps = vec![status(&url)["step"].as_str().unwrap().to_string()];
    let err = refused(&["set", "advance", &url, "--now", T1]);
    assert!(err.contains("waiting for"), "{err}");
    while steps.last().unwrap() != "completed" {
        for target in ["control-plane", "node-1"] {
            ack_exported(&url, &out, target);
        }
        assert_set_trust(&out, steps.last().unwrap());
        ok(&["set", "advance", &url, "--now", T1]);
        steps.push(status(&url)["step"].as_str().unwrap().to_string());
        assert!(steps.len() < 10, "{steps:?}");
    }
    assert_eq!(
        steps,
        ["trust-both", "update-certs", "trust-new", "completed"]
    );
    let _ = std::fs::remove_dir_all(&out);
    ok(&["export", &url, out.to_str().unwrap()]);
    assert_set_trust(&out, "completed");
}

/// A key ring: a token signed before a forced rotation verifies during
/// the grace, and not once it expired; a token of the new key verifies.
fn key_ring(cluster: &Cluster) {
    let url = cluster.url("keys");
    let at = |hours: i64| pki_core::datetime::rfc3339(parse(T0) + Duration::hours(hours));
    let unix = |hours: i64| (parse(T0) + Duration::hours(hours)).unix_timestamp();
    let claims = cluster.tmp.path().join("claims.json");
    // A token and the file `keys verify --token` reads it from.
    let sign = |hours: i64, exp_hours: i64| {
        let text = format!(r#"{{"sub":"coredns","exp":{}}}"#, unix(exp_hours));
        std::fs::write(&claims, text).unwrap();
        let token = ok(&[
            "keys",
            "sign",
            &url,
            "--claims",
            claims.to_str().unwrap(),
            "--now",
            &at(hours),
        ]);
        let file = cluster.tmp.path().join(format!("token-{hours}.jwt"));
        std::fs::write(&file, token.trim()).unwrap();
        (token.trim().to_string(), file.to_str().unwrap().to_string())
    };
    let verify = |(_, file): &(String, String), hours: i64| {
        cli::pki(&["keys", "verify", &url, "--token", file, "--now", &at(hours)])
    };
    let grace = ["--grace", "24h", "--max-token-lifetime", "2h"];
    ok(&[&["keys", "init", &url, "--now", T0][..], &grace].concat());
    let old = sign(240, 242);
    let out = ok(&[
        "keys",
        "rotate",
        &url,
        "--force",
        "drill",
        "--now",
        &at(241),
    ]);
    assert!(out.contains("rotated signing key"), "{out}");
    assert!(verify(&old, 241).status.success(), "in the grace");
    let fresh = sign(241, 243);
    assert_ne!(
        fresh.0.split('.').next(),
        old.0.split('.').next(),
        "a new kid"
    );
    assert!(verify(&fresh, 241).status.success());
    assert_eq!(verify(&old, 242).status.code(), Some(1), "expired");
    let exported = cluster.export(&url, "keys");
    let jwks: serde_json::Value =
        serde_json::from_slice(&std::fs::read(exported.join("keys/jwks.json")).unwrap()).unwrap();
    assert_eq!(jwks["keys"].as_array().unwrap().len(), 2, "{jwks}");
}

/// A credential minted, rotated when due, the old one revoked after the
/// grace: every check a real AUTH against Redis, on the credential as
/// exported from the server. Returns every credential minted.
fn credential(cluster: &Cluster) -> Vec<String> {
    use support::redis::{DUE, GRACE_END, IN_GRACE, Setup, ok as succeeded};
    let mut s = Setup::new();
    s.dir = cluster.url("creds");
    let url = s.dir.clone();
    let read = |name: &str, export: &str| {
        let dir = cluster.export(&url, export);
        std::fs::read_to_string(dir.join("creds/db").join(name))
            .ok()
            .map(|v| v.trim().to_string())
    };
    succeeded(&s.init(&[]));
    let first = read("current", "creds-0").expect("init mints the first credential");
    assert!(s.redis.logs_in(&first));
    succeeded(&s.reconcile(DUE, &[]));
    let second = read("current", "creds-1").unwrap();
    assert_ne!(second, first);
    assert_eq!(read("old", "creds-2").as_deref(), Some(first.as_str()));
    assert!(s.redis.logs_in(&first) && s.redis.logs_in(&second));
    assert_eq!(s.status(IN_GRACE)["credentials"][0]["state"], "grace");
    succeeded(&s.reconcile(GRACE_END, &[]));
    assert!(!s.redis.logs_in(&first), "revoked after the grace");
    assert!(s.redis.logs_in(&second));
    assert_eq!(read("old", "creds-3"), None);
    assert_eq!(s.minted().len(), 2);
    cluster.export(&url, "creds");
    s.minted()
}

#[test]
fn walkthroughs_on_kube_read_back_from_the_server_and_no_secret_is_in_clear() {
    let started = std::time::Instant::now();
    let cluster = Cluster::start();
    automatic_rotation(&cluster);
    forced_rotation(&cluster);
    set_through_every_step(&cluster);
    key_ring(&cluster);
    let minted = credential(&cluster);

    // Every private file of every export, before and after each step:
    // the old CA keys, the set's keys, the ring's, each credential.
    let mut secrets = private_files(&cluster.tmp.path().join("exports"));
    for wanted in [
        "automatic-old/signer/tls.key",
        "forced-new/signer/tls.key",
        "set/set/cas/cluster/ca.key",
        "keys/keys/active.key",
        "creds/creds/db/current",
    ] {
        assert!(
            secrets.iter().any(|(path, _)| path == wanted),
            "no private file {wanted} exported: {:?}",
            secrets.iter().map(|(p, _)| p).collect::<Vec<_>>()
        );
    }
    secrets.extend(
        minted
            .into_iter()
            .map(|c| ("a minted credential".into(), c.into_bytes())),
    );
    let dumped = dump(&cluster.server, NAMESPACE);
    assert!(dumped.len() > 10, "{} values", dumped.len());
    let findings = in_clear(&dumped, &secrets);
    assert!(findings.is_empty(), "in clear: {findings:#?}");
    eprintln!(
        "{} private files and credentials, none in clear in {} values; {:.1?}",
        secrets.len(),
        dumped.len(),
        started.elapsed()
    );

    // The check can fail: a store written without the store key holds
    // its CA key in clear, and the dump finds it.
    let clear = "pki-clear";
    cluster.admin.create_namespace(clear);
    let url = format!("kube://{clear}/unsealed");
    let unsealed = |args: &[&str]| {
        let o = cli::command(args)
            .env_remove("PKI_STORE_KEY_FILE")
            .output()
            .unwrap();
        cli::succeeded(args, o)
    };
    unsealed(&["init", &url, "--now", T0]);
    let out = cluster.tmp.path().join("exports/unsealed");
    unsealed(&["export", &url, out.to_str().unwrap()]);
    let findings = in_clear(&dump(&cluster.server, clear), &private_files(&out));
    assert!(
        findings.iter().any(|f| f.ends_with(" signer/tls.key")),
        "{findings:#?}"
    );
}
