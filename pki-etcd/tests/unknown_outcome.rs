//! A commit whose answer is lost: etcd applied the transaction, but the
//! reply never reached the store. A proxy between the store and a real etcd
//! forwards every request and drops etcd's bytes from the commit on. The
//! store must never call that "nothing changed": it proves the write landed
//! by reading the head again, or reports an unknown outcome, and stepping
//! again is then safe.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::{etcd, proxy};

use etcd::{Etcd, quick_options};
use pki_etcd::{EtcdOptions, EtcdStore};
use pki_rotate::{
    Driver, Engine, File, Files, ForcedRotation, LeafRequest, RotateError, RotationReason,
    SignerEngine, SignerInput, SignerPolicy, SignerState, Store,
};
use proxy::Proxy;
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::sync::{Arc, Mutex};
use std::time::{Duration as StdDuration, Instant};
use time::{Duration, OffsetDateTime, macros::datetime};

// 2026-01-01: the day every signer here is created.
const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);
const KEY: &str = "signer";
const TIMEOUT: StdDuration = StdDuration::from_secs(2);

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

/// A store that reaches etcd through `proxy`, and records the steps of
/// its writes; `at_commit` runs at the `commit` step.
fn proxied_store(
    proxy: &Proxy,
    prefix: &str,
    at_commit: impl Fn() + Send + Sync + 'static,
) -> (EtcdStore, Arc<Mutex<Vec<String>>>) {
    let options = EtcdOptions {
        request_timeout: TIMEOUT,
        ..quick_options()
    };
    let mut store = EtcdStore::connect(&[proxy.endpoint()], prefix, options).unwrap();
    let steps = Arc::new(Mutex::new(Vec::new()));
    let record = steps.clone();
    store.set_write_hook(Some(Box::new(move |step| {
        record.lock().unwrap().push(step.to_string());
        if step == "commit" {
            at_commit();
        }
        Ok(())
    })));
    (store, steps)
}

fn text(pairs: &[(&str, &str)]) -> Files {
    let mut f = Files::new();
    for (path, contents) in pairs {
        f.insert(*path, File::public(contents.as_bytes().to_vec()))
            .unwrap();
    }
    f
}

#[test]
fn a_commit_whose_answer_is_lost_is_an_unknown_outcome_and_stepping_again_is_nothing_to_do() {
    let etcd = Etcd::start();
    let s = initial();
    let direct = etcd.store("lost");
    Driver::new(&direct)
        .create::<SignerEngine>(KEY, &s)
        .unwrap();
    let proxy = Arc::new(Proxy::start(&etcd.endpoint()));
    let trigger = proxy.clone();
    // From the commit on, nothing etcd sends arrives: neither the commit's
    // answer nor that of the read that tries to resolve it.
    let (store, steps) = proxied_store(&proxy, "lost", move || trigger.lose_replies());
    let input = SignerInput::forced(ForcedRotation::new("r"));
    let now = T0 + Duration::days(1);

    let started = Instant::now();
    let err = Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &input, now, &mut rng(3))
        .unwrap_err();
    let took = started.elapsed();
    assert!(proxy.losing());
    assert!(err.is_unknown_outcome(), "{err}");
    assert!(!err.is_conflict());
    assert!(
        matches!(&err, RotateError::Store(pki_rotate::StoreError::UnknownOutcome { key, .. }) if key == KEY)
    );
    let message = err.to_string();
    assert!(!message.contains('\n'), "{message}");
    assert!(message.contains(&proxy.url("lost")), "{message}");
    assert!(message.contains("may have landed"), "{message}");
    assert!(
        message.contains("rerunning the command is safe"),
        "{message}"
    );
    assert!(
        message.contains("reading the head again failed"),
        "{message}"
    );
    // The commit and the read that checks it, each bounded by the timeout.
    assert!(took >= TIMEOUT, "{took:?}");
    assert!(took < 2 * TIMEOUT + StdDuration::from_secs(2), "{took:?}");
    let steps = steps.lock().unwrap().clone();
    assert_eq!(
        steps[steps.len() - 2..],
        ["commit", "check commit"],
        "{steps:?}"
    );

    // It landed: read straight from etcd, the rotation is there, whole.
    let (doc, _) = Driver::new(&direct).load::<SignerEngine>(KEY).unwrap();
    assert_eq!(doc.history.len(), 1);
    assert_eq!(
        doc.history[0].reason,
        RotationReason::Forced { reason: "r".into() }
    );
    assert_ne!(doc.ca.cert, s.ca.cert);
    assert!(doc.ca.key.matches(doc.ca.cert.public_key()));

    // Stepping again with the same request, through a working connection,
    // is nothing to do: no second rotation, nothing written.
    let before = etcd.dump("lost");
    let step = Driver::new(&direct)
        .step::<SignerEngine, _>(KEY, &input, now + Duration::minutes(1), &mut rng(4))
        .unwrap();
    assert!(!step.changed);
    assert!(step.events.is_empty(), "{:?}", step.events);
    assert_eq!(step.document.history.len(), 1);
    assert_eq!(etcd.dump("lost"), before);
}

