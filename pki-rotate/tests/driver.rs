//! The driver: writes only what changed, wakes up when the new document
//! says, and when writers race, decides again from the fresh document so
//! that a rotation happens once.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_rotate::Document as _;
use pki_rotate::{
    Driver, Engine, Files, ForcedRotation, FsStore, MemoryStore, Revision, RotateError,
    SignerEngine, SignerInput, SignerPolicy, SignerState, Store,
};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use support::fs::{KEY, T0, rng, rotation_time};
use time::{Duration, OffsetDateTime};

/// The signer every test starts from: a CA and its leaf `web`.
fn initial() -> SignerState {
    support::fs::initial(1)
}

fn memory_store(s: &SignerState) -> MemoryStore {
    let store = MemoryStore::new();
    Driver::new(&store).create::<SignerEngine>(KEY, s).unwrap();
    store
}

#[test]
fn a_step_with_nothing_due_writes_nothing() {
    let s = initial();
    let store = memory_store(&s);
    let (_, before) = store.get(KEY).unwrap().unwrap();
    let step = Driver::new(&store)
        .step::<SignerEngine, _>(
            KEY,
            &SignerInput::default(),
            T0 + Duration::days(3),
            &mut rng(3),
        )
        .unwrap();
    assert!(!step.changed);
    assert!(step.events.is_empty());
    assert_eq!(step.revision, before);
    assert_eq!(store.get(KEY).unwrap().unwrap().1, before);
    // The wake-up time is the leaf's refresh time, not the time of the step.
    let leaf = &s.leaves["web"].issued.as_ref().unwrap().cert;
    assert_eq!(step.next_wake, pki_rotate::refresh_at(leaf, 0.2));
}

#[test]
fn next_wake_after_a_rotation_comes_from_the_new_document() {
    let s = initial();
    let store = memory_store(&s);
    let now = rotation_time(&s);
    let step = Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &SignerInput::default(), now, &mut rng(4))
        .unwrap();
    assert!(step.changed);
    assert_eq!(step.document.history.len(), 1);
    // The new leaf (issued now, one year) is refreshed first, at 80% of its life.
    let leaf = &step.document.leaves["web"].issued.as_ref().unwrap().cert;
    assert_eq!(step.next_wake, pki_rotate::refresh_at(leaf, 0.2));
    assert!(
        step.next_wake > now + Duration::days(290),
        "{}",
        step.next_wake
    );
    // Stepping again at that time is the next thing to do, and nothing before.
    let quiet = Driver::new(&store)
        .step::<SignerEngine, _>(
            KEY,
            &SignerInput::default(),
            step.next_wake - Duration::SECOND,
            &mut rng(5),
        )
        .unwrap();
    assert!(!quiet.changed);
    assert_eq!(quiet.next_wake, step.next_wake);
}

/// Makes another replica step the document once, at `now`, between the
/// next step's read and its write; the returned flag says it happened.
fn rotate_concurrently_before_next_write(
    store: &MemoryStore,
    now: OffsetDateTime,
    seed: u64,
) -> Arc<AtomicBool> {
    let fired = Arc::new(AtomicBool::new(false));
    let flag = fired.clone();
    store.set_before_put(Some(Box::new(move |store, key| {
        if !flag.swap(true, Ordering::SeqCst) {
            Driver::new(store)
                .step::<SignerEngine, _>(key, &SignerInput::default(), now, &mut rng(seed))
                .unwrap();
        }
    })));
    fired
}

#[test]
fn a_lost_write_is_decided_again_from_the_fresh_document() {
    let s = initial();
    let store = memory_store(&s);
    let now = rotation_time(&s);
    // Another replica rotates the CA between this step's read and its write.
    let fired = rotate_concurrently_before_next_write(&store, now, 99);
    let step = Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &SignerInput::default(), now, &mut rng(6))
        .unwrap();
    assert!(fired.load(Ordering::SeqCst));
    assert_eq!(step.attempts, 2);
    // The fresh document was already rotated: nothing left to do, no second rotation.
    assert!(!step.changed);
    assert_eq!(step.document.history.len(), 1);
    let (files, _) = store.get(KEY).unwrap().unwrap();
    assert_eq!(SignerState::from_files(&files).unwrap().history.len(), 1);
}

