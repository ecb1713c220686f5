//! The etcd store against a real etcd server: round trips, compare-and-swap,
//! large documents within etcd's limits, crashes of the server at every
//! step of a write, unreachable servers, and a cluster with one endpoint
//! down.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::etcd;

use etcd::{Etcd, killing_store, quick_options};
use pki_etcd::{EtcdOptions, EtcdStore, OpenError, UrlError};
use pki_rotate::{File, Files, Revision, RotateError, Store};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn files(pairs: &[(&str, &str, bool)], dirs: &[&str]) -> Files {
    let mut f = Files::new();
    for (path, text, secret) in pairs {
        let file = if *secret {
            File::secret(text.as_bytes().to_vec())
        } else {
            File::public(text.as_bytes().to_vec())
        };
        f.insert(*path, file).unwrap();
    }
    for d in dirs {
        f.insert_dir(*d).unwrap();
    }
    f
}

/// Blob keys of `key` in the store under `prefix`, and the blob keys its
/// head references.
fn blobs(etcd: &Etcd, prefix: &str, key: &str) -> (BTreeSet<String>, BTreeSet<String>) {
    let dump = etcd.dump(prefix);
    let blob_prefix = format!("{prefix}/{key}/.blobs/");
    let present = dump
        .iter()
        .filter(|(k, _, _)| k.starts_with(&blob_prefix))
        .map(|(k, _, _)| k.clone())
        .collect();
    let referenced = etcd::head_files(&dump, prefix, key)
        .0
        .values()
        .flat_map(|ids| ids.split(','))
        .filter(|id| !id.is_empty())
        .map(|id| format!("{blob_prefix}{id}"))
        .collect();
    (present, referenced)
}

/// Nothing is left that the head does not need: no unreferenced blob, no
/// entry of another generation, no attempt marker.
fn assert_no_garbage(etcd: &Etcd, prefix: &str, key: &str) {
    let (_, unneeded) = etcd::head_files(&etcd.dump(prefix), prefix, key);
    assert!(unneeded.is_empty(), "keys left behind: {unneeded:?}");
}

fn expect_conflict(err: RotateError) -> (Option<Revision>, Option<Revision>) {
    match err {
        RotateError::Store(pki_rotate::StoreError::Conflict {
            expected, found, ..
        }) => (expected, found),
        other => panic!("expected a conflict, got {other}"),
    }
}

#[test]
fn the_store_is_send_and_sync() {
    fn shareable<T: Send + Sync>() {}
    shareable::<EtcdStore>();
}

