//! The directory store after accidents: crashes and I/O errors at every
//! step of `init` and around the switch, old generations, the generation
//! counter's end, a lock held by someone else, readers racing commits, and
//! the spare kept up to date, corrected and removed when a crash left it
//! behind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_rotate::Document as _;
use pki_rotate::signer::document::{leaf_cert_path, leaf_pem_path};
use pki_rotate::{
    Driver, FsStore, LeafChange, LeafRequest, Revision, RotateError, SignerEngine, SignerInput,
    SignerState, Store,
};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use time::Duration;

mod support;

use support::fs::*;

/// What a crash or an I/O error at step `fail_at` of `init` leaves, and what
/// the next command and a second `init` make of it.
fn init_interrupted_at(fail_at: usize, crash: bool, s: &SignerState) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let seen = Arc::new(AtomicUsize::new(0));
    let name = Arc::new(Mutex::new(None));
    let mut store = FsStore::open_or_create(dir.path()).unwrap();
    {
        let (seen, name) = (seen.clone(), name.clone());
        store.set_write_hook(Some(Box::new(move |step| {
            if seen.fetch_add(1, Ordering::SeqCst) != fail_at {
                return Ok(());
            }
            *name.lock().unwrap() = Some(step.to_string());
            if crash {
                panic!("crash before {step}");
            }
            Err(std::io::Error::other(format!(
                "injected failure before {step}"
            )))
        })));
    }
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        Driver::new(&store).create::<SignerEngine>(KEY, s)
    }));
    let step_name = name.lock().unwrap().clone()?;
    store.set_write_hook(None);
    let what = format!(
        "{} before {step_name}",
        if crash { "crash" } else { "error" }
    );
    let live_before = store.get(KEY).unwrap().is_some();
    match (&outcome, crash) {
        (Ok(Err(e)), false) => {
            // A failure before the switch: nothing was committed, nothing left.
            assert!(!live_before, "{what}: failed but committed: {e}");
            assert!(e.to_string().contains("injected failure"), "{what}: {e}");
        }
        (Ok(Ok(_)), false) => {
            // After the switch: committed, with a warning saying so.
            let notices = store.take_notices();
            assert!(
                notices
                    .iter()
                    .any(|n| n.starts_with("warning: ") && n.contains("is live")),
                "{what}: {notices:?}"
            );
            assert!(live_before, "{what}");
        }
        (Err(_), true) => {}
        (other, _) => panic!(
            "{what}: unexpected outcome {:?}",
            other.as_ref().map(|r| r.is_ok())
        ),
    }
    // The next command (here the read that starts `init`) has repaired the
    // store: no leftovers, every published name a link that resolves.
    let gens = generations(dir.path());
    assert!(gens.len() <= 1, "{what}: leftovers {gens:?}");
    // A second `init` completes, or says the store exists.
    let again = Driver::new(&store).create::<SignerEngine>(KEY, s);
    match again {
        Ok(_) => assert!(!live_before, "{what}"),
        Err(RotateError::Store(pki_rotate::StoreError::AlreadyInitialized(_))) => {
            assert!(live_before, "{what}")
        }
        Err(e) => panic!("{what}: second init: {e}"),
    }
    let files = s.to_files().unwrap();
    for name in files.top_level_names() {
        let link = dir.path().join(name);
        assert_eq!(
            std::fs::read_link(&link).unwrap(),
            Path::new(".data").join(name),
            "{what}"
        );
    }
    for (path, file) in files.iter() {
        assert_eq!(
            std::fs::read(dir.path().join(path)).unwrap(),
            *file.contents,
            "{what}: {path}"
        );
    }
    assert_eq!(generations(dir.path()), [".gen-000000001"], "{what}");
    Some(step_name)
}

#[test]
fn init_interrupted_at_any_step_is_repaired_by_the_next_command_and_init_again() {
    let s = initial(100);
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let mut steps = Vec::new();
    for crash in [false, true] {
        for fail_at in 0.. {
            match init_interrupted_at(fail_at, crash, &s) {
                Some(name) => steps.push(name),
                None => break,
            }
        }
    }
    std::panic::set_hook(previous_hook);
    for expected in [
        "switch data link",
        "sync directory",
        "publish ca-bundle.crt",
    ] {
        assert!(steps.iter().any(|n| n == expected), "{expected}: {steps:?}");
    }
}

