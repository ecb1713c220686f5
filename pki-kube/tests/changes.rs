//! Writing and reading parts of a document on a real kube-apiserver
//! (`put_changes`, `get_paths`): a one-leaf change reads and writes a
//! number of Secrets that does not grow with the document (counted by the
//! API server itself); the files after a series of changes are those of
//! whole writes, and a document that outgrew its buckets is rewritten with
//! more; a stale revision writes nothing; a store of the previous format
//! is read and converted; the sweep never removes a shard the head still
//! names; a write of changes stopped at any request leaves the old
//! document.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use pki_kube::{KubeOptions, KubeStore, KubeUrl};
use pki_rotate::store::{Changes, only_paths};
use pki_rotate::{File, Files, Revision, RotateError, Store, StoreError};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::admin::{Admin, NAMESPACE, open, options};
use support::kube::KubeServer;

/// The head files of a signer, as its part steps name them.
const HEAD_PATHS: [&str; 6] = [
    "pki-state.json",
    "ca-bundle.crt",
    "signer/tls.crt",
    "signer/tls.key",
    "signer/intermediate-ca.crt",
    "signer/ca-chain.crt",
];

/// The files of leaf `name`, `salt` making them differ.
fn leaf(name: &str, salt: u8) -> [(String, File); 4] {
    let fill = |n: usize, b: u8| vec![b ^ salt; n];
    [
        (
            format!("leaf-requests/{name}.json"),
            File::public(fill(300, 1)),
        ),
        (
            format!("certs/{name}/tls.crt"),
            File::public(fill(1_400, 2)),
        ),
        (format!("certs/{name}/tls.key"), File::secret(fill(250, 3))),
        (
            format!("certs/{name}/tls.pem"),
            File::secret(fill(1_650, 4)),
        ),
    ]
}

/// What a signer of `leaves` leaves holds, by path and size.
fn signer_like(leaves: usize, salt: u8) -> Files {
    let mut files = Files::new();
    files
        .insert("pki-state.json", File::public(vec![salt; 2_000]))
        .unwrap();
    files
        .insert("ca-bundle.crt", File::public(vec![7; 1_200]))
        .unwrap();
    files
        .insert("signer/tls.crt", File::public(vec![8; 1_200]))
        .unwrap();
    files
        .insert("signer/tls.key", File::secret(vec![9; 250]))
        .unwrap();
    for i in 0..leaves {
        for (path, file) in leaf(&format!("svc{i}"), salt) {
            files.insert(path, file).unwrap();
        }
    }
    files.insert_dir("certs").unwrap();
    files.insert_dir("leaf-requests").unwrap();
    files
}

/// Issuing leaf `name`: its files and a new state file.
fn issue(name: &str, salt: u8) -> Changes {
    let mut changes = Changes::new();
    for (path, file) in leaf(name, salt) {
        changes.write(path, file).unwrap();
    }
    changes
        .write("pki-state.json", File::public(vec![salt; 2_100]))
        .unwrap();
    changes
}

/// The paths a part step on leaf `name` reads.
fn part_paths(name: &str) -> BTreeSet<String> {
    HEAD_PATHS
        .iter()
        .map(|p| p.to_string())
        .chain(leaf(name, 0).into_iter().map(|(p, _)| p))
        .collect()
}

fn is_conflict(e: &RotateError) -> bool {
    matches!(e, RotateError::Store(StoreError::Conflict { .. }))
}

/// Requests of `verbs` between two counts.
fn between(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, verbs: &[&str]) -> u64 {
    verbs
        .iter()
        .map(|v| after.get(*v).unwrap_or(&0) - before.get(*v).unwrap_or(&0))
        .sum()
}

/// The shards a head names, by name.
fn named_shards(head: &serde_json::Value, head_name: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for bucket in head["buckets"].as_array().unwrap() {
        let generation = bucket["generation"].as_str().unwrap();
        let first = bucket["first"].as_u64().unwrap();
        for i in 0..bucket["shards"].as_array().unwrap().len() as u64 {
            names.insert(format!("{head_name}.{generation}.{}", first + i));
        }
    }
    names
}

