//! `pki controller` against a real kube-apiserver (started by the test, as
//! pki-kube's own tests start it): an annotated Service gets a
//! `kubernetes.io/tls` Secret whose chain OpenSSL verifies against the
//! bundle injected into an annotated ConfigMap; a forced rotation re-issues
//! the Secret from the new CA while the injected bundle keeps both CAs
//! (the new chain verifies against the bundle from before the rotation
//! too); a Secret the controller did not create is left as it was; a store
//! that does not exist is one line (exit 1); SIGTERM stops it with exit 0.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
// The kube-apiserver support includes pki-etcd's `free_port` by path.
#![allow(clippy::duplicate_mod)]

#[path = "support/openssl.rs"]
#[allow(dead_code)]
mod openssl;
// The API server and its admin: pki-kube's own test support, by path.
#[path = "../pki-kube/tests/support/mod.rs"]
mod kube_support;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use kube_support::admin::Admin;
use kube_support::kube::KubeServer;
use pki_core::{Bundle, Certificate};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

const T0: &str = "2026-01-01T00:00:00Z";
/// The forced rotation, an hour after `pki init`.
const T1: &str = "2026-01-01T01:00:00Z";
/// The controller's frozen clock, after both.
const T2: &str = "2026-01-01T02:00:00Z";
const STORE: &str = "kube://pki/service-ca";
const APPS: &str = "apps";
/// How long the controller may take to bring an object up to date.
const CONVERGE: Duration = Duration::from_secs(60);

/// Runs `pki ARGS` as the admin, nothing of the user's own configuration.
fn pki(server: &KubeServer, home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pki"));
    command
        .args(args)
        .env("KUBECONFIG", server.admin_kubeconfig())
        .env("HOME", home)
        .env_remove("PKI_STORE_KEY_FILE");
    command
}

