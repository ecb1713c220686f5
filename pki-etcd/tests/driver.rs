//! Controller replicas sharing one signer in etcd: threads and separate
//! processes step it at the same simulated time, at the rotation point, and
//! exactly one rotation happens.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::etcd;

use etcd::{Etcd, quick_options};
use pki_etcd::EtcdStore;
use pki_rotate::{
    Driver, Engine, Event, ForcedRotation, LeafRequest, RotationReason, SignerEngine, SignerInput,
    SignerPolicy, SignerState, Step,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration as StdDuration, Instant};
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

fn create(etcd: &Etcd, prefix: &str, s: &SignerState) -> EtcdStore {
    let store = etcd.store(prefix);
    Driver::new(&store).create::<SignerEngine>(KEY, s).unwrap();
    store
}

fn rotated(step: &Step<SignerState, Event>) -> bool {
    step.events
        .iter()
        .any(|e| matches!(e, Event::Rotated { .. }))
}

/// One rotation in the store, from the initial CA, with the key that
/// matches the new CA; every replica ended on that CA.
fn assert_one_rotation(
    store: &EtcdStore,
    replica_cas: &[String],
    rotations: usize,
    before: &SignerState,
) -> SignerState {
    let (doc, _) = Driver::new(store).load::<SignerEngine>(KEY).unwrap();
    assert_eq!(doc.history.len(), 1, "{:?}", doc.history);
    assert_eq!(rotations, 1, "replicas that rotated");
    for ca in replica_cas {
        assert_eq!(*ca, doc.ca.cert.id());
    }
    assert!(doc.ca.key.matches(doc.ca.cert.public_key()));
    assert_ne!(doc.ca.cert, before.ca.cert);
    assert_eq!(doc.history[0].from, before.ca.cert.id());
    doc
}

