//! The CLI against a real kube-apiserver on 127.0.0.1 (started by the
//! test, as pki-kube's own tests start it): every signer command takes
//! `kube://NAMESPACE/NAME` for DIR with kubectl's credentials
//! (`KUBECONFIG`), `pki export` writes what it holds in the directory
//! layout, and with `PKI_STORE_KEY_FILE` no private key is in clear but
//! a leaf's, in Secrets (its `kubernetes.io/tls` Secret and the shards). An account that may not read Secrets gets one line naming what
//! it lacks (exit 1), `CONTEXT@` picks the kubeconfig's context, and a
//! malformed `kube://` URL is bad usage (exit 2). The book's `kube://`
//! commands run here as written (docs/book/src/kubernetes.md). With the
//! CA and signing keys in a token, the cluster holds only their URIs.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The etcd and kube-apiserver supports each include the one `free_port`
// (pki-etcd/tests/support/free_port.rs) by path.
#![allow(clippy::duplicate_mod)]

mod support;
// The API server and its admin client: pki-kube's own test support,
// shared by path as the etcd tests share pki-etcd's.
#[path = "../pki-kube/tests/support/mod.rs"]
mod kube_support;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
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

/// The PEM blocks of private keys in `text`, whatever their kind.
fn private_keys(text: &str) -> Vec<String> {
    let mut keys = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("-----BEGIN ") {
        let block = &rest[start..];
        let Some(end) = block.find("-----END ") else {
            break;
        };
        let close = block[end..].find("\n").map_or(block.len(), |n| end + n);
        let pem = &block[..close];
        if pem.lines().next().unwrap_or("").contains("PRIVATE KEY") {
            keys.push(pem.trim().to_string());
        }
        rest = &block[close..];
    }
    keys
}

/// Sealed with `PKI_STORE_KEY_FILE`: no head, shard or ConfigMap holds a
/// CA key (the exported `signer/tls.key`) or any private key but a leaf's,
/// and a leaf's key is in clear only in Secrets, where consumers mount it
/// (its `kubernetes.io/tls` Secret) and in the shards beside it.
fn assert_private_material_only_in_leaf_secrets(admin: &Admin, config: &Path, exported: &Path) {
    let ca_key = std::fs::read_to_string(exported.join("signer/tls.key")).unwrap();
    let ca_keys = private_keys(&ca_key);
    assert_eq!(ca_keys.len(), 1, "the exported CA key is one PEM key");
    let secrets = admin.secrets();
    let leaf_keys: Vec<String> = secrets
        .iter()
        .filter(|s| s.type_.as_deref() == Some("kubernetes.io/tls"))
        .flat_map(|s| {
            let key = &s.data.as_ref().unwrap()["tls.key"].0;
            private_keys(&String::from_utf8_lossy(key))
        })
        .collect();
    let exported_leaf = std::fs::read_to_string(exported.join("certs/web/tls.key")).unwrap();
    assert_eq!(leaf_keys, private_keys(&exported_leaf), "web's tls Secret");
    let mut shards_with_keys = 0;
    for secret in &secrets {
        let kind = secret.type_.clone().unwrap_or_default();
        for (name, value) in secret.data.clone().unwrap_or_default() {
            let text = String::from_utf8_lossy(&value.0);
            let where_ = format!("secret {:?}/{name} ({kind})", secret.metadata.name);
            assert!(
                !text.contains(&ca_keys[0]),
                "{where_} holds the CA key in clear"
            );
            let found = private_keys(&text);
            match kind.as_str() {
                "kubernetes.io/tls" if name == "tls.key" => continue,
                "pki.invalid/document-shard" if !found.is_empty() => shards_with_keys += 1,
                _ => assert!(found.is_empty(), "{where_} holds a private key in clear"),
            }
            for key in found {
                assert!(
                    leaf_keys.contains(&key),
                    "{where_}: a private key that is no leaf's"
                );
            }
        }
    }
    assert!(
        shards_with_keys > 0,
        "the shards hold the leaf's key beside its Secret"
    );
    for map in listed::<ConfigMap>(config, NAMESPACE) {
        let text = format!("{:?}{:?}", map.data, map.binary_data);
        assert!(
            !text.contains("PRIVATE KEY"),
            "configmap {:?}",
            map.metadata.name
        );
    }
}

/// Every object of kind `K` in `namespace`, read as the admin.
fn listed<K>(kubeconfig: &Path, namespace: &str) -> Vec<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let kubeconfig = kube::config::Kubeconfig::read_from(kubeconfig).unwrap();
        let options = kube::config::KubeConfigOptions::default();
        let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
            .await
            .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let api: kube::Api<K> = kube::Api::namespaced(client, namespace);
        api.list(&Default::default()).await.unwrap().items
    })
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

    let exported = tmp.path().join("out");
    ok(sealed, &["export", &url, exported.to_str().unwrap()]);
    let chain = exported.join("certs/web/tls.crt");
    let bundle = exported.join("ca-bundle.crt");
    assert!(exported.join("certs/web/tls.key").exists());
    assert_private_material_only_in_leaf_secrets(&admin, config, &exported);
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