#[test]
fn a_one_leaf_change_reads_and_writes_as_many_secrets_at_4000_leaves_as_at_100() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let mut most = Vec::new();
    for leaves in [100, 4_000] {
        let store = open(
            server.admin_kubeconfig(),
            &format!("kube://pki/count{leaves}"),
        );
        let mut files = signer_like(leaves, 0);
        let mut revision = store.put("signer", None, &files).unwrap();
        let (mut reads, mut writes) = (0, 0);
        for round in 0..4u8 {
            let name = format!("new{round}");
            let paths = part_paths(&name);
            let before = admin.secret_requests();
            let (part, read) = store.get_paths("signer", &paths).unwrap().unwrap();
            let after_read = admin.secret_requests();
            assert_eq!(read, revision);
            assert_eq!(part, only_paths(&files, &paths));
            let changes = issue(&name, round + 1);
            revision = store
                .put_changes("signer", &revision, &changes, None)
                .unwrap();
            changes.apply_to(&mut files).unwrap();
            let after = admin.secret_requests();
            let read_here = between(&before, &after_read, &["GET", "LIST"])
                + between(&after_read, &after, &["GET", "LIST"]);
            let written = between(&after_read, &after, &["POST", "PUT", "DELETE"]);
            eprintln!(
                "{leaves} leaves, round {round}: {read_here} Secrets read, {written} written"
            );
            reads = reads.max(read_here);
            writes = writes.max(written);
        }
        assert_eq!(store.get("signer").unwrap().unwrap(), (files, revision));
        most.push((leaves, reads, writes));
    }
    eprintln!("most per step (leaves, read, written): {most:?}");
    // Reading: the head, then at most the five buckets of the head files
    // and the leaf; writing: the head again, at most two buckets read,
    // two shards created, the commit and two shards removed; then the
    // leaf's published Secret, read and replaced.
    for &(leaves, reads, writes) in &most {
        assert!(reads <= 1 + 5 + 1 + 2 + 1, "{leaves} leaves: {reads} reads");
        assert!(writes <= 5 + 1, "{leaves} leaves: {writes} writes");
    }
}

