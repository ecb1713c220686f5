//! The `pki` binary on `kube://` stores of one real API server per test
//! process (pki-kube's test support), sealed with a store key: every
//! helper written for directory stores (`support::cli::ok`,
//! `support::set`, `support::redis`) runs unchanged on a `kube://` URL,
//! because every `pki` run of the process gets `KUBECONFIG` and
//! `PKI_STORE_KEY_FILE`. And a dump of every Secret and ConfigMap of a
//! namespace, searched for private material in clear.
//!
//! A test file includes it by path, next to `support` and pki-kube's
//! support as `kube_support`:
//!
//! ```ignore
//! mod support;
//! #[path = "../pki-kube/tests/support/mod.rs"]
//! mod kube_support;
//! #[path = "support/on_kube.rs"]
//! mod on_kube;
//! ```

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::kube_support::admin::{Admin, NAMESPACE};
use crate::kube_support::kube::KubeServer;
use crate::support::cli::{ok, set_pki_env};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{Api, ListParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The API server of this test process, its admin, and the store key
/// every `pki` run seals with.
pub struct Cluster {
    pub server: KubeServer,
    pub admin: Admin,
    pub store_key: PathBuf,
    pub tmp: tempfile::TempDir,
}

impl Cluster {
    /// Starts the server, makes namespace [`NAMESPACE`] and a store key,
    /// and gives every later `pki` run of this process the admin's
    /// kubeconfig and the key.
    pub fn start() -> Cluster {
        let server = KubeServer::start();
        let admin = Admin::new(&server);
        let tmp = tempfile::tempdir().unwrap();
        let store_key = tmp.path().join("store.key");
        let key = store_key.to_str().unwrap();
        ok(&["store-key", "new", key]);
        set_pki_env(&[
            ("KUBECONFIG", server.admin_kubeconfig().to_str().unwrap()),
            ("PKI_STORE_KEY_FILE", key),
        ]);
        Cluster {
            server,
            admin,
            store_key,
            tmp,
        }
    }

    /// `kube://pki/NAME`.
    pub fn url(&self, name: &str) -> String {
        format!("kube://{NAMESPACE}/{name}")
    }

    /// `pki export URL` into a new directory `name` (with the store key:
    /// private files in clear, 0600), read back from the API server.
    pub fn export(&self, url: &str, name: &str) -> PathBuf {
        let out = self.tmp.path().join("exports").join(name);
        ok(&["export", url, out.to_str().unwrap()]);
        out
    }
}

/// One value of a Secret or ConfigMap.
#[derive(Debug)]
pub struct Dumped {
    /// `Secret/NAME` or `ConfigMap/NAME`.
    pub object: String,
    /// The Secret's `type` (empty for a ConfigMap).
    pub kind: String,
    /// The data key (`tls.key`, `head.json`, `data`…).
    pub key: String,
    pub value: Vec<u8>,
}

/// Every value of every Secret and ConfigMap in `namespace`, read as the
/// admin of `server` (outside pki: what `kubectl get -o yaml` shows).
pub fn dump(server: &KubeServer, namespace: &str) -> Vec<Dumped> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let kubeconfig = Kubeconfig::read_from(server.admin_kubeconfig()).unwrap();
    runtime.block_on(async {
        let config =
            kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                .await
                .unwrap();
        let client = kube::Client::try_from(config).unwrap();
        let mut out = Vec::new();
        let secrets: Api<Secret> = Api::namespaced(client.clone(), namespace);
        for secret in secrets.list(&ListParams::default()).await.unwrap() {
            let object = format!("Secret/{}", secret.metadata.name.unwrap_or_default());
            let kind = secret.type_.unwrap_or_default();
            let data = secret
                .data
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0));
            let strings = secret.string_data.unwrap_or_default().into_iter();
            for (key, value) in data.chain(strings.map(|(k, v)| (k, v.into_bytes()))) {
                out.push(Dumped {
                    object: object.clone(),
                    kind: kind.clone(),
                    key,
                    value,
                });
            }
        }
        let maps: Api<ConfigMap> = Api::namespaced(client, namespace);
        for map in maps.list(&ListParams::default()).await.unwrap() {
            let object = format!("ConfigMap/{}", map.metadata.name.unwrap_or_default());
            let data = map.data.unwrap_or_default().into_iter();
            let binary = map.binary_data.unwrap_or_default().into_iter();
            for (key, value) in data
                .map(|(k, v)| (k, v.into_bytes()))
                .chain(binary.map(|(k, v)| (k, v.0)))
            {
                out.push(Dumped {
                    object: object.clone(),
                    kind: String::new(),
                    key,
                    value,
                });
            }
        }
        out
    })
}