#[test]
fn a_failed_switch_leaves_no_temporary_link_and_says_the_store_is_unchanged() {
    let dir = tempfile::tempdir().unwrap();
    let s = initial(110);
    let mut store = create(dir.path(), &s);
    store.set_write_hook(Some(Box::new(|step| {
        if step == "switch data link" {
            Err(std::io::Error::from_raw_os_error(5))
        } else {
            Ok(())
        }
    })));
    let err = step(&store, &SignerInput::default(), rotation_time(&s), 11).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("the store is unchanged at generation 1"),
        "{text}"
    );
    assert!(text.contains(".data"), "{text}");
    assert_eq!(generations(dir.path()), [".gen-000000001"]);
    assert_eq!(store.get(KEY).unwrap().unwrap().1, Revision::new("1"));
}

#[test]
fn a_crash_after_the_switch_leaves_an_old_generation_that_a_no_op_run_removes() {
    let dir = tempfile::tempdir().unwrap();
    let s = initial(120);
    let mut store = create(dir.path(), &s);
    let now = rotation_time(&s);
    store.set_write_hook(Some(Box::new(|step| {
        if step == "sync directory" {
            panic!("crash before {step}");
        }
        Ok(())
    })));
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        step(&store, &SignerInput::default(), now, 12)
    }));
    std::panic::set_hook(previous_hook);
    assert!(crashed.is_err());
    assert_eq!(
        generations(dir.path()),
        [".gen-000000001", ".gen-000000002"]
    );

    // The rotation is committed; a run with nothing to do removes generation
    // 1, which holds the previous CA's key.
    store.set_write_hook(None);
    let idle = step(&store, &SignerInput::default(), now, 13).unwrap();
    assert!(!idle.changed);
    assert_eq!(generations(dir.path()), [".gen-000000002"]);
    let removed = dir.path().join(".gen-000000001");
    assert!(store.take_notices().contains(&format!(
        "removed {} (left by an interrupted run)",
        removed.display()
    )),);
}

#[test]
fn an_io_error_after_the_switch_is_a_warning_that_the_new_generation_is_live() {
    for failing in ["sync directory", "remove .gen-000000001"] {
        let dir = tempfile::tempdir().unwrap();
        let s = initial(130);
        let mut store = create(dir.path(), &s);
        let target = failing.to_string();
        store.set_write_hook(Some(Box::new(move |step| {
            if step == target {
                Err(std::io::Error::from_raw_os_error(5))
            } else {
                Ok(())
            }
        })));
        let done = step(&store, &SignerInput::default(), rotation_time(&s), 14).unwrap();
        assert_eq!(done.revision, Revision::new("2"), "{failing}");
        let notices = store.take_notices();
        assert_eq!(notices.len(), 1, "{failing}: {notices:?}");
        assert!(notices[0].starts_with("warning: "), "{notices:?}");
        assert!(
            notices[0].contains("generation 2 is live")
                || notices[0].contains("still holds private keys"),
            "{failing}: {notices:?}"
        );
        assert!(notices[0].contains("Input/output error"), "{notices:?}");
        // The old generation stays until a run can remove it safely.
        assert_eq!(
            generations(dir.path()),
            [".gen-000000001", ".gen-000000002"]
        );
        store.set_write_hook(None);
        assert_eq!(store.get(KEY).unwrap().unwrap().1, Revision::new("2"));
        assert_eq!(generations(dir.path()), [".gen-000000002"], "{failing}");
    }
}

#[test]
fn the_generation_counter_refuses_to_wrap() {
    let dir = tempfile::tempdir().unwrap();
    let s = initial(140);
    let store = create(dir.path(), &s);
    let last = format!(".gen-{}", u64::MAX);
    std::fs::rename(dir.path().join(".gen-000000001"), dir.path().join(&last)).unwrap();
    std::fs::remove_file(dir.path().join(".data")).unwrap();
    std::os::unix::fs::symlink(&last, dir.path().join(".data")).unwrap();
    let err = step(&store, &SignerInput::default(), rotation_time(&s), 15).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("wrap") && text.contains(&u64::MAX.to_string()),
        "{text}"
    );
    assert_eq!(generations(dir.path()), [last]);
    store.get(KEY).unwrap().unwrap();
}