#[test]
fn a_commit_whose_answer_is_lost_resolves_to_success_when_the_head_can_be_read_again() {
    let etcd = Etcd::start();
    let direct = etcd.store("resolve");
    let a = text(&[("a", "one"), ("b", "two")]);
    let r1 = direct.put("doc", None, &a).unwrap();
    // etcd's answers to the commit are lost, then the connection is cut:
    // the commit fails without an answer, and the store reads the head
    // again on a new connection.
    let proxy = Arc::new(Proxy::start(&etcd.endpoint()));
    proxy.cut_after(StdDuration::from_millis(300));
    let trigger = proxy.clone();
    let (store, steps) = proxied_store(&proxy, "resolve", move || trigger.lose_replies());
    let b = text(&[("a", "one"), ("b", "three")]);

    let started = Instant::now();
    let r2 = store.put("doc", Some(&r1), &b).unwrap();
    assert!(started.elapsed() < 2 * TIMEOUT, "{:?}", started.elapsed());
    assert!(
        steps.lock().unwrap().contains(&"check commit".to_string()),
        "the commit's answer was not lost: {:?}",
        steps.lock().unwrap()
    );
    assert!(!proxy.losing());
    // The revision returned is the document's: a compare-and-swap from it
    // succeeds, and the blob the new head no longer needs is gone.
    assert_eq!(direct.get("doc").unwrap().unwrap(), (b.clone(), r2.clone()));
    let blobs = etcd
        .dump("resolve")
        .iter()
        .filter(|(k, _, _)| k.starts_with("resolve/doc/.blobs/"))
        .count();
    assert_eq!(blobs, 2, "unreferenced blobs left behind");
    let c = text(&[("a", "four")]);
    let r3 = direct.put("doc", Some(&r2), &c).unwrap();
    assert_eq!(direct.get("doc").unwrap().unwrap(), (c, r3));
}

#[test]
fn a_lost_commit_that_added_no_blob_is_still_recognised_by_the_commit_in_the_head() {
    let etcd = Etcd::start();
    let direct = etcd.store("same");
    let a = text(&[("a", "one"), ("b", "two")]);
    let r1 = direct.put("doc", None, &a).unwrap();
    let proxy = Arc::new(Proxy::start(&etcd.endpoint()));
    proxy.cut_after(StdDuration::from_millis(300));
    let trigger = proxy.clone();
    let (store, steps) = proxied_store(&proxy, "same", move || trigger.lose_replies());
    // Dropping a file writes no blob, and the head of another writer
    // dropping the same file would name the same files: but every head
    // names the attempt that committed it, which no other writer knows.
    let b = text(&[("a", "one")]);
    let r2 = store.put("doc", Some(&r1), &b).unwrap();
    assert!(steps.lock().unwrap().contains(&"check commit".to_string()));
    assert_eq!(direct.get("doc").unwrap().unwrap(), (b, r2));
}
