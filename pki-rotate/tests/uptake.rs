//! Uptake in the signer's document: every bundle change is recorded as
//! published (bounded), acks name published bundles only, documents from
//! before the record count their bundle as published, and acks racing
//! through the driver all land, however many race at once (within a bound).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_rotate::uptake::{MAX_PUBLISHED, bundle_fingerprint};
use pki_rotate::{
    AckInput, Document, Driver, Engine, Files, ForcedRotation, MemoryStore, Revision, RotateError,
    SignerEngine, SignerError, SignerInput, SignerPolicy, SignerState, Store, UptakeDocument,
    UptakeEngine,
};
use std::sync::Barrier;
use support::seed::{T0, rng};
use time::Duration;

fn signer() -> SignerState {
    SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap()
}

/// A forced rotation at `now` that may break trust (rotations much closer
/// together than any reload interval).
fn rotate(s: &SignerState, reason: &str, now: time::OffsetDateTime, seed: u64) -> SignerState {
    let input = SignerInput {
        forced: Some(ForcedRotation::new(reason)),
        allow_trust_break: Some("lab".into()),
        ..SignerInput::default()
    };
    SignerEngine::step(s, &input, now, &mut rng(seed))
        .unwrap()
        .into_document()
}

/// The signer's document as the uptake engine's.
fn view(s: &SignerState) -> UptakeDocument {
    UptakeDocument::new(s.clone())
}

fn ack(s: &SignerState, who: &str, fp: &str) -> pki_rotate::Result<SignerState> {
    UptakeEngine::step(&view(s), &AckInput::new(who, fp), T0, &mut rng(0))
        .map(|o| o.into_document().into_signer())
}

#[test]
fn every_bundle_change_is_published_and_only_the_last_ones_are_remembered() {
    let mut s = signer();
    let mut prints = vec![s.bundle_fingerprint()];
    assert_eq!(s.published.len(), 1);
    assert_eq!(s.published[0].at, T0);
    for i in 0..=MAX_PUBLISHED {
        let at = T0 + Duration::days(i as i64 + 1);
        s = rotate(&s, &format!("drill {i}"), at, 10 + i as u64);
        prints.push(s.bundle_fingerprint());
        assert_eq!(s.published_at(prints.last().unwrap()), Some(at));
    }
    assert_eq!(s.published.len(), MAX_PUBLISHED);
    // The two oldest bundles are forgotten: acks of them are refused.
    for old in &prints[..2] {
        let e = ack(&s, "web", old).unwrap_err();
        assert!(
            matches!(e, RotateError::Signer(SignerError::UnknownBundle { .. })),
            "{e}"
        );
    }
    // Every remembered one is accepted; only the latest is current.
    let acked = ack(&s, "web", &prints[2]).unwrap();
    assert_eq!(acked.consumers["web"].fingerprint, prints[2]);
    let status = pki_rotate::status::SignerStatus::of(&acked, T0 + Duration::days(30)).unwrap();
    assert!(!status.consumers[0].current);
}

#[test]
fn a_plain_step_with_nothing_due_publishes_nothing() {
    let s = signer();
    let out = SignerEngine::step(&s, &SignerInput::default(), T0, &mut rng(2)).unwrap();
    assert!(!out.changed());
}

#[test]
fn an_ack_changes_nothing_but_the_consumer_record_even_when_a_rotation_is_due() {
    let s = signer();
    let due = s.rotation_due_at(&s.policy) + Duration::days(1);
    let fp = s.bundle_fingerprint();
    let read = view(&s);
    let out = UptakeEngine::step(&read, &AckInput::new("web", &fp), due, &mut rng(3)).unwrap();
    let next = out.into_document().into_signer();
    assert_eq!(next.ca.cert, s.ca.cert, "an ack rotated the CA");
    assert_eq!(next.consumers["web"].loaded_at, due);
    // The same ack again: nothing to write.
    let next = view(&next);
    let again = UptakeEngine::step(&next, &AckInput::new("web", &fp), due, &mut rng(3)).unwrap();
    assert!(!again.changed());
}

#[test]
fn a_document_without_the_record_counts_its_bundle_as_published_at_its_last_rotation() {
    let rotated_at = T0 + Duration::days(400);
    let s = rotate(&signer(), "drill", rotated_at, 4);
    let mut json: serde_json::Value = serde_json::from_slice(&s.to_json().unwrap()).unwrap();
    let object = json.as_object_mut().unwrap();
    assert!(object.remove("published").is_some());
    let old = SignerState::from_json(&serde_json::to_vec(&json).unwrap()).unwrap();
    assert_eq!(old.published.len(), 1);
    assert_eq!(old.published_at(&s.bundle_fingerprint()), Some(rotated_at));
    // Never rotated: published at the CA's NotBefore.
    let fresh = signer();
    let mut json: serde_json::Value = serde_json::from_slice(&fresh.to_json().unwrap()).unwrap();
    json.as_object_mut().unwrap().remove("published");
    let old = SignerState::from_json(&serde_json::to_vec(&json).unwrap()).unwrap();
    assert_eq!(
        old.published_at(&bundle_fingerprint(&fresh.bundle)),
        Some(fresh.ca.cert.not_before())
    );
}

