//! Reading and writing some files of a document in etcd (`get_paths`,
//! `put_changes`) against a real etcd server: they read and write what the
//! whole read and write would, they check what they read as `get` does,
//! they keep the compare-and-swap and crash-safety of `put`, and they cost
//! what the named files cost, not what the document does.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::{etcd, proxy};

use etcd::{Etcd, killing_store, quick_options};
use pki_etcd::{EtcdOptions, EtcdStore};
use pki_rotate::store::{Changes, only_paths};
use pki_rotate::{File, Files, Revision, RotateError, Store, Summary};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The state of a signer with `leaves` leaves, one record each: large
/// enough to be cut into chunks.
fn state(leaves: impl Iterator<Item = String>) -> Vec<u8> {
    let records: String = leaves
        .map(|name| format!("{{\"name\":\"{name}\",\"dns\":[\"{name}.ns.svc\"],\"serial\":\"0123456789abcdef\"}},"))
        .collect();
    format!("{{\"leaves\":[{records}]}}").into_bytes()
}

/// A signer-like document: `leaves` certificates and keys, a state file
/// with a record per leaf, and two declared directories.
fn document(leaves: usize) -> Files {
    let mut f = Files::new();
    for i in 0..leaves {
        let cert = format!("CERT {i} ").repeat(40).into_bytes();
        let key = format!("KEY {i} ").repeat(20).into_bytes();
        f.insert(format!("certs/leaf-{i}/tls.crt"), File::public(cert))
            .unwrap();
        f.insert(format!("certs/leaf-{i}/tls.key"), File::secret(key))
            .unwrap();
    }
    let names = (0..leaves.max(3000)).map(|i| format!("svc{i}"));
    f.insert("pki-state.json", File::public(state(names)))
        .unwrap();
    f.insert_dir("certs").unwrap();
    f.insert_dir("targets/x").unwrap();
    f
}

/// The state of [`document`] with one more leaf record in the middle.
fn state_with_one_more(leaves: usize) -> Vec<u8> {
    let n = leaves.max(3000);
    let names = (0..n).flat_map(|i| {
        let extra = (i == n / 2).then(|| "added".to_string());
        std::iter::once(format!("svc{i}")).chain(extra)
    });
    state(names)
}

fn set(paths: &[&str]) -> BTreeSet<String> {
    paths.iter().map(|p| p.to_string()).collect()
}

fn assert_no_garbage(etcd: &Etcd, prefix: &str, key: &str) {
    let (_, unneeded) = etcd::head_files(&etcd.dump(prefix), prefix, key);
    assert!(unneeded.is_empty(), "keys left behind: {unneeded:?}");
}

fn blob_keys(etcd: &Etcd, prefix: &str, key: &str) -> BTreeSet<String> {
    let blobs = format!("{prefix}/{key}/.blobs/");
    etcd.dump(prefix)
        .into_iter()
        .map(|(k, _, _)| k)
        .filter(|k| k.starts_with(&blobs))
        .collect()
}

/// The head of `key`, as JSON.
fn head(etcd: &Etcd, prefix: &str, key: &str) -> serde_json::Value {
    let head_key = format!("{prefix}/{key}");
    let (_, value, _) = etcd
        .dump(prefix)
        .into_iter()
        .find(|(k, _, _)| *k == head_key)
        .unwrap();
    serde_json::from_slice(&value).unwrap()
}

fn expect_conflict(err: RotateError) -> (Option<Revision>, Option<Revision>) {
    match err {
        RotateError::Store(pki_rotate::StoreError::Conflict {
            expected, found, ..
        }) => (expected, found),
        other => panic!("expected a conflict, got {other}"),
    }
}

fn recording(store: &mut EtcdStore) -> Arc<Mutex<Vec<String>>> {
    let steps = Arc::new(Mutex::new(Vec::new()));
    let record = steps.clone();
    let hook = move |step: &str| {
        record.lock().unwrap().push(step.to_string());
        Ok(())
    };
    let other = hook.clone();
    store.set_write_hook(Some(Box::new(hook)));
    store.set_read_hook(Some(Box::new(other)));
    steps
}

