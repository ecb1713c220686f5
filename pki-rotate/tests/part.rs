//! Steps over part of a document (`Read::Part`): a step that changes a
//! few leaves inside the document's idle promise reads the head and those
//! leaves, writes what changed, and ends in exactly the files a whole step
//! gives.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_rotate::{
    Driver, FsStore, Idle, LeafChange, LeafKind, LeafRequest, MemoryStore, Read, SealedStore,
    SealingKeys, SignerEngine, SignerInput, SignerState, Step, Store, StoreKey,
};
use proptest::prelude::*;
use std::collections::BTreeSet;
use support::fs::{KEY, initial};
use support::recording::Recording;
use support::seed::{T0, rng};
use time::{Duration, OffsetDateTime};

type Event = pki_rotate::Event;

fn request(names: &[&str], days: i64) -> LeafRequest {
    LeafRequest {
        lifetime: Duration::days(days),
        ..LeafRequest::server(names.iter().map(|n| n.to_string()).collect())
    }
}

/// A signer whose leaves were issued one after another, `gaps[i]` days
/// apart, each with its own lifetime, in `store`; returns the time of the
/// last write.
fn build<S: Store>(store: &S, leaves: &[(u8, i64)]) -> OffsetDateTime {
    let driver = Driver::new(store);
    driver
        .create_at::<SignerEngine>(KEY, &initial(7), T0)
        .unwrap();
    let mut now = T0;
    for (i, (gap, days)) in leaves.iter().enumerate() {
        now += Duration::days(i64::from(*gap));
        let name = format!("svc{i}");
        let step = driver
            .step::<SignerEngine, _>(
                KEY,
                &SignerInput::request(&name, request(&[&format!("{name}.ns.svc")], *days)),
                now,
                &mut rng(100 + i as u64),
            )
            .unwrap();
        assert!(step.changed);
    }
    now
}

/// A copy of `from`'s document and summary in a new memory store.
fn copy(from: &MemoryStore) -> MemoryStore {
    let to = MemoryStore::new();
    let (files, _) = from.get(KEY).unwrap().unwrap();
    let summary = from.get_summary(KEY).unwrap().map(|(s, _)| s);
    to.put_with_summary(KEY, None, &files, summary.as_ref())
        .unwrap();
    to
}

fn promise(store: &impl Store) -> Option<Idle> {
    let (summary, _) = store.get_summary(KEY).unwrap()?;
    Idle::from_summary(&summary, "signer")
}

/// One leaf change of the kinds a caller asks, on leaf `which` (of `n`).
fn change(kind: u8, which: usize, n: usize) -> LeafChange {
    let name = format!("svc{}", which % (n + 1));
    match kind % 7 {
        0 => LeafChange::Request {
            name: "fresh".into(),
            request: request(&["fresh.ns.svc"], 30),
        },
        1 => LeafChange::Request {
            request: LeafRequest {
                ip_addresses: vec!["10.0.0.7".parse().unwrap()],
                ..request(&[&format!("{name}.ns.svc"), "extra.ns.svc"], 45)
            },
            name,
        },
        2 => LeafChange::Renew { name },
        3 => LeafChange::Remove { name },
        4 => LeafChange::Replace {
            request: LeafRequest {
                kind: LeafKind::Client,
                ..request(&["client.ns.svc"], 20)
            },
            name,
        },
        // The request the leaf already has: nothing to do.
        5 => LeafChange::Request {
            request: request(&[&format!("{name}.ns.svc")], 30),
            name,
        },
        // Narrowing without Replace: refused by both.
        _ => LeafChange::Request {
            request: request(&["other.ns.svc"], 30),
            name,
        },
    }
}

