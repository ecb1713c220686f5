//! What a `kube://` store publishes for consumers, against a real
//! kube-apiserver: each leaf a `kubernetes.io/tls` Secret whose chain
//! OpenSSL verifies against the bundle's ConfigMap, following init, issue,
//! rotation and removal; a publisher of an older commit that finishes last
//! changes nothing; an object of the same name that pki did not make is
//! left alone with a notice; a publication cut short after the commit is
//! completed by the next no-op step; a one-leaf step writes O(1) consumer
//! objects.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{Api, ListParams, PostParams};
use pki_rotate::{
    Driver, File, Files, ForcedRotation, LeafChange, LeafRequest, SignerEngine, SignerInput,
    SignerPolicy, SignerState, Store,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use support::admin::{Admin, NAMESPACE, open};
use support::kube::KubeServer;
use time::{Duration, OffsetDateTime, macros::datetime};

const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);
const KEY: &str = "signer";

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// The admin's view of the namespace's Secrets and ConfigMaps.
struct View {
    secrets: Api<Secret>,
    configmaps: Api<ConfigMap>,
    runtime: tokio::runtime::Runtime,
}

impl View {
    fn new(server: &KubeServer) -> View {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let kubeconfig = kube::config::Kubeconfig::read_from(server.admin_kubeconfig()).unwrap();
        let client = runtime.block_on(async {
            let options = kube::config::KubeConfigOptions::default();
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .unwrap();
            kube::Client::try_from(config).unwrap()
        });
        View {
            secrets: Api::namespaced(client.clone(), NAMESPACE),
            configmaps: Api::namespaced(client, NAMESPACE),
            runtime,
        }
    }

    fn secret(&self, name: &str) -> Option<Secret> {
        self.runtime.block_on(self.secrets.get_opt(name)).unwrap()
    }

    fn configmap(&self, name: &str) -> Option<ConfigMap> {
        self.runtime
            .block_on(self.configmaps.get_opt(name))
            .unwrap()
    }

    /// The leaf Secrets of store `store` by name, with their data.
    fn leaves(&self, store: &str) -> BTreeMap<String, Secret> {
        let params = ListParams::default().labels(&format!(
            "pki.invalid/store={store},pki.invalid/published=leaf"
        ));
        let list = self.runtime.block_on(self.secrets.list(&params)).unwrap();
        list.items
            .into_iter()
            .map(|s| (s.metadata.name.clone().unwrap(), s))
            .collect()
    }

    fn create_secret(&self, secret: &Secret) {
        self.runtime
            .block_on(self.secrets.create(&PostParams::default(), secret))
            .unwrap();
    }
}

fn data(secret: &Secret, key: &str) -> Vec<u8> {
    secret.data.as_ref().unwrap()[key].0.clone()
}

fn bundle(map: &ConfigMap) -> Vec<u8> {
    map.data.as_ref().unwrap()["ca-bundle.crt"]
        .as_bytes()
        .to_vec()
}

fn annotation(meta: &ObjectMeta, name: &str) -> String {
    meta.annotations.as_ref().unwrap()[name].clone()
}

fn openssl(args: &[&str]) -> std::process::Output {
    Command::new("openssl").args(args).output().unwrap()
}

/// OpenSSL verifies the published Secret's chain (`tls.crt`: leaf first,
/// then what the leaf presents) against the ConfigMap's bundle, strictly,
/// and the key is the certificate's.
fn assert_verifies(dir: &Path, secret: &Secret, map: &ConfigMap) {
    assert_eq!(
        secret.type_.as_deref(),
        Some("kubernetes.io/tls"),
        "{secret:?}"
    );
    assert_eq!(data(secret, "ca.crt"), bundle(map), "ca.crt is the bundle");
    let write = |name: &str, bytes: &[u8]| {
        let path = dir.join(name);
        std::fs::write(&path, bytes).unwrap();
        path.to_str().unwrap().to_string()
    };
    let chain = write("chain.pem", &data(secret, "tls.crt"));
    let ca = write("bundle.pem", &bundle(map));
    let key = write("tls.key", &data(secret, "tls.key"));
    let verify = openssl(&[
        "verify",
        "-x509_strict",
        "-CAfile",
        &ca,
        "-untrusted",
        &chain,
        &chain,
    ]);
    assert!(
        verify.status.success(),
        "{}{}",
        String::from_utf8_lossy(&verify.stdout),
        String::from_utf8_lossy(&verify.stderr)
    );
    let from_cert = openssl(&["x509", "-in", &chain, "-noout", "-pubkey"]);
    let from_key = openssl(&["pkey", "-in", &key, "-pubout"]);
    assert!(from_cert.status.success() && from_key.status.success());
    assert_eq!(from_cert.stdout, from_key.stdout, "the key is the leaf's");
}