#[test]
fn get_paths_reads_exactly_what_get_and_filtering_read() {
    let etcd = Etcd::start();
    let store = etcd.store("paths");
    assert!(store.get_paths("signer", &set(&["a"])).unwrap().is_none());
    let doc = document(500);
    let written = store.put("signer", None, &doc).unwrap();
    let (whole, revision) = store.get("signer").unwrap().unwrap();
    assert_eq!(revision, written);
    let all: BTreeSet<String> = doc.iter().map(|(p, _)| p.to_string()).collect();
    let some = set(&[
        "pki-state.json",
        "certs/leaf-7/tls.crt",
        "certs/leaf-7/tls.key",
        // Held by no document: left out.
        "certs/leaf-100000/tls.crt",
        "certs",
        "../x",
        "",
    ]);
    // A server that takes 8 operations a transaction: the named entries
    // take several.
    let small = EtcdStore::connect(
        &[etcd.endpoint()],
        "paths",
        EtcdOptions {
            max_txn_ops: 8,
            ..quick_options()
        },
    )
    .unwrap();
    for paths in [set(&[]), set(&["pki-state.json"]), some, all] {
        for store in [&store, &small] {
            let (files, at) = store.get_paths("signer", &paths).unwrap().unwrap();
            assert_eq!(files, only_paths(&whole, &paths), "{paths:?}");
            assert_eq!(at, revision);
        }
    }
    let (files, _) = store
        .get_paths("signer", &set(&["certs/leaf-7/tls.key"]))
        .unwrap()
        .unwrap();
    assert!(files.file("certs/leaf-7/tls.key").unwrap().secret);
    assert_eq!(files.dirs().collect::<Vec<_>>(), ["certs", "targets/x"]);
}

#[test]
fn a_head_of_the_first_format_is_read_and_changed_whole() {
    use sha2::Digest;
    let etcd = Etcd::start();
    let store = etcd.store("old");
    let sha = hex::encode(sha2::Sha256::digest(b"hello"));
    let head = format!(
        r#"{{"format":1,"files":{{"a/b":{{"sha256":"{sha}","blob":"ab-1","secret":false}}}},"dirs":["d"]}}"#
    );
    etcd::put_raw(&etcd.endpoint(), "old/doc/.blobs/ab-1", b"hello");
    etcd::put_raw(&etcd.endpoint(), "old/doc", head.as_bytes());
    let (whole, revision) = store.get("doc").unwrap().unwrap();
    let paths = set(&["a/b", "c"]);
    assert_eq!(
        store.get_paths("doc", &paths).unwrap().unwrap(),
        (only_paths(&whole, &paths), revision.clone())
    );
    let mut changes = Changes::new();
    changes.write("c", File::public(b"new".to_vec())).unwrap();
    let next = store.put_changes("doc", &revision, &changes, None).unwrap();
    let mut expected = whole;
    changes.apply_to(&mut expected).unwrap();
    assert_eq!(store.get("doc").unwrap().unwrap(), (expected, next));
    assert_no_garbage(&etcd, "old", "doc");
}

#[test]
fn put_changes_then_get_is_the_merged_document_with_its_summary() {
    let etcd = Etcd::start();
    let store = etcd.store("merge");
    let doc = document(50);
    let r1 = store.put("signer", None, &doc).unwrap();
    let before = blob_keys(&etcd, "merge", "signer");

    let mut changes = Changes::new();
    let renewed = File::public(b"renewed".to_vec());
    changes.write("certs/leaf-3/tls.crt", renewed).unwrap();
    let new_cert = File::public(b"NEW CERT".to_vec());
    changes.write("certs/leaf-new/tls.crt", new_cert).unwrap();
    let new_key = File::secret(b"NEW KEY".to_vec());
    changes.write("certs/leaf-new/tls.key", new_key).unwrap();
    let state = File::public(state_with_one_more(50));
    changes.write("pki-state.json", state).unwrap();
    changes.remove("certs/leaf-4/tls.crt").unwrap();
    changes.remove("certs/not-there").unwrap();
    let summary = Summary::new("{\"next_wake\":\"2026-02-01T00:00:00Z\"}").unwrap();
    let r2 = store
        .put_changes("signer", &r1, &changes, Some(&summary))
        .unwrap();
    let mut merged = doc.clone();
    changes.apply_to(&mut merged).unwrap();
    assert_eq!(
        store.get("signer").unwrap().unwrap(),
        (merged.clone(), r2.clone())
    );
    assert_eq!(
        store.get_summary("signer").unwrap(),
        Some((summary.clone(), r2.clone()))
    );
    assert_eq!(head(&etcd, "merge", "signer")["files"], merged.len());
    assert_no_garbage(&etcd, "merge", "signer");
    // The state keeps the blobs of the chunks it still has: one leaf
    // record inserted changes one or two chunks of it.
    let after = blob_keys(&etcd, "merge", "signer");
    let chunks = etcd::head_files(&etcd.dump("merge"), "merge", "signer").0["pki-state.json"]
        .split(',')
        .count();
    assert!(chunks > 5, "{chunks}");
    // New: a replaced and two added files, a chunk or two of the state.
    let new = after.difference(&before).count();
    assert!((4..=5).contains(&new), "{new} new blobs");
    // Gone: the replaced file's, the removed one's, a chunk or two.
    let gone = before.difference(&after).count();
    assert!((3..=4).contains(&gone), "{gone} blobs gone");

    // Removing paths (one added above), without a summary.
    let mut removals = Changes::new();
    for path in [
        "certs/leaf-new/tls.crt",
        "certs/leaf-new/tls.key",
        "certs/leaf-5/tls.key",
    ] {
        removals.remove(path).unwrap();
    }
    let r3 = store.put_changes("signer", &r2, &removals, None).unwrap();
    removals.apply_to(&mut merged).unwrap();
    assert_eq!(
        store.get("signer").unwrap().unwrap(),
        (merged.clone(), r3.clone())
    );
    assert_eq!(store.get_summary("signer").unwrap(), None);
    assert_eq!(head(&etcd, "merge", "signer")["files"], merged.len());

    // No change of a file: the summary alone, at a new revision.
    let r4 = store
        .put_changes("signer", &r3, &Changes::new(), Some(&summary))
        .unwrap();
    assert_ne!(r4, r3);
    assert_eq!(store.get("signer").unwrap().unwrap(), (merged, r4.clone()));
    assert_eq!(store.get_summary("signer").unwrap(), Some((summary, r4)));
    assert_no_garbage(&etcd, "merge", "signer");
}

