//! A controller written in async Rust (a kube-rs reconcile loop) steps a
//! signer in etcd from inside its own tokio runtime: no runtime of the
//! store's, no blocked worker, and replicas racing as tasks still rotate
//! exactly once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::etcd;

use etcd::{Etcd, quick_options};
use pki_etcd::{AsyncEtcdStore, EtcdUrl};
use pki_rotate::{
    AsyncDriver, Event, ForcedRotation, LeafRequest, SignerEngine, SignerInput, SignerPolicy,
    SignerState,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use time::{Duration, OffsetDateTime, macros::datetime};

// 2026-01-01: the signer is created.
const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);
const KEY: &str = "signer";

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

async fn store(etcd: &Etcd, prefix: &str) -> AsyncEtcdStore {
    let url = EtcdUrl::parse(&etcd.url(prefix)).unwrap();
    AsyncEtcdStore::open(&url, quick_options()).await.unwrap()
}

#[tokio::test(flavor = "current_thread")]
async fn a_controller_on_a_single_threaded_runtime_creates_issues_and_rotates() {
    let etcd = Etcd::start();
    let driver = AsyncDriver::new(store(&etcd, "single").await);
    let s = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap();
    driver.create::<SignerEngine>(KEY, &s).await.unwrap();
    let web = SignerInput::request("web", LeafRequest::server(vec!["web.ns.svc".into()]));
    let step = driver
        .step::<SignerEngine, _>(KEY, &web, T0, &mut rng(2))
        .await
        .unwrap();
    assert!(step.changed && step.events.len() == 1);
    let due = s.rotation_due_at(&s.policy) + Duration::days(1);
    let step = driver
        .step::<SignerEngine, _>(KEY, &SignerInput::default(), due, &mut rng(3))
        .await
        .unwrap();
    assert!(
        step.events
            .iter()
            .any(|e| matches!(e, Event::Rotated { .. }))
    );
    // Read back through a blocking store on another thread: the same document.
    let url = etcd.url("single");
    let (doc, revision) = tokio::task::spawn_blocking(move || {
        let store = pki_etcd::EtcdStore::from_url(&url).unwrap();
        pki_rotate::Driver::new(&store)
            .load::<SignerEngine>(KEY)
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(revision, step.revision);
    assert_eq!(doc.ca.cert, step.document.ca.cert);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_racing_as_tasks_rotate_once() {
    let etcd = Etcd::start();
    let driver = AsyncDriver::new(store(&etcd, "race").await);
    let s = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap();
    driver.create::<SignerEngine>(KEY, &s).await.unwrap();
    let now = T0 + Duration::days(40);
    let mut tasks = Vec::new();
    for i in 0..6u64 {
        let store = store(&etcd, "race").await;
        tasks.push(tokio::spawn(async move {
            let input = SignerInput::forced(ForcedRotation::new("key ceremony"));
            AsyncDriver::new(store)
                .with_max_attempts(32)
                .step::<SignerEngine, _>(KEY, &input, now, &mut rng(10 + i))
                .await
                .unwrap()
        }));
    }
    let mut rotated = 0;
    for task in tasks {
        let step = task.await.unwrap();
        rotated += step
            .events
            .iter()
            .filter(|e| matches!(e, Event::Rotated { .. }))
            .count();
    }
    assert_eq!(rotated, 1, "one task rotates; the others find it done");
    let (doc, _) = driver.load::<SignerEngine>(KEY).await.unwrap();
    assert_eq!(doc.history.len(), 1, "{:?}", doc.history);
    assert!(doc.history[0].satisfied("key ceremony"));
}