#[test]
fn a_writer_waits_a_bounded_time_for_a_held_lock_and_names_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let s = initial(150);
    let mut holder = create(dir.path(), &s);
    let (holding_tx, holding_rx) = mpsc::channel();
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    holder.set_write_hook(Some(Box::new(move |step| {
        if step == "create generation directory" {
            holding_tx.send(()).unwrap();
            release_rx.lock().unwrap().recv().unwrap();
        }
        Ok(())
    })));
    std::thread::scope(|scope| {
        let holding = scope.spawn(|| step(&holder, &SignerInput::default(), rotation_time(&s), 16));
        holding_rx.recv().unwrap();

        let mut waiter = FsStore::open(dir.path()).unwrap();
        waiter.set_lock_timeout(std::time::Duration::from_millis(200));
        // Readers do not wait.
        assert_eq!(waiter.get(KEY).unwrap().unwrap().1, Revision::new("1"));
        let input = SignerInput::request("api", LeafRequest::server(vec!["api.ns.svc".into()]));
        let err = step(&waiter, &input, T0, 17).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(
                err,
                RotateError::Store(pki_rotate::StoreError::LockTimeout { .. })
            ),
            "{text}"
        );
        assert!(text.contains(".lock"), "{text}");
        assert!(
            text.contains(&format!("held by pid {} (", std::process::id())),
            "{text}"
        );
        release_tx.send(()).unwrap();
        assert_eq!(
            holding.join().unwrap().unwrap().revision,
            Revision::new("2")
        );
    });
}

#[test]
fn readers_of_tls_pem_always_get_a_key_that_matches_its_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let s = initial(160);
    let store = create(dir.path(), &s);
    let pem_path = dir.path().join(leaf_pem_path("web"));
    let done = AtomicBool::new(false);
    let checked = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                while !done.load(Ordering::SeqCst) {
                    // A commit may remove the generation between the lookup
                    // of `.data` and the file: the documented answer is to
                    // read again.
                    let Ok(text) = std::fs::read_to_string(&pem_path) else {
                        continue;
                    };
                    let begin = text.find("-----BEGIN PRIVATE KEY-----").unwrap();
                    let key = pki_core::PrivateKey::from_pem(&text.as_bytes()[begin..]).unwrap();
                    let leaf = pki_core::Certificate::all_from_pem(&text.as_bytes()[..begin])
                        .unwrap()
                        .remove(0);
                    assert!(key.matches(leaf.public_key()), "tls.pem mixes two commits");
                    checked.fetch_add(1, Ordering::SeqCst);
                }
            });
        }
        // Each commit re-issues "web" (its names are replaced) with a new
        // key. The readers stop however this ends, so a failed commit fails
        // the test instead of leaving it spinning.
        let committed = (0..30u64).try_for_each(|i| {
            let input = SignerInput {
                leaves: vec![LeafChange::Replace {
                    name: "web".into(),
                    request: LeafRequest::server(vec![format!("web{i}.ns.svc")]),
                }],
                ..SignerInput::default()
            };
            Driver::new(&store)
                .step::<SignerEngine, _>(KEY, &input, T0, &mut rng(1000 + i))
                .map(drop)
        });
        done.store(true, Ordering::SeqCst);
        committed.unwrap();
    });
    assert!(checked.load(Ordering::SeqCst) > 0);
    let (loaded, _) = Driver::new(&store).load::<SignerEngine>(KEY).unwrap();
    assert_eq!(
        loaded.leaves["web"].request.dns_names,
        ["web29.ns.svc".to_string()]
    );
}

/// Every regular file under `dir` (relative path → (device, inode)).
fn files_under(dir: &Path) -> std::collections::BTreeMap<String, (u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    fn walk(base: &Path, dir: &Path, out: &mut std::collections::BTreeMap<String, (u64, u64)>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                walk(base, &path, out);
            } else {
                let relative = path
                    .strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(relative, (meta.dev(), meta.ino()));
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn live_generation(dir: &Path) -> std::path::PathBuf {
    dir.join(std::fs::read_link(dir.join(".data")).unwrap())
}

#[test]
fn the_spare_holds_the_live_files_and_none_a_commit_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, now) = rotated(dir.path(), 200);
    // The rotation replaced the CA key: the spare (the generation before)
    // must not keep it.
    let mut spare = files_under(&dir.path().join(".spare"));
    assert!(spare.remove(".mirrors").is_some());
    let live = files_under(&live_generation(dir.path()));
    assert_eq!(
        spare, live,
        "the spare is the live generation's files, linked"
    );
    // The mark: the generation mirrored, then the spare's directories.
    let mark = std::fs::read_to_string(dir.path().join(".spare/.mirrors")).unwrap();
    assert_eq!(mark.lines().next(), Some("2"));
    assert!(mark.lines().any(|l| l == "certs/web"), "{mark}");

    // Another commit starts from the spare: it becomes generation 3 and the
    // old generation 2 becomes the spare, again mirroring the live one.
    let renew = SignerInput {
        leaves: vec![LeafChange::Renew { name: "web".into() }],
        ..SignerInput::default()
    };
    step(&store, &renew, now + Duration::hours(1), 201).unwrap();
    assert_eq!(generations(dir.path()), [".gen-000000003"]);
    let mut spare = files_under(&dir.path().join(".spare"));
    spare.remove(".mirrors");
    assert_eq!(spare, files_under(&live_generation(dir.path())));
}

