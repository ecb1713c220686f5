//! Steps with nothing to do, decided from the summary a store keeps with
//! the document (`Driver::step_unless_idle`): they read no document, say
//! exactly what the full step says, and are taken only while the promise
//! holds; every write keeps the summary as current as the document.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_rotate::signer::IdleReport;
use pki_rotate::{
    AckInput, Driver, ForcedRotation, FsStore, Idle, LeafRequest, MemoryStore, Read, SignerEngine,
    SignerInput, SignerState, Step, Store, Summary, UptakeEngine,
};
use support::fs::{KEY, initial};
use support::recording::Recording;
use support::seed::{T0, rng};
use time::{Duration, OffsetDateTime};

/// A signer with a few leaves issued at T0.
fn signer(seed: u64) -> SignerState {
    let mut s = initial(seed);
    for i in 0..5 {
        s.request_leaf(
            &format!("svc{i}"),
            LeafRequest::server(vec![format!("svc{i}.ns.svc")]),
        )
        .unwrap();
    }
    let plan = pki_rotate::signer::plan(&s, &SignerInput::default(), T0).unwrap();
    pki_rotate::signer::apply(&s, plan, &mut rng(seed + 1))
        .unwrap()
        .into_document()
}

fn full_step<S: Store>(store: &S, now: OffsetDateTime) -> Step<SignerState, pki_rotate::Event> {
    Driver::new(store)
        .step::<SignerEngine, _>(KEY, &SignerInput::default(), now, &mut rng(99))
        .unwrap()
}

fn idle_or_step<S: Store>(
    store: &S,
    input: &SignerInput,
    now: OffsetDateTime,
) -> Step<SignerState, pki_rotate::Event> {
    Driver::new(store)
        .step_unless_idle::<SignerEngine, _>(KEY, input, now, &mut rng(98))
        .unwrap()
}

/// The idle step at `now` says what the full step says, and reads nothing.
fn check_idle_matches_full<S: Store>(store: &Recording<S>, now: OffsetDateTime) {
    let before = store.whole_reads.get();
    let idle @ Step {
        read: Read::Summary { .. },
        ..
    } = idle_or_step(store, &SignerInput::default(), now)
    else {
        panic!("expected an idle step at {now}");
    };
    assert_eq!(
        store.whole_reads.get(),
        before,
        "an idle step reads no document"
    );
    let full = full_step(store, now);
    assert!(!full.changed && full.events.is_empty(), "{:?}", full.events);
    assert_eq!(idle.next_wake, full.next_wake, "at {now}");
    assert_eq!(idle.revision, full.revision);
    let report: IdleReport = idle.summary_report().unwrap().unwrap();
    let doc = &full.document;
    assert_eq!(report.ca_id, doc.ca.cert.id());
    assert_eq!(report.next_rotation, doc.rotation_due_at(&doc.policy));
}

fn exercise<S: Store>(store: Recording<S>) {
    let s = signer(10);
    Driver::new(&store)
        .create_at::<SignerEngine>(KEY, &s, T0)
        .unwrap();
    let (summary, revision) = store.get_summary(KEY).unwrap().expect("a summary");
    let idle = Idle::from_summary(&summary, "signer").unwrap();
    assert_eq!(idle.since, T0);
    assert!(idle.until > T0 + Duration::days(30), "{}", idle.until);
    assert_eq!(Some(revision), store.get(KEY).unwrap().map(|(_, r)| r));

    // Every time inside the promise: idle, and the full step agrees.
    for hours in [0, 1, 24, 24 * 30] {
        check_idle_matches_full(&store, T0 + Duration::hours(hours));
    }
    let last = idle.until - Duration::SECOND;
    check_idle_matches_full(&store, last);

    // Outside the promise, or asked for something: the full step.
    for now in [idle.until, T0 - Duration::SECOND] {
        assert!(
            matches!(
                Driver::new(&store).step_unless_idle::<SignerEngine, _>(
                    KEY,
                    &SignerInput::default(),
                    now,
                    &mut rng(3)
                ),
                Ok(Step {
                    read: Read::Whole,
                    ..
                }) | Err(_)
            ),
            "at {now}"
        );
    }
    let forced = SignerInput::forced(ForcedRotation::new("drill"));
    let reads = store.whole_reads.get();
    let step @ Step {
        read: Read::Whole, ..
    } = Driver::new(&store)
        .step_unless_idle::<SignerEngine, _>(
            KEY,
            &SignerInput {
                allow_trust_break: Some("test".into()),
                ..forced
            },
            T0 + Duration::days(1),
            &mut rng(4),
        )
        .unwrap()
    else {
        panic!("a forced rotation is never idle");
    };
    assert!(step.changed);
    assert!(store.whole_reads.get() > reads);

    // The rotation's write left a summary of the new document.
    let now = T0 + Duration::days(2);
    check_idle_matches_full(&store, now);
    let after @ Step {
        read: Read::Summary { .. },
        ..
    } = idle_or_step(&store, &SignerInput::default(), now)
    else {
        panic!("idle after the rotation");
    };
    assert_eq!(
        after.summary_report::<IdleReport>().unwrap().unwrap().ca_id,
        step.document.ca.cert.id()
    );

    // A write by another engine over the same document (a consumer's
    // acknowledgement) keeps the summary current.
    let fingerprint = pki_rotate::uptake::bundle_fingerprint(&step.document.bundle);
    let ack = Driver::new(&store)
        .step::<UptakeEngine, _>(KEY, &AckInput::new("web-1", fingerprint), now, &mut rng(5))
        .unwrap();
    assert!(ack.changed);
    let (_, revision) = store
        .get_summary(KEY)
        .unwrap()
        .expect("a summary after the ack");
    assert_eq!(revision, ack.revision);
    check_idle_matches_full(&store, now + Duration::hours(1));

    // A write without a summary removes it: nothing stale is ever read.
    let (files, revision) = store.get(KEY).unwrap().unwrap();
    store.put(KEY, Some(&revision), &files).unwrap();
    assert!(store.get_summary(KEY).unwrap().is_none());
    let reads = store.whole_reads.get();
    assert!(matches!(
        idle_or_step(&store, &SignerInput::default(), now + Duration::hours(2)),
        Step {
            read: Read::Whole,
            ..
        }
    ));
    assert!(store.whole_reads.get() > reads);
}