#[test]
fn a_document_that_keeps_changing_ends_in_too_many_conflicts() {
    let s = initial();
    let store = memory_store(&s);
    let writes = Arc::new(AtomicUsize::new(0));
    let counter = writes.clone();
    // Before every write, someone else rewrites the document (the
    // interfering write itself is let through).
    let interfering = AtomicBool::new(false);
    store.set_before_put(Some(Box::new(move |store, key| {
        if interfering.swap(true, Ordering::SeqCst) {
            return;
        }
        let (files, rev) = store.get(key).unwrap().unwrap();
        store.put(key, Some(&rev), &files).unwrap();
        counter.fetch_add(1, Ordering::SeqCst);
        interfering.store(false, Ordering::SeqCst);
    })));
    let err = Driver::new(&store)
        .with_max_attempts(3)
        .step::<SignerEngine, _>(KEY, &SignerInput::default(), rotation_time(&s), &mut rng(7))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::Store(pki_rotate::StoreError::TooManyConflicts { attempts: 3, .. })
        ),
        "{err}"
    );
    // Three attempts, each lost to an interfering write.
    assert_eq!(writes.load(Ordering::SeqCst), 3);
    let (files, _) = store.get(KEY).unwrap().unwrap();
    assert!(SignerState::from_files(&files).unwrap().history.is_empty());
}

/// A rewrite of a document's files (resealing) runs the same
/// compare-and-swap loop as a step: a lost write decides again from the
/// fresh files, a document that keeps changing ends in too many conflicts
/// after the driver's attempts, and nothing to change writes nothing.
#[test]
fn a_rewrite_decides_again_after_a_lost_write_and_is_bounded_like_a_step() {
    let s = initial();
    let store = memory_store(&s);
    let marked = |stored: &Files| {
        let mut files = stored.clone();
        files.insert("rewritten", pki_rotate::File::public("yes"))?;
        Ok(Some(files))
    };
    // Someone else writes before every write of the rewrite.
    let interfering = Arc::new(AtomicBool::new(false));
    let on = interfering.clone();
    store.set_before_put(Some(Box::new(move |store, key| {
        if on.swap(true, Ordering::SeqCst) {
            return;
        }
        let (files, rev) = store.get(key).unwrap().unwrap();
        store.put(key, Some(&rev), &files).unwrap();
        on.store(false, Ordering::SeqCst);
    })));
    let decided = AtomicUsize::new(0);
    let err = Driver::new(&store)
        .with_max_attempts(3)
        .rewrite(KEY, |stored| {
            decided.fetch_add(1, Ordering::SeqCst);
            marked(stored)
        })
        .unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::Store(pki_rotate::StoreError::TooManyConflicts { attempts: 3, .. })
        ),
        "{err}"
    );
    assert_eq!(decided.load(Ordering::SeqCst), 3);
    // Without interference it writes once, and then has nothing to do.
    store.set_before_put(None);
    assert!(Driver::new(&store).rewrite(KEY, marked).unwrap());
    let (files, _) = store.get(KEY).unwrap().unwrap();
    assert!(files.get("rewritten").is_some());
    let unchanged = |_: &Files| Ok(None);
    assert!(!Driver::new(&store).rewrite(KEY, unchanged).unwrap());
    assert!(!Driver::new(&store).rewrite("absent", marked).unwrap());
}

/// How the writes of a [`FaultyWrites`] store fail.
#[derive(Clone, Copy)]
enum Fault {
    /// A broken backend, not a conflict: nothing is written.
    Broken,
    /// The write lands but its answer is lost: an unknown outcome.
    LostReply,
}

/// A store whose writes fail with its [`Fault`], counting them.
struct FaultyWrites(MemoryStore, AtomicUsize, Fault);

impl Store for FaultyWrites {
    fn location(&self) -> String {
        match self.2 {
            Fault::Broken => "broken".into(),
            Fault::LostReply => "lossy".into(),
        }
    }
    fn get(&self, key: &str) -> pki_rotate::Result<Option<(Files, Revision)>> {
        self.0.get(key)
    }
    fn put(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
    ) -> pki_rotate::Result<Revision> {
        self.1.fetch_add(1, Ordering::SeqCst);
        Err(RotateError::Store(match self.2 {
            Fault::Broken => pki_rotate::StoreError::Backend {
                store: self.location(),
                source: "connection refused".into(),
            },
            Fault::LostReply => {
                self.0.put(key, expected, files)?;
                pki_rotate::StoreError::UnknownOutcome {
                    store: self.location(),
                    key: key.into(),
                    detail: "no answer".into(),
                }
            }
        }))
    }
}