#[test]
fn a_commit_of_one_leaf_touches_what_changed_not_every_leaf() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = initial(210);
    for i in 0..40 {
        s.request_leaf(
            &format!("svc{i}"),
            LeafRequest::server(vec![format!("svc{i}.ns.svc")]),
        )
        .unwrap();
    }
    let mut store = create(dir.path(), &s);
    // Two commits: the first makes a spare, the second uses it.
    for (i, seed) in [(0, 211), (1, 212)] {
        step(
            &store,
            &SignerInput::request(
                format!("new{i}"),
                LeafRequest::server(vec![format!("new{i}.ns.svc")]),
            ),
            T0,
            seed,
        )
        .unwrap();
    }
    let steps = Arc::new(Mutex::new(Vec::new()));
    let seen = steps.clone();
    store.set_write_hook(Some(Box::new(move |what| {
        seen.lock().unwrap().push(what.to_string());
        Ok(())
    })));
    let request = LeafRequest::server(vec!["new2.ns.svc".into()]);
    step(&store, &SignerInput::request("new2", request), T0, 213).unwrap();
    let steps = steps.lock().unwrap().clone();
    let touched: Vec<&String> = steps
        .iter()
        .filter(|s| s.starts_with("link ") || s.starts_with("write ") || s.starts_with("unlink "))
        .collect();
    // The new leaf's three files and its request, the manifest, the index,
    // the shards that list those four paths and their identity records,
    // and the spare's mark; nothing per existing leaf.
    assert!(touched.len() <= 15, "{touched:?}");
    assert!(
        touched
            .iter()
            .any(|s| s.as_str() == "write certs/new2/tls.crt"),
        "{touched:?}"
    );
}

#[test]
fn a_spare_that_was_tampered_with_is_corrected_before_it_goes_live() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, now) = rotated(dir.path(), 220);
    let spare = dir.path().join(".spare");
    // A stray file, and a leaf's certificate replaced by another file.
    std::fs::write(spare.join("certs/web/planted.crt"), "x").unwrap();
    std::fs::remove_file(spare.join("certs/web/tls.crt")).unwrap();
    std::fs::write(spare.join("certs/web/tls.crt"), "not the certificate").unwrap();
    // A commit that leaves web alone links its certificate from the live
    // generation, so the spare's replaced copy must be noticed and undone.
    let request = LeafRequest::server(vec!["api.ns.svc".into()]);
    step(
        &store,
        &SignerInput::request("api", request),
        now + Duration::hours(1),
        221,
    )
    .unwrap();
    let live = live_generation(dir.path());
    assert!(!live.join("certs/web/planted.crt").exists());
    // The store reads back whole: every file has its committed digest.
    let (files, _) = store.get(KEY).unwrap().unwrap();
    assert!(files.get(&leaf_cert_path("web")).is_some());
    assert_ne!(
        std::fs::read(live.join("certs/web/tls.crt")).unwrap(),
        b"not the certificate"
    );
}

#[test]
fn a_crash_while_the_spare_is_updated_leaves_one_the_next_run_removes() {
    let dir = tempfile::tempdir().unwrap();
    let s = initial(230);
    let mut store = create(dir.path(), &s);
    let now = rotation_time(&s);
    store.set_write_hook(Some(Box::new(|step| {
        if step == "update spare" {
            panic!("crash before {step}");
        }
        Ok(())
    })));
    let previous_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let crashed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        step(&store, &SignerInput::default(), now, 231)
    }));
    std::panic::set_hook(previous_hook);
    assert!(crashed.is_err());
    // The old generation, with the previous CA's key, sits in the spare.
    assert!(dir.path().join(".spare").exists());
    store.set_write_hook(None);
    let (_, revision) = store.get(KEY).unwrap().unwrap();
    assert_eq!(revision, Revision::new("2"));
    assert!(!dir.path().join(".spare").exists());
    let spare = dir.path().join(".spare");
    assert!(store.take_notices().contains(&format!(
        "removed {} (left by an interrupted run)",
        spare.display()
    )));
}