#[test]
fn files_after_changes_are_those_of_whole_writes_and_a_document_that_outgrew_its_buckets_gets_more()
{
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let by_parts = open(server.admin_kubeconfig(), "kube://pki/parts");
    let whole = open(server.admin_kubeconfig(), "kube://pki/whole");
    let mut files = signer_like(20, 1);
    let mut parts_revision = by_parts.put("signer", None, &files).unwrap();
    let mut whole_revision = whole.put("signer", None, &files).unwrap();
    assert_eq!(
        admin.head("parts.signer")["buckets"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    for round in 0..12u8 {
        let mut changes = Changes::new();
        for i in 0..10 {
            for (path, file) in leaf(&format!("r{round}-{i}"), round) {
                changes.write(path, file).unwrap();
            }
        }
        changes
            .write("pki-state.json", File::public(vec![round; 1_000]))
            .unwrap();
        for (path, _) in leaf(&format!("svc{round}"), 0) {
            changes.remove(path).unwrap();
        }
        changes.remove("certs/nobody/tls.crt").unwrap();
        parts_revision = by_parts
            .put_changes("signer", &parts_revision, &changes, None)
            .unwrap();
        changes.apply_to(&mut files).unwrap();
        whole_revision = whole.put("signer", Some(&whole_revision), &files).unwrap();
        let (read, revision) = by_parts.get("signer").unwrap().unwrap();
        assert_eq!(revision, parts_revision);
        assert_eq!(read, files, "round {round}");
        assert_eq!(whole.get("signer").unwrap().unwrap().0, files);
        let paths = part_paths(&format!("r{round}-3"));
        let (part, _) = by_parts.get_paths("signer", &paths).unwrap().unwrap();
        assert_eq!(part, only_paths(&files, &paths), "round {round}");
    }
    let head = admin.head("parts.signer");
    assert_eq!(head["format"], 2);
    assert_eq!(head["sequence"], 13);
    let buckets = head["buckets"].as_array().unwrap().len();
    assert!(
        buckets > 1,
        "a document that grew past twice its aim has more buckets"
    );
    // Exactly the head and the shards it names are left.
    let mut objects: BTreeSet<String> = admin.store_objects("parts").into_iter().collect();
    assert!(objects.remove("parts.signer"));
    assert_eq!(objects, named_shards(&head, "parts.signer"));
}

#[test]
fn a_stale_revision_is_a_conflict_before_anything_is_written() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let store = open(server.admin_kubeconfig(), "kube://pki/stale");
    let files = signer_like(50, 0);
    let first = store.put("signer", None, &files).unwrap();
    let second = store
        .put_changes("signer", &first, &issue("a", 1), None)
        .unwrap();
    let objects = admin.store_objects("stale");
    let before = admin.secret_requests();
    let error = store
        .put_changes("signer", &first, &issue("b", 2), None)
        .unwrap_err();
    assert!(is_conflict(&error), "{error}");
    let error = store
        .put_changes("nothing", &first, &issue("b", 2), None)
        .unwrap_err();
    assert!(is_conflict(&error), "{error}");
    let after = admin.secret_requests();
    assert_eq!(between(&before, &after, &["POST", "PUT", "DELETE"]), 0);
    assert_eq!(admin.store_objects("stale"), objects);
    let mut expected = files;
    issue("a", 1).apply_to(&mut expected).unwrap();
    assert_eq!(store.get("signer").unwrap().unwrap(), (expected, second));
}

/// Writes `files` at key `signer` of store `store` as the previous
/// release did: one generation, shards in path order, a format-1 head.
fn write_format_1(admin: &Admin, store: &str, files: &Files) -> Vec<String> {
    let generation = "0123456789abcdef";
    let document = &hex::encode(Sha256::digest(b"signer"))[..32];
    let head_name = format!("{store}.signer");
    let meta = |name: String, shard: bool| {
        let mut labels = BTreeMap::from([
            (
                "app.kubernetes.io/managed-by".to_string(),
                "pki".to_string(),
            ),
            ("pki.invalid/store".to_string(), store.to_string()),
            ("pki.invalid/document".to_string(), document.to_string()),
        ]);
        if shard {
            labels.insert("pki.invalid/generation".into(), generation.into());
        }
        ObjectMeta {
            name: Some(name),
            namespace: Some(NAMESPACE.into()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                "pki.invalid/key".to_string(),
                "signer".to_string(),
            )])),
            ..ObjectMeta::default()
        }
    };
    let shards = pki_kube::fuzzing::pack(files).unwrap();
    let mut names = Vec::new();
    for (i, (index, data)) in shards.iter().enumerate() {
        let name = format!("{head_name}.{generation}.{i}");
        admin.create_secret(&Secret {
            metadata: meta(name.clone(), true),
            type_: Some("pki.invalid/document-shard".into()),
            immutable: Some(true),
            data: Some(BTreeMap::from([
                ("index.json".to_string(), ByteString(index.clone())),
                ("data".to_string(), ByteString(data.clone())),
            ])),
            ..Secret::default()
        });
        names.push(name);
    }
    let head = serde_json::json!({
        "format": 1, "key": "signer", "generation": generation,
        "shards": shards.iter().map(|(i, d)| pki_kube::fuzzing::digest(i, d)).collect::<Vec<_>>(),
        "files": files.len(), "dirs": files.dirs().collect::<Vec<_>>(),
    });
    admin.create_secret(&Secret {
        metadata: meta(head_name, false),
        type_: Some("pki.invalid/document-head".into()),
        data: Some(BTreeMap::from([(
            "head.json".to_string(),
            ByteString(serde_json::to_vec(&head).unwrap()),
        )])),
        ..Secret::default()
    });
    names
}

#[test]
fn a_store_of_the_previous_format_is_read_and_its_next_write_of_changes_converts_it() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let mut files = signer_like(300, 4);
    let old_shards = write_format_1(&admin, "previous", &files);
    assert!(old_shards.len() > 1);
    let store = open(server.admin_kubeconfig(), "kube://pki/previous");
    let (read, revision) = store.get("signer").unwrap().unwrap();
    assert_eq!(read, files);
    let paths = part_paths("svc7");
    let (part, at) = store.get_paths("signer", &paths).unwrap().unwrap();
    assert_eq!((part, at), (only_paths(&files, &paths), revision.clone()));

    let changes = issue("new", 5);
    let next = store
        .put_changes("signer", &revision, &changes, None)
        .unwrap();
    changes.apply_to(&mut files).unwrap();
    assert_eq!(store.get("signer").unwrap().unwrap(), (files, next));
    let head = admin.head("previous.signer");
    assert_eq!(head["format"], 2);
    assert!(head["buckets"].as_array().unwrap().len() > 1);
    let objects = admin.store_objects("previous");
    for old in &old_shards {
        assert!(!objects.contains(old), "{old} is left");
    }
}