#[test]
fn a_broken_backend_is_reported_at_once_not_retried() {
    let s = initial();
    let store = FaultyWrites(memory_store(&s), AtomicUsize::new(0), Fault::Broken);
    let err = Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &SignerInput::default(), rotation_time(&s), &mut rng(8))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::Store(pki_rotate::StoreError::Backend { .. })
        ),
        "{err}"
    );
    assert!(!err.is_conflict());
    assert_eq!(store.1.load(Ordering::SeqCst), 1);
}

#[test]
fn a_write_that_may_have_landed_is_reported_not_retried_and_a_rerun_is_nothing_to_do() {
    let s = initial();
    let store = FaultyWrites(memory_store(&s), AtomicUsize::new(0), Fault::LostReply);
    let input = SignerInput::forced(ForcedRotation::new("key ceremony"));
    let err = Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &input, T0 + Duration::days(1), &mut rng(8))
        .unwrap_err();
    assert!(err.is_unknown_outcome(), "{err}");
    assert!(!err.is_conflict());
    let text = err.to_string();
    assert!(
        text.contains("may have landed") && text.contains("rerunning the command is safe"),
        "{text}"
    );
    assert_eq!(store.1.load(Ordering::SeqCst), 1, "retried");
    // It landed; the same request again is nothing to do, on any store.
    let step = Driver::new(&store.0)
        .step::<SignerEngine, _>(KEY, &input, T0 + Duration::days(1), &mut rng(9))
        .unwrap();
    assert!(!step.changed);
    assert_eq!(step.document.history.len(), 1);
}

#[test]
fn a_missing_document_is_not_initialized() {
    let store = MemoryStore::new();
    let err = Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &SignerInput::default(), T0, &mut rng(9))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::Store(pki_rotate::StoreError::NotInitialized(_))
        ),
        "{err}"
    );
}

/// Replicas step the same document at the same simulated time, each with
/// its own RNG. Every replica's first read completes before any of them
/// writes, so they all decide from the same document and race to commit:
/// a replica that read only after another's commit would not be racing
/// but acting on a newer document.
fn race<S: Store + Sync>(
    store: &S,
    replicas: usize,
    now: OffsetDateTime,
    input: impl Fn(usize) -> SignerInput + Sync,
) -> Vec<pki_rotate::Step<SignerState, pki_rotate::Event>> {
    let together = ReadTogether {
        inner: store,
        first_reads: AtomicUsize::new(replicas),
        barrier: Barrier::new(replicas),
    };
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..replicas)
            .map(|i| {
                let together = &together;
                let input = &input;
                scope.spawn(move || {
                    Driver::new(together)
                        .step::<SignerEngine, _>(KEY, &input(i), now, &mut rng(100 + i as u64))
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    })
}

/// A store whose first `replicas` reads wait for each other.
struct ReadTogether<'a, S> {
    inner: &'a S,
    first_reads: AtomicUsize,
    barrier: Barrier,
}

impl<S: Store> Store for ReadTogether<'_, S> {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn get(&self, key: &str) -> pki_rotate::Result<Option<(Files, Revision)>> {
        let read = self.inner.get(key);
        let first = self
            .first_reads
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if first {
            self.barrier.wait();
        }
        read
    }
    fn put(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
    ) -> pki_rotate::Result<Revision> {
        self.inner.put(key, expected, files)
    }
}

fn assert_one_rotation<S: Store>(
    store: &S,
    steps: &[pki_rotate::Step<SignerState, pki_rotate::Event>],
    before: &SignerState,
) {
    let (doc, _) = Driver::new(store).load::<SignerEngine>(KEY).unwrap();
    assert_eq!(doc.history.len(), 1, "{:?}", doc.history);
    let rotated = steps
        .iter()
        .filter(|s| {
            s.events
                .iter()
                .any(|e| matches!(e, pki_rotate::Event::Rotated { .. }))
        })
        .count();
    assert_eq!(rotated, 1);
    // Every replica ends on the CA in the store, and the key that signs is
    // the one that matches it: nothing lost.
    for step in steps {
        assert_eq!(step.document.ca.cert, doc.ca.cert);
    }
    assert!(doc.ca.key.matches(doc.ca.cert.public_key()));
    assert_ne!(doc.ca.cert, before.ca.cert);
    assert_eq!(doc.history[0].from, before.ca.cert.id());
}