/// The uptake and external-CA engines have document types of their own,
/// views of the signer's: one stored object, one commit point, so an ack
/// written through its view is what the signer reads, and each view
/// writes back exactly the signer's files.
#[test]
fn the_uptake_and_external_ca_documents_are_the_signers_stored_object() {
    let store = MemoryStore::new();
    let driver = Driver::new(&store);
    let s = signer();
    driver.create::<SignerEngine>("signer", &s).unwrap();
    let fp = s.bundle_fingerprint();
    let acked = driver
        .step::<UptakeEngine, _>("signer", &AckInput::new("web", &fp), T0, &mut rng(5))
        .unwrap();
    assert!(acked.changed);
    let (signer, revision) = driver.load::<SignerEngine>("signer").unwrap();
    assert_eq!(revision, acked.revision);
    assert_eq!(signer.consumers["web"].fingerprint, fp);
    let (external, _) = driver.load::<pki_rotate::ExternalEngine>("signer").unwrap();
    let (stored, _) = store.get("signer").unwrap().unwrap();
    for files in [
        acked.document.to_files().unwrap(),
        external.to_files().unwrap(),
        signer.to_files().unwrap(),
    ] {
        assert!(
            files == stored,
            "a view wrote other files than the signer's"
        );
    }
}

#[test]
fn acks_racing_through_the_driver_are_all_recorded() {
    let store = MemoryStore::new();
    let driver = Driver::new(&store);
    let s = signer();
    let fp = s.bundle_fingerprint();
    driver.create::<SignerEngine>("signer", &s).unwrap();
    let threads = 8;
    let barrier = Barrier::new(threads);
    let attempts: u32 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (store, barrier, fp) = (&store, &barrier, fp.clone());
                scope.spawn(move || {
                    barrier.wait();
                    Driver::new(store)
                        .step::<UptakeEngine, _>(
                            "signer",
                            &AckInput::new(format!("c{i}"), fp),
                            T0,
                            &mut rng(i as u64),
                        )
                        .unwrap()
                        .attempts
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    let (doc, _) = driver.load::<SignerEngine>("signer").unwrap();
    assert_eq!(doc.consumers.len(), threads);
    // Not asserted (scheduling decides), but reported: how often they collided.
    println!("{threads} acks took {attempts} rounds");
}

/// A store where other consumers' acks land between this writer's read
/// and its writes: one before each of its first `others` writes (the race
/// the driver must survive), each from a consumer of its own.
struct AckLandsFirst<'a> {
    store: &'a MemoryStore,
    others: u32,
    landed: std::sync::atomic::AtomicU32,
    fingerprint: String,
}

impl<'a> AckLandsFirst<'a> {
    fn new(store: &'a MemoryStore, others: u32, fingerprint: &str) -> Self {
        AckLandsFirst {
            store,
            others,
            landed: 0.into(),
            fingerprint: fingerprint.to_string(),
        }
    }
}

impl Store for AckLandsFirst<'_> {
    fn location(&self) -> String {
        self.store.location()
    }
    fn get(&self, key: &str) -> pki_rotate::Result<Option<(Files, Revision)>> {
        self.store.get(key)
    }
    fn put(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
    ) -> pki_rotate::Result<Revision> {
        let n = self
            .landed
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if n < self.others {
            let name = if n == 0 {
                "other".to_string()
            } else {
                format!("other-{n}")
            };
            Driver::new(self.store)
                .step::<UptakeEngine, _>(
                    key,
                    &AckInput::new(name, &self.fingerprint),
                    T0,
                    &mut rng(7),
                )
                .unwrap();
        }
        self.store.put(key, expected, files)
    }
}

#[test]
fn an_ack_that_loses_the_write_to_another_ack_retries_and_both_are_recorded() {
    let store = MemoryStore::new();
    let s = signer();
    let fp = s.bundle_fingerprint();
    Driver::new(&store)
        .create::<SignerEngine>("signer", &s)
        .unwrap();
    let racing = AckLandsFirst::new(&store, 1, &fp);
    let step = Driver::new(&racing)
        .step::<UptakeEngine, _>("signer", &AckInput::new("mine", &fp), T0, &mut rng(8))
        .unwrap();
    assert_eq!(step.attempts, 2, "the first write should have conflicted");
    let (doc, _) = Driver::new(&store).load::<SignerEngine>("signer").unwrap();
    let names: Vec<&String> = doc.consumers.keys().collect();
    assert_eq!(names, ["mine", "other"]);
}

#[test]
fn an_ack_that_loses_more_writes_to_other_acks_than_the_attempt_budget_still_lands() {
    let store = MemoryStore::new();
    let s = signer();
    let fp = s.bundle_fingerprint();
    Driver::new(&store)
        .create::<SignerEngine>("signer", &s)
        .unwrap();
    // Twenty consumers ack at once: one can lose nineteen rounds, more
    // than the default budget of eight.
    let racing = AckLandsFirst::new(&store, 19, &fp);
    let step = Driver::new(&racing)
        .step::<UptakeEngine, _>("signer", &AckInput::new("mine", &fp), T0, &mut rng(8))
        .unwrap();
    assert_eq!(step.attempts, 20);
    let (doc, _) = Driver::new(&store).load::<SignerEngine>("signer").unwrap();
    assert_eq!(doc.consumers.len(), 20);
    assert!(doc.consumers.contains_key("mine"));
}