fn outcome(
    stepped: pki_rotate::Result<Step<SignerState, Event>>,
) -> Result<(Step<SignerState, Event>, bool), String> {
    match stepped {
        Ok(step) => match step.read {
            Read::Part => Ok((step, true)),
            Read::Whole => Ok((step, false)),
            Read::Summary { .. } => panic!("a leaf change is never idle"),
        },
        Err(e) => Err(e.to_string()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// For every leaf change inside the promise, the step over the part
    /// and the whole step leave byte-identical files, report the same
    /// events and fail alike; the part's new promise ends no later than
    /// the whole step's, and the document it leaves is one a whole read
    /// accepts, with nothing due.
    #[test]
    fn a_step_over_a_part_ends_where_the_whole_step_ends(
        leaves in prop::collection::vec((0u8..20, 20i64..120), 1..5),
        changes in prop::collection::vec((0u8..7, 0usize..6), 1..3),
        at in 0.0f64..1.0,
        seed in 0u64..1000,
    ) {
        let base = MemoryStore::new();
        let last = build(&base, &leaves);
        let before = promise(&base).expect("a promise after the last write");
        prop_assert_eq!(before.since, last);
        let span = (before.until - last).whole_seconds();
        let now = last + Duration::seconds((span as f64 * at) as i64);
        prop_assume!(before.covers(now));

        let input = SignerInput {
            leaves: changes.iter().map(|(k, w)| change(*k, *w, leaves.len())).collect(),
            ..SignerInput::default()
        };
        let by_parts = Recording::new(copy(&base));
        let whole = copy(&base);
        let part = outcome(Driver::new(&by_parts)
            .step_unless_idle::<SignerEngine, _>(KEY, &input, now, &mut rng(seed)));
        let full = outcome(Driver::new(&whole)
            .step::<SignerEngine, _>(KEY, &input, now, &mut rng(seed)));
        let ((part, by_part), (full, _)) = match (part, full) {
            (Ok(p), Ok(f)) => (p, f),
            (Err(p), Err(f)) => {
                prop_assert_eq!(p, f);
                prop_assert_eq!(by_parts.inner.get(KEY).unwrap().unwrap().0, base.get(KEY).unwrap().unwrap().0);
                return Ok(());
            }
            (p, f) => panic!("part {:?}, whole {:?}", p.map(|s| s.0.events), f.map(|s| s.0.events)),
        };
        prop_assert!(by_part, "a leaf change inside the promise steps by parts");
        // Only the memory store's default `put_changes` reads it whole.
        prop_assert!(by_parts.whole_reads.get() <= 1);
        prop_assert_eq!(&part.events, &full.events);
        prop_assert_eq!(part.changed, full.changed);
        prop_assert!(part.next_wake <= full.next_wake);
        let (part_files, _) = by_parts.inner.get(KEY).unwrap().unwrap();
        let (full_files, _) = whole.get(KEY).unwrap().unwrap();
        prop_assert_eq!(&part_files, &full_files);

        // What was read and written: the head and the named leaves.
        let named: BTreeSet<String> = input.leaves.iter().map(|c| c.name().to_string()).collect();
        let leaf_of = |path: &str| {
            path.strip_prefix("certs/")
                .and_then(|p| p.split('/').next())
                .or_else(|| path.strip_prefix("leaf-requests/").and_then(|p| p.strip_suffix(".json")))
                .map(str::to_string)
        };
        for path in by_parts.paths_read.borrow().iter().flatten() {
            if let Some(leaf) = leaf_of(path) {
                prop_assert!(named.contains(&leaf), "read {}", path);
            }
        }
        for changes in by_parts.changes.borrow().iter() {
            for path in changes.written().map(|(p, _)| p).chain(changes.removed()) {
                if let Some(leaf) = leaf_of(path) {
                    prop_assert!(named.contains(&leaf), "wrote {}", path);
                }
                // The head holds nothing of a leaf: its size does not grow
                // with the leaves, and a leaf change leaves it alone.
                prop_assert!(path != "pki-state.json", "wrote the state file");
            }
        }

        match (promise(&by_parts.inner), promise(&whole)) {
            (Some(p), Some(f)) => {
                prop_assert_eq!(p.since, f.since);
                prop_assert!(p.until <= f.until && p.until > p.since);
                prop_assert_eq!(p.report, f.report);
            }
            (None, None) => prop_assert!(!part.changed, "a written part keeps a promise"),
            (p, f) => panic!("promises differ: part {:?}, whole {:?}", p, f),
        }
        // Nothing else is due: the whole step after it changes nothing.
        let after = Driver::new(&by_parts.inner)
            .step::<SignerEngine, _>(KEY, &SignerInput::default(), now, &mut rng(1))
            .unwrap();
        prop_assert!(!after.changed, "{:?}", after.events);
    }
}

/// Outside the promise, or without a summary, a leaf change reads the
/// whole document; a document changed between the summary and the part
/// read is stepped whole too.
#[test]
fn a_leaf_change_outside_the_promise_is_a_whole_step() {
    let store = MemoryStore::new();
    let last = build(&store, &[(0, 30), (3, 60)]);
    let promise = promise(&store).unwrap();
    let renew = SignerInput {
        leaves: vec![LeafChange::Renew {
            name: "svc0".into(),
        }],
        ..SignerInput::default()
    };
    let step = |store: &MemoryStore, now| {
        Driver::new(store)
            .step_unless_idle::<SignerEngine, _>(KEY, &renew, now, &mut rng(5))
            .unwrap()
    };
    assert!(matches!(
        step(&store, promise.until),
        Step {
            read: Read::Whole,
            ..
        }
    ));
    assert!(matches!(
        step(&store, last - Duration::SECOND),
        Step {
            read: Read::Whole,
            ..
        }
    ));

    let (files, revision) = store.get(KEY).unwrap().unwrap();
    store.put(KEY, Some(&revision), &files).unwrap();
    assert!(matches!(
        step(&store, last),
        Step {
            read: Read::Whole,
            ..
        }
    ));
    // That whole step wrote a summary again: the next one is by parts.
    assert!(matches!(
        step(&store, last),
        Step {
            read: Read::Part,
            ..
        }
    ));
}

/// The part a step returns is the document with the named leaves only,
/// and the document in the store keeps every other leaf.
#[test]
fn the_part_returned_holds_the_named_leaves_and_the_store_keeps_the_rest() {
    let store = MemoryStore::new();
    let last = build(&store, &[(0, 30), (1, 60), (1, 90)]);
    let step @ Step {
        read: Read::Part, ..
    } = Driver::new(&store)
        .step_unless_idle::<SignerEngine, _>(
            KEY,
            &SignerInput::request("new", request(&["new.ns.svc"], 10)),
            last,
            &mut rng(6),
        )
        .unwrap()
    else {
        panic!("expected a step by parts");
    };
    assert_eq!(step.document.leaves.keys().collect::<Vec<_>>(), vec!["new"]);
    assert!(step.document.leaves["new"].issued.is_some());
    let (doc, _) = Driver::new(&store).load::<SignerEngine>(KEY).unwrap();
    assert_eq!(
        doc.leaves.keys().collect::<Vec<_>>(),
        vec!["new", "svc0", "svc1", "svc2", "web"]
    );
    assert!(doc.leaves.values().all(|l| l.issued.is_some()));
    // The new leaf refreshes before the others: the promise ends then.
    let refresh = promise(&store).unwrap().until;
    let full = Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &SignerInput::default(), last, &mut rng(7))
        .unwrap();
    assert_eq!(refresh, full.next_wake);
}

/// On a directory store, and through a sealing store (which seals the
/// written key and opens the read ones), the part step gives the same
/// document as on memory.
#[test]
fn directory_and_sealed_stores_step_by_parts() {
    let memory = MemoryStore::new();
    let last = build(&memory, &[(0, 30), (2, 60)]);
    let (files, _) = memory.get(KEY).unwrap().unwrap();
    let summary = memory.get_summary(KEY).unwrap().map(|(s, _)| s);
    let input = SignerInput::request("svc0", request(&["svc0.ns.svc", "b.ns.svc"], 40));

    let dir = tempfile::tempdir().unwrap();
    let fs = FsStore::open_or_create(dir.path()).unwrap();
    fs.put_with_summary(KEY, None, &files, summary.as_ref())
        .unwrap();
    let key = StoreKey::generate(&mut rng(8));
    let sealed_dir = tempfile::tempdir().unwrap();
    let sealed = SealedStore::new(
        FsStore::open_or_create(sealed_dir.path()).unwrap(),
        SealingKeys::single(key),
        rng(9),
        false,
    );
    sealed
        .put_with_summary(KEY, None, &files, summary.as_ref())
        .unwrap();

    let expected = {
        let copy = copy(&memory);
        Driver::new(&copy)
            .step::<SignerEngine, _>(KEY, &input, last, &mut rng(10))
            .unwrap();
        copy.get(KEY).unwrap().unwrap().0
    };
    for store in [&fs as &dyn Store, &sealed] {
        let stepped = Driver::new(store)
            .step_unless_idle::<SignerEngine, _>(KEY, &input, last, &mut rng(10))
            .unwrap();
        assert!(
            matches!(
                stepped,
                Step {
                    read: Read::Part,
                    ..
                }
            ),
            "{}",
            store.location()
        );
        assert_eq!(store.get(KEY).unwrap().unwrap().0, expected);
    }
}

/// A store written by an older version keeps every leaf request in
/// `pki-state.json`. It reads as the same signer; its first leaf change is
/// a whole step that moves the requests into `leaf-requests/`, and the
/// next one goes by parts.
#[test]
fn a_version_2_store_migrates_on_its_first_leaf_change_then_steps_by_parts() {
    let current = MemoryStore::new();
    let last = build(&current, &[(0, 30), (1, 60), (1, 90)]);
    let (files, _) = current.get(KEY).unwrap().unwrap();
    let summary = current.get_summary(KEY).unwrap().map(|(s, _)| s);
    let old = MemoryStore::new();
    old.put_with_summary(KEY, None, &version_2(&files), summary.as_ref())
        .unwrap();
    let (read, _) = Driver::new(&old).load::<SignerEngine>(KEY).unwrap();
    let (want, _) = Driver::new(&current).load::<SignerEngine>(KEY).unwrap();
    assert_eq!(*read.to_json().unwrap(), *want.to_json().unwrap());

    let issue = |store: &MemoryStore, name: &str| {
        let input = SignerInput::request(name, request(&[&format!("{name}.ns.svc")], 10));
        Driver::new(store)
            .step_unless_idle::<SignerEngine, _>(KEY, &input, last, &mut rng(11))
            .unwrap()
    };
    assert!(matches!(
        issue(&old, "new"),
        Step {
            read: Read::Whole,
            ..
        }
    ));
    assert!(matches!(
        issue(&current, "new"),
        Step {
            read: Read::Part,
            ..
        }
    ));
    // The same files, but for the new leaf's certificate and key: the
    // attempt by parts drew from the random source before it gave way.
    let (migrated, _) = old.get(KEY).unwrap().unwrap();
    let (stepped, _) = current.get(KEY).unwrap().unwrap();
    assert!(migrated.dirs().eq(stepped.dirs()));
    assert!(
        migrated
            .iter()
            .map(|(p, _)| p)
            .eq(stepped.iter().map(|(p, _)| p))
    );
    for (path, file) in migrated
        .iter()
        .filter(|(p, _)| !p.starts_with("certs/new/"))
    {
        assert_eq!(Some(file), stepped.file(path), "{path}");
    }
    assert!(matches!(
        issue(&old, "next"),
        Step {
            read: Read::Part,
            ..
        }
    ));
}

/// `files` as version 2 wrote them: the leaf requests inside the state file.
fn version_2(files: &pki_rotate::Files) -> pki_rotate::Files {
    let mut state: serde_json::Value =
        serde_json::from_slice(files.get("pki-state.json").unwrap()).unwrap();
    let mut leaves = serde_json::Map::new();
    let mut out = pki_rotate::Files::new();
    for (path, file) in files.iter() {
        match path
            .strip_prefix("leaf-requests/")
            .and_then(|p| p.strip_suffix(".json"))
        {
            Some(name) => {
                leaves.insert(
                    name.to_string(),
                    serde_json::from_slice(&file.contents).unwrap(),
                );
            }
            None => out.insert(path, file.clone()).unwrap(),
        }
    }
    assert!(!leaves.is_empty());
    state["version"] = 2.into();
    state["leaves"] = leaves.into();
    out.insert(
        "pki-state.json",
        pki_rotate::File::public(serde_json::to_vec_pretty(&state).unwrap()),
    )
    .unwrap();
    for dir in files.dirs().filter(|d| *d != "leaf-requests") {
        out.insert_dir(dir).unwrap();
    }
    out
}