#[test]
fn documents_round_trip_and_stale_writes_conflict_without_writing() {
    let etcd = Etcd::start();
    let store = etcd.store("pki/t1");
    assert_eq!(store.location(), etcd.url("pki/t1"));
    assert!(store.get("signer").unwrap().is_none());

    let a = files(
        &[
            ("pki-state.json", "{\"kind\":\"signer\"}", false),
            ("signer/tls.crt", "CERT A", false),
            ("signer/tls.key", "KEY A", true),
            ("empty", "", false),
        ],
        &["certs", "targets/x"],
    );
    let r1 = store.put("signer", None, &a).unwrap();
    let (got, rev) = store.get("signer").unwrap().unwrap();
    assert_eq!(got, a);
    assert!(got.file("signer/tls.key").unwrap().secret);
    assert!(!got.file("signer/tls.crt").unwrap().secret);
    assert_eq!(got.dirs().collect::<Vec<_>>(), ["certs", "targets/x"]);
    assert_eq!(rev, r1);

    // A second store (another replica) reads the same.
    let other = EtcdStore::from_url(&etcd.url("pki/t1")).unwrap();
    assert_eq!(
        other.get("signer").unwrap().unwrap(),
        (a.clone(), r1.clone())
    );

    let before = etcd.dump("");
    // Create-only when it exists.
    let (expected, found) = expect_conflict(store.put("signer", None, &a).unwrap_err());
    assert_eq!((expected, found), (None, Some(r1.clone())));

    let b = files(
        &[
            ("pki-state.json", "{\"kind\":\"signer\",\"v\":2}", false),
            ("signer/tls.crt", "CERT B", false),
            ("signer/tls.key", "KEY A", true),
        ],
        &["certs"],
    );
    // Stale and foreign revisions.
    let stale = Revision::new((r1.as_str().parse::<i64>().unwrap() - 1).to_string());
    for wrong in [stale, Revision::new("not-a-number"), Revision::new("0")] {
        let (expected, found) = expect_conflict(store.put("signer", Some(&wrong), &b).unwrap_err());
        assert_eq!((expected, found), (Some(wrong), Some(r1.clone())));
    }
    // Expecting a document where there is none.
    let (_, found) = expect_conflict(store.put("nothing", Some(&r1), &b).unwrap_err());
    assert_eq!(found, None);
    assert_eq!(etcd.dump(""), before, "a conflict wrote something");

    let r2 = other.put("signer", Some(&r1), &b).unwrap();
    assert_ne!(r1, r2);
    let (expected, found) = expect_conflict(store.put("signer", Some(&r1), &a).unwrap_err());
    assert_eq!((expected, found), (Some(r1.clone()), Some(r2.clone())));
    assert_eq!(
        store.get("signer").unwrap().unwrap(),
        (b.clone(), r2.clone())
    );
    assert_no_garbage(&etcd, "pki/t1", "signer");

    // Every key lives under the prefix.
    for (key, _, _) in etcd.dump("") {
        assert!(key.starts_with("pki/t1/"), "{key}");
    }
    // Documents of several keys share a prefix without touching each other.
    let r = store.put("creds/db", None, &a).unwrap();
    assert_eq!(store.get("creds/db").unwrap().unwrap(), (a.clone(), r));
    assert_eq!(store.get("signer").unwrap().unwrap(), (b, r2));
    assert_eq!(store.keys().unwrap(), ["creds/db", "signer"]);
    assert!(matches!(
        store.get("Bad Key").unwrap_err(),
        RotateError::Store(pki_rotate::StoreError::InvalidKey { .. })
    ));
}

#[test]
fn a_missing_or_altered_blob_is_corrupt_state_naming_the_file() {
    let etcd = Etcd::start();
    let store = etcd.store("pki");
    let a = files(
        &[
            ("signer/tls.crt", "CERT", false),
            ("signer/tls.key", "KEY", true),
        ],
        &[],
    );
    store.put("signer", None, &a).unwrap();
    let (files, _) = etcd::head_files(&etcd.dump("pki"), "pki", "signer");
    let blob = format!("pki/signer/.blobs/{}", files["signer/tls.key"]);

    etcd::put_raw(&etcd.endpoint(), &blob, b"OTHER KEY");
    let err = store.get("signer").unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::Document(pki_rotate::DocumentError::Corrupt { .. })
        ),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("signer/tls.key") && text.contains("SHA-256"),
        "{text}"
    );

    etcd::delete_raw(&etcd.endpoint(), &blob);
    let text = store.get("signer").unwrap_err().to_string();
    assert!(
        text.contains("signer/tls.key") && text.contains("missing"),
        "{text}"
    );

    // An entry that goes missing is noticed: the head counts its files.
    let entry = etcd
        .dump("pki")
        .into_iter()
        .map(|(k, _, _)| k)
        .find(|k| k.starts_with("pki/signer/.files/") && k.ends_with("/signer/tls.crt"))
        .unwrap();
    etcd::delete_raw(&etcd.endpoint(), &entry);
    let text = store.get("signer").unwrap_err().to_string();
    assert!(
        text.contains("the head names 2 files") && text.contains("holds 1 entries"),
        "{text}"
    );

    etcd::put_raw(
        &etcd.endpoint(),
        "pki/signer",
        b"{\"format\":9,\"files\":{}}",
    );
    let text = store.get("signer").unwrap_err().to_string();
    assert!(text.contains("format 9 is not supported"), "{text}");
}