#[test]
fn a_memory_store_decides_idle_steps_from_the_summary() {
    exercise(Recording::new(MemoryStore::new()));
}

#[test]
fn a_directory_store_decides_idle_steps_from_the_summary() {
    let dir = tempfile::tempdir().unwrap();
    exercise(Recording::new(FsStore::open_or_create(dir.path()).unwrap()));
}

/// Documents at many ages: fresh, after a rotation with bridges, with a
/// consumer that loaded the previous bundle (it lags once the reload
/// interval has passed) or the current one, and an imported CA (whose
/// replacement falls due before it expires).
fn documents() -> Vec<SignerState> {
    use pki_rotate::{AckInput, Engine};
    let fresh = signer(20);
    let due = fresh.rotation_due_at(&fresh.policy) + Duration::days(1);
    let plan = pki_rotate::signer::plan(&fresh, &SignerInput::default(), due).unwrap();
    let rotated = pki_rotate::signer::apply(&fresh, plan, &mut rng(21))
        .unwrap()
        .into_document();
    let ack = |doc: &SignerState, fingerprint: String| {
        let doc = pki_rotate::UptakeDocument::new(doc.clone());
        UptakeEngine::step(
            &doc,
            &AckInput::new("web-1", fingerprint),
            due,
            &mut rng(22),
        )
        .unwrap()
        .into_document()
        .into_signer()
    };
    // Consumers reload within a week: one that loaded the previous bundle
    // lags a week after the rotation, long before anything else is due.
    let mut lagging = ack(&rotated, fresh.bundle_fingerprint());
    lagging.policy.rotation.reload_interval = Some(Duration::days(7));
    let current = ack(&rotated, rotated.bundle_fingerprint());
    let ca = support::seed::root("Imported Root", 800, 23);
    let import = pki_core::CaImport {
        cert: ca.cert.clone(),
        key: Some(ca.key.clone()),
        chain: vec![],
    };
    let mut imported =
        SignerState::import(&import, pki_rotate::SignerPolicy::default(), T0).unwrap();
    imported
        .request_leaf("web", LeafRequest::server(vec!["web.ns.svc".into()]))
        .unwrap();
    let plan = pki_rotate::signer::plan(&imported, &SignerInput::default(), T0).unwrap();
    let imported = pki_rotate::signer::apply(&imported, plan, &mut rng(24))
        .unwrap()
        .into_document();
    vec![fresh, rotated, lagging, current, imported]
}

