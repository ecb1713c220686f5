//! The directory store read and written by parts (`get_paths`,
//! `put_changes`): the same files as a whole read, the same checks on what
//! it reads, a commit that writes what changed and links the rest, and
//! the same crash safety as a whole commit.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_rotate::store::{Changes, only_paths};
use pki_rotate::{File, Files, FsStore, Revision, RotateError, Store, StoreError, Summary};
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

const KEY: &str = "doc";

/// A document of `n` leaf directories, each with a public and a secret file.
fn document(n: usize) -> Files {
    let mut files = Files::new();
    files
        .insert("head.json", File::public(b"{\"leaves\": 1}".to_vec()))
        .unwrap();
    files.insert_dir("leaves").unwrap();
    for i in 0..n {
        files
            .insert(
                format!("leaves/l{i:03}/cert.pem"),
                File::public(format!("cert {i}").into_bytes()),
            )
            .unwrap();
        files
            .insert(
                format!("leaves/l{i:03}/key.pem"),
                File::secret(format!("key {i}").into_bytes()),
            )
            .unwrap();
    }
    files
}

fn other() -> Files {
    let mut files = Files::new();
    files
        .insert("other.json", File::public(b"{}".to_vec()))
        .unwrap();
    files
}

fn store(dir: &Path, n: usize) -> (FsStore, Revision) {
    let store = FsStore::open_or_create(dir).unwrap();
    store.put("other", None, &other()).unwrap();
    let revision = store.put(KEY, None, &document(n)).unwrap();
    (store, revision)
}

fn paths(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|p| p.to_string()).collect()
}

fn summary(text: &str) -> Summary {
    Summary::new(text).unwrap()
}

fn live(dir: &Path) -> std::path::PathBuf {
    dir.join(std::fs::read_link(dir.join(".data")).unwrap())
}

/// Every file under `dir`, links as their targets, for "nothing changed".
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let entry = entry.unwrap();
            let path = entry.path();
            let name = path.strip_prefix(dir).unwrap().display().to_string();
            let kind = entry.file_type().unwrap();
            if kind.is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(name, target.display().to_string().into_bytes());
            } else if kind.is_dir() {
                pending.push(path);
            } else if name != ".lock" {
                out.insert(name, std::fs::read(&path).unwrap());
            }
        }
    }
    out
}

#[test]
fn reading_some_paths_gives_what_filtering_the_whole_read_gives() {
    let dir = tempfile::tempdir().unwrap();
    let (store, revision) = store(dir.path(), 50);
    let (whole, whole_revision) = store.get(KEY).unwrap().unwrap();
    assert_eq!(whole_revision, revision);
    for wanted in [
        paths(&[]),
        paths(&["head.json"]),
        paths(&["head.json", "leaves/l007/cert.pem", "leaves/l007/key.pem"]),
        paths(&["leaves/l049/key.pem", "leaves/l999/cert.pem", "absent.json"]),
        // Another key's file is not this document's.
        paths(&["other.json"]),
    ] {
        let (part, part_revision) = store.get_paths(KEY, &wanted).unwrap().unwrap();
        assert_eq!(part, only_paths(&whole, &wanted), "{wanted:?}");
        assert_eq!(part_revision, revision);
        assert_eq!(part.dirs().collect::<Vec<_>>(), ["leaves"]);
    }
    let secret = store
        .get_paths(KEY, &paths(&["leaves/l001/key.pem"]))
        .unwrap()
        .unwrap()
        .0;
    assert!(secret.file("leaves/l001/key.pem").unwrap().secret);
    assert!(
        store
            .get_paths("nothing", &paths(&["head.json"]))
            .unwrap()
            .is_none()
    );
    let empty = tempfile::tempdir().unwrap();
    let fresh = FsStore::open_or_create(empty.path()).unwrap();
    assert!(
        fresh
            .get_paths(KEY, &paths(&["head.json"]))
            .unwrap()
            .is_none()
    );
}