/// 1,000 leaves: a certificate and a key each, about 1.7 MB in all.
fn large_document(generation: u8) -> Files {
    let mut f = Files::new();
    for i in 0..1000 {
        let cert = format!("{generation}-{i}-").repeat(180).into_bytes();
        let key = format!("key-{i}-").repeat(80).into_bytes();
        f.insert(format!("certs/leaf-{i}/tls.crt"), File::public(cert))
            .unwrap();
        f.insert(format!("certs/leaf-{i}/tls.key"), File::secret(key))
            .unwrap();
    }
    f.insert_dir("certs").unwrap();
    f
}

#[test]
fn a_document_beyond_etcds_limits_round_trips_and_a_change_writes_only_what_changed() {
    let etcd = Etcd::start();
    let mut store = etcd.store("big");
    let doc = large_document(1);
    let total: usize = doc.iter().map(|(_, f)| f.contents.len()).sum();
    assert!(doc.len() >= 2000 && total > pki_etcd::DEFAULT_MAX_REQUEST_BYTES);
    let r1 = store.put("signer", None, &doc).unwrap();
    assert_eq!(
        store.get("signer").unwrap().unwrap(),
        (doc.clone(), r1.clone())
    );
    let (before, referenced) = blobs(&etcd, "big", "signer");
    assert_eq!(before.len(), 2000);
    assert_eq!(before, referenced);

    let steps = Arc::new(Mutex::new(Vec::new()));
    let record = steps.clone();
    store.set_write_hook(Some(Box::new(move |step| {
        record.lock().unwrap().push(step.to_string());
        Ok(())
    })));
    let mut changed = doc.clone();
    changed
        .insert("certs/leaf-7/tls.crt", File::public(b"renewed".to_vec()))
        .unwrap();
    changed
        .insert("certs/leaf-7/tls.key", File::secret(b"new key".to_vec()))
        .unwrap();
    let r2 = store.put("signer", Some(&r1), &changed).unwrap();
    // The 2,000 entries are read in one page; then one request writes the
    // two new blobs, one commits, one removes the two old ones, and the
    // marker of the attempt goes once nothing else is left to do.
    let expected: Vec<String> = [
        "read head",
        "read entries 1",
        "write blobs 1/1",
        "commit",
        "delete garbage 1/1",
        "list generations",
        "list attempts",
        "delete marker",
    ]
    .map(String::from)
    .to_vec();
    assert_eq!(*steps.lock().unwrap(), expected);
    let (after, referenced) = blobs(&etcd, "big", "signer");
    assert_eq!(after, referenced);
    assert_eq!(after.difference(&before).count(), 2, "only two new blobs");
    assert_eq!(
        before.difference(&after).count(),
        2,
        "only two old blobs gone"
    );
    assert_eq!(store.get("signer").unwrap().unwrap(), (changed, r2));
}

/// Generation `g` of a 40-file document: each generation changes 20 files
/// (3 blob batches and 3 garbage batches of 8) and keeps 20.
fn generation(g: usize) -> Files {
    let mut f = Files::new();
    for i in 0..40 {
        let text = if i % 2 == 0 {
            format!("file {i} of generation {g}")
        } else {
            format!("file {i}, always the same")
        };
        f.insert(
            format!("d/f{i}"),
            File {
                contents: text.into_bytes().into(),
                secret: i % 3 == 0,
            },
        )
        .unwrap();
    }
    f.insert_dir(format!("dirs/g{g}")).unwrap();
    f
}