#[test]
fn a_change_too_large_for_one_transaction_in_place_is_written_whole() {
    let etcd = Etcd::start();
    let options = EtcdOptions {
        max_txn_ops: 8,
        ..quick_options()
    };
    let mut store = EtcdStore::connect(&[etcd.endpoint()], "large", options).unwrap();
    let doc = document(20);
    let mut revision = store.put("signer", None, &doc).unwrap();
    let steps = recording(&mut store);
    let mut expected = doc;
    for (n, named) in [(6, true), (7, false), (20, false)] {
        let mut changes = Changes::new();
        for i in 0..n {
            let file = File::public(format!("renewed {n}").into_bytes());
            changes
                .write(format!("certs/leaf-{i}/tls.crt"), file)
                .unwrap();
        }
        steps.lock().unwrap().clear();
        revision = store
            .put_changes("signer", &revision, &changes, None)
            .unwrap();
        let seen = steps.lock().unwrap().clone();
        assert_eq!(seen[1] == "read named entries 1", named, "{n}: {seen:?}");
        changes.apply_to(&mut expected).unwrap();
        assert_eq!(
            store.get("signer").unwrap().unwrap(),
            (expected.clone(), revision.clone())
        );
        assert_no_garbage(&etcd, "large", "signer");
    }
}

#[test]
fn a_stale_or_foreign_revision_is_a_conflict_that_writes_nothing() {
    let etcd = Etcd::start();
    let store = etcd.store("stale");
    let r1 = store.put("signer", None, &document(10)).unwrap();
    let mut changes = Changes::new();
    let file = File::public(b"one".to_vec());
    changes.write("certs/leaf-1/tls.crt", file).unwrap();
    let r2 = store.put_changes("signer", &r1, &changes, None).unwrap();
    let before = etcd.dump("");

    let mut other = Changes::new();
    other.write("x", File::public(b"x".to_vec())).unwrap();
    other.remove("certs/leaf-2/tls.crt").unwrap();
    let (expected, found) =
        expect_conflict(store.put_changes("signer", &r1, &other, None).unwrap_err());
    assert_eq!((expected, found), (Some(r1), Some(r2.clone())));
    let foreign = Revision::new("from-another-store");
    let (_, found) = expect_conflict(
        store
            .put_changes("signer", &foreign, &other, None)
            .unwrap_err(),
    );
    assert_eq!(found, Some(r2.clone()));
    let (_, found) = expect_conflict(store.put_changes("nothing", &r2, &other, None).unwrap_err());
    assert_eq!(found, None);
    assert_eq!(etcd.dump(""), before);

    // A commit that lands between this write's reads and its commit: the
    // commit's compare fails, and what this write wrote goes.
    let mut racing = etcd.store("stale");
    let winner = etcd.store("stale");
    let won = Arc::new(Mutex::new(None));
    let record = won.clone();
    let from = r2.clone();
    racing.set_write_hook(Some(Box::new(move |step| {
        if step == "commit" {
            let mut c = Changes::new();
            c.write("won", File::public(b"won".to_vec())).unwrap();
            *record.lock().unwrap() = Some(winner.put_changes("signer", &from, &c, None).unwrap());
        }
        Ok(())
    })));
    let mut large = Changes::new();
    large
        .write("pki-state.json", File::public(state_with_one_more(10)))
        .unwrap();
    let (_, found) = expect_conflict(racing.put_changes("signer", &r2, &large, None).unwrap_err());
    assert_eq!(found, *won.lock().unwrap());
    let (files, _) = store.get("signer").unwrap().unwrap();
    assert_eq!(files.get("won"), Some(&b"won"[..]));
    assert_no_garbage(&etcd, "stale", "signer");
}