#[test]
fn a_change_writes_what_changed_and_links_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (store, revision) = store(dir.path(), 20);
    let inode =
        |generation: &Path, path: &str| std::fs::metadata(generation.join(path)).unwrap().ino();
    // The previous generation becomes the spare after the commit.
    let before: Vec<u64> = ["leaves/l010/key.pem", "other.json"]
        .iter()
        .map(|p| inode(&live(dir.path()), p))
        .collect();

    let mut changes = Changes::new();
    changes
        .write("head.json", File::public(b"{\"leaves\": 2}".to_vec()))
        .unwrap();
    changes
        .write("leaves/new/cert.pem", File::public(b"new cert".to_vec()))
        .unwrap();
    changes
        .write("leaves/new/key.pem", File::secret(b"new key".to_vec()))
        .unwrap();
    changes.remove("leaves/l003/cert.pem").unwrap();
    changes.remove("leaves/l003/key.pem").unwrap();
    changes.remove("leaves/absent/cert.pem").unwrap();
    let written = store
        .put_changes(KEY, &revision, &changes, Some(&summary("{\"s\":1}")))
        .unwrap();
    assert_ne!(written, revision);

    let mut expected = document(20);
    changes.apply_to(&mut expected).unwrap();
    let (found, found_revision) = store.get(KEY).unwrap().unwrap();
    assert_eq!(found, expected);
    assert_eq!(found_revision, written);
    assert_eq!(store.get("other").unwrap().unwrap().0, other());
    let (kept, kept_revision) = store.get_summary(KEY).unwrap().unwrap();
    assert_eq!(
        (kept.as_str(), kept_revision),
        ("{\"s\":1}", written.clone())
    );

    // Unchanged files are the very files of the previous generation.
    let after = live(dir.path());
    assert_eq!(
        before,
        [
            inode(&after, "leaves/l010/key.pem"),
            inode(&after, "other.json")
        ]
    );
    assert!(!after.join("leaves/l003").exists());
    let mode = |p: &str| {
        std::fs::metadata(after.join(p))
            .unwrap()
            .permissions()
            .mode()
            & 0o777
    };
    assert_eq!(mode("leaves/new/key.pem"), 0o600);
    assert_eq!(mode("leaves/new/cert.pem"), 0o644);
    assert_eq!(
        std::fs::read(dir.path().join("leaves/new/key.pem")).unwrap(),
        b"new key"
    );

    // A change without a summary removes it; a stale revision writes nothing.
    let none = store
        .put_changes(KEY, &written, &Changes::new(), None)
        .unwrap();
    assert!(store.get_summary(KEY).unwrap().is_none());
    let untouched = snapshot(dir.path());
    for stale in [&revision, &written, &Revision::new("not a generation")] {
        let err = store.put_changes(KEY, stale, &changes, None).unwrap_err();
        assert!(err.is_conflict(), "{err}");
    }
    let err = store
        .put_changes("nothing", &none, &changes, None)
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert_eq!(snapshot(dir.path()), untouched);

    // A path another document owns is refused.
    let mut taken = Changes::new();
    taken
        .write("other.json", File::public(b"mine".to_vec()))
        .unwrap();
    let err = store.put_changes(KEY, &none, &taken, None).unwrap_err();
    assert!(err.to_string().contains("already owned"), "{err}");
    assert_eq!(snapshot(dir.path()), untouched);
}