/// The `kube://` commands of docs/book/src/kubernetes.md, run as written
/// with `KUBECONFIG` naming the admin and the chapter's namespace made:
/// the leaf's `kubernetes.io/tls` Secret and the bundle's ConfigMap are
/// published as the chapter says, the chain trusted under that bundle by
/// OpenSSL, and every object of the store labelled.
#[test]
fn the_books_kube_sequence_runs_as_written() {
    const BOOKS_NAMESPACE: &str = "pki-system";
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    admin.create_namespace(BOOKS_NAMESPACE);
    let config = server.admin_kubeconfig();
    let home = tempfile::tempdir().unwrap();
    let script = support::book::sh_block("kubernetes.md", "## The `kube://` store");
    assert!(script.contains("kube://pki-system/service-ca"), "{script}");
    let o = support::book::command(&script, home.path())
        .env("KUBECONFIG", config)
        .env("HOME", home.path())
        .output()
        .unwrap();
    support::book::ran(&script, o);

    let secrets: Vec<Secret> = listed(config, BOOKS_NAMESPACE);
    // The API server's controllers do not run here, so the namespace
    // holds no `kube-root-ca.crt`: every ConfigMap is the store's.
    let maps: Vec<ConfigMap> = listed(config, BOOKS_NAMESPACE);
    let metadata = secrets.iter().map(|s| &s.metadata);
    for meta in metadata.chain(maps.iter().map(|m| &m.metadata)) {
        let labels = meta.labels.clone().unwrap_or_default();
        let label = |key: &str| labels.get(key).map(String::as_str);
        assert_eq!(
            label("app.kubernetes.io/managed-by"),
            Some("pki"),
            "{meta:?}"
        );
        assert_eq!(label("pki.invalid/store"), Some("service-ca"), "{meta:?}");
    }
    let named = |name: &str| Some(name.to_string());
    let leaf = secrets
        .iter()
        .find(|s| s.metadata.name == named("service-ca.signer.leaf.web"))
        .expect("web's Secret");
    assert_eq!(leaf.type_.as_deref(), Some("kubernetes.io/tls"));
    let data = leaf.data.clone().unwrap();
    assert_eq!(
        private_keys(&String::from_utf8_lossy(&data["tls.key"].0)).len(),
        1
    );
    let published = maps
        .iter()
        .find(|m| m.metadata.name == named("service-ca.signer"))
        .expect("the bundle's ConfigMap");
    let bundle = &published.data.as_ref().unwrap()["ca-bundle.crt"];
    assert_eq!(String::from_utf8_lossy(&data["ca.crt"].0), *bundle);
    let ca = pki_core::Certificate::all_from_pem(bundle.as_bytes()).unwrap();
    assert_eq!(ca[0].common_name().as_deref(), Some("service-ca"));
    let bundle_file = home.path().join("ca-bundle.crt");
    std::fs::write(&bundle_file, bundle).unwrap();
    let chain = pki_core::Certificate::all_from_pem(&data["tls.crt"].0).unwrap();
    assert_eq!(chain[0].dns_names(), ["web.ns.svc"]);
    let now = time::OffsetDateTime::now_utc();
    let verdict = support::openssl::verify_with_bundle_file(&bundle_file, &chain, now, "sslserver");
    assert!(
        matches!(verdict, Ok(support::openssl::Verdict::Verified)),
        "{verdict:?}"
    );
}

/// The CA key and the key ring's signing keys in a token, the store on the
/// API server: after init, a key rotation and a forced CA rotation, no
/// Secret or ConfigMap holds a private key but web's leaf key (in its tls
/// Secret and the shards beside it), an export writes no CA or signing
/// key, and the token holds exactly the keys the documents name.
#[test]
fn token_held_keys_on_a_kube_store_leave_only_their_uris_in_the_cluster() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let hsm = support::hsm::Hsm::new();
    let config = server.admin_kubeconfig();
    let home = tempfile::tempdir().unwrap();
    let store = format!("kube://{NAMESPACE}/ca");
    let run = |args: &[&str]| {
        let o = hsm
            .command(args)
            .env("KUBECONFIG", config)
            .env("HOME", home.path())
            .env_remove("PKI_STORE_KEY_FILE")
            .output()
            .unwrap();
        succeeded(args, o)
    };
    let in_token = format!("pkcs11:token={}", support::softhsm::LABEL);
    run(&["init", &store, "--key-store", &in_token, "--now", T0]);
    run(&["issue", &store, "web", "--dns", "web.ns.svc", "--now", T0]);
    run(&[
        "keys",
        "init",
        &store,
        "--key-store",
        &in_token,
        "--now",
        T0,
    ]);
    let later = "2026-01-02T00:00:00Z";
    run(&["keys", "rotate", &store, "--force", "drill", "--now", later]);
    run(&["rotate", &store, "--force", "drill", "--now", later]);

    let leaf_keys: Vec<String> = admin
        .secrets()
        .iter()
        .filter(|s| s.type_.as_deref() == Some("kubernetes.io/tls"))
        .flat_map(|s| {
            private_keys(&String::from_utf8_lossy(
                &s.data.as_ref().unwrap()["tls.key"].0,
            ))
        })
        .collect();
    assert_eq!(leaf_keys.len(), 1, "web's key, in its tls Secret");
    for secret in admin.secrets() {
        for (name, value) in secret.data.clone().unwrap_or_default() {
            for key in private_keys(&String::from_utf8_lossy(&value.0)) {
                assert!(
                    leaf_keys.contains(&key),
                    "secret {:?}/{name}: a private key that is no leaf's",
                    secret.metadata.name
                );
            }
        }
    }
    for map in listed::<ConfigMap>(config, NAMESPACE) {
        let text = format!("{:?}{:?}", map.data, map.binary_data);
        assert!(!text.contains("PRIVATE KEY"), "{:?}", map.metadata.name);
    }

    run(&["export", &store, hsm.store()]);
    assert!(!hsm.store.join("signer/tls.key").exists());
    assert!(!hsm.store.join("keys/active.key").exists());
    let named = support::hsm::named_ids_in(&hsm.store);
    assert_eq!(
        hsm.private_key_ids(),
        named,
        "the token's keys and the documents'"
    );
    assert_eq!(named.len(), 4, "two CA keys and two signing keys");
}
