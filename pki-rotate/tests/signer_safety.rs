//! The signer's requests are safe to repeat and to race: `rotate --to` the
//! CA in use is nothing to do, a second rotation within the reload
//! interval is refused by the guard every rotation runs, and every forced
//! reason that reported success stays in the history.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_core::{CaImport, CertificateAuthority};
use pki_rotate::external::ServiceAccountKeys;
use pki_rotate::{
    Driver, Engine, Event, ExternalEngine, ExternalInput, ForcedRotation, LeafRequest, MemoryStore,
    Replacement, Revision, RotateError, SignerEngine, SignerInput, SignerPolicy, SignerState,
    Store,
};
use std::sync::Barrier;
use std::sync::atomic::{AtomicUsize, Ordering};
use support::seed::{T0, rng, root};
use time::Duration;

const KEY: &str = "signer";

fn self_signed(cn: &str, seed: u64) -> CertificateAuthority {
    root(cn, 800, seed)
}

fn to(ca: &CertificateAuthority, force: Option<&str>) -> ExternalInput {
    ExternalInput::Replace(Box::new(Replacement {
        import: CaImport {
            cert: ca.cert.clone(),
            key: Some(ca.key.clone()),
            chain: Vec::new(),
        },
        force: force.map(str::to_string),
        service_accounts: ServiceAccountKeys::default(),
    }))
}

/// A signer with one leaf, in memory.
fn signer() -> (MemoryStore, SignerState) {
    let store = MemoryStore::new();
    let driver = Driver::new(&store);
    let state = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap();
    driver.create::<SignerEngine>(KEY, &state).unwrap();
    let web = SignerInput::request("web", LeafRequest::server(vec!["web.example".into()]));
    let state = driver
        .step::<SignerEngine, _>(KEY, &web, T0, &mut rng(2))
        .unwrap()
        .document;
    (store, state)
}

#[test]
fn rotate_to_the_ca_in_use_is_nothing_to_do_and_writes_nothing() {
    let (store, _) = signer();
    let driver = Driver::new(&store);
    let y = self_signed("Y", 10);
    let now = T0 + Duration::days(30);
    let first = driver
        .step::<ExternalEngine, _>(KEY, &to(&y, None), now, &mut rng(11))
        .unwrap();
    assert!(first.changed);
    let leaf_before = first.document.signer().leaves["web"]
        .issued
        .clone()
        .unwrap()
        .cert;
    // The operator's rerun, after a kill or a lost reply, a minute later.
    let rerun = driver
        .step::<ExternalEngine, _>(KEY, &to(&y, None), now + Duration::minutes(1), &mut rng(12))
        .unwrap();
    assert!(!rerun.changed);
    assert_eq!(rerun.revision, first.revision);
    assert!(
        rerun
            .events
            .iter()
            .any(|e| matches!(e, Event::AlreadyDone { .. })),
        "{:?}",
        rerun.events
    );
    assert_eq!(rerun.document.signer().history.len(), 1);
    assert_eq!(
        rerun.document.signer().leaves["web"]
            .issued
            .as_ref()
            .unwrap()
            .cert,
        leaf_before
    );
}

#[test]
fn a_second_rotate_to_within_the_reload_interval_is_refused_unless_forced_and_recorded() {
    let (store, _) = signer();
    let driver = Driver::new(&store);
    let now = T0 + Duration::days(30);
    driver
        .step::<ExternalEngine, _>(KEY, &to(&self_signed("Y", 20), None), now, &mut rng(21))
        .unwrap();
    let (_, revision) = store.get(KEY).unwrap().unwrap();
    let z = self_signed("Z", 22);
    let err = driver
        .step::<ExternalEngine, _>(KEY, &to(&z, None), now + Duration::hours(1), &mut rng(23))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::Signer(pki_rotate::SignerError::TrustBreak { .. })
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("two-rotations-ago")
            || err.to_string().contains("before the rotation"),
        "{err}"
    );
    let (_, unchanged) = store.get(KEY).unwrap().unwrap();
    assert_eq!(unchanged, revision, "a refused --to writes nothing");
    // Forced for a reason: it goes ahead, each break recorded with it.
    let forced = driver
        .step::<ExternalEngine, _>(
            KEY,
            &to(&z, Some("Y was issued wrongly")),
            now + Duration::hours(1),
            &mut rng(24),
        )
        .unwrap();
    let record = forced.document.signer().history.last().unwrap();
    assert!(
        record
            .overridden
            .iter()
            .any(|o| o.name == "bundle-of-two-rotations-ago"),
        "{:?}",
        record.overridden
    );
}

/// A store whose first `n` reads wait for each other, so every replica
/// decides from the same document.
struct ReadTogether<'a> {
    inner: &'a MemoryStore,
    first_reads: AtomicUsize,
    barrier: Barrier,
}

impl Store for ReadTogether<'_> {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn get(&self, key: &str) -> pki_rotate::Result<Option<(pki_rotate::Files, Revision)>> {
        let read = self.inner.get(key);
        if self
            .first_reads
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            self.barrier.wait();
        }
        read
    }
    fn put(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &pki_rotate::Files,
    ) -> pki_rotate::Result<Revision> {
        self.inner.put(key, expected, files)
    }
}

#[test]
fn every_forced_reason_that_lost_a_race_is_in_the_history() {
    let (store, before) = signer();
    let replicas = 8;
    let together = ReadTogether {
        inner: &store,
        first_reads: AtomicUsize::new(replicas),
        barrier: Barrier::new(replicas),
    };
    let now = T0 + Duration::days(40);
    let steps: Vec<_> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..replicas)
            .map(|i| {
                let together = &together;
                scope.spawn(move || {
                    let input = SignerInput::forced(ForcedRotation::new(format!("reason {i}")));
                    Driver::new(together)
                        .with_max_attempts(32)
                        .step::<SignerEngine, _>(KEY, &input, now, &mut rng(100 + i as u64))
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let (doc, _) = Driver::new(&store).load::<SignerEngine>(KEY).unwrap();
    assert_eq!(doc.history.len(), 1, "one rotation: {:?}", doc.history);
    assert_ne!(doc.ca.cert, before.ca.cert);
    let record = &doc.history[0];
    for i in 0..replicas {
        let reason = format!("reason {i}");
        assert!(
            record.satisfied(&reason),
            "{reason} reported success and is in no history entry: {record:?}"
        );
    }
    assert_eq!(steps.len(), replicas);
    // Each of them again: nothing to do.
    for i in 0..replicas {
        let input = SignerInput::forced(ForcedRotation::new(format!("reason {i}")));
        let plan = SignerEngine::plan(&doc, &input, now + Duration::hours(1)).unwrap();
        assert!(plan.is_empty(), "reason {i} again");
    }
}

#[test]
fn forced_reasons_with_control_characters_are_refused() {
    let (_, state) = signer();
    for bad in ["two\nlines", "\u{1b}]0;title\u{7}"] {
        let input = SignerInput::forced(ForcedRotation::new(bad));
        let err = SignerEngine::plan(&state, &input, T0 + Duration::days(1)).unwrap_err();
        assert!(err.to_string().contains("control character"), "{err}");
    }
}