/// The promise is the plan's own and the status's: at every time sampled
/// inside it, the plan with nothing asked changes nothing and `pki status
/// --check` would say ok (exit 0), so the summary can answer both. Where
/// no promise is made, one of them says otherwise.
#[test]
fn nothing_is_due_or_wrong_anywhere_inside_the_promise() {
    use pki_rotate::Document;
    use pki_rotate::status::{Health, SignerStatus};
    let health = |doc: &SignerState, t| SignerStatus::of(doc, t).unwrap().health;
    let mut refused = [0; 3];
    for (i, doc) in documents().iter().enumerate() {
        let mut now = doc.ca.cert.not_before();
        for _ in 0..24 {
            let Some(idle) = doc.idle(now) else {
                // Something is due or wrong at `now`: no promise is made.
                let plan = pki_rotate::signer::plan(doc, &SignerInput::default(), now).unwrap();
                let h = health(doc, now);
                assert!(
                    !plan.is_empty() || h != Health::Ok,
                    "document {i}: no promise at {now} though nothing is due or wrong"
                );
                refused[h as usize] += 1;
                now += Duration::days(17);
                continue;
            };
            let span = idle.until - idle.since;
            for k in 0..=16 {
                let t = idle.since + span * (k as f64 / 16.0) - Duration::SECOND * (k == 16) as i32;
                let plan = pki_rotate::signer::plan(doc, &SignerInput::default(), t).unwrap();
                assert!(
                    plan.is_empty(),
                    "document {i}: something due at {t} inside [{}, {})",
                    idle.since,
                    idle.until
                );
                assert_eq!(
                    health(doc, t),
                    Health::Ok,
                    "document {i}: at {t} inside [{}, {})",
                    idle.since,
                    idle.until
                );
            }
            // At the promise's end the plan has something to do, the
            // status something to say, or a later promise to make.
            now = idle.until;
        }
    }
    // The walk saw every health without a promise: an action due (the
    // lagging consumer, the imported CA's replacement) and broken (expiry).
    assert!(refused[1] > 0 && refused[2] > 0, "{refused:?}");
}

/// A summary of another kind, a damaged one, or one too large to be a
/// summary is not taken.
#[test]
fn only_a_readable_summary_of_the_same_kind_is_taken() {
    let store = MemoryStore::new();
    let s = signer(30);
    let files = pki_rotate::Document::to_files(&s).unwrap();
    let now = T0 + Duration::hours(1);
    let mut idle = pki_rotate::Document::idle(&s, T0).unwrap();
    idle.kind = "ca-set".into();
    for summary in [
        idle.to_summary().unwrap(),
        Summary::new("{not json").unwrap(),
    ] {
        let revision = store.get(KEY).unwrap().map(|(_, r)| r);
        store
            .put_with_summary(KEY, revision.as_ref(), &files, Some(&summary))
            .unwrap();
        assert!(matches!(
            idle_or_step(&store, &SignerInput::default(), now),
            Step {
                read: Read::Whole,
                ..
            }
        ));
    }
    assert!(Summary::new("x".repeat(pki_rotate::store::MAX_SUMMARY_LEN + 1)).is_none());
}

/// The directory store keeps the summary in a small index per generation:
/// one an older build wrote without it is read through the document; a
/// damaged one is not taken; an unsafe one is refused as any unsafe file
/// of the store; and reading it repairs a missing published link, as
/// every read of the store does.
#[test]
fn a_directory_store_index_is_checked_and_its_absence_is_a_full_step() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let store = FsStore::open_or_create(dir.path()).unwrap();
    Driver::new(&store)
        .create_at::<SignerEngine>(KEY, &signer(40), T0)
        .unwrap();
    let now = T0 + Duration::hours(1);
    let live = dir
        .path()
        .join(std::fs::read_link(dir.path().join(".data")).unwrap());
    let index = live.join(".index.json");
    let original = std::fs::read(&index).unwrap();

    std::fs::remove_file(dir.path().join("ca-bundle.crt")).unwrap();
    assert!(store.get_summary(KEY).unwrap().is_some());
    assert_eq!(
        std::fs::read_link(dir.path().join("ca-bundle.crt")).unwrap(),
        std::path::Path::new(".data/ca-bundle.crt")
    );

    std::fs::set_permissions(&index, std::fs::Permissions::from_mode(0o666)).unwrap();
    let err = store.get_summary(KEY).unwrap_err();
    assert!(err.to_string().contains(".index.json"), "{err}");
    std::fs::set_permissions(&index, std::fs::Permissions::from_mode(0o644)).unwrap();

    for damaged in [
        None,
        Some(&b"{\"format\": 1"[..]),
        Some(&b"{\"format\": 99, \"published\": [], \"keys\": {}}"[..]),
    ] {
        match damaged {
            None => std::fs::remove_file(&index).unwrap(),
            Some(bytes) => std::fs::write(&index, bytes).unwrap(),
        }
        assert!(store.get_summary(KEY).unwrap().is_none());
        assert!(matches!(
            idle_or_step(&store, &SignerInput::default(), now),
            Step {
                read: Read::Whole,
                ..
            }
        ));
    }
    std::fs::write(&index, original).unwrap();
    assert!(matches!(
        idle_or_step(&store, &SignerInput::default(), now),
        Step {
            read: Read::Summary { .. },
            ..
        }
    ));
}