/// Replicas in threads, released together; replica `i` uses store
/// `stores[i % stores.len()]`, so some share a store and some do not.
fn race(
    stores: &[EtcdStore],
    replicas: usize,
    now: OffsetDateTime,
    input: impl Fn(usize) -> SignerInput + Sync,
) -> Vec<Step<SignerState, Event>> {
    let barrier = Barrier::new(replicas);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..replicas)
            .map(|i| {
                let barrier = &barrier;
                let input = &input;
                let store = &stores[i % stores.len()];
                scope.spawn(move || {
                    barrier.wait();
                    Driver::new(store)
                        .step::<SignerEngine, _>(KEY, &input(i), now, &mut rng(100 + i as u64))
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

#[test]
fn replicas_in_threads_racing_on_a_due_rotation_rotate_once() {
    let etcd = Etcd::start();
    let s = initial();
    let stores = [create(&etcd, "threads", &s), etcd.store("threads")];
    let steps = race(&stores, 6, rotation_time(&s), |_| SignerInput::default());
    let cas: Vec<String> = steps.iter().map(|s| s.document.ca.cert.id()).collect();
    let rotations = steps.iter().filter(|s| rotated(s)).count();
    assert_one_rotation(&stores[0], &cas, rotations, &s);
}

#[test]
fn a_forced_rotation_racing_an_automatic_one_rotates_once() {
    let etcd = Etcd::start();
    let s = initial();
    let stores = [create(&etcd, "forced", &s), etcd.store("forced")];
    let steps = race(&stores, 4, rotation_time(&s), |i| {
        if i % 2 == 0 {
            SignerInput::forced(ForcedRotation::new("key ceremony"))
        } else {
            SignerInput::default()
        }
    });
    let cas: Vec<String> = steps.iter().map(|s| s.document.ca.cert.id()).collect();
    let rotations = steps.iter().filter(|s| rotated(s)).count();
    let doc = assert_one_rotation(&stores[0], &cas, rotations, &s);
    // Whichever won, the one rotation is recorded as forced.
    assert_eq!(
        doc.history[0].reason,
        RotationReason::Forced {
            reason: "key ceremony".into()
        }
    );
}

#[test]
fn a_write_that_loses_to_another_replica_is_decided_again_without_a_second_rotation() {
    let etcd = Etcd::start();
    let s = initial();
    let mut store = create(&etcd, "lost", &s);
    let now = rotation_time(&s);
    // Another replica (its own connection) rotates the CA between this
    // replica's read and its commit.
    let other = etcd.store("lost");
    let fired = AtomicBool::new(false);
    store.set_write_hook(Some(Box::new(move |step| {
        if step == "commit" && !fired.swap(true, Ordering::SeqCst) {
            let step = Driver::new(&other)
                .step::<SignerEngine, _>(KEY, &SignerInput::default(), now, &mut rng(99))
                .unwrap();
            assert!(step.changed);
        }
        Ok(())
    })));
    let step = Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &SignerInput::default(), now, &mut rng(6))
        .unwrap();
    assert_eq!(step.attempts, 2);
    assert!(!step.changed, "the fresh document was already rotated");
    assert_eq!(step.document.history.len(), 1);
    let doc = assert_one_rotation(&store, &[step.document.ca.cert.id()], 1, &s);
    assert_eq!(doc.ca.cert, step.document.ca.cert);
    // Nothing is left of the losing attempt: every blob is referenced.
    let (_, unneeded) = etcd::head_files(&etcd.dump("lost"), "lost", "signer");
    assert!(unneeded.is_empty(), "{unneeded:?}");
}

const REPLICA_ENV: &str = "PKI_ETCD_TEST_REPLICA";

/// Run by `replicas_in_processes_racing_on_a_due_rotation_rotate_once` as
/// a child process (this test binary again, with `--ignored --exact`): one
/// controller replica. Does nothing when run by hand.
#[test]
#[ignore = "a child process of replicas_in_processes_racing_on_a_due_rotation_rotate_once"]
fn replica_process() {
    let Ok(spec) = std::env::var(REPLICA_ENV) else {
        return;
    };
    // endpoint, prefix, seed, unix time of the step, rendezvous directory
    let parts: Vec<&str> = spec.split('|').collect();
    let [endpoint, prefix, seed, at, dir] = parts[..] else {
        panic!("bad {REPLICA_ENV}: {spec}");
    };
    let store = EtcdStore::connect(&[endpoint], prefix, quick_options()).unwrap();
    let now = OffsetDateTime::from_unix_timestamp(at.parse().unwrap()).unwrap();
    let dir = Path::new(dir);
    std::fs::write(dir.join(format!("ready-{seed}")), b"").unwrap();
    let deadline = Instant::now() + StdDuration::from_secs(60);
    while !dir.join("go").exists() {
        assert!(Instant::now() < deadline, "never told to go");
        std::thread::sleep(StdDuration::from_millis(2));
    }
    let step = Driver::new(&store)
        .step::<SignerEngine, _>(
            KEY,
            &SignerInput::default(),
            now,
            &mut rng(seed.parse().unwrap()),
        )
        .unwrap();
    println!(
        "\nREPLICA-RESULT rotated={} attempts={} ca={}",
        rotated(&step),
        step.attempts,
        step.document.ca.cert.id()
    );
}

#[test]
fn replicas_in_processes_racing_on_a_due_rotation_rotate_once() {
    const REPLICAS: usize = 3;
    let etcd = Etcd::start();
    let s = initial();
    let store = create(&etcd, "processes", &s);
    let rendezvous = tempfile::tempdir().unwrap();
    let now = rotation_time(&s);
    let children: Vec<_> = (0..REPLICAS)
        .map(|i| {
            let spec = format!(
                "{}|processes|{}|{}|{}",
                etcd.endpoint(),
                200 + i,
                now.unix_timestamp(),
                rendezvous.path().display()
            );
            Command::new(std::env::current_exe().unwrap())
                .args(["--ignored", "--exact", "replica_process", "--nocapture"])
                .args(["--test-threads", "1"])
                .env(REPLICA_ENV, spec)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    // Release them together once every one has connected.
    let deadline = Instant::now() + StdDuration::from_secs(60);
    while std::fs::read_dir(rendezvous.path()).unwrap().count() < REPLICAS {
        assert!(Instant::now() < deadline, "replicas did not start");
        std::thread::sleep(StdDuration::from_millis(5));
    }
    std::fs::write(rendezvous.path().join("go"), b"").unwrap();

    let mut cas = Vec::new();
    let mut rotations = 0;
    for child in children {
        let out = child.wait_with_output().unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "replica failed: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let line = stdout
            .lines()
            .find_map(|l| l.split_once("REPLICA-RESULT ").map(|(_, r)| r))
            .unwrap_or_else(|| panic!("no result from a replica: {stdout}"));
        for field in line.split(' ') {
            match field.split_once('=') {
                Some(("rotated", "true")) => rotations += 1,
                Some(("ca", id)) => cas.push(id.to_string()),
                _ => {}
            }
        }
    }
    assert_eq!(cas.len(), REPLICAS);
    assert_one_rotation(&store, &cas, rotations, &s);
}