#[test]
fn a_file_altered_by_hand_is_refused_by_get_paths_as_by_get() {
    let etcd = Etcd::start();
    let store = etcd.store("pki");
    store.put("signer", None, &document(20)).unwrap();
    let (files, _) = etcd::head_files(&etcd.dump("pki"), "pki", "signer");
    let blob = format!("pki/signer/.blobs/{}", files["certs/leaf-3/tls.key"]);
    etcd::put_raw(&etcd.endpoint(), &blob, b"OTHER KEY");
    let named = set(&["certs/leaf-3/tls.key", "pki-state.json"]);
    for err in [
        store.get("signer").unwrap_err(),
        store.get_paths("signer", &named).unwrap_err(),
    ] {
        assert!(
            matches!(
                err,
                RotateError::Document(pki_rotate::DocumentError::Corrupt { .. })
            ),
            "{err}"
        );
        let text = err.to_string();
        assert!(
            text.contains("certs/leaf-3/tls.key") && text.contains("SHA-256"),
            "{text}"
        );
    }
    // One chunk of the state altered.
    let state_blob = files["pki-state.json"].split(',').nth(3).unwrap();
    etcd::put_raw(
        &etcd.endpoint(),
        &format!("pki/signer/.blobs/{state_blob}"),
        b"{}",
    );
    let text = store
        .get_paths("signer", &set(&["pki-state.json"]))
        .unwrap_err()
        .to_string();
    assert!(
        text.contains("pki-state.json") && text.contains("SHA-256"),
        "{text}"
    );
    etcd::delete_raw(&etcd.endpoint(), &blob);
    let text = store.get_paths("signer", &named).unwrap_err().to_string();
    assert!(
        text.contains("certs/leaf-3/tls.key") && text.contains("missing"),
        "{text}"
    );
}

/// Change `g` of a document: the state with generation `g`'s records
/// (chunks enough for several transactions of 8), two files replaced, one
/// added and one removed: six entries, in place in a transaction of 8.
fn change(g: usize) -> Changes {
    let mut c = Changes::new();
    let names = (0..6000).map(|i| format!("svc{i}-{}", if i % 1000 == 0 { g } else { 0 }));
    c.write("pki-state.json", File::public(state(names)))
        .unwrap();
    for i in [g % 5, g % 5 + 5] {
        let file = File::secret(format!("KEY {i} at {g}").into_bytes());
        c.write(format!("certs/leaf-{i}/tls.key"), file).unwrap();
    }
    c.write(format!("extra/{g}"), File::public(vec![b'x'; 100]))
        .unwrap();
    if g > 0 {
        c.remove(format!("extra/{}", g - 1)).unwrap();
    }
    c
}

