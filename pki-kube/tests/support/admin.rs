//! What the store tests do as the admin, outside the store: make a
//! namespace, list every Secret in it, and open `kube://` stores with an
//! explicit kubeconfig (never the user's own).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::kube::KubeServer;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};
use pki_kube::{KubeOptions, KubeStore, KubeUrl};
use std::path::Path;
use std::time::Duration;

/// The namespace the tests' stores live in.
pub const NAMESPACE: &str = "pki";

/// Options with an explicit kubeconfig and short bounds.
pub fn options(kubeconfig: &Path) -> KubeOptions {
    KubeOptions {
        kubeconfig: Some(kubeconfig.to_path_buf()),
        connect_timeout: Duration::from_secs(5),
        request_timeout: Duration::from_secs(10),
        ..KubeOptions::default()
    }
}

/// The store `url` (`kube://…`), opened with `kubeconfig`.
pub fn open(kubeconfig: &Path, url: &str) -> KubeStore {
    KubeStore::open(&KubeUrl::parse(url).unwrap(), options(kubeconfig)).unwrap()
}

/// The admin's client, on a runtime of its own.
pub struct Admin {
    client: Client,
    runtime: tokio::runtime::Runtime,
}

impl Admin {
    /// The admin of `server`, with namespace [`NAMESPACE`] made.
    pub fn new(server: &KubeServer) -> Admin {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let kubeconfig = Kubeconfig::read_from(server.admin_kubeconfig()).unwrap();
        let client = runtime.block_on(async {
            let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .unwrap();
            Client::try_from(config).unwrap()
        });
        let admin = Admin { client, runtime };
        admin.create_namespace(NAMESPACE);
        admin
    }

    pub fn create_namespace(&self, name: &str) {
        let namespaces: Api<Namespace> = Api::all(self.client.clone());
        let namespace = Namespace {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..ObjectMeta::default()
            },
            ..Namespace::default()
        };
        self.runtime
            .block_on(namespaces.create(&PostParams::default(), &namespace))
            .unwrap();
    }

    /// Every Secret in [`NAMESPACE`], by name.
    pub fn secrets(&self) -> Vec<Secret> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), NAMESPACE);
        self.runtime
            .block_on(secrets.list(&ListParams::default()))
            .unwrap()
            .items
    }

    /// The names of the Secrets in [`NAMESPACE`] that hold store `store`'s
    /// documents (heads and shards; not the leaves it publishes).
    pub fn store_objects(&self, store: &str) -> Vec<String> {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), NAMESPACE);
        let params = ListParams::default().labels(&format!(
            "app.kubernetes.io/managed-by=pki,pki.invalid/store={store},!pki.invalid/published"
        ));
        let mut names: Vec<String> = self
            .runtime
            .block_on(secrets.list(&params))
            .unwrap()
            .items
            .into_iter()
            .map(|s| s.metadata.name.unwrap())
            .collect();
        names.sort();
        names
    }

    /// Deletes Secret `name` in [`NAMESPACE`].
    pub fn delete(&self, name: &str) {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), NAMESPACE);
        self.runtime
            .block_on(secrets.delete(name, &Default::default()))
            .unwrap();
    }
}

/// The total bytes of a Secret's data.
pub fn data_size(secret: &Secret) -> usize {
    secret
        .data
        .as_ref()
        .map(|d| d.values().map(|v| v.0.len()).sum())
        .unwrap_or(0)
}

impl Admin {
    /// How many requests on Secrets the API server has answered so far,
    /// by verb (`GET`, `LIST`, `POST`, `PUT`, `DELETE`), from its own
    /// `/metrics`: what a store read and wrote, counted by the server.
    pub fn secret_requests(&self) -> std::collections::BTreeMap<String, u64> {
        // The server counts a request once its handler returned, which may
        // be just after the client had the answer.
        std::thread::sleep(Duration::from_millis(300));
        let request = kube::core::Request::new("")
            .get("metrics", &Default::default())
            .unwrap();
        let text = self
            .runtime
            .block_on(self.client.request_text(request))
            .unwrap();
        let mut counts = std::collections::BTreeMap::new();
        for line in text.lines() {
            let Some(labels) = line.strip_prefix("apiserver_request_total{") else {
                continue;
            };
            if !labels.contains("resource=\"secrets\"") {
                continue;
            }
            let verb = labels
                .split("verb=\"")
                .nth(1)
                .and_then(|v| v.split('"').next())
                .unwrap()
                .to_string();
            let value: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
            *counts.entry(verb).or_insert(0) += value as u64;
        }
        counts
    }

    /// Creates `secret` in [`NAMESPACE`].
    pub fn create_secret(&self, secret: &Secret) {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), NAMESPACE);
        self.runtime
            .block_on(secrets.create(&PostParams::default(), secret))
            .unwrap();
    }

    /// The `head.json` of head Secret `name`, parsed.
    pub fn head(&self, name: &str) -> serde_json::Value {
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), NAMESPACE);
        let secret = self.runtime.block_on(secrets.get(name)).unwrap();
        serde_json::from_slice(&secret.data.unwrap()["head.json"].0).unwrap()
    }
}
