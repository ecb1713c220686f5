//! The signer engine through pki-rotate's driver on a `kube://` store,
//! against a real kube-apiserver: create, issue, rotate and read back; a
//! write that loses its compare-and-swap at the commit is decided again
//! and rotates once; replicas racing in threads rotate once; sealed with a
//! store key, no Secret holds a private key in clear.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_kube::{AsyncKubeStore, KubeStore, KubeUrl};
use pki_rotate::{
    AsyncDriver, Document, Driver, Engine, Event, ForcedRotation, LeafRequest, RotationReason,
    SealedStore, SealingKeys, SignerEngine, SignerInput, SignerPolicy, SignerState, Step, Store,
    StoreKey,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use support::admin::{Admin, open, options};
use support::kube::KubeServer;
use time::{Duration, OffsetDateTime, macros::datetime};

// 2026-01-01: the day every signer here is created.
const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);
const KEY: &str = "signer";

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

fn initial() -> SignerState {
    let mut s = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap();
    s.request_leaf("web", LeafRequest::server(vec!["web.ns.svc".into()]))
        .unwrap();
    SignerEngine::step(&s, &SignerInput::default(), T0, &mut rng(2))
        .unwrap()
        .into_document()
}

fn rotation_time(s: &SignerState) -> OffsetDateTime {
    s.rotation_due_at(&s.policy) + Duration::days(1)
}

fn rotated(step: &Step<SignerState, Event>) -> bool {
    step.events
        .iter()
        .any(|e| matches!(e, Event::Rotated { .. }))
}

#[test]
fn a_signer_is_created_rotated_and_read_back_file_for_file() {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    let store = open(server.admin_kubeconfig(), "kube://pki/roundtrip");
    let driver = Driver::new(&store);
    let s = initial();
    driver.create::<SignerEngine>(KEY, &s).unwrap();
    let forced = SignerInput::forced(ForcedRotation::new("key ceremony"));
    let step = driver
        .step::<SignerEngine, _>(KEY, &forced, T0 + Duration::days(30), &mut rng(3))
        .unwrap();
    assert!(step.changed && rotated(&step));

    // Another store object (another process, in effect) reads the same.
    let other = open(server.admin_kubeconfig(), "kube://pki/roundtrip");
    let (doc, revision) = Driver::new(&other).load::<SignerEngine>(KEY).unwrap();
    assert_eq!(doc.to_files().unwrap(), step.document.to_files().unwrap());
    let (files, read_revision) = other.get(KEY).unwrap().unwrap();
    assert_eq!(files, step.document.to_files().unwrap());
    assert_eq!(read_revision, revision);
    assert_eq!(doc.history.len(), 1);
    assert_ne!(doc.ca.cert, s.ca.cert);

    // The same reason again is nothing to do: no write.
    let again = driver
        .step::<SignerEngine, _>(KEY, &forced, T0 + Duration::days(31), &mut rng(4))
        .unwrap();
    assert!(!again.changed);
    assert_eq!(other.get(KEY).unwrap().unwrap().1, revision);
}

#[test]
fn a_write_that_loses_its_commit_to_another_writer_is_decided_again_and_rotates_once() {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    let mut store = open(server.admin_kubeconfig(), "kube://pki/lost");
    let s = initial();
    Driver::new(&store).create::<SignerEngine>(KEY, &s).unwrap();
    let now = rotation_time(&s);
    // Another writer rotates between this one's read and its commit. The
    // hook runs on this store's runtime, so the other store runs on a
    // thread of its own.
    let other = open(server.admin_kubeconfig(), "kube://pki/lost");
    let fired = AtomicBool::new(false);
    store.set_write_hook(Some(Box::new(move |step| {
        if step == "commit" && !fired.swap(true, Ordering::SeqCst) {
            std::thread::scope(|scope| {
                scope.spawn(|| {
                    let forced = SignerInput::forced(ForcedRotation::new("key ceremony"));
                    let step = Driver::new(&other)
                        .step::<SignerEngine, _>(KEY, &forced, now, &mut rng(99))
                        .unwrap();
                    assert!(step.changed);
                });
            });
        }
        Ok(())
    })));
    let step = Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &SignerInput::default(), now, &mut rng(6))
        .unwrap();
    assert_eq!(step.attempts, 2, "the first commit lost with 409");
    assert!(!step.changed, "the fresh document was already rotated");
    store.set_write_hook(None);
    let (doc, _) = Driver::new(&store).load::<SignerEngine>(KEY).unwrap();
    assert_eq!(doc.history.len(), 1);
    assert_eq!(
        doc.history[0].reason,
        RotationReason::Forced {
            reason: "key ceremony".into()
        }
    );
}