#[test]
fn killing_etcd_before_each_step_of_a_write_leaves_the_old_or_the_new_document() {
    let etcd = Arc::new(Mutex::new(Etcd::start()));
    let kill_at = Arc::new(Mutex::new(None::<String>));
    let store = killing_store(&etcd, "crash", &kill_at);
    let mut g = 0;
    let mut revision = store.put("signer", None, &generation(g)).unwrap();
    g += 1;
    // Learn the steps of a write like the ones below.
    let steps = Arc::new(Mutex::new(Vec::new()));
    {
        let mut probe = killing_store(&etcd, "crash", &kill_at);
        let record = steps.clone();
        probe.set_write_hook(Some(Box::new(move |step| {
            record.lock().unwrap().push(step.to_string());
            Ok(())
        })));
        revision = probe
            .put("signer", Some(&revision), &generation(g))
            .unwrap();
        g += 1;
    }
    let steps = steps.lock().unwrap().clone();
    // 20 changes do not fit one transaction of 8: the write starts a new
    // generation, written in several transactions before the commit.
    let batches = steps
        .iter()
        .filter(|s| s.starts_with("write blobs"))
        .count();
    assert!(batches >= 5, "{steps:?}");
    let commit = steps.iter().position(|s| s == "commit").unwrap();

    for (i, step) in steps.iter().enumerate() {
        let old = store.get("signer").unwrap().unwrap();
        let new = generation(g);
        *kill_at.lock().unwrap() = Some(step.clone());
        let started = Instant::now();
        let result = store.put("signer", Some(&revision), &new);
        let took = started.elapsed();
        assert!(kill_at.lock().unwrap().is_none(), "step {step} never came");
        assert!(took < Duration::from_secs(8), "{step}: took {took:?}");
        etcd.lock().unwrap().restart();
        let (now, now_rev) = store.get("signer").unwrap().unwrap();
        if i <= commit {
            // The server was down before the request that commits: a clear
            // error, and the old document whole. At the commit, the client
            // may still write its request on the connection that is going
            // away: then it cannot know that etcd never read it, and says
            // the outcome is unknown (never that nothing changed when it
            // cannot tell). Refused connections are certain: a backend error.
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
            let text = err.to_string();
            assert!(!text.contains('\n'), "{text}");
            let url = etcd.lock().unwrap().url("crash");
            assert!(
                text.starts_with(&url) || unknown && text.contains(&url),
                "{text}"
            );
            assert_eq!((now, now_rev), old, "{step}");
        } else {
            // Committed; only the garbage collection failed.
            let r = result.unwrap();
            assert_eq!((now, now_rev), (new, r), "{step}");
            g += 1;
        }
        // The next write succeeds and leaves no garbage behind.
        let (_, current) = store.get("signer").unwrap().unwrap();
        revision = store.put("signer", Some(&current), &generation(g)).unwrap();
        g += 1;
        assert_no_garbage(&etcd.lock().unwrap(), "crash", "signer");
        assert_eq!(store.get("signer").unwrap().unwrap().0, generation(g - 1));
    }
}

#[test]
fn an_unreachable_server_is_a_backend_error_within_the_timeout() {
    // A port nobody listens on, and no server of this process will.
    let port = etcd::free_port();
    let options = EtcdOptions {
        connect_timeout: Duration::from_secs(1),
        ..EtcdOptions::default()
    };
    let started = Instant::now();
    let err = EtcdStore::connect(&[format!("127.0.0.1:{port}")], "pki", options).unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    let OpenError::Store(err @ RotateError::Store(pki_rotate::StoreError::Backend { .. })) = err
    else {
        panic!("expected a backend error, got {err}");
    };
    let text = err.to_string();
    assert!(
        text.starts_with(&format!("etcd://127.0.0.1:{port}/pki: connecting")),
        "{text}"
    );
    assert!(!text.contains('\n'), "{text}");

    // A port that accepts connections and never answers: the timeout.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = silent.local_addr().unwrap();
    let options = EtcdOptions {
        connect_timeout: Duration::from_secs(1),
        ..EtcdOptions::default()
    };
    let started = Instant::now();
    let err = EtcdStore::connect(&[address.to_string()], "pki", options).unwrap_err();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "{took:?}");
    let text = err.to_string();
    assert!(text.contains("no answer from etcd within 1s"), "{text}");
    drop(silent);

    // A server that goes away after connecting: bounded too.
    let mut etcd = Etcd::start();
    let store = EtcdStore::connect(
        &[etcd.endpoint()],
        "pki",
        EtcdOptions {
            request_timeout: Duration::from_secs(1),
            ..EtcdOptions::default()
        },
    )
    .unwrap();
    etcd.kill();
    let started = Instant::now();
    let err = store.get("signer").unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    assert!(
        matches!(
            err,
            RotateError::Store(pki_rotate::StoreError::Backend { .. })
        ),
        "{err}"
    );
    let err = store.put("signer", None, &Files::new()).unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::Store(pki_rotate::StoreError::Backend { .. })
        ),
        "{err}"
    );
    assert!(!err.is_conflict());
}

