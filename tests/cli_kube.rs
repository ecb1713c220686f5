//! The CLI against a real kube-apiserver on 127.0.0.1 (started by the
//! test, as pki-kube's own tests start it): every signer command takes
//! `kube://NAMESPACE/NAME` for DIR with kubectl's credentials
//! (`KUBECONFIG`), `pki export` writes what it holds in the directory
//! layout, and with `PKI_STORE_KEY_FILE` no Secret holds a private key in
//! clear. An account that may not read Secrets gets one line naming what
//! it lacks (exit 1), `CONTEXT@` picks the kubeconfig's context, and a
//! malformed `kube://` URL is bad usage (exit 2).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The etcd and kube-apiserver supports each include the one `free_port`
// (pki-etcd/tests/support/free_port.rs) by path.
#![allow(clippy::duplicate_mod)]

mod support;
// The API server and its admin client: pki-kube's own test support,
// shared by path as the etcd tests share pki-etcd's.
#[path = "../pki-kube/tests/support/mod.rs"]
mod kube_support;

use kube_support::admin::{Admin, NAMESPACE};
use kube_support::kube::KubeServer;
use std::path::Path;
use std::process::{Command, Output};
use support::cli::{exited_with, succeeded};

const T0: &str = "2026-01-01T00:00:00Z";
const AFTER_ROTATION_POINT: &str = "2027-02-01T00:00:00Z";

/// Runs `pki ARGS` with `KUBECONFIG` set to `kubeconfig` (and the other
/// variables of `env`), nothing of the user's own configuration.
fn pki(kubeconfig: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let home = tempfile::tempdir().unwrap();
    Command::new(env!("CARGO_BIN_EXE_pki"))
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", home.path())
        .env_remove("PKI_STORE_KEY_FILE")
        .envs(env.iter().copied())
        .output()
        .expect("run pki")
}

#[test]
fn every_signer_command_works_on_a_kube_url_sealed_and_export_writes_the_layout() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let config = server.admin_kubeconfig();
    let tmp = tempfile::tempdir().unwrap();
    let key = tmp.path().join("store.key");
    let key = key.to_str().unwrap();
    let ok = |env: &[(&str, &str)], args: &[&str]| succeeded(args, pki(config, env, args));
    ok(&[], &["store-key", "new", key]);
    let sealed: &[(&str, &str)] = &[("PKI_STORE_KEY_FILE", key)];
    let url = format!("kube://{NAMESPACE}/service-ca");
    ok(sealed, &["init", &url, "--now", T0]);
    ok(
        sealed,
        &["issue", &url, "web", "--dns", "web.ns.svc", "--now", T0],
    );
    let out = ok(sealed, &["rotate", &url, "--now", AFTER_ROTATION_POINT]);
    assert!(out.contains("rotated CA"), "{out}");
    let status = ok(
        sealed,
        &["status", &url, "--json", "--now", AFTER_ROTATION_POINT],
    );
    let json: serde_json::Value = serde_json::from_str(&status).unwrap();
    assert_eq!(json["rotations"], 1);
    ok(
        sealed,
        &["status", &url, "--check", "--now", AFTER_ROTATION_POINT],
    );

    // The store is Secrets labelled as pki's, none holding a key in clear.
    assert!(!admin.store_objects("service-ca").is_empty());
    for secret in admin.secrets() {
        for (name, value) in secret.data.unwrap_or_default() {
            let text = String::from_utf8_lossy(&value.0);
            assert!(
                !text.contains("PRIVATE KEY"),
                "{:?}/{name} holds a private key in clear",
                secret.metadata.name
            );
        }
    }

    let exported = tmp.path().join("out");
    ok(sealed, &["export", &url, exported.to_str().unwrap()]);
    let chain = exported.join("certs/web/tls.crt");
    let bundle = exported.join("ca-bundle.crt");
    assert!(exported.join("certs/web/tls.key").exists());
    ok(
        &[],
        &[
            "verify",
            "--bundle",
            bundle.to_str().unwrap(),
            "--chain",
            chain.to_str().unwrap(),
            "--dns",
            "web.ns.svc",
            "--at",
            AFTER_ROTATION_POINT,
        ],
    );
    let served = pki_core::Certificate::all_from_pem(&std::fs::read(&chain).unwrap()).unwrap();
    let at = time::OffsetDateTime::parse(
        AFTER_ROTATION_POINT,
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap();
    let verdict = support::openssl::verify_with_bundle_file(&bundle, &served, at, "sslserver");
    assert!(
        matches!(verdict, Ok(support::openssl::Verdict::Verified)),
        "{verdict:?}"
    );
    let args = ["init", &url, "--now", T0];
    let err = exited_with(1, &args, &pki(config, sealed, &args));
    assert!(err.contains("already exists"), "{err}");

    // Re-sealed under a new key: the new key opens the store, the old one
    // no longer does.
    let new_key = tmp.path().join("new.key");
    let new_key = new_key.to_str().unwrap();
    ok(&[], &["store-key", "new", new_key]);
    let out = ok(sealed, &["store-key", "rotate", &url, "--new", new_key]);
    assert!(out.contains("re-sealed signer"), "{out}");
    let resealed: &[(&str, &str)] = &[("PKI_STORE_KEY_FILE", new_key)];
    let check = [
        "status",
        url.as_str(),
        "--check",
        "--now",
        AFTER_ROTATION_POINT,
    ];
    succeeded(&check, pki(config, resealed, &check));
    exited_with(1, &check, &pki(config, sealed, &check));
}

#[test]
fn a_reader_gets_one_line_a_context_picks_the_account_and_a_bad_url_is_bad_usage() {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    let url = format!("kube://{NAMESPACE}/service-ca");
    let init = ["init", url.as_str(), "--now", T0];
    succeeded(&init, pki(server.admin_kubeconfig(), &[], &init));

    // The reader may not read Secrets: one line naming the verb and the
    // resource, through its own kubeconfig or its context in a shared one.
    let status = ["status", url.as_str(), "--now", T0];
    let err = exited_with(1, &status, &pki(server.reader_kubeconfig(), &[], &status));
    assert!(err.contains("secrets"), "{err}");
    let as_reader = format!("kube://pki-reader@{NAMESPACE}/service-ca");
    let status = ["status", as_reader.as_str(), "--now", T0];
    let err = exited_with(1, &status, &pki(server.kubeconfig(), &[], &status));
    assert!(err.contains("secrets"), "{err}");
    let as_admin = format!("kube://pki-admin@{NAMESPACE}/service-ca");
    let status = ["status", as_admin.as_str(), "--now", T0];
    succeeded(&status, pki(server.kubeconfig(), &[], &status));

    for bad in ["kube://", "kube://ns", "kube://Bad_NS/x"] {
        let args = ["status", bad];
        exited_with(2, &args, &pki(server.admin_kubeconfig(), &[], &args));
    }
}