#[test]
fn an_ack_that_other_acks_keep_beating_gives_up_within_a_bound() {
    let store = MemoryStore::new();
    let s = signer();
    let fp = s.bundle_fingerprint();
    Driver::new(&store)
        .create::<SignerEngine>("signer", &s)
        .unwrap();
    let racing = AckLandsFirst::new(&store, u32::MAX, &fp);
    let err = Driver::new(&racing)
        .with_max_attempts(2)
        .step::<UptakeEngine, _>("signer", &AckInput::new("mine", &fp), T0, &mut rng(8))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::Store(pki_rotate::StoreError::TooManyConflicts { attempts: 2, .. })
        ),
        "{err}"
    );
    // Two counted rounds and sixteen free ones per counted round.
    let rounds = racing.landed.load(std::sync::atomic::Ordering::SeqCst);
    assert_eq!(rounds, 2 + 2 * 16);
}

#[test]
fn an_ack_commutes_with_other_consumers_acks_not_with_a_rotation_or_its_own() {
    // A rotation publishes a new bundle: not a change an ack commutes with.
    let s = signer();
    let fp = s.bundle_fingerprint();
    let rotated = rotate(&s, "r", T0 + Duration::days(1), 2);
    let input = AckInput::new("mine", &fp);
    assert!(!UptakeEngine::commutes(&input, &view(&s), &view(&rotated)));
    let other = ack(&s, "other", &fp).unwrap();
    assert!(UptakeEngine::commutes(&input, &view(&s), &view(&other)));
    let same = ack(&s, "mine", &fp).unwrap();
    assert!(!UptakeEngine::commutes(&input, &view(&s), &view(&same)));
}

/// Inside the store's idle promise an ack is a step over the document's
/// head: it reads and writes no leaf, and the whole document read back
/// afterwards holds the record and every leaf as it was. Outside it (no
/// summary in the store), the same ack is a whole step with the same
/// record.
#[test]
fn an_ack_inside_the_idle_promise_reads_and_writes_the_head_alone() {
    use pki_rotate::{Document as _, LeafRequest, Read};
    let mut s = signer();
    for i in 0..20 {
        s.request_leaf(
            &format!("leaf-{i}"),
            LeafRequest::server(vec![format!("leaf-{i}.ns.svc")]),
        )
        .unwrap();
    }
    let store = support::recording::Recording::new(MemoryStore::new());
    let driver = Driver::new(&store);
    driver.create::<SignerEngine>("signer", &s).unwrap();
    // The first step issues the leaves and writes the summary.
    let first = driver
        .step::<SignerEngine, _>("signer", &SignerInput::default(), T0, &mut rng(2))
        .unwrap();
    assert!(first.changed);
    let fingerprint = first.document.bundle_fingerprint();
    let whole_reads = store.whole_reads.get();
    let later = T0 + Duration::hours(1);
    let ack = driver
        .step_unless_idle::<UptakeEngine, _>(
            "signer",
            &AckInput::new("web", &fingerprint),
            later,
            &mut rng(3),
        )
        .unwrap();
    assert!(matches!(ack.read, Read::Part), "{:?}", ack.read);
    assert!(ack.changed);
    assert!(
        ack.document.signer().leaves.is_empty(),
        "the part holds no leaf"
    );
    // No whole read, no leaf read, no leaf written.
    assert_eq!(store.whole_reads.get(), whole_reads);
    let read = store.paths_read.borrow();
    assert!(
        read.iter().flatten().all(|p| !p.starts_with("certs/")),
        "{read:?}"
    );
    let changes = store.changes.borrow();
    assert_eq!(changes.len(), 1);
    assert!(
        !format!("{:?}", changes[0]).contains("certs/"),
        "{:?}",
        changes[0]
    );
    let (after, _) = store.get("signer").unwrap().unwrap();
    let whole = SignerState::from_files(&after).unwrap();
    assert_eq!(whole.consumers["web"].fingerprint, fingerprint);
    assert_eq!(whole.leaves.len(), 20);
    // Without the summary the ack is a whole step, to the same record.
    let plain = MemoryStore::new();
    plain.put("signer", None, &after).unwrap();
    let again = Driver::new(&plain)
        .step_unless_idle::<UptakeEngine, _>(
            "signer",
            &AckInput::new("api", &fingerprint),
            later,
            &mut rng(4),
        )
        .unwrap();
    assert!(matches!(again.read, Read::Whole), "{:?}", again.read);
    let (files, _) = plain.get("signer").unwrap().unwrap();
    let whole = SignerState::from_files(&files).unwrap();
    assert_eq!(whole.consumers["api"].fingerprint, fingerprint);
}