#[test]
fn with_one_endpoint_down_a_store_uses_the_other_whatever_their_order() {
    let etcd = Etcd::start();
    // Ports nobody listens on, and no server of this process will.
    let down = format!("127.0.0.1:{}", etcd::free_port());
    let also_down = format!("127.0.0.1:{}", etcd::free_port());
    let orders = [
        [down.clone(), etcd.endpoint()],
        [etcd.endpoint(), down.clone()],
    ];
    for (n, endpoints) in orders.iter().enumerate() {
        let started = Instant::now();
        let store = EtcdStore::connect(endpoints, &format!("multi{n}"), quick_options()).unwrap();
        // Each round is several requests: a store that sent any of them
        // to the endpoint that is down would fail.
        let mut revision = None;
        for g in 0..10 {
            let doc = files(&[("state.json", &format!("{{\"g\":{g}}}"), false)], &[]);
            revision = Some(store.put("doc", revision.as_ref(), &doc).unwrap());
            let (got, read) = store.get("doc").unwrap().unwrap();
            assert_eq!((got, Some(read)), (doc, revision.clone()), "{endpoints:?}");
        }
        let took = started.elapsed();
        assert!(took < Duration::from_secs(10), "{endpoints:?}: {took:?}");
    }

    // Every endpoint down: one backend error, within the connect timeout.
    let started = Instant::now();
    let err = EtcdStore::connect(&[down, also_down], "pki", quick_options()).unwrap_err();
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "{took:?}");
    let text = err.to_string();
    assert!(text.contains(": connecting: "), "{text}");
    assert!(!text.contains('\n'), "{text}");
}

#[test]
fn compacting_the_history_makes_every_earlier_revision_unreadable_and_can_be_repeated() {
    use pki_etcd::client::GetOptions;
    let etcd = Etcd::start();
    let store = etcd.store("compact");
    let old = files(&[("signer/tls.key", "OLD KEY", true)], &[]);
    let r1 = store.put("signer", None, &old).unwrap();
    let new = files(&[("signer/tls.key", "NEW KEY", true)], &[]);
    store.put("signer", Some(&r1), &new).unwrap();
    let read_at = |revision: i64| {
        etcd.with_client(async |client| {
            let options = GetOptions::new().with_prefix().with_revision(revision);
            client
                .kv()
                .get("compact/", Some(options))
                .await
                .map(|a| a.kvs().iter().any(|kv| kv.value() == b"OLD KEY"))
                .map_err(|e| e.to_string())
        })
    };
    let before: i64 = r1.as_str().parse().unwrap();
    assert_eq!(read_at(before), Ok(true), "the old value is in the history");

    let compacted = store.compact_history().unwrap();
    assert!(compacted > before);
    let err = read_at(before).unwrap_err();
    assert!(err.contains("compacted"), "{err}");
    assert_eq!(store.get("signer").unwrap().unwrap().0, new);
    // Again, with nothing written since: already compacted is compacted.
    assert_eq!(store.compact_history().unwrap(), compacted);
}

#[test]
fn a_malformed_url_is_a_url_error_not_a_backend_error() {
    for url in [
        "etcd://127.0.0.1:2379",
        "etcd://127.0.0.1:2379/",
        "etcd://:1/p",
        "/var/lib/pki",
    ] {
        match EtcdStore::from_url(url) {
            Err(OpenError::Url(e)) => {
                let _: UrlError = e;
            }
            Err(other) => panic!("{url}: {other}"),
            Ok(_) => panic!("{url}: opened"),
        }
    }
    let err = EtcdStore::connect(&["127.0.0.1:2379"], "a//b", EtcdOptions::default()).unwrap_err();
    assert!(
        matches!(err, OpenError::Url(UrlError::Prefix { .. })),
        "{err}"
    );
}