/// What is done to a generation, and which error a read must give then.
type Tampering = (&'static str, fn(&Path), fn(&RotateError) -> bool);

fn damaged(e: &RotateError) -> bool {
    matches!(e, RotateError::Store(StoreError::DamagedStore { .. }))
}

fn unsafe_store(e: &RotateError) -> bool {
    matches!(e, RotateError::Store(StoreError::UnsafeStore { .. }))
}

#[test]
fn what_a_read_of_some_paths_reads_is_checked_and_a_change_checks_what_it_reads() {
    let wanted = paths(&["head.json", "leaves/l002/key.pem"]);
    let cases: [Tampering; 5] = [
        (
            "other content",
            |g| std::fs::write(g.join("leaves/l002/key.pem"), b"evil").unwrap(),
            damaged,
        ),
        (
            "a link",
            |g| {
                std::fs::remove_file(g.join("head.json")).unwrap();
                std::os::unix::fs::symlink("/etc/hostname", g.join("head.json")).unwrap();
            },
            damaged,
        ),
        (
            "a directory on the way replaced by a link",
            |g| {
                std::fs::rename(g.join("leaves/l002"), g.join("leaves/moved")).unwrap();
                std::os::unix::fs::symlink("moved", g.join("leaves/l002")).unwrap();
            },
            damaged,
        ),
        (
            "a file writable by others",
            |g| {
                std::fs::set_permissions(
                    g.join("leaves/l002/key.pem"),
                    std::fs::Permissions::from_mode(0o666),
                )
                .unwrap()
            },
            unsafe_store,
        ),
        (
            "the manifest writable by others",
            |g| {
                std::fs::set_permissions(
                    g.join(".manifest.json"),
                    std::fs::Permissions::from_mode(0o666),
                )
                .unwrap()
            },
            unsafe_store,
        ),
    ];
    for (what, tamper, expected) in cases {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = store(dir.path(), 5);
        tamper(&live(dir.path()));
        let err = store.get_paths(KEY, &wanted).unwrap_err();
        assert!(expected(&err), "{what}: {err}");
    }

    // A file the read does not name is not read. A change from the spare
    // does not read it either: the next generation has the spare's copy,
    // the committed file when the damage replaced the live one's, and the
    // damaged file when it was changed in place (a spare holds the same
    // files), refused then, naming it, by the reads that need it. Without
    // a spare to start from, the whole commit checks every file first,
    // refuses the damaged one and writes nothing.
    for (spare, in_place) in [(true, false), (true, true), (false, false)] {
        let dir = tempfile::tempdir().unwrap();
        let (store, revision) = store(dir.path(), 5);
        if !spare {
            std::fs::remove_dir_all(dir.path().join(".spare")).unwrap();
        }
        let victim = "leaves/l004/cert.pem";
        let generation = live(dir.path());
        if !in_place {
            std::fs::remove_file(generation.join(victim)).unwrap();
        }
        std::fs::write(generation.join(victim), b"tampered").unwrap();
        let (part, _) = store.get_paths(KEY, &wanted).unwrap().unwrap();
        assert_eq!(part.len(), 2);
        let mut changes = Changes::new();
        changes
            .write("head.json", File::public(b"{\"leaves\": 3}".to_vec()))
            .unwrap();
        let before = snapshot(dir.path());
        let mut errors = vec![
            store.get(KEY).unwrap_err(),
            store.get_paths(KEY, &paths(&[victim])).unwrap_err(),
        ];
        match store.put_changes(KEY, &revision, &changes, None) {
            Ok(_) => {
                assert!(spare, "a whole commit checks every file");
                let (part, _) = store.get_paths(KEY, &wanted).unwrap().unwrap();
                let head = &part.file("head.json").unwrap().contents;
                assert_eq!(head.as_slice(), b"{\"leaves\": 3}");
                if in_place {
                    errors.push(store.get(KEY).unwrap_err());
                } else {
                    let (files, _) = store.get(KEY).unwrap().unwrap();
                    let cert = &files.file(victim).unwrap().contents;
                    assert_eq!(cert.as_slice(), b"cert 4");
                }
            }
            Err(e) => {
                assert!(!spare, "{e}");
                errors.push(e);
                assert_eq!(snapshot(dir.path()), before);
            }
        }
        for err in errors {
            match &err {
                RotateError::Store(StoreError::DamagedStore { path, .. }) => {
                    assert_eq!(path, &dir.path().join(victim), "{err}")
                }
                other => panic!("{other}"),
            }
        }
    }
}

/// A change that fails or crashes at any step of its commit leaves the
/// old document or the new one, whole, and the next read finishes the rest.
#[test]
fn a_change_interrupted_at_any_step_leaves_one_whole_document() {
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut steps = Vec::new();
    for crash in [false, true] {
        for fail_at in 0.. {
            let dir = tempfile::tempdir().unwrap();
            let (mut store, revision) = store(dir.path(), 6);
            let old = store.get(KEY).unwrap().unwrap().0;
            let mut changes = Changes::new();
            changes
                .write("leaves/l001/key.pem", File::secret(b"rotated".to_vec()))
                .unwrap();
            changes.remove("leaves/l002/cert.pem").unwrap();
            changes.remove("leaves/l002/key.pem").unwrap();
            let mut new = old.clone();
            changes.apply_to(&mut new).unwrap();

            let seen = Arc::new(AtomicUsize::new(0));
            let hit = Arc::new(std::sync::Mutex::new(None));
            {
                let (seen, hit) = (seen.clone(), hit.clone());
                store.set_write_hook(Some(Box::new(move |step| {
                    if seen.fetch_add(1, Ordering::SeqCst) != fail_at {
                        return Ok(());
                    }
                    *hit.lock().unwrap() = Some(step.to_string());
                    if crash {
                        panic!("crash before {step}");
                    }
                    Err(std::io::Error::other(format!("injected before {step}")))
                })));
            }
            let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                store.put_changes(KEY, &revision, &changes, None)
            }));
            store.set_write_hook(None);
            let Some(step) = hit.lock().unwrap().clone() else {
                assert!(matches!(outcome, Ok(Ok(_))));
                break;
            };
            let (found, _) = store.get(KEY).unwrap().unwrap();
            assert!(
                found == old || found == new,
                "{} before {step}: neither document",
                if crash { "crash" } else { "error" }
            );
            if matches!(outcome, Ok(Err(_))) {
                assert!(found == old, "a failed change before {step} was committed");
            }
            // Only the live generation is left once a run held the lock.
            let generations: Vec<_> = std::fs::read_dir(dir.path())
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(".gen-"))
                .collect();
            assert_eq!(generations.len(), 1, "before {step}: {generations:?}");
            steps.push(step);
        }
    }
    std::panic::set_hook(previous_hook);
    assert!(steps.iter().any(|s| s == "switch data link"), "{steps:?}");
    assert!(
        steps.iter().any(|s| s.starts_with("write leaves/l001")),
        "{steps:?}"
    );
}