#[test]
fn replicas_racing_on_a_due_rotation_rotate_once_in_memory() {
    let s = initial();
    let store = memory_store(&s);
    let steps = race(&store, 6, rotation_time(&s), |_| SignerInput::default());
    assert_one_rotation(&store, &steps, &s);
}

#[test]
fn replicas_racing_on_a_due_rotation_rotate_once_in_a_directory() {
    let dir = tempfile::tempdir().unwrap();
    let s = initial();
    let store = FsStore::open_or_create(dir.path()).unwrap();
    Driver::new(&store).create::<SignerEngine>(KEY, &s).unwrap();
    let steps = race(&store, 4, rotation_time(&s), |_| SignerInput::default());
    assert_one_rotation(&store, &steps, &s);
}

#[test]
fn a_forced_rotation_racing_an_automatic_one_rotates_once() {
    let s = initial();
    let store = memory_store(&s);
    let steps = race(&store, 4, rotation_time(&s), |i| {
        if i % 2 == 0 {
            SignerInput::forced(ForcedRotation::new("key ceremony"))
        } else {
            SignerInput::default()
        }
    });
    assert_one_rotation(&store, &steps, &s);
    // Whichever won, the one rotation is recorded as forced, and the same
    // forced reason later changes nothing.
    let (doc, _) = Driver::new(&store).load::<SignerEngine>(KEY).unwrap();
    assert_eq!(
        doc.history[0].reason,
        pki_rotate::RotationReason::Forced {
            reason: "key ceremony".into()
        }
    );
    assert_eq!(doc.forced_rotation_reason.as_deref(), Some("key ceremony"));
    let later = SignerEngine::plan(
        &doc,
        &SignerInput::forced(ForcedRotation::new("key ceremony")),
        rotation_time(&s) + Duration::hours(1),
    )
    .unwrap();
    assert!(later.is_empty());
}

#[test]
fn an_emergency_rotation_is_not_satisfied_by_a_concurrent_normal_one() {
    let s = initial();
    let store = memory_store(&s);
    let now = rotation_time(&s);
    // Another replica rotates the CA between this step's read and its write.
    let fired = rotate_concurrently_before_next_write(&store, now, 98);
    let compromised = ForcedRotation {
        no_bridges: true,
        ..ForcedRotation::new("key leaked")
    };
    let step = Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &SignerInput::forced(compromised), now, &mut rng(10))
        .unwrap();
    assert!(fired.load(Ordering::SeqCst));
    assert_eq!(step.attempts, 2);
    assert_eq!(step.document.history.len(), 2);
    assert_eq!(step.document.history[1].previous_trusted_until, None);
    assert!(step.document.bridge.is_none());
}

#[test]
fn a_forced_rotation_that_loses_to_an_automatic_one_is_recorded_on_it() {
    let s = initial();
    let store = memory_store(&s);
    let now = rotation_time(&s);
    // Another replica rotates the CA between this step's read and its write.
    let fired = rotate_concurrently_before_next_write(&store, now, 97);
    let step = Driver::new(&store)
        .step::<SignerEngine, _>(
            KEY,
            &SignerInput::forced(ForcedRotation::new("key ceremony")),
            now,
            &mut rng(11),
        )
        .unwrap();
    assert!(fired.load(Ordering::SeqCst));
    assert_eq!(step.attempts, 2);
    assert!(step.changed);
    assert_eq!(step.document.history.len(), 1);
    assert!(matches!(
        &step.events[..],
        [pki_rotate::Event::ForcedRotationSatisfied { reason, .. }] if reason == "key ceremony"
    ));
    assert_eq!(
        step.document.history[0].reason,
        pki_rotate::RotationReason::Forced {
            reason: "key ceremony".into()
        }
    );
}