#[test]
fn a_file_whose_pieces_exceed_one_request_is_refused_before_anything_is_written() {
    let etcd = Etcd::start();
    let options = EtcdOptions {
        max_request_bytes: 64 * 1024,
        ..quick_options()
    };
    let store = EtcdStore::connect(&[etcd.endpoint()], "limits", options).unwrap();
    let mut doc = files(&[("small", "x", false)], &[]);
    doc.insert("huge.crt", File::public(vec![b'a'; 100 * 1024]))
        .unwrap();
    let err = store.put("signer", None, &doc).unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::Store(pki_rotate::StoreError::Backend { .. })
        ),
        "{err}"
    );
    assert!(
        err.to_string()
            .contains("a piece of file huge.crt is 65536 bytes, more than one etcd request may carry (65536 bytes)"),
        "{err}"
    );
    assert!(etcd.dump("limits").is_empty());
    // Many small files go in several requests within the same limit.
    let mut doc = Files::new();
    for i in 0..50 {
        doc.insert(format!("f{i}"), File::public(vec![i as u8; 4000]))
            .unwrap();
    }
    let r = store.put("signer", None, &doc).unwrap();
    assert_eq!(store.get("signer").unwrap().unwrap(), (doc, r));
}

/// Generation `g` of a document whose files all change every generation.
fn tagged(g: usize, files: usize) -> Files {
    let mut f = Files::new();
    for i in 0..files {
        f.insert(
            format!("f/{i:04}"),
            File::public(format!("{g}:{i}").into_bytes()),
        )
        .unwrap();
    }
    f
}

#[test]
fn a_read_is_one_snapshot_even_when_a_commit_and_its_collection_fall_inside_it() {
    let etcd = Etcd::start();
    let writer = etcd.store("snap1");
    let first = writer.put("doc", None, &tagged(0, 600)).unwrap();
    let mut reader = etcd.store("snap1");
    // Between the reader's head and its second page of blobs, the writer
    // replaces every file, and its garbage collection deletes every blob
    // the reader is about to read.
    let fired = std::sync::atomic::AtomicBool::new(false);
    reader.set_read_hook(Some(Box::new(move |step| {
        if step == "read blobs 2" && !fired.swap(true, std::sync::atomic::Ordering::SeqCst) {
            writer.put("doc", Some(&first), &tagged(1, 600)).unwrap();
        }
        Ok(())
    })));
    let (files, revision) = reader.get("doc").unwrap().unwrap();
    assert_eq!(files, tagged(0, 600));
    let (files, newer) = reader.get("doc").unwrap().unwrap();
    assert_eq!(files, tagged(1, 600));
    assert_ne!(revision, newer);
    assert_no_garbage(&etcd, "snap1", "doc");
}

#[test]
fn readers_see_whole_documents_while_a_writer_commits_and_collects_garbage() {
    let etcd = Etcd::start();
    // More files than one page of blobs, so that a read takes several
    // requests and commits and collections may fall between them.
    const FILES: usize = 600;
    const GENERATIONS: usize = 10;
    let writer = etcd.store("snap");
    let mut revision = writer.put("doc", None, &tagged(0, FILES)).unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let reads = std::thread::scope(|scope| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                let store = etcd.store("snap");
                let done = &done;
                scope.spawn(move || {
                    let mut seen = 0;
                    while !done.load(std::sync::atomic::Ordering::SeqCst) {
                        let (files, _) = store.get("doc").unwrap().unwrap();
                        let text =
                            String::from_utf8(files.get("f/0000").unwrap().to_vec()).unwrap();
                        let g: usize = text.split(':').next().unwrap().parse().unwrap();
                        assert_eq!(files, tagged(g, FILES), "a read mixed generations");
                        seen += 1;
                    }
                    seen
                })
            })
            .collect();
        for g in 1..=GENERATIONS {
            revision = writer
                .put("doc", Some(&revision), &tagged(g, FILES))
                .unwrap();
        }
        done.store(true, std::sync::atomic::Ordering::SeqCst);
        readers
            .into_iter()
            .map(|r| r.join().unwrap())
            .sum::<usize>()
    });
    assert!(reads > 0);
    assert_no_garbage(&etcd, "snap", "doc");
}