fn server_leaf(name: &str) -> LeafChange {
    LeafChange::Request {
        name: name.into(),
        request: LeafRequest::server(vec![format!("{name}.ns.svc")]),
    }
}

fn leaves_input(changes: Vec<LeafChange>) -> SignerInput {
    SignerInput {
        leaves: changes,
        ..SignerInput::default()
    }
}

fn new_signer() -> SignerState {
    SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap()
}

#[test]
fn leaves_and_bundle_follow_init_issue_rotation_and_removal_and_verify_with_openssl() {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    let view = View::new(&server);
    let tmp = tempfile::tempdir().unwrap();
    let store = open(server.admin_kubeconfig(), "kube://pki/pub");
    let driver = Driver::new(&store);
    driver
        .create_at::<SignerEngine>(KEY, &new_signer(), T0)
        .unwrap();
    let map = view
        .configmap("pub.signer")
        .expect("the bundle's ConfigMap");
    let (files, _) = store.get(KEY).unwrap().unwrap();
    assert_eq!(bundle(&map), files.get("ca-bundle.crt").unwrap());
    assert_eq!(annotation(&map.metadata, "pki.invalid/sequence"), "1");
    assert!(view.leaves("pub").is_empty());

    let input = leaves_input(vec![server_leaf("web"), server_leaf("api")]);
    driver
        .step::<SignerEngine, _>(KEY, &input, T0, &mut rng(2))
        .unwrap();
    let map = view.configmap("pub.signer").unwrap();
    assert_eq!(annotation(&map.metadata, "pki.invalid/sequence"), "2");
    let leaves = view.leaves("pub");
    let names: Vec<&String> = leaves.keys().collect();
    assert_eq!(names, ["pub.signer.leaf.api", "pub.signer.leaf.web"]);
    let (files, _) = store.get(KEY).unwrap().unwrap();
    for (name, secret) in &leaves {
        let leaf = annotation(&secret.metadata, "pki.invalid/leaf");
        assert_eq!(
            annotation(&secret.metadata, "pki.invalid/key"),
            KEY,
            "{name}"
        );
        let chain = files.get(&format!("certs/{leaf}/tls.crt")).unwrap();
        assert_eq!(data(secret, "tls.crt"), chain, "{name}");
        assert_verifies(tmp.path(), secret, &map);
    }

    // A forced rotation changes the bundle: every leaf's ca.crt follows.
    let forced = SignerInput::forced(ForcedRotation::new("key ceremony"));
    let later = T0 + Duration::days(30);
    let step = driver
        .step::<SignerEngine, _>(KEY, &forced, later, &mut rng(3))
        .unwrap();
    assert!(step.changed);
    let rotated = view.configmap("pub.signer").unwrap();
    assert_ne!(bundle(&rotated), bundle(&map));
    for secret in view.leaves("pub").values() {
        assert_verifies(tmp.path(), secret, &rotated);
    }

    // A removed leaf's Secret goes; the other stays as it was.
    let before = view.secret("pub.signer.leaf.web").unwrap();
    let removal = leaves_input(vec![LeafChange::Remove { name: "api".into() }]);
    driver
        .step::<SignerEngine, _>(KEY, &removal, later, &mut rng(4))
        .unwrap();
    assert!(view.secret("pub.signer.leaf.api").is_none());
    let after = view.secret("pub.signer.leaf.web").unwrap();
    assert_eq!(
        after.metadata.resource_version, before.metadata.resource_version,
        "an unchanged leaf is not written"
    );
    // The store's own listing names the document once, not its leaves.
    assert_eq!(store.keys().unwrap(), [KEY]);
    assert!(store.take_notices().is_empty());
}

/// A document of plain files: the bundle `bundle` and each leaf with
/// `version` in its chain and key.
fn document(bundle: &str, leaves: &[(&str, &str)]) -> Files {
    let mut files = Files::new();
    let public = |s: String| File::public(s.into_bytes());
    files
        .insert("ca-bundle.crt", public(bundle.to_string()))
        .unwrap();
    for (leaf, version) in leaves {
        let chain = public(format!("chain {leaf} {version}"));
        files
            .insert(format!("certs/{leaf}/tls.crt"), chain)
            .unwrap();
        let key = File::secret(format!("key {leaf} {version}").into_bytes());
        files.insert(format!("certs/{leaf}/tls.key"), key).unwrap();
    }
    files
}