#[test]
fn replicas_racing_in_threads_on_a_due_rotation_rotate_once() {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    let s = initial();
    let stores: Vec<KubeStore> = (0..3)
        .map(|_| open(server.admin_kubeconfig(), "kube://pki/race"))
        .collect();
    Driver::new(&stores[0])
        .create::<SignerEngine>(KEY, &s)
        .unwrap();
    let now = rotation_time(&s);
    let replicas = 6;
    let barrier = Barrier::new(replicas);
    let steps: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..replicas)
            .map(|i| {
                let (barrier, store) = (&barrier, &stores[i % stores.len()]);
                scope.spawn(move || {
                    barrier.wait();
                    let input = if i % 2 == 0 {
                        SignerInput::forced(ForcedRotation::new("key ceremony"))
                    } else {
                        SignerInput::default()
                    };
                    Driver::new(store)
                        .step::<SignerEngine, _>(KEY, &input, now, &mut rng(100 + i as u64))
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(steps.iter().filter(|s| rotated(s)).count(), 1);
    let (doc, _) = Driver::new(&stores[1]).load::<SignerEngine>(KEY).unwrap();
    assert_eq!(doc.history.len(), 1, "{:?}", doc.history);
    for step in &steps {
        assert_eq!(step.document.ca.cert, doc.ca.cert);
    }
    // Whichever won, the one rotation is recorded as forced, once.
    assert_eq!(
        doc.history[0].reason,
        RotationReason::Forced {
            reason: "key ceremony".into()
        }
    );
}

/// Every value of every Secret in the namespace that holds a PEM private key.
fn secrets_holding_a_private_key(admin: &Admin) -> Vec<String> {
    let mut found = Vec::new();
    for secret in admin.secrets() {
        for (key, value) in secret.data.unwrap_or_default() {
            let text = String::from_utf8_lossy(&value.0);
            if text.contains("PRIVATE KEY") {
                found.push(format!("{}/{key}", secret.metadata.name.clone().unwrap()));
            }
        }
    }
    found
}

#[test]
fn a_sealed_store_leaves_no_private_key_in_clear_in_any_secret() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let key = StoreKey::generate(&mut rng(7));
    let sealed = SealedStore::new(
        open(server.admin_kubeconfig(), "kube://pki/sealed"),
        SealingKeys::single(key),
        rng(8),
        false,
    );
    let s = initial();
    let driver = Driver::new(&sealed);
    driver.create::<SignerEngine>(KEY, &s).unwrap();
    let forced = SignerInput::forced(ForcedRotation::new("key ceremony"));
    driver
        .step::<SignerEngine, _>(KEY, &forced, T0 + Duration::days(30), &mut rng(9))
        .unwrap();
    assert!(!admin.store_objects("sealed").is_empty());
    assert_eq!(secrets_holding_a_private_key(&admin), Vec::<String>::new());
    let (doc, _) = driver.load::<SignerEngine>(KEY).unwrap();
    assert!(doc.ca.key.matches(doc.ca.cert.public_key()));

    // The same document unsealed: the dump finds its keys, so the check
    // above can fail.
    let clear = open(server.admin_kubeconfig(), "kube://pki/clear");
    Driver::new(&clear)
        .create::<SignerEngine>(KEY, &doc)
        .unwrap();
    let found = secrets_holding_a_private_key(&admin);
    assert!(
        !found.is_empty() && found.iter().all(|f| f.starts_with("clear.")),
        "{found:?}"
    );
}

#[test]
fn a_controller_on_the_async_store_creates_issues_and_rotates() {
    let server = KubeServer::start();
    let _admin = Admin::new(&server);
    // A controller's own runtime, on one thread.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let url = KubeUrl::parse("kube://pki/async").unwrap();
        let store = AsyncKubeStore::open(&url, options(server.admin_kubeconfig()))
            .await
            .unwrap();
        let driver = AsyncDriver::new(store);
        let s = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap();
        driver.create::<SignerEngine>(KEY, &s).await.unwrap();
        let web = SignerInput::request("web", LeafRequest::server(vec!["web.ns.svc".into()]));
        let step = driver
            .step::<SignerEngine, _>(KEY, &web, T0, &mut rng(2))
            .await
            .unwrap();
        assert!(step.changed);
        let due = rotation_time(&step.document);
        let step = driver
            .step::<SignerEngine, _>(KEY, &SignerInput::default(), due, &mut rng(3))
            .await
            .unwrap();
        assert!(rotated(&step));
        let (doc, _) = driver.load::<SignerEngine>(KEY).await.unwrap();
        assert_eq!(doc.to_files().unwrap(), step.document.to_files().unwrap());
    });
}