#[test]
fn the_sweep_removes_abandoned_shards_and_never_one_the_head_still_names() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let grace = Duration::from_secs(2);
    let options = KubeOptions {
        abandoned_after: grace,
        ..options(server.admin_kubeconfig())
    };
    let url = KubeUrl::parse("kube://pki/sweep").unwrap();
    let mut store = KubeStore::open(&url, options).unwrap();
    let mut files = signer_like(300, 0);
    let mut revision = store.put("signer", None, &files).unwrap();
    let first = admin.head("sweep.signer");
    // An attempt killed between its shards and its commit.
    store.set_write_hook(Some(Box::new(|step| {
        if step == "commit" || step.starts_with("delete") {
            Err(std::io::Error::other("killed"))
        } else {
            Ok(())
        }
    })));
    assert!(
        store
            .put_changes("signer", &revision, &issue("lost", 9), None)
            .is_err()
    );
    store.set_write_hook(None);
    let abandoned: BTreeSet<String> = admin
        .store_objects("sweep")
        .into_iter()
        .filter(|n| n != "sweep.signer" && !named_shards(&first, "sweep.signer").contains(n))
        .collect();
    assert!(!abandoned.is_empty());
    std::thread::sleep(grace + Duration::from_secs(2));
    // Writes of changes until one sweeps (every 16th head): most buckets
    // are still the first generation's, older than the grace, and stay.
    for round in 0..15u8 {
        let changes = issue(&format!("n{round}"), round);
        revision = store
            .put_changes("signer", &revision, &changes, None)
            .unwrap();
        changes.apply_to(&mut files).unwrap();
    }
    let head = admin.head("sweep.signer");
    assert_eq!(head["sequence"], 16);
    let named = named_shards(&head, "sweep.signer");
    let kept_from_first = named
        .intersection(&named_shards(&first, "sweep.signer"))
        .count();
    assert!(
        kept_from_first > 0,
        "the head still names first-generation shards"
    );
    let mut objects: BTreeSet<String> = admin.store_objects("sweep").into_iter().collect();
    assert!(objects.remove("sweep.signer"));
    assert_eq!(
        objects, named,
        "the abandoned shards are gone, the named all there"
    );
    assert_eq!(store.get("signer").unwrap().unwrap(), (files, revision));
}

#[test]
fn a_write_of_changes_stopped_at_any_request_leaves_the_old_document_and_nothing_of_its_own() {
    let server = KubeServer::start();
    let admin = Admin::new(&server);
    let mut store = open(server.admin_kubeconfig(), "kube://pki/crash");
    let old = signer_like(200, 0);
    let revision = store.put("signer", None, &old).unwrap();
    let changes = issue("new", 3);
    let mut new = old.clone();
    changes.apply_to(&mut new).unwrap();
    // Every request of a write of changes, in order.
    let steps = Arc::new(Mutex::new(Vec::new()));
    let seen = steps.clone();
    store.set_write_hook(Some(Box::new(move |step| {
        seen.lock().unwrap().push(step.to_string());
        Ok(())
    })));
    let probe = store
        .put_changes("signer", &revision, &changes, None)
        .unwrap();
    let steps = steps.lock().unwrap().clone();
    let commit = steps.iter().position(|s| s == "commit").unwrap();
    assert!(commit >= 2, "{steps:?}");
    assert!(steps.len() > commit + 1, "{steps:?}");
    store.set_write_hook(None);
    let revision: Revision = store.put("signer", Some(&probe), &old).unwrap();
    let before = admin.store_objects("crash");
    for (stop, at) in steps.iter().enumerate().take(commit + 1) {
        let calls = AtomicUsize::new(0);
        store.set_write_hook(Some(Box::new(move |_| {
            if calls.fetch_add(1, Ordering::SeqCst) == stop {
                Err(std::io::Error::other("stopped"))
            } else {
                Ok(())
            }
        })));
        let error = store
            .put_changes("signer", &revision, &changes, None)
            .unwrap_err();
        assert!(
            matches!(error, RotateError::Store(StoreError::Backend { .. })),
            "{at}: {error}"
        );
        store.set_write_hook(None);
        assert_eq!(
            store.get("signer").unwrap().unwrap(),
            (old.clone(), revision.clone()),
            "{at}"
        );
        assert_eq!(admin.store_objects("crash"), before, "{at}");
    }
    // Removing the replaced shards fails after the commit: the write is
    // done, wholly new.
    store.set_write_hook(Some(Box::new(|step| {
        if step.starts_with("delete") {
            Err(std::io::Error::other("stopped"))
        } else {
            Ok(())
        }
    })));
    let done = store
        .put_changes("signer", &revision, &changes, None)
        .unwrap();
    store.set_write_hook(None);
    assert_eq!(store.get("signer").unwrap().unwrap(), (new, done));
}