/// Rewrites the live generation's manifest as the previous build wrote it
/// (format 2: every file with its digest in `.manifest.json`, no shards).
fn as_format_2(dir: &Path) {
    let generation = live(dir);
    let read = |p: &Path| -> serde_json::Value {
        serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
    };
    let top = read(&generation.join(".manifest.json"));
    let mut keys = serde_json::Map::new();
    for (key, entry) in top["keys"].as_object().unwrap() {
        let mut old = serde_json::json!({
            "revision": entry["revision"],
            "files": {},
            "sha256": {},
        });
        if let Some(dirs) = entry.get("dirs") {
            old["dirs"] = dirs.clone();
        }
        if let Some(summary) = entry.get("summary") {
            old["summary"] = summary.clone();
        }
        keys.insert(key.clone(), old);
    }
    for bucket in top["shards"].as_object().unwrap().keys() {
        let shard = read(&generation.join(format!(".manifest/{bucket}.json")));
        for (key, files) in shard.as_object().unwrap() {
            for (path, file) in files.as_object().unwrap() {
                let entry = keys.get_mut(key).unwrap();
                entry["files"][path] = file["secret"].clone();
                entry["sha256"][path] = file["sha256"].clone();
            }
        }
    }
    std::fs::remove_dir_all(generation.join(".manifest")).unwrap();
    let manifest = serde_json::json!({ "format": 2, "keys": keys });
    std::fs::remove_file(generation.join(".manifest.json")).unwrap();
    std::fs::write(
        generation.join(".manifest.json"),
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
}

/// A store the previous build wrote (manifest format 2) reads the same,
/// whole and by parts; its next commit, whole or of changes, shards it.
#[test]
fn a_manifest_of_format_2_is_read_and_the_next_commit_shards_it() {
    for by_changes in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let (store, revision) = store(dir.path(), 20);
        let whole = store.get(KEY).unwrap().unwrap();
        as_format_2(dir.path());
        assert!(!live(dir.path()).join(".manifest").exists());
        let store = FsStore::open(dir.path()).unwrap();
        assert_eq!(store.get(KEY).unwrap().unwrap(), whole);
        assert_eq!(store.get("other").unwrap().unwrap().0, other());
        let wanted = paths(&["head.json", "leaves/l007/key.pem"]);
        assert_eq!(
            store.get_paths(KEY, &wanted).unwrap().unwrap(),
            (only_paths(&whole.0, &wanted), revision.clone())
        );

        let mut changes = Changes::new();
        changes
            .write("leaves/new/cert.pem", File::public(b"new".to_vec()))
            .unwrap();
        let mut expected = whole.0.clone();
        changes.apply_to(&mut expected).unwrap();
        if by_changes {
            store.put_changes(KEY, &revision, &changes, None).unwrap();
        } else {
            store.put(KEY, Some(&revision), &expected).unwrap();
        }
        let generation = live(dir.path());
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(generation.join(".manifest.json")).unwrap())
                .unwrap();
        assert_eq!(manifest["format"], 4);
        assert!(generation.join(".manifest").is_dir());
        let store = FsStore::open(dir.path()).unwrap();
        assert_eq!(store.get(KEY).unwrap().unwrap().0, expected);
        assert_eq!(store.get("other").unwrap().unwrap().0, other());
    }
}

