//! What the `pki controller` tests share (tests/kube_controller.rs,
//! tests/kube_controller_inject.rs): running `pki` as the admin of a real
//! kube-apiserver, the admin's requests on any kind of object, and what
//! the controller writes.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::kube_support::kube::KubeServer;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, PostParams};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

pub const T0: &str = "2026-01-01T00:00:00Z";
/// The forced rotation, an hour after `pki init`.
pub const T1: &str = "2026-01-01T01:00:00Z";
/// The controller's frozen clock, after both.
pub const T2: &str = "2026-01-01T02:00:00Z";
pub const STORE: &str = "kube://pki/service-ca";
pub const APPS: &str = "apps";
/// How long the controller may take to bring an object up to date.
pub const CONVERGE: Duration = Duration::from_secs(60);

/// Runs `pki ARGS` as the admin, nothing of the user's own configuration.
pub fn pki(server: &KubeServer, home: &Path, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pki"));
    command
        .args(args)
        .env("KUBECONFIG", server.admin_kubeconfig())
        .env("HOME", home)
        .env_remove("PKI_STORE_KEY_FILE");
    command
}

pub fn output(mut command: Command) -> Output {
    command.output().expect("run pki")
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The admin's requests on objects of any kind, on a runtime of its own.
pub struct Cluster {
    pub client: kube::Client,
    pub runtime: tokio::runtime::Runtime,
}

impl Cluster {
    pub fn new(server: &KubeServer) -> Cluster {
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

    pub fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as kube::Resource>::DynamicType: Default,
    {
        Api::namespaced(self.client.clone(), APPS)
    }

    pub fn create<K>(&self, object: &K)
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

    pub fn get<K>(&self, name: &str) -> Option<K>
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
    pub fn wait_for<K, T>(&self, name: &str, what: &str, check: impl Fn(&K) -> Option<T>) -> T
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

pub fn meta(name: &str, annotations: &[(&str, &str)]) -> ObjectMeta {
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

pub fn service(name: &str, secret: &str) -> Service {
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

pub fn data(secret: &Secret, key: &str) -> String {
    text(&secret.data.as_ref().unwrap()[key].0)
}

/// The Secret's `tls.crt` once it is there and differs from `before`.
pub fn serving_chain(secret: &Secret, before: Option<&str>) -> Option<String> {
    let chain = text(&secret.data.as_ref()?.get("tls.crt")?.0);
    (Some(chain.as_str()) != before).then_some(chain)
}

/// The injected bundle once both keys hold one and it differs from `before`.
pub fn injected(config_map: &ConfigMap, before: Option<&str>) -> Option<String> {
    let data = config_map.data.as_ref()?;
    let bundle = data.get("ca-bundle.crt")?;
    (data.get("service-ca.crt") == Some(bundle) && Some(bundle.as_str()) != before)
        .then(|| bundle.clone())
}

pub fn at(s: &str) -> OffsetDateTime {
    OffsetDateTime::parse(s, &Rfc3339).unwrap()
}

/// Sends SIGTERM and waits (bounded) for the exit.
pub fn terminate(child: &mut Child) -> std::process::ExitStatus {
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

/// A running `pki controller`, killed when dropped: a failing test must
/// not leave it behind, retrying against an API server that is gone.
pub struct Running(pub Child);

impl Drop for Running {
    fn drop(&mut self) {
        // Already reaped (terminate waited for it): nothing is sent.
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for Running {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

/// Starts `pki controller` with a short lease, its stderr in a file.
pub fn spawn_controller(server: &KubeServer, home: &Path) -> (Running, tempfile::NamedTempFile) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let args = ["controller", STORE, "--now", T2, "--lease-duration", "3s"];
    let child = pki(server, home, &args)
        .stdout(Stdio::null())
        .stderr(log.reopen().unwrap())
        .spawn()
        .unwrap();
    (Running(child), log)
}

pub fn read(log: &tempfile::NamedTempFile) -> String {
    std::fs::read_to_string(log.path()).unwrap()
}

impl Cluster {
    /// Creates the cluster-scoped object `json` describes.
    pub fn create_global<K>(&self, json: serde_json::Value)
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
    pub fn ca_bundles<K>(&self, name: &str, pointers: &[&str]) -> Vec<Option<String>>
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
    pub fn store_bundle(&self) -> String {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), "pki");
        let config_map = self.runtime.block_on(api.get("service-ca.signer")).unwrap();
        config_map.data.unwrap()["ca-bundle.crt"].clone()
    }
}

impl Cluster {
    /// Every object of kind `K` in [`APPS`].
    pub fn list<K>(&self) -> Vec<K>
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
    pub fn until(
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

/// One Event (events.k8s.io/v1) as the tests read it.
#[derive(Debug, Clone)]
pub struct SeenEvent {
    pub type_: String,
    pub reason: String,
    pub note: String,
    pub instance: String,
}

impl Cluster {
    /// The Events in `namespace` about the object `kind` `name`.
    pub fn events(&self, namespace: &str, kind: &str, name: &str) -> Vec<SeenEvent> {
        use k8s_openapi::api::events::v1::Event;
        let api: Api<Event> = Api::namespaced(self.client.clone(), namespace);
        let params = kube::api::ListParams::default();
        let events = self.runtime.block_on(api.list(&params)).unwrap().items;
        events
            .into_iter()
            .filter(|e| {
                let regarding = e.regarding.as_ref();
                regarding.and_then(|r| r.kind.as_deref()) == Some(kind)
                    && regarding.and_then(|r| r.name.as_deref()) == Some(name)
            })
            .map(|e| SeenEvent {
                type_: e.type_.unwrap_or_default(),
                reason: e.reason.unwrap_or_default(),
                note: e.note.unwrap_or_default(),
                instance: e.reporting_instance.unwrap_or_default(),
            })
            .collect()
    }

    /// Polls until an Event of `reason` about `kind` `name` in `namespace`
    /// has a note that contains `text`; that Event.
    pub fn wait_for_event(
        &self,
        (namespace, kind, name): (&str, &str, &str),
        reason: &str,
        text: &str,
    ) -> SeenEvent {
        let start = Instant::now();
        loop {
            let events = self.events(namespace, kind, name);
            let found = events
                .iter()
                .find(|e| e.reason == reason && e.note.contains(text));
            if let Some(found) = found {
                return found.clone();
            }
            assert!(
                start.elapsed() < CONVERGE,
                "no Event {reason} ({text}) on {kind} {namespace}/{name} within {CONVERGE:?}: {events:#?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