/// Published objects: name → (resourceVersion, data).
type Objects = BTreeMap<String, (String, String)>;

/// Every published object of store `store`.
fn published(view: &View, store: &str) -> Objects {
    let mut all: Objects = view
        .leaves(store)
        .into_iter()
        .map(|(name, s)| {
            let version = s.metadata.resource_version.clone().unwrap();
            (name, (version, format!("{:?}", s.data)))
        })
        .collect();
    if let Some(map) = view.configmap(&format!("{store}.{KEY}")) {
        let version = map.metadata.resource_version.clone().unwrap();
        all.insert("configmap".into(), (version, format!("{:?}", map.data)));
    }
    all
}

#[test]
fn a_publisher_of_an_older_commit_that_finishes_last_changes_nothing() {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    let view = View::new(&server);
    let mut first = open(server.admin_kubeconfig(), "kube://pki/race");
    let second = open(server.admin_kubeconfig(), "kube://pki/race");
    let one = document("bundle 1", &[("a", "1"), ("b", "1")]);
    let rev1 = first.put(KEY, None, &one).unwrap();
    // Sequence 2 commits; before it publishes anything, sequence 3 (which
    // drops leaf b) commits and publishes in another process.
    let two = document("bundle 2", &[("a", "2"), ("b", "2")]);
    let three = document("bundle 3", &[("a", "3")]);
    let newer: Arc<Mutex<Option<Objects>>> = Arc::default();
    let seen = newer.clone();
    let hook_view = View::new(&server);
    let fired = AtomicBool::new(false);
    first.set_write_hook(Some(Box::new(move |step| {
        if step.starts_with("publish") && !fired.swap(true, Ordering::SeqCst) {
            // The hook runs on the first store's runtime: the second store
            // and the admin's view run on a thread of their own.
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    let (_, rev2) = second.get(KEY).unwrap().unwrap();
                    second.put(KEY, Some(&rev2), &three).unwrap();
                    *seen.lock().unwrap() = Some(published(&hook_view, "race"));
                });
            });
        }
        Ok(())
    })));
    first.put(KEY, Some(&rev1), &two).unwrap();
    first.set_write_hook(None);
    let newer = newer.lock().unwrap().clone().expect("the hook ran");
    assert_eq!(published(&view, "race"), newer, "the older publisher lost");
    assert!(view.secret("race.signer.leaf.b").is_none());
    let a = view.secret("race.signer.leaf.a").unwrap();
    assert_eq!(data(&a, "tls.crt"), b"chain a 3");
    assert_eq!(annotation(&a.metadata, "pki.invalid/sequence"), "3");
    let map = view.configmap("race.signer").unwrap();
    assert_eq!(annotation(&map.metadata, "pki.invalid/sequence"), "3");
    assert_eq!(bundle(&map), b"bundle 3");
}

#[test]
fn a_secret_of_the_same_name_that_pki_did_not_make_is_left_alone_with_a_notice() {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    let view = View::new(&server);
    let theirs = Secret {
        metadata: ObjectMeta {
            name: Some("own.signer.leaf.web".into()),
            ..ObjectMeta::default()
        },
        string_data: Some(BTreeMap::from([("tls.crt".into(), "not pki's".into())])),
        ..Secret::default()
    };
    view.create_secret(&theirs);
    let mut store = open(server.admin_kubeconfig(), "kube://pki/own");
    let notices: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = notices.clone();
    store.set_notice_hook(Some(Box::new(move |n| sink.lock().unwrap().push(n.into()))));
    let files = document("bundle", &[("web", "1"), ("api", "1")]);
    store.put(KEY, None, &files).unwrap();
    let left = view.secret("own.signer.leaf.web").unwrap();
    assert_eq!(data(&left, "tls.crt"), b"not pki's");
    assert!(left.metadata.labels.is_none());
    assert!(view.secret("own.signer.leaf.api").is_some());
    let notices = notices.lock().unwrap().clone();
    assert_eq!(notices.len(), 1, "{notices:?}");
    assert!(
        notices[0].contains("secret own.signer.leaf.web") && notices[0].contains("not made by pki"),
        "{notices:?}"
    );
    // Nor is it deleted when the document drops that leaf.
    let (_, revision) = store.get(KEY).unwrap().unwrap();
    let fewer = document("bundle", &[("api", "1")]);
    store.put(KEY, Some(&revision), &fewer).unwrap();
    assert!(view.secret("own.signer.leaf.web").is_some());
}