fn output(mut command: Command) -> Output {
    command.output().expect("run pki")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The admin's requests on objects of any kind, on a runtime of its own.
struct Cluster {
    client: kube::Client,
    runtime: tokio::runtime::Runtime,
}

impl Cluster {
    fn new(server: &KubeServer) -> Cluster {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let client = runtime.block_on(async {
            let kubeconfig =
                kube::config::Kubeconfig::read_from(server.admin_kubeconfig()).unwrap();
            let options = kube::config::KubeConfigOptions::default();
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .unwrap();
            kube::Client::try_from(config).unwrap()
        });
        Cluster { client, runtime }
    }

    fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), APPS)
    }

    fn create<K>(&self, object: &K)
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        self.runtime
            .block_on(self.api::<K>().create(&PostParams::default(), object))
            .unwrap();
    }

    fn get<K>(&self, name: &str) -> Option<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        self.runtime
            .block_on(self.api::<K>().get_opt(name))
            .unwrap()
    }

    /// Polls until `check` finds what it waits for in `get(name)`.
    fn wait_for<K, T>(&self, name: &str, what: &str, check: impl Fn(&K) -> Option<T>) -> T
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        let start = Instant::now();
        loop {
            if let Some(found) = self.get::<K>(name).as_ref().and_then(&check) {
                return found;
            }
            assert!(
                start.elapsed() < CONVERGE,
                "{what}: not within {CONVERGE:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

fn meta(name: &str, annotations: &[(&str, &str)]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(APPS.into()),
        annotations: Some(
            annotations
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        ),
        ..ObjectMeta::default()
    }
}

fn service(name: &str, secret: &str) -> Service {
    Service {
        metadata: meta(name, &[("pki.invalid/serving-cert-secret-name", secret)]),
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 443,
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

fn data(secret: &Secret, key: &str) -> String {
    text(&secret.data.as_ref().unwrap()[key].0)
}

/// The Secret's `tls.crt` once it is there and differs from `before`.
fn serving_chain(secret: &Secret, before: Option<&str>) -> Option<String> {
    let chain = text(&secret.data.as_ref()?.get("tls.crt")?.0);
    (Some(chain.as_str()) != before).then_some(chain)
}

/// The injected bundle once both keys hold one and it differs from `before`.
fn injected(config_map: &ConfigMap, before: Option<&str>) -> Option<String> {
    let data = config_map.data.as_ref()?;
    let bundle = data.get("ca-bundle.crt")?;
    (data.get("service-ca.crt") == Some(bundle) && Some(bundle.as_str()) != before)
        .then(|| bundle.clone())
}

fn at(s: &str) -> OffsetDateTime {
    OffsetDateTime::parse(s, &Rfc3339).unwrap()
}

/// OpenSSL (`-x509_strict`, TLS server purpose) accepts `chain` against
/// `bundle` at T2.
fn assert_verifies(chain: &str, bundle: &str, what: &str) {
    let chain = Certificate::all_from_pem(chain.as_bytes()).unwrap();
    let bundle = Bundle::from_pem(bundle.as_bytes()).unwrap();
    let verdict = openssl::verify(
        &bundle,
        &chain,
        at(T2) + time::Duration::minutes(1),
        "sslserver",
    );
    assert_eq!(verdict, Ok(openssl::Verdict::Verified), "{what}");
}

/// `pki verify` (pki-core's RFC 5280 path validation) accepts `chain`
/// against `bundle` for `dns`.
fn assert_pki_verifies(server: &KubeServer, home: &Path, chain: &str, bundle: &str, dns: &str) {
    let dir = tempfile::tempdir().unwrap();
    let (chain_file, bundle_file) = (dir.path().join("chain.pem"), dir.path().join("bundle.pem"));
    std::fs::write(&chain_file, chain).unwrap();
    std::fs::write(&bundle_file, bundle).unwrap();
    let args = [
        "verify",
        "--bundle",
        bundle_file.to_str().unwrap(),
        "--chain",
        chain_file.to_str().unwrap(),
        "--dns",
        dns,
        "--at",
        T2,
    ];
    let out = output(pki(server, home, &args));
    assert!(
        out.status.success(),
        "pki verify --dns {dns}: {}",
        text(&out.stderr)
    );
}

/// Sends SIGTERM and waits (bounded) for the exit.
fn terminate(child: &mut Child) -> std::process::ExitStatus {
    let pid = rustix::process::Pid::from_child(child);
    rustix::process::kill_process(pid, rustix::process::Signal::TERM).unwrap();
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "no exit within 15 s of SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A Secret `newer-tls` marked as the controller's of [`STORE`], holding
/// the leaf of another store's CA.
fn newer_replicas_secret(server: &KubeServer, home: &Path, cluster: &Cluster) -> Secret {
    let other = "kube://pki/other";
    for args in [
        vec!["init", other, "--now", T0],
        vec!["issue", other, "x", "--dns", "x.apps.svc", "--now", T0],
    ] {
        let out = output(pki(server, home, &args));
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    }
    let api: Api<Secret> = Api::namespaced(cluster.client.clone(), "pki");
    let published = cluster
        .runtime
        .block_on(api.get("other.signer.leaf.x"))
        .unwrap();
    Secret {
        metadata: meta("newer-tls", &[("pki.invalid/serving-cert-store", STORE)]),
        type_: Some("kubernetes.io/tls".into()),
        data: published.data,
        ..Secret::default()
    }
}

#[test]
fn the_controller_issues_serving_secrets_injects_the_whole_bundle_and_keeps_trust_through_a_rotation()
 {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();

    // No store yet: one line naming what to do, exit 1.
    let out = output(pki(&server, home, &["controller", STORE, "--now", T2]));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("pki init"), "{stderr}");

    let out = output(pki(&server, home, &["init", STORE, "--now", T0]));
    assert!(out.status.success(), "init: {}", text(&out.stderr));
    let cluster = Cluster::new(&server);
    _admin.create_namespace(APPS);
    // A Secret someone else made, which a Service names.
    let foreign = Secret {
        metadata: meta("foreign", &[]),
        data: Some(BTreeMap::from([(
            "tls.crt".to_string(),
            ByteString(b"not pki's".to_vec()),
        )])),
        ..Secret::default()
    };
    cluster.create(&foreign);
    cluster.create(&service("web", "web-tls"));
    cluster.create(&service("taken", "foreign"));
    let config_map = ConfigMap {
        metadata: meta("trust", &[("pki.invalid/inject-cabundle", "true")]),
        data: Some(BTreeMap::from([("keep".to_string(), "me".to_string())])),
        ..ConfigMap::default()
    };
    cluster.create(&config_map);

    // A Secret marked as this controller's that holds a leaf of a CA the
    // store never had (what a replica with a newer document would have
    // written): this replica must not write its older leaf over it.
    let newer = newer_replicas_secret(&server, home, &cluster);
    cluster.create(&newer);
    cluster.create(&service("newer", "newer-tls"));

    let log = tempfile::NamedTempFile::new().unwrap();
    let mut controller = pki(&server, home, &["controller", STORE, "--now", T2])
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();

    let chain =
        cluster.wait_for::<Secret, _>("web-tls", "the serving Secret", |s| serving_chain(s, None));
    let bundle =
        cluster.wait_for::<ConfigMap, _>("trust", "the injected bundle", |c| injected(c, None));
    let secret: Secret = cluster.get("web-tls").unwrap();
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/tls"));
    assert_eq!(data(&secret, "ca.crt"), bundle, "ca.crt is the bundle");
    assert!(data(&secret, "tls.key").contains("PRIVATE KEY"));
    assert_verifies(
        &chain,
        &bundle,
        "the serving chain against the injected bundle",
    );
    for dns in ["web.apps.svc", "web.apps.svc.cluster.local"] {
        assert_pki_verifies(&server, home, &chain, &bundle, dns);
    }
    let trust: ConfigMap = cluster.get("trust").unwrap();
    assert_eq!(
        trust.data.as_ref().unwrap()["keep"],
        "me",
        "other keys stay"
    );

    // Rotation by hand while the controller runs: the Secret is re-issued
    // from the new CA, the injected bundle holds the old CA and the new.
    let rotate = ["rotate", STORE, "--force", "test", "--now", T1];
    let out = output(pki(&server, home, &rotate));
    assert!(out.status.success(), "rotate: {}", text(&out.stderr));
    let new_chain = cluster.wait_for::<Secret, _>("web-tls", "the re-issued Secret", |s| {
        serving_chain(s, Some(&chain))
    });
    let new_bundle =
        cluster.wait_for::<ConfigMap, _>("trust", "the new bundle", |c| injected(c, Some(&bundle)));
    let (old, new) = (
        Bundle::from_pem(bundle.as_bytes()).unwrap(),
        Bundle::from_pem(new_bundle.as_bytes()).unwrap(),
    );
    // The old CA's key stays trusted: its root, or bridge A (its subject
    // and key under the new root) that replaces it; and a new key is there.
    let keys = |bundle: &Bundle| -> Vec<Vec<u8>> {
        let keys = bundle.certs().iter().map(|ca| ca.ski().unwrap().to_vec());
        keys.collect()
    };
    let (old_keys, new_keys) = (keys(&old), keys(&new));
    assert!(
        old_keys.iter().all(|k| new_keys.contains(k)) && new_keys.len() > old_keys.len(),
        "the injected bundle keeps the old CA and adds the new: {old_keys:x?} then {new_keys:x?}"
    );
    let new_leaf = &Certificate::all_from_pem(new_chain.as_bytes()).unwrap()[0];
    assert!(
        new.certs()
            .iter()
            .filter(|ca| !old_keys.iter().any(|k| ca.ski() == Some(k.as_slice())))
            .any(|ca| pki_core::issued_by(new_leaf, ca).issued_by),
        "the re-issued leaf comes from the new CA"
    );
    assert_verifies(
        &new_chain,
        &new_bundle,
        "the new chain against the new bundle",
    );
    assert_verifies(
        &new_chain,
        &bundle,
        "the new chain against the bundle before",
    );
    assert_verifies(&chain, &new_bundle, "the old chain against the new bundle");
    let secret: Secret = cluster.get("web-tls").unwrap();
    assert_eq!(data(&secret, "ca.crt"), new_bundle);

    // The foreign Secret was never written, and the log says why.
    let after: Secret = cluster.get("foreign").unwrap();
    assert_eq!(
        after.data, foreign.data,
        "a Secret pki did not create stays"
    );
    let after: Secret = cluster.get("newer-tls").unwrap();
    assert!(after.data == newer.data, "a leaf of an unknown CA stays");
    // Idle, the controller writes nothing: the head of the document (the
    // commit point) and the injected ConfigMap keep their versions across
    // passes (each ConfigMap patch would wake it again, each commit too).
    let versions = || {
        let heads: Api<Secret> = Api::namespaced(cluster.client.clone(), "pki");
        let head = cluster
            .runtime
            .block_on(heads.get("service-ca.signer"))
            .unwrap();
        let trust: ConfigMap = cluster.get("trust").unwrap();
        (
            head.metadata.resource_version,
            trust.metadata.resource_version,
        )
    };
    let before = versions();
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(versions(), before, "an idle controller wrote");

    // A Service deleted: its leaf leaves the store (its published Secret
    // in the store's namespace goes with it).
    let published = |leaf: &str| {
        let api: Api<Secret> = Api::namespaced(cluster.client.clone(), "pki");
        let params = kube::api::ListParams::default().labels("pki.invalid/published=leaf");
        let secrets = cluster.runtime.block_on(api.list(&params)).unwrap().items;
        secrets.iter().any(|s| {
            let annotations = s.metadata.annotations.as_ref();
            annotations
                .and_then(|a| a.get("pki.invalid/leaf"))
                .map(String::as_str)
                == Some(leaf)
        })
    };
    assert!(published("svc.apps.taken") && published("svc.apps.web"));
    let services: Api<Service> = cluster.api();
    let params = kube::api::DeleteParams::default();
    cluster
        .runtime
        .block_on(services.delete("taken", &params))
        .unwrap();
    let start = Instant::now();
    while published("svc.apps.taken") {
        assert!(
            start.elapsed() < CONVERGE,
            "the leaf of a deleted Service stays"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(published("svc.apps.web"), "the other leaf stays");

    let status = terminate(&mut controller);
    let log = std::fs::read_to_string(log.path()).unwrap();
    assert!(status.success(), "SIGTERM: {status:?}\n{log}");
    assert!(
        log.contains("apps/foreign") && log.contains("not overwritten"),
        "{log}"
    );
    assert_eq!(
        log.matches("apps/foreign exists").count(),
        1,
        "reported once: {log}"
    );
    assert!(
        log.contains("apps/newer-tls holds a certificate from a CA newer"),
        "{log}"
    );
}

/// Starts `pki controller` with a short lease, its stderr in a file.
fn spawn_controller(server: &KubeServer, home: &Path) -> (Child, tempfile::NamedTempFile) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let args = ["controller", STORE, "--now", T2, "--lease-duration", "3s"];
    let child = pki(server, home, &args)
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    (child, log)
}

fn read(log: &tempfile::NamedTempFile) -> String {
    std::fs::read_to_string(log.path()).unwrap()
}

#[test]
fn of_two_replicas_the_lease_holder_acts_and_the_other_takes_over_after_kill_9() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let out = output(pki(&server, home, &["init", STORE, "--now", T0]));
    assert!(out.status.success(), "init: {}", text(&out.stderr));
    admin.create_namespace(APPS);
    let cluster = Cluster::new(&server);
    cluster.create(&service("web", "web-tls"));

    let mut replicas = [
        spawn_controller(&server, home),
        spawn_controller(&server, home),
    ];
    cluster.wait_for::<Secret, _>("web-tls", "the serving Secret", |s| serving_chain(s, None));
    let held = |log: &str| log.contains("Lease service-ca.controller: held by");
    let logs: Vec<String> = replicas.iter().map(|(_, log)| read(log)).collect();
    let leaders: Vec<usize> = (0..2).filter(|&i| held(&logs[i])).collect();
    assert_eq!(leaders.len(), 1, "one replica holds the Lease: {logs:#?}");
    let (leader, other) = (leaders[0], 1 - leaders[0]);
    assert!(
        logs[leader].contains("Secret apps/web-tls holds leaf"),
        "{logs:#?}"
    );
    assert!(
        !logs[other].contains("holds leaf"),
        "the other replica waits: {logs:#?}"
    );

    // kill -9: no release; the other replica takes over once the lease
    // (3 s) lapses, and serves a Service annotated after the kill.
    replicas[leader].0.kill().unwrap();
    replicas[leader].0.wait().unwrap();
    let killed = Instant::now();
    cluster.create(&service("late", "late-tls"));
    cluster.wait_for::<Secret, _>("late-tls", "the Secret after the takeover", |s| {
        serving_chain(s, None)
    });
    let took = killed.elapsed();
    let log = read(&replicas[other].1);
    assert!(log.contains("now held by"), "{log}");
    assert!(
        took >= Duration::from_secs(1),
        "taken over after the lease lapsed: {took:?}"
    );
    eprintln!(
        "takeover: the new Service's Secret {took:?} after kill -9 of the leader (lease 3 s)"
    );
    let status = terminate(&mut replicas[other].0);
    assert!(
        status.success(),
        "SIGTERM: {status:?}\n{}",
        read(&replicas[other].1)
    );
}

impl Cluster {
    /// Creates the cluster-scoped object `json` describes.
    fn create_global<K>(&self, json: serde_json::Value)
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let object: K = serde_json::from_value(json).unwrap();
        let api: Api<K> = Api::all(self.client.clone());
        self.runtime
            .block_on(api.create(&PostParams::default(), &object))
            .unwrap();
    }

    /// Every `caBundle` of the cluster-scoped object `name`, as JSON (a
    /// base64 string, or null when unset), found by `pointers`.
    fn ca_bundles<K>(&self, name: &str, pointers: &[&str]) -> Vec<Option<String>>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
            + Clone
            + serde::Serialize
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
    {
        let api: Api<K> = Api::all(self.client.clone());
        let object = self.runtime.block_on(api.get(name)).unwrap();
        let json = serde_json::to_value(&object).unwrap();
        let decode = |value: &serde_json::Value| {
            let bundle: ByteString = serde_json::from_value(value.clone()).ok()?;
            Some(text(&bundle.0))
        };
        pointers
            .iter()
            .map(|p| json.pointer(p).and_then(decode))
            .collect()
    }

    /// The store's own published bundle (ConfigMap NAME.signer).
    fn store_bundle(&self) -> String {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), "pki");
        let config_map = self.runtime.block_on(api.get("service-ca.signer")).unwrap();
        config_map.data.unwrap()["ca-bundle.crt"].clone()
    }
}