#[test]
fn killing_etcd_before_each_step_of_a_partial_write_leaves_the_old_or_the_new_document() {
    let etcd = Arc::new(Mutex::new(Etcd::start()));
    let kill_at = Arc::new(Mutex::new(None::<String>));
    let store = killing_store(&etcd, "crash", &kill_at);
    let mut revision = store.put("signer", None, &document(20)).unwrap();
    let mut g = 0;
    revision = store
        .put_changes("signer", &revision, &change(g), None)
        .unwrap();
    g += 1;
    let steps = Arc::new(Mutex::new(Vec::new()));
    {
        let mut probe = killing_store(&etcd, "crash", &kill_at);
        let record = steps.clone();
        probe.set_write_hook(Some(Box::new(move |step| {
            record.lock().unwrap().push(step.to_string());
            Ok(())
        })));
        probe
            .put_changes("signer", &revision, &change(g), None)
            .unwrap();
        g += 1;
    }
    let steps = steps.lock().unwrap().clone();
    assert_eq!(steps[..2], ["read head", "read named entries 1"]);
    let batches = steps
        .iter()
        .filter(|s| s.starts_with("write blobs"))
        .count();
    assert!(batches >= 2, "{steps:?}");
    assert!(steps.iter().all(|s| s != "read entries 1"), "{steps:?}");
    let commit = steps.iter().position(|s| s == "commit").unwrap();

    for (i, step) in steps.iter().enumerate() {
        let old = store.get("signer").unwrap().unwrap();
        let mut new = old.0.clone();
        change(g).apply_to(&mut new).unwrap();
        *kill_at.lock().unwrap() = Some(step.clone());
        let result = store.put_changes("signer", &old.1, &change(g), None);
        assert!(kill_at.lock().unwrap().is_none(), "step {step} never came");
        etcd.lock().unwrap().restart();
        let (now, now_rev) = store.get("signer").unwrap().unwrap();
        if i <= commit {
            let err = result.unwrap_err();
            let unknown = i == commit && err.is_unknown_outcome();
            assert!(
                unknown
                    || matches!(
                        err,
                        RotateError::Store(pki_rotate::StoreError::Backend { .. })
                    ),
                "{step}: {err}"
            );
            assert_eq!((now, now_rev), old, "{step}");
        } else {
            let r = result.unwrap();
            assert_eq!((now, now_rev), (new, r), "{step}");
            g += 1;
        }
        // The next write (partial too) succeeds and leaves no garbage:
        // what the stopped attempt left is found by its marker.
        let (files, current) = store.get("signer").unwrap().unwrap();
        revision = store
            .put_changes("signer", &current, &change(g), None)
            .unwrap();
        let mut expected = files;
        change(g).apply_to(&mut expected).unwrap();
        g += 1;
        assert_no_garbage(&etcd.lock().unwrap(), "crash", "signer");
        assert_eq!(
            store.get("signer").unwrap().unwrap(),
            (expected, revision.clone())
        );
    }
}

/// What a step reads and writes: on a document of 1,000 leaves (2,000
/// files and a chunked state), `get_paths` of the state and one leaf reads
/// the head, those entries and their blobs, and `put_changes` of them
/// reads those entries, not the 2,001; both cost a small fraction of the
/// whole read and write.
#[test]
fn a_partial_read_and_write_cost_what_the_named_files_cost() {
    let etcd = Etcd::start();
    let proxy = proxy::Proxy::start(&etcd.endpoint());
    let mut store = EtcdStore::connect(&[proxy.endpoint()], "cost", quick_options()).unwrap();
    let doc = document(1000);
    let mut revision = store.put("signer", None, &doc).unwrap();
    let steps = recording(&mut store);
    let leaf = ["certs/leaf-7/tls.crt", "certs/leaf-7/tls.key"];
    let named = set(&[leaf[0], leaf[1], "pki-state.json"]);
    let named_bytes: usize = named.iter().map(|p| doc.get(p).unwrap().len()).sum();
    let whole_bytes: usize = doc.iter().map(|(_, f)| f.contents.len()).sum();

    let measure = |what: &str, run: &mut dyn FnMut()| -> (Vec<String>, u64, u64) {
        steps.lock().unwrap().clear();
        let (sent, received) = proxy.bytes();
        run();
        let (sent_after, received_after) = proxy.bytes();
        let seen = steps.lock().unwrap().clone();
        let cost = (seen, sent_after - sent, received_after - received);
        eprintln!(
            "{what}: {} requests, {} bytes sent, {} bytes received: {:?}",
            cost.0.len(),
            cost.1,
            cost.2,
            cost.0
        );
        cost
    };

    let (_, _, get_in) = measure("get", &mut || {
        store.get("signer").unwrap().unwrap();
    });
    let (paths_steps, _, paths_in) = measure("get_paths", &mut || {
        let (files, _) = store.get_paths("signer", &named).unwrap().unwrap();
        assert_eq!(files.len(), 3);
    });
    assert_eq!(
        paths_steps,
        ["read head", "read named entries 1", "read blobs 1"]
    );
    assert!(get_in as usize > whole_bytes, "{get_in}");
    // The named files' bytes, and a few kilobytes of head, entries and framing.
    assert!(
        (paths_in as usize) < named_bytes + 32 * 1024,
        "{paths_in} for {named_bytes}"
    );
    assert!(paths_in * 5 < get_in, "{paths_in} vs {get_in}");

    let mut changed = doc.clone();
    let mut changes = Changes::new();
    changes
        .write(leaf[0], File::public(b"renewed".to_vec()))
        .unwrap();
    changes
        .write(leaf[1], File::secret(b"new key".to_vec()))
        .unwrap();
    changes
        .write("pki-state.json", File::public(state_with_one_more(1000)))
        .unwrap();
    changes.apply_to(&mut changed).unwrap();
    let (put_steps, put_out, put_in) = measure("put", &mut || {
        revision = store.put("signer", Some(&revision), &changed).unwrap();
    });
    let mut back = Changes::new();
    for path in &named {
        back.write(path.clone(), doc.file(path).unwrap().clone())
            .unwrap();
    }
    let (changes_steps, changes_out, changes_in) = measure("put_changes", &mut || {
        revision = store.put_changes("signer", &revision, &back, None).unwrap();
    });
    assert_eq!(
        changes_steps,
        [
            "read head",
            "read named entries 1",
            "write blobs 1/1",
            "commit",
            "delete garbage 1/1",
            "list generations",
            "list attempts",
            "delete marker",
        ]
    );
    assert!(
        put_steps.contains(&"read entries 1".to_string()),
        "{put_steps:?}"
    );
    // The whole write reads every entry; the partial one reads three.
    assert!(changes_in * 10 < put_in, "{changes_in} vs {put_in}");
    assert!(changes_out <= put_out + 1024, "{changes_out} vs {put_out}");
    assert_eq!(store.get("signer").unwrap().unwrap(), (doc, revision));
}