/// The private files of an export (written 0600: keys, credentials), by
/// path relative to `dir`, with their contents.
pub fn private_files(dir: &Path) -> Vec<(String, Vec<u8>)> {
    fn walk(base: &Path, dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                walk(base, &path, out);
            } else if meta.is_file() && meta.permissions().mode() & 0o077 == 0 {
                let rel = path.strip_prefix(base).unwrap().display().to_string();
                out.push((rel, std::fs::read(&path).unwrap()));
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The byte strings that give `secret` away wherever it is stored: its
/// text (trimmed), and for each private key of a PEM file (the
/// certificates next to it are public) its DER and a stretch of its
/// base64 body (how a JSON document or a Secret's `data` would hold it).
pub fn needles(secret: &[u8]) -> Vec<Vec<u8>> {
    let text = String::from_utf8_lossy(secret);
    let trimmed = text.trim();
    let mut out = vec![trimmed.as_bytes().to_vec()];
    if trimmed.starts_with("-----BEGIN") {
        let blocks = pki_core::pem::read_blocks(trimmed.as_bytes()).unwrap_or_default();
        for block in blocks.iter().filter(|b| b.label.contains("PRIVATE KEY")) {
            use base64::Engine as _;
            let der = &block.der;
            let b64 = base64::engine::general_purpose::STANDARD.encode(der.as_slice());
            // 48 characters from the middle: past any common prefix of
            // the key type's encoding.
            let middle = b64.len() / 2;
            out.push(b64.as_bytes()[middle..middle + 48].to_vec());
            out.push(der[der.len() / 2..].to_vec());
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    !needle.is_empty() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// Where `dump` holds a private key or one of `secrets` (private files
/// of exports) in clear: one line each. A private key may be in clear
/// only where consumers read it: `tls.key` of a `kubernetes.io/tls`
/// Secret, and a published leaf key (`certs/NAME/tls.key`, the chain and
/// key `tls.pem`) in the document's own shards, which the store must hold
/// to commit it with its certificate, as a directory store keeps its
/// published leaf keys in clear (0600). CA keys, key rings and
/// credentials never.
pub fn in_clear(dump: &[Dumped], secrets: &[(String, Vec<u8>)]) -> Vec<String> {
    let published: Vec<&[u8]> = secrets
        .iter()
        .filter(|(path, _)| is_published_leaf_key(path))
        .map(|(_, value)| value.as_slice())
        .collect();
    let mut findings = Vec::new();
    for value in dump {
        if value.kind == "kubernetes.io/tls" && value.key == "tls.key" {
            continue;
        }
        let at = format!("{} {}", value.object, value.key);
        let mut data = value.value.clone();
        if value.kind == "pki.invalid/document-shard" {
            for allowed in &published {
                data = without(&data, allowed);
            }
        }
        if contains(&data, b"PRIVATE KEY") {
            findings.push(format!("{at}: a PEM private key"));
        }
        for (path, secret) in secrets {
            if needles(secret).iter().any(|n| contains(&data, n)) {
                findings.push(format!("{at}: {path}"));
            }
        }
    }
    findings
}

/// Whether an exported path is a leaf key consumers mount.
fn is_published_leaf_key(path: &str) -> bool {
    let parts: Vec<&str> = path.split('/').collect();
    matches!(parts.as_slice(), [.., "certs", _, "tls.key" | "tls.pem"])
}

/// `haystack` with every occurrence of `needle` cut out.
fn without(haystack: &[u8], needle: &[u8]) -> Vec<u8> {
    if needle.is_empty() {
        return haystack.to_vec();
    }
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}