/// A webhook configuration of `kind` with two webhooks that no request
/// ever reaches (a resource that does not exist; failures ignored).
fn webhooks(kind: &str, name: &str, annotated: bool) -> serde_json::Value {
    let webhook = |hook: &str| {
        serde_json::json!({
            "name": format!("{hook}.pki.invalid"),
            "clientConfig": {"service": {"namespace": APPS, "name": "web", "path": format!("/{hook}")}},
            "rules": [{"operations": ["CREATE"], "apiGroups": ["pki.invalid"],
                       "apiVersions": ["v1"], "resources": ["gadgets"]}],
            "failurePolicy": "Ignore",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        })
    };
    let annotations = if annotated {
        serde_json::json!({"pki.invalid/inject-cabundle": "true"})
    } else {
        serde_json::json!({})
    };
    serde_json::json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": kind,
        "metadata": {"name": name, "annotations": annotations},
        "webhooks": [webhook("a"), webhook("b")],
    })
}

/// A CRD with two versions converted by a webhook behind Service apps/web.
fn crd() -> serde_json::Value {
    let schema = serde_json::json!({"openAPIV3Schema": {
        "type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.pki.invalid",
                     "annotations": {"pki.invalid/inject-cabundle": "true"}},
        "spec": {
            "group": "pki.invalid",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList"},
            "scope": "Namespaced",
            "versions": [
                {"name": "v1", "served": true, "storage": true, "schema": schema},
                {"name": "v2", "served": true, "storage": false, "schema": schema},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"service": {"namespace": APPS, "name": "web", "path": "/convert", "port": 443}},
            }},
        },
    })
}

