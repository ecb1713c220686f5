//! kube-rs against a real kube-apiserver (etcd 3.6 behind it, RBAC on),
//! through the kubeconfigs the test support writes: what the `kube://`
//! store will rely on. A Secret written by the admin reads back as
//! written; a replace that carries a stale `resourceVersion` is refused
//! with 409 Conflict (the compare-and-swap); a user without a role gets
//! 403 Forbidden naming the verb and the resource. Stopping the server,
//! even from a panicking test, leaves no process behind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use std::collections::BTreeMap;
use std::path::Path;
use support::kube::{KubeServer, READER};

/// A client from a kubeconfig file, as the store will make one.
async fn client(kubeconfig: &Path) -> Client {
    client_in_context(kubeconfig, None).await
}

/// A client from `context` of a kubeconfig file (its current one if None).
async fn client_in_context(kubeconfig: &Path, context: Option<&str>) -> Client {
    let kubeconfig = Kubeconfig::read_from(kubeconfig).unwrap();
    let options = KubeConfigOptions {
        context: context.map(str::to_string),
        ..KubeConfigOptions::default()
    };
    let config = Config::from_custom_kubeconfig(kubeconfig, &options)
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

fn secret(name: &str, value: &[u8]) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(
            "tls.crt".to_string(),
            ByteString(value.to_vec()),
        )])),
        ..Secret::default()
    }
}

/// The admin makes namespace `namespace` and, in it, Secret `signer`.
async fn namespace_with_secret(admin: &Client, namespace: &str) -> Secret {
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(namespace.into()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), namespace);
    secrets
        .create(&PostParams::default(), &secret("signer", b"first"))
        .await
        .unwrap()
}

fn data(secret: &Secret) -> &[u8] {
    &secret.data.as_ref().unwrap()["tls.crt"].0
}

#[tokio::test]
async fn a_secret_reads_back_and_a_replace_with_a_stale_resource_version_is_a_409_conflict() {
    let server = KubeServer::start();
    eprintln!("kube-apiserver ready after {:?}", server.started_in());
    let admin = client(server.admin_kubeconfig()).await;
    let created = namespace_with_secret(&admin, "pki-cas").await;
    let secrets: Api<Secret> = Api::namespaced(admin, "pki-cas");

    let read = secrets.get("signer").await.unwrap();
    assert_eq!(data(&read), b"first");
    let first_version = read.metadata.resource_version.clone().unwrap();
    assert_eq!(
        created.metadata.resource_version,
        Some(first_version.clone())
    );

    // A replace that names the version it read commits...
    let mut second = secret("signer", b"second");
    second.metadata.resource_version = Some(first_version.clone());
    let replaced = secrets
        .replace("signer", &PostParams::default(), &second)
        .await
        .unwrap();
    assert_ne!(
        replaced.metadata.resource_version,
        Some(first_version.clone())
    );

    // ...and a second one from the same read loses the compare-and-swap.
    let mut stale = secret("signer", b"stale");
    stale.metadata.resource_version = Some(first_version);
    let error = secrets
        .replace("signer", &PostParams::default(), &stale)
        .await
        .unwrap_err();
    match &error {
        kube::Error::Api(status) => {
            assert!(status.is_conflict(), "{status:?}");
            assert_eq!(status.code, 409);
        }
        other => panic!("expected 409 Conflict, got {other:?}"),
    }
    assert_eq!(data(&secrets.get("signer").await.unwrap()), b"second");
}

#[tokio::test]
async fn a_user_without_a_role_gets_403_forbidden_reading_the_secret() {
    let server = KubeServer::start();
    let admin = client(server.admin_kubeconfig()).await;
    namespace_with_secret(&admin, "pki-cas").await;

    // The reader's own kubeconfig, and its context in the shared one.
    let readers = [
        client(server.reader_kubeconfig()).await,
        client_in_context(server.kubeconfig(), Some(READER)).await,
    ];
    for reader in readers {
        let secrets: Api<Secret> = Api::namespaced(reader, "pki-cas");
        refused_with_403(secrets.get("signer").await.unwrap_err());
    }
    // The shared kubeconfig's current context is the admin's.
    let admin_again = client(server.kubeconfig()).await;
    let secrets: Api<Secret> = Api::namespaced(admin_again, "pki-cas");
    assert_eq!(data(&secrets.get("signer").await.unwrap()), b"first");
}

fn refused_with_403(error: kube::Error) {
    match &error {
        kube::Error::Api(status) => {
            assert!(status.is_forbidden(), "{status:?}");
            assert_eq!(status.code, 403);
            // What the store's one-line error will quote: who, which verb,
            // which resource.
            assert!(
                status
                    .message
                    .contains(r#"User "pki-reader" cannot get resource "secrets""#),
                "{}",
                status.message
            );
        }
        other => panic!("expected 403 Forbidden, got {other:?}"),
    }
}

/// The processes whose command line names `dir` (etcd's data directory and
/// the API server's certificate directory are inside it).
fn processes_naming(dir: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(dir) {
            found.push(cmdline);
        }
    }
    found
}

#[test]
fn a_test_that_panics_leaves_no_server_process_behind() {
    let seen = std::sync::Mutex::new(None);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let server = KubeServer::start();
        let dir = server.path().display().to_string();
        let running = processes_naming(&dir);
        assert!(
            running.iter().any(|p| p.contains("--etcd-servers="))
                && running.iter().any(|p| p.contains("--initial-cluster=")),
            "{running:?}"
        );
        *seen.lock().unwrap() = Some((dir, server.url()));
        panic!("a test failing while its server runs");
    }));
    assert!(outcome.is_err());
    let (dir, url) = seen.lock().unwrap().take().unwrap();
    // The watchdogs' watchers exit right after killing their server.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    while !processes_naming(&dir).is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(processes_naming(&dir), Vec::<String>::new());
    let address = url.trim_start_matches("https://");
    assert!(
        std::net::TcpStream::connect(address).is_err(),
        "{url} still answers"
    );
}
