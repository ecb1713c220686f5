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

/// A controller's step with nothing to do reads the document's head alone:
/// its summary says nothing is due, and the step says what the full step
/// says. Every write keeps the summary current; a write without one (an
/// older build's) makes the next step a full one.
#[tokio::test(flavor = "current_thread")]
async fn a_step_with_nothing_due_reads_the_head_alone() {
    use pki_rotate::{AsyncStore, Read, Step};
    use std::sync::{Arc, Mutex};
    let etcd = Etcd::start();
    let mut store = store(&etcd, "idle").await;
    let reads = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = reads.clone();
    store.set_read_hook(Some(Box::new(move |what| {
        seen.lock().unwrap().push(what.to_string());
        Ok(())
    })));
    let driver = AsyncDriver::new(store);
    let mut s = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap();
    for i in 0..20 {
        s.request_leaf(
            &format!("svc{i}"),
            LeafRequest::server(vec![format!("svc{i}.ns")]),
        )
        .unwrap();
    }
    driver.create_at::<SignerEngine>(KEY, &s, T0).await.unwrap();
    let now = T0 + Duration::hours(1);
    // The leaves are requested but not issued yet: something is due.
    let issued @ Step {
        read: Read::Whole, ..
    } = driver
        .step_unless_idle::<SignerEngine, _>(KEY, &SignerInput::default(), now, &mut rng(2))
        .await
        .unwrap()
    else {
        panic!("the requested leaves are due");
    };
    assert!(issued.changed);

    for later in [now + Duration::minutes(1), now + Duration::days(40)] {
        reads.lock().unwrap().clear();
        let idle @ Step {
            read: Read::Summary { .. },
            ..
        } = driver
            .step_unless_idle::<SignerEngine, _>(KEY, &SignerInput::default(), later, &mut rng(3))
            .await
            .unwrap()
        else {
            panic!("nothing is due at {later}");
        };
        // The summary, then the document's head (its entries and blobs,
        // to confirm the summary): the same four reads whatever the leaves.
        assert_eq!(
            *reads.lock().unwrap(),
            [
                "read head",
                "read head",
                "read named entries 1",
                "read blobs 1"
            ]
        );
        let full = driver
            .step::<SignerEngine, _>(KEY, &SignerInput::default(), later, &mut rng(4))
            .await
            .unwrap();
        assert!(!full.changed);
        assert_eq!(idle.next_wake, full.next_wake);
        assert_eq!(idle.revision, full.revision);
        assert_eq!(idle.revision, issued.revision);
        let report: pki_rotate::signer::IdleReport = idle.summary_report().unwrap().unwrap();
        assert_eq!(report.ca_id, full.document.ca.cert.id());
    }

    // A write without a summary: the next step reads the document.
    let (files, revision) = driver.store().get(KEY).await.unwrap().unwrap();
    AsyncStore::put(driver.store(), KEY, Some(&revision), &files)
        .await
        .unwrap();
    assert!(matches!(
        driver
            .step_unless_idle::<SignerEngine, _>(KEY, &SignerInput::default(), now, &mut rng(5))
            .await
            .unwrap(),
        Step {
            read: Read::Whole,
            ..
        }
    ));
}

/// A leaf request inside the promise is a step by parts: the store reads
/// the head and the named entries, never the whole generation, and the
/// document it leaves is the one a whole step would (read back whole).
#[tokio::test]
async fn a_leaf_change_with_nothing_else_due_reads_the_head_and_that_leaf() {
    use pki_rotate::{LeafChange, Read, Step};
    use std::sync::{Arc, Mutex};
    let etcd = Etcd::start();
    let mut store = store(&etcd, "part").await;
    let reads = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen = reads.clone();
    store.set_read_hook(Some(Box::new(move |what| {
        seen.lock().unwrap().push(what.to_string());
        Ok(())
    })));
    let driver = AsyncDriver::new(store);
    let mut s = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap();
    for i in 0..30 {
        s.request_leaf(
            &format!("svc{i}"),
            LeafRequest::server(vec![format!("svc{i}.ns")]),
        )
        .unwrap();
    }
    let s = pki_rotate::signer::apply(
        &s,
        pki_rotate::signer::plan(&s, &SignerInput::default(), T0).unwrap(),
        &mut rng(2),
    )
    .unwrap()
    .into_document();
    driver.create_at::<SignerEngine>(KEY, &s, T0).await.unwrap();

    let now = T0 + Duration::days(3);
    for input in [
        SignerInput::request("new", LeafRequest::server(vec!["new.ns".into()])),
        SignerInput {
            leaves: vec![LeafChange::Renew {
                name: "svc7".into(),
            }],
            ..SignerInput::default()
        },
        SignerInput {
            leaves: vec![LeafChange::Remove {
                name: "svc8".into(),
            }],
            ..SignerInput::default()
        },
    ] {
        reads.lock().unwrap().clear();
        let step @ Step {
            read: Read::Part, ..
        } = driver
            .step_unless_idle::<SignerEngine, _>(KEY, &input, now, &mut rng(3))
            .await
            .unwrap()
        else {
            panic!("a leaf change inside the promise steps by parts: {input:?}");
        };
        assert!(step.changed);
        assert!(step.document.leaves.len() <= 1);
        let reads = reads.lock().unwrap().clone();
        assert!(
            reads.iter().all(|r| !r.starts_with("read entries")),
            "{reads:?}"
        );
    }
    let (doc, _) = driver.load::<SignerEngine>(KEY).await.unwrap();
    assert_eq!(doc.leaves.len(), 30);
    assert!(doc.leaves.contains_key("new") && !doc.leaves.contains_key("svc8"));
    assert!(doc.leaves.values().all(|l| l.issued.is_some()));
    let after = driver
        .step::<SignerEngine, _>(KEY, &SignerInput::default(), now, &mut rng(4))
        .await
        .unwrap();
    assert!(!after.changed, "{:?}", after.events);
}