/// Secret data by key with its resourceVersion.
type SecretMap = std::collections::BTreeMap<String, (pki_rotate::SecretData, u64)>;

/// Secret-shaped storage with a resourceVersion, as a Kubernetes client has.
#[derive(Default)]
struct Secrets {
    inner: std::sync::Mutex<(u64, SecretMap)>,
}

impl pki_rotate::SecretBackend for Secrets {
    fn location(&self) -> String {
        "secrets".into()
    }
    fn get(&self, key: &str) -> pki_rotate::Result<Option<(pki_rotate::SecretData, Revision)>> {
        let inner = self.inner.lock().unwrap();
        Ok(inner
            .1
            .get(key)
            .map(|(d, v)| (d.clone(), Revision::new(v.to_string()))))
    }
    fn put(
        &self,
        key: &str,
        expected: Option<&Revision>,
        data: &pki_rotate::SecretData,
    ) -> pki_rotate::Result<Revision> {
        let mut inner = self.inner.lock().unwrap();
        let found = inner.1.get(key).map(|(_, v)| Revision::new(v.to_string()));
        if found.as_ref() != expected {
            return Err(RotateError::Store(pki_rotate::StoreError::Conflict {
                key: key.into(),
                expected: expected.cloned(),
                found,
            }));
        }
        inner.0 += 1;
        let version = inner.0;
        inner.1.insert(key.into(), (data.clone(), version));
        Ok(Revision::new(version.to_string()))
    }
}

#[test]
fn a_secret_backend_keeps_the_signer_under_its_documented_keys() {
    let s = initial();
    let store = pki_rotate::SecretStore::<SignerState, _>::new(Secrets::default());
    Driver::new(&store).create::<SignerEngine>(KEY, &s).unwrap();
    let steps = race(&store, 3, rotation_time(&s), |_| SignerInput::default());
    assert_one_rotation(&store, &steps, &s);
    let inner = store.backend().inner.lock().unwrap();
    let (data, _) = &inner.1[KEY];
    let mut keys: Vec<&str> = data.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(
        keys,
        [
            "ca-bundle.crt",
            "certs.web.tls.crt",
            "certs.web.tls.key",
            "intermediate-ca.crt",
            "pki-state.json",
            "tls.crt",
            "tls.key"
        ]
    );
}

#[test]
fn at_the_due_second_the_wake_up_is_the_next_second_and_it_rotates_then() {
    let s = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap();
    let store = memory_store(&s);
    let due = s.rotation_due_at(&s.policy);
    // Exactly M is left: not less than M, so nothing yet, but not "now" either.
    let step = Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &SignerInput::default(), due, &mut rng(12))
        .unwrap();
    assert!(!step.changed);
    assert_eq!(step.next_wake, due + Duration::SECOND);
    let step = Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &SignerInput::default(), step.next_wake, &mut rng(13))
        .unwrap();
    assert_eq!(step.document.history.len(), 1);
}

#[test]
fn a_forced_rotation_read_after_a_due_one_at_the_same_instant_is_that_rotation() {
    let s = initial();
    let now = rotation_time(&s);
    // Another replica rotated the due CA at this instant and wrote first;
    // this one reads only afterwards, so there is no conflict to notice.
    let rotated = SignerEngine::step(&s, &SignerInput::default(), now, &mut rng(3))
        .unwrap()
        .into_document();
    assert_eq!(rotated.history.len(), 1);
    let forced = SignerInput::forced(ForcedRotation::new("key ceremony"));
    let outcome = SignerEngine::step(&rotated, &forced, now, &mut rng(4)).unwrap();
    let doc = outcome.into_document();
    assert_eq!(doc.history.len(), 1, "one rotation, not two");
    assert_eq!(doc.ca.cert, rotated.ca.cert);
    assert_eq!(
        doc.history[0].reason,
        pki_rotate::RotationReason::Forced {
            reason: "key ceremony".into()
        }
    );
    // A second later it is a new request: a second rotation, which the
    // trust-break guard refuses so soon after the first.
    let later = SignerEngine::step(&rotated, &forced, now + Duration::SECOND, &mut rng(5));
    assert!(
        matches!(
            later,
            Err(RotateError::Signer(
                pki_rotate::SignerError::TrustBreak { .. }
            ))
        ),
        "{later:?}"
    );
}