/// A shard changed by hand, missing or replaced by a link is refused by a
/// read that needs it, naming it; a shard a read of some paths does not
/// need is not read.
#[test]
fn a_damaged_shard_is_refused_by_the_reads_that_need_it() {
    type Damage = fn(&Path);
    let damage: [(&str, Damage); 3] = [
        ("other content", |p| {
            std::fs::remove_file(p).unwrap();
            std::fs::write(p, b"{}").unwrap();
        }),
        ("missing", |p| std::fs::remove_file(p).unwrap()),
        ("a link", |p| {
            let copy = p.with_extension("copy");
            std::fs::copy(p, &copy).unwrap();
            std::fs::remove_file(p).unwrap();
            std::os::unix::fs::symlink(&copy, p).unwrap();
        }),
    ];
    for (what, damage) in damage {
        let dir = tempfile::tempdir().unwrap();
        let (store, _) = store(dir.path(), 20);
        let victim = "leaves/l007/key.pem";
        let bucket = {
            use sha2::Digest;
            hex::encode(&sha2::Sha256::digest(victim.as_bytes())[..1])
        };
        let shard = live(dir.path()).join(format!(".manifest/{bucket}.json"));
        damage(&shard);
        let shard_name = format!(".manifest/{bucket}.json");
        let err = store.get(KEY).unwrap_err().to_string();
        assert!(err.contains(&shard_name), "{what}: {err}");
        let err = store
            .get_paths(KEY, &paths(&[victim]))
            .unwrap_err()
            .to_string();
        assert!(err.contains(&shard_name), "{what}: {err}");
        // A path listed in another shard reads without it.
        let elsewhere = (0..20)
            .map(|i| format!("leaves/l{i:03}/cert.pem"))
            .find(|p| {
                use sha2::Digest;
                hex::encode(&sha2::Sha256::digest(p.as_bytes())[..1]) != bucket
            })
            .unwrap();
        assert_eq!(
            store
                .get_paths(KEY, &paths(&[&elsewhere]))
                .unwrap()
                .unwrap()
                .0
                .len(),
            1,
            "{what}"
        );
    }
}