#[test]
fn a_publication_cut_short_after_the_commit_is_completed_by_the_next_no_op_step() {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    let view = View::new(&server);
    let mut store = open(server.admin_kubeconfig(), "kube://pki/cut");
    let driver = Driver::new(&store);
    driver
        .create_at::<SignerEngine>(KEY, &new_signer(), T0)
        .unwrap();
    // Every publication request fails: the step commits, publishes nothing.
    store.set_write_hook(Some(Box::new(|step| {
        if step.starts_with("publish") {
            Err(std::io::Error::other("stopped"))
        } else {
            Ok(())
        }
    })));
    let input = leaves_input(vec![server_leaf("web")]);
    let step = Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &input, T0, &mut rng(2))
        .unwrap();
    assert!(step.changed);
    let notices = store.take_notices();
    assert!(
        notices
            .iter()
            .any(|n| n.contains("is committed (sequence 2) but not published")),
        "{notices:?}"
    );
    assert!(view.secret("cut.signer.leaf.web").is_none());
    let map = view.configmap("cut.signer").unwrap();
    assert_eq!(annotation(&map.metadata, "pki.invalid/sequence"), "1");

    // Another process's step with nothing to do reads the summary alone,
    // sees the publication lag, and completes it.
    let other = open(server.admin_kubeconfig(), "kube://pki/cut");
    let idle = Driver::new(&other)
        .step_unless_idle::<SignerEngine, _>(KEY, &SignerInput::default(), T0, &mut rng(3))
        .unwrap();
    assert!(!idle.changed);
    let map = view.configmap("cut.signer").unwrap();
    assert_eq!(annotation(&map.metadata, "pki.invalid/sequence"), "2");
    let web = view.secret("cut.signer.leaf.web").expect("published");
    let tmp = tempfile::tempdir().unwrap();
    assert_verifies(tmp.path(), &web, &map);
    assert!(other.take_notices().is_empty());
}

#[test]
fn a_one_leaf_step_on_a_signer_of_many_leaves_writes_one_leaf_and_the_configmap() {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    let view = View::new(&server);
    let mut store = open(server.admin_kubeconfig(), "kube://pki/many");
    let leaves: Vec<LeafChange> = (0..150).map(|i| server_leaf(&format!("l{i}"))).collect();
    let driver = Driver::new(&store);
    driver
        .create_at::<SignerEngine>(KEY, &new_signer(), T0)
        .unwrap();
    driver
        .step::<SignerEngine, _>(KEY, &leaves_input(leaves), T0, &mut rng(2))
        .unwrap();
    assert_eq!(view.leaves("many").len(), 150);
    let before = published(&view, "many");
    let writes = Arc::new(AtomicUsize::new(0));
    let counter = writes.clone();
    store.set_write_hook(Some(Box::new(move |step| {
        if step.contains("publish") {
            counter.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    })));
    // Renewing one leaf through the driver (which read the document first,
    // so the write compares with what it read).
    let renew = leaves_input(vec![LeafChange::Renew { name: "l7".into() }]);
    let step = Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &renew, T0 + Duration::days(1), &mut rng(3))
        .unwrap();
    assert!(step.changed);
    assert_eq!(
        writes.load(Ordering::SeqCst),
        2,
        "its Secret and the ConfigMap"
    );
    // A write by a store that has not read the document (one list of the
    // leaves' metadata instead): still one Secret and the ConfigMap.
    let (mut files, _) = store.get(KEY).unwrap().unwrap();
    let mut other = open(server.admin_kubeconfig(), "kube://pki/many");
    let other_writes = Arc::new(AtomicUsize::new(0));
    let counter = other_writes.clone();
    other.set_write_hook(Some(Box::new(move |step| {
        if step.contains("publish") {
            counter.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    })));
    let (_, revision) = other.get_summary(KEY).unwrap().unwrap();
    let chain = files.get("certs/l9/tls.crt").unwrap().to_vec();
    let key = files.get("certs/l8/tls.key").unwrap().to_vec();
    files
        .insert("certs/l8/tls.crt", File::public(chain))
        .unwrap();
    files.insert("certs/l8/tls.key", File::secret(key)).unwrap();
    other.put(KEY, Some(&revision), &files).unwrap();
    assert_eq!(other_writes.load(Ordering::SeqCst), 2);
    let after = published(&view, "many");
    let changed: Vec<&String> = after
        .iter()
        .filter(|(name, object)| before.get(*name) != Some(*object))
        .map(|(name, _)| name)
        .collect();
    assert_eq!(
        changed,
        ["configmap", "many.signer.leaf.l7", "many.signer.leaf.l8"]
    );
}