/// A store reaching etcd through `proxy` that loses etcd's answers from
/// its commit on; returns it and the steps of its writes.
fn losing_store(proxy: &Arc<proxy::Proxy>, prefix: &str) -> (EtcdStore, Arc<Mutex<Vec<String>>>) {
    let options = EtcdOptions {
        request_timeout: Duration::from_secs(2),
        ..quick_options()
    };
    let mut store = EtcdStore::connect(&[proxy.endpoint()], prefix, options).unwrap();
    let steps = Arc::new(Mutex::new(Vec::new()));
    let (record, trigger) = (steps.clone(), proxy.clone());
    store.set_write_hook(Some(Box::new(move |step| {
        record.lock().unwrap().push(step.to_string());
        if step == "commit" {
            trigger.lose_replies();
        }
        Ok(())
    })));
    (store, steps)
}

#[test]
fn a_partial_commit_whose_answer_is_lost_is_resolved_by_its_head_or_unknown() {
    let etcd = Etcd::start();
    let direct = etcd.store("lost");
    let doc = document(20);
    let r1 = direct.put("signer", None, &doc).unwrap();
    let mut changes = change(1);
    let summary = Summary::new("{}").unwrap();

    // The connection is cut after the answer is lost: the store reads the
    // head again, finds its commit there, and cleans up after it.
    let proxy = Arc::new(proxy::Proxy::start(&etcd.endpoint()));
    proxy.cut_after(Duration::from_millis(300));
    let (store, steps) = losing_store(&proxy, "lost");
    let r2 = store
        .put_changes("signer", &r1, &changes, Some(&summary))
        .unwrap();
    assert!(steps.lock().unwrap().contains(&"check commit".to_string()));
    let mut expected = doc;
    changes.apply_to(&mut expected).unwrap();
    assert_eq!(
        direct.get("signer").unwrap().unwrap(),
        (expected.clone(), r2.clone())
    );
    assert_eq!(
        direct.get_summary("signer").unwrap(),
        Some((summary, r2.clone()))
    );
    assert_no_garbage(&etcd, "lost", "signer");

    // Lost for good: an unknown outcome, never a conflict or a plain
    // failure; it landed, and the next write cleans up after it.
    let proxy = Arc::new(proxy::Proxy::start(&etcd.endpoint()));
    let (store, _) = losing_store(&proxy, "lost");
    changes = change(2);
    let err = store
        .put_changes("signer", &r2, &changes, None)
        .unwrap_err();
    assert!(err.is_unknown_outcome(), "{err}");
    changes.apply_to(&mut expected).unwrap();
    let (files, r3) = direct.get("signer").unwrap().unwrap();
    assert_eq!(files, expected);
    let r4 = direct.put_changes("signer", &r3, &change(3), None).unwrap();
    change(3).apply_to(&mut expected).unwrap();
    assert_eq!(direct.get("signer").unwrap().unwrap(), (expected, r4));
    assert_no_garbage(&etcd, "lost", "signer");
}