/// Every file under `dir` but the spare's mark, by path, with its inode.
fn inodes(dir: &Path) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(d) = pending.pop() {
        for entry in std::fs::read_dir(&d).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                pending.push(path);
            } else if !path.ends_with(".mirrors") {
                let name = path.strip_prefix(dir).unwrap().display().to_string();
                out.insert(name, meta.ino());
            }
        }
    }
    out
}

/// A change made from the spare writes and removes what changed (the
/// files, the shards that list them, the manifest and the index) and
/// nothing per unchanged file; the generation it replaced becomes a spare
/// holding the very files of the live one, marked with its number. A
/// spare that mirrors another generation is not trusted: the whole commit
/// walks and corrects it.
#[test]
fn a_change_from_the_spare_touches_only_what_changed_and_leaves_a_true_spare() {
    let dir = tempfile::tempdir().unwrap();
    let (mut store, mut revision) = store(dir.path(), 200);
    let steps = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = steps.clone();
    store.set_write_hook(Some(Box::new(move |what| {
        seen.lock().unwrap().push(what.to_string());
        Ok(())
    })));
    let mut expected = document(200);
    for round in 0..3 {
        let mut changes = Changes::new();
        changes
            .write(
                "head.json",
                File::public(format!("{{\"round\": {round}}}").into_bytes()),
            )
            .unwrap();
        changes
            .write(
                format!("leaves/new{round}/key.pem"),
                File::secret(b"new key".to_vec()),
            )
            .unwrap();
        changes
            .remove(format!("leaves/l{round:03}/cert.pem"))
            .unwrap();
        changes
            .remove(format!("leaves/l{round:03}/key.pem"))
            .unwrap();
        changes.apply_to(&mut expected).unwrap();
        steps.lock().unwrap().clear();
        revision = store.put_changes(KEY, &revision, &changes, None).unwrap();
        let taken = steps.lock().unwrap().clone();
        // Building the generation (the spare then gets the same edit).
        let touched: Vec<&String> = taken
            .iter()
            .take_while(|s| *s != "switch data link")
            .filter(|s| {
                s.starts_with("link ") || s.starts_with("write ") || s.starts_with("unlink ")
            })
            .collect();
        // Two files written, two removed, at most four shards and their
        // identity records, the manifest, the index and the spare's mark.
        assert!(touched.len() <= 15, "{touched:?}");
        assert!(taken.iter().any(|s| s == "update spare"), "{taken:?}");
        assert!(!taken.iter().any(|s| s.starts_with("link ")), "{taken:?}");
        assert_eq!(
            store.get(KEY).unwrap().unwrap(),
            (expected.clone(), revision.clone())
        );
        assert_eq!(store.get("other").unwrap().unwrap().0, other());
        assert!(
            !live(dir.path())
                .join(format!("leaves/l{round:03}"))
                .exists()
        );
        let spare = dir.path().join(".spare");
        assert_eq!(inodes(&spare), inodes(&live(dir.path())), "round {round}");
        // The mark's first line: the generation the spare mirrors.
        let mark = std::fs::read_to_string(spare.join(".mirrors")).unwrap();
        assert_eq!(mark.lines().next(), Some(revision.as_str()));
    }

    // A spare marked for another generation is not trusted.
    let spare = dir.path().join(".spare");
    std::fs::remove_file(spare.join(".mirrors")).unwrap();
    std::fs::write(spare.join(".mirrors"), b"1").unwrap();
    std::fs::write(spare.join("leaves/l100/planted.pem"), b"x").unwrap();
    let mut changes = Changes::new();
    changes
        .write("head.json", File::public(b"{}".to_vec()))
        .unwrap();
    changes.apply_to(&mut expected).unwrap();
    steps.lock().unwrap().clear();
    revision = store.put_changes(KEY, &revision, &changes, None).unwrap();
    assert_eq!(store.get(KEY).unwrap().unwrap(), (expected, revision));
    assert!(!live(dir.path()).join("leaves/l100/planted.pem").exists());
}