fn api_service() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": "v1.api.pki.invalid",
                     "annotations": {"pki.invalid/inject-cabundle": "true"}},
        "spec": {"group": "api.pki.invalid", "version": "v1",
                 "service": {"namespace": APPS, "name": "web", "port": 443},
                 "groupPriorityMinimum": 1000, "versionPriority": 15},
    })
}

#[test]
fn webhook_configurations_api_services_and_crds_get_the_whole_bundle_in_every_ca_bundle() {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration as Mutating, ValidatingWebhookConfiguration as Validating,
    };
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition as Crd;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;

    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let out = output(pki(&server, home, &["init", STORE, "--now", T0]));
    assert!(out.status.success(), "init: {}", text(&out.stderr));
    admin.create_namespace(APPS);
    let cluster = Cluster::new(&server);
    cluster.create_global::<Validating>(webhooks("ValidatingWebhookConfiguration", "v", true));
    cluster.create_global::<Validating>(webhooks("ValidatingWebhookConfiguration", "plain", false));
    cluster.create_global::<Mutating>(webhooks("MutatingWebhookConfiguration", "m", true));
    cluster.create_global::<Crd>(crd());
    cluster.create_global::<APIService>(api_service());
    let (mut controller, log) = spawn_controller(&server, home);

    let hooks = [
        "/webhooks/0/clientConfig/caBundle",
        "/webhooks/1/clientConfig/caBundle",
    ];
    let crd_field = ["/spec/conversion/webhook/clientConfig/caBundle"];
    let api_field = ["/spec/caBundle"];
    let every = |bundle: &str| {
        let mut all = cluster.ca_bundles::<Validating>("v", &hooks);
        all.extend(cluster.ca_bundles::<Mutating>("m", &hooks));
        all.extend(cluster.ca_bundles::<Crd>("widgets.pki.invalid", &crd_field));
        all.extend(cluster.ca_bundles::<APIService>("v1.api.pki.invalid", &api_field));
        all.iter().all(|b| b.as_deref() == Some(bundle))
    };
    for round in ["after init", "after a forced rotation"] {
        if round != "after init" {
            let rotate = ["rotate", STORE, "--force", "test", "--now", T1];
            let out = output(pki(&server, home, &rotate));
            assert!(out.status.success(), "rotate: {}", text(&out.stderr));
        }
        let bundle = cluster.store_bundle();
        let start = Instant::now();
        while !every(&bundle) {
            assert!(
                start.elapsed() < CONVERGE,
                "{round}: not injected\n{}",
                read(&log)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    let bundle = Bundle::from_pem(cluster.store_bundle().as_bytes()).unwrap();
    assert_eq!(
        bundle.len(),
        2,
        "the new CA and the old CA's key (bridge A)"
    );
    let plain = cluster.ca_bundles::<Validating>("plain", &hooks);
    assert_eq!(
        plain,
        vec![None, None],
        "an object not annotated is left alone"
    );
    assert!(terminate(&mut controller).success());
}

impl Cluster {
    /// Every object of kind `K` in [`APPS`].
    fn list<K>(&self) -> Vec<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug,
        <K as kube::Resource>::DynamicType: Default,
    {
        let params = kube::api::ListParams::default();
        self.runtime
            .block_on(self.api::<K>().list(&params))
            .unwrap()
            .items
    }

    /// Polls until `done` holds of the Secrets and ConfigMaps in [`APPS`];
    /// how long that took.
    fn until(
        &self,
        what: &str,
        limit: Duration,
        log: &tempfile::NamedTempFile,
        done: impl Fn(&[Secret], &[ConfigMap]) -> bool,
    ) -> Duration {
        let start = Instant::now();
        while !done(&self.list::<Secret>(), &self.list::<ConfigMap>()) {
            assert!(
                start.elapsed() < limit,
                "{what}: not within {limit:?}\n{}",
                read(log)
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        start.elapsed()
    }
}

/// The measurement the issue asks for, at 100 Services and 100 injected
/// ConfigMaps: from the Services annotated to the last Secret written, and
/// from a forced rotation to the last object current.
#[test]
fn a_hundred_services_and_a_hundred_config_maps_converge_after_annotation_and_rotation() {
    const N: usize = 100;
    let limit = Duration::from_secs(180);
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let home = tempfile::tempdir().unwrap();
    let home = home.path();
    let out = output(pki(&server, home, &["init", STORE, "--now", T0]));
    assert!(out.status.success(), "init: {}", text(&out.stderr));
    admin.create_namespace(APPS);
    let cluster = Cluster::new(&server);
    let (mut controller, log) = spawn_controller(&server, home);

    let annotated = Instant::now();
    for i in 0..N {
        cluster.create(&service(&format!("svc{i}"), &format!("svc{i}-tls")));
        cluster.create(&ConfigMap {
            metadata: meta(
                &format!("trust{i}"),
                &[("pki.invalid/inject-cabundle", "true")],
            ),
            ..ConfigMap::default()
        });
    }
    let created = annotated.elapsed();
    let bundle = cluster.store_bundle();
    let current = |secrets: &[Secret], maps: &[ConfigMap], bundle: &str| {
        let served = secrets.iter().filter(|s| {
            s.data
                .as_ref()
                .is_some_and(|d| d.get("ca.crt").is_some_and(|b| b.0 == bundle.as_bytes()))
        });
        let injected = maps
            .iter()
            .filter(|c| injected(c, None).as_deref() == Some(bundle));
        served.count() == N && injected.count() == N
    };
    cluster.until("100 Secrets and 100 bundles", limit, &log, |s, c| {
        current(s, c, &bundle)
    });
    let first = annotated.elapsed();

    let chains: Vec<String> = cluster
        .list::<Secret>()
        .iter()
        .map(|s| data(s, "tls.crt"))
        .collect();
    let rotate = ["rotate", STORE, "--force", "test", "--now", T1];
    let rotated = Instant::now();
    let out = output(pki(&server, home, &rotate));
    assert!(out.status.success(), "rotate: {}", text(&out.stderr));
    let new_bundle = cluster.store_bundle();
    assert_ne!(new_bundle, bundle);
    cluster.until(
        "100 re-issued Secrets and 100 new bundles",
        limit,
        &log,
        |s, c| {
            current(s, c, &new_bundle) && s.iter().all(|s| !chains.contains(&data(s, "tls.crt")))
        },
    );
    let second = rotated.elapsed();
    eprintln!(
        "scale: {N} Services + {N} ConfigMaps created in {created:?}; all Secrets and bundles current {first:?} after the first was annotated; {second:?} from `pki rotate --force` to all {N} Secrets re-issued and {N} bundles current"
    );
    assert!(terminate(&mut controller).success(), "{}", read(&log));
}
