//! The directory store: atomic commits, fault injection at every write,
//! racing writers, several documents in one directory, clear errors on
//! corrupt files.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_rotate::signer::document::{CA_BUNDLE, SIGNER_CERT, SIGNER_KEY, STATE_FILE};
use pki_rotate::{
    Driver, File, Files, FsStore, LeafRequest, Revision, RotateError, SignerEngine, SignerInput,
    SignerPolicy, SignerState, Store,
};
use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use support::fs::{KEY, T0, create, rng, rotation_time};
use time::{Duration, OffsetDateTime};

/// The signer every test starts from: a CA and its leaf `web`.
fn initial() -> SignerState {
    support::fs::initial(1)
}

fn load(store: &FsStore) -> (SignerState, Revision) {
    Driver::new(store).load::<SignerEngine>(KEY).unwrap()
}

/// The published files, read through the links as a consumer would.
fn snapshot(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for name in [
        SIGNER_CERT,
        SIGNER_KEY,
        CA_BUNDLE,
        STATE_FILE,
        "certs/web/tls.crt",
        "certs/web/tls.key",
    ] {
        out.insert(name.to_string(), std::fs::read(dir.join(name)).unwrap());
    }
    out
}

/// One controller step through the driver, at `now`, with no retry.
fn rotate_once(store: &FsStore, now: OffsetDateTime, seed: u64) -> Result<Revision, RotateError> {
    let step = Driver::new(store)
        .with_max_attempts(1)
        .step::<SignerEngine, _>(KEY, &SignerInput::default(), now, &mut rng(seed))?;
    Ok(step.revision)
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn store_roundtrips_state_and_publishes_the_layout() {
    let dir = tempfile::tempdir().unwrap();
    let s = initial();
    let store = create(dir.path(), &s);
    let (loaded, revision) = load(&store);
    assert_eq!(revision, Revision::new("1"));
    assert_eq!(*loaded.to_json().unwrap(), *s.to_json().unwrap());
    for key in [SIGNER_KEY, "certs/web/tls.key"] {
        assert_eq!(mode(&dir.path().join(key)), 0o600, "{key}");
    }
    let bundle = std::fs::read(dir.path().join(CA_BUNDLE)).unwrap();
    assert_eq!(pki_core::Bundle::from_pem(&bundle).unwrap(), s.bundle);
}

/// Run by `directories_are_private_whatever_the_umask` in a child process
/// that a shell started with umask 000 (the umask is process-wide, so it is
/// changed only there).
#[test]
#[ignore = "run in a child process by directories_are_private_whatever_the_umask"]
fn create_store_under_umask_000() {
    let Some(dir) = std::env::var_os("PKI_TEST_UMASK_STORE") else {
        return;
    };
    let store = create(Path::new(&dir), &initial());
    let input = SignerInput::request("api", LeafRequest::server(vec!["api.ns.svc".into()]));
    Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &input, T0, &mut rng(3))
        .unwrap();
}

#[test]
fn directories_are_private_whatever_the_umask() {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let status = std::process::Command::new("sh")
        .arg("-c")
        .arg("umask 000 && exec \"$0\" --ignored --exact create_store_under_umask_000")
        .arg(std::env::current_exe().unwrap())
        .env("PKI_TEST_UMASK_STORE", &store_dir)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    for sub in ["", ".data", "signer", "certs", "certs/web", "certs/api"] {
        let path = std::fs::canonicalize(store_dir.join(sub)).unwrap();
        assert_eq!(mode(&path), 0o700, "{}", path.display());
    }
    for file in [SIGNER_KEY, "certs/web/tls.key", "certs/api/tls.key"] {
        assert_eq!(mode(&store_dir.join(file)), 0o600, "{file}");
    }
    for file in [CA_BUNDLE, "certs/api/tls.crt"] {
        assert_eq!(mode(&store_dir.join(file)), 0o644, "{file}");
    }
}

#[test]
fn failure_at_each_write_leaves_old_state_and_next_run_completes_rotation() {
    let s = initial();
    let now = rotation_time(&s);

    // Name the write steps of a clean rotation.
    let counting = tempfile::tempdir().unwrap();
    let mut store = create(counting.path(), &s);
    let steps = Arc::new(std::sync::Mutex::new(Vec::new()));
    let recorder = steps.clone();
    store.set_write_hook(Some(Box::new(move |step| {
        recorder.lock().unwrap().push(step.to_string());
        Ok(())
    })));
    rotate_once(&store, now, 3).unwrap();
    let steps = steps.lock().unwrap().clone();
    let total = steps.len();
    assert!(total >= 8, "only {total} write steps observed");
    // After this step the new generation is live: a failure there is a
    // warning (see fs_hardening.rs), not a failed commit.
    let switch = steps.iter().position(|s| s == "switch data link").unwrap();

    for fail_at in 0..=switch {
        let dir = tempfile::tempdir().unwrap();
        let mut store = create(dir.path(), &s);
        let before = snapshot(dir.path());
        let seen = Arc::new(AtomicUsize::new(0));
        let seen2 = seen.clone();
        store.set_write_hook(Some(Box::new(move |step| {
            if seen2.fetch_add(1, Ordering::SeqCst) == fail_at {
                Err(std::io::Error::other(format!(
                    "injected failure before {step}"
                )))
            } else {
                Ok(())
            }
        })));
        let err = rotate_once(&store, now, 3).unwrap_err();
        assert!(
            matches!(err, RotateError::Store(pki_rotate::StoreError::Io { .. })),
            "step {fail_at}: {err}"
        );
        assert_eq!(
            snapshot(dir.path()),
            before,
            "step {fail_at} changed the store"
        );
        let (loaded, revision) = load(&store);
        assert_eq!(revision, Revision::new("1"));
        assert_eq!(loaded.ca.cert, s.ca.cert, "step {fail_at}");

        store.set_write_hook(None);
        assert_eq!(
            rotate_once(&store, now, 3).unwrap(),
            Revision::new("2"),
            "step {fail_at}"
        );
        let (rotated, _) = load(&store);
        assert_ne!(rotated.ca.cert, s.ca.cert);
        assert_eq!(rotated.history.len(), 1);
    }
}

#[test]
fn leftovers_of_an_interrupted_run_are_ignored_and_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let s = initial();
    let store = create(dir.path(), &s);
    // A run killed while writing generation 2 leaves a partial directory.
    let partial = dir.path().join(".gen-000000002.tmp/signer");
    std::fs::create_dir_all(&partial).unwrap();
    std::fs::write(partial.join("tls.crt"), b"half a cert").unwrap();
    std::fs::create_dir_all(dir.path().join(".gen-000000002")).unwrap();
    assert_eq!(load(&store).1, Revision::new("1"));
    assert_eq!(
        rotate_once(&store, rotation_time(&s), 4).unwrap(),
        Revision::new("2")
    );
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".gen-"))
        .collect();
    assert_eq!(names, [".gen-000000002"]);
}

#[test]
fn racing_writers_each_get_their_change_in_through_the_driver() {
    let dir = tempfile::tempdir().unwrap();
    drop(create(dir.path(), &initial()));
    let threads = 4;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let path = dir.path().to_path_buf();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                let store = FsStore::open(&path).unwrap();
                barrier.wait();
                let input = SignerInput::request(
                    format!("svc{i}"),
                    LeafRequest::server(vec![format!("svc{i}.ns.svc")]),
                );
                Driver::new(&store)
                    .step::<SignerEngine, _>(
                        KEY,
                        &input,
                        T0 + Duration::days(1),
                        &mut rng(i as u64),
                    )
                    .unwrap()
            })
        })
        .collect();
    let steps: Vec<_> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    let mut revisions: Vec<String> = steps.iter().map(|s| s.revision.to_string()).collect();
    revisions.sort();
    assert_eq!(revisions, ["2", "3", "4", "5"]);
    assert!(steps.iter().all(|s| s.changed));
    let (state, _) = load(&FsStore::open(dir.path()).unwrap());
    assert_eq!(state.leaves.len(), threads + 1);
    assert!(state.leaves.values().all(|l| l.issued.is_some()));
}

#[test]
fn put_refuses_a_stale_revision_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = initial();
    let store = create(dir.path(), &s);
    let (files, r1) = store.get(KEY).unwrap().unwrap();
    let r2 = store.put(KEY, Some(&r1), &files).unwrap();
    let before = snapshot(dir.path());
    let err = store.put(KEY, Some(&r1), &files).unwrap_err();
    match err {
        RotateError::Store(pki_rotate::StoreError::Conflict {
            key,
            expected,
            found,
        }) => {
            assert_eq!(key, KEY);
            assert_eq!(expected, Some(r1));
            assert_eq!(found, Some(r2));
        }
        other => panic!("{other}"),
    }
    let err = store.put(KEY, None, &files).unwrap_err();
    assert!(err.is_conflict(), "{err}");
    assert_eq!(snapshot(dir.path()), before);
}

#[test]
fn unchanged_files_are_shared_with_the_previous_generation() {
    let dir = tempfile::tempdir().unwrap();
    let s = initial();
    let store = create(dir.path(), &s);
    let inode = |p: &str| std::fs::metadata(dir.path().join(p)).unwrap().ino();
    let web_cert = inode("certs/web/tls.crt");
    let ca_key = inode(SIGNER_KEY);
    let input = SignerInput::request("api", LeafRequest::server(vec!["api.ns.svc".into()]));
    Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &input, T0, &mut rng(5))
        .unwrap();
    // Adding a leaf rewrites the document and writes the new leaf; the
    // other files are the same inodes, and keep their modes.
    assert_eq!(inode("certs/web/tls.crt"), web_cert);
    assert_eq!(inode(SIGNER_KEY), ca_key);
    assert_eq!(mode(&dir.path().join(SIGNER_KEY)), 0o600);
    assert!(dir.path().join("certs/api/tls.key").exists());
}

#[test]
fn several_documents_share_a_directory_without_touching_each_other() {
    let dir = tempfile::tempdir().unwrap();
    let s = initial();
    let store = create(dir.path(), &s);
    let mut other = Files::new();
    other
        .insert("keys/public.pem", File::public(b"public".to_vec()))
        .unwrap();
    other
        .insert("keys/active.key", File::secret(b"secret".to_vec()))
        .unwrap();
    let r = store.put("keys", None, &other).unwrap();
    assert_eq!(
        std::fs::read(dir.path().join("keys/public.pem")).unwrap(),
        b"public"
    );
    assert_eq!(mode(&dir.path().join("keys/active.key")), 0o600);
    let mut keys = store.keys().unwrap();
    keys.sort();
    assert_eq!(keys, ["keys", "signer"]);

    // The signer rotates; the other document is untouched.
    rotate_once(&store, rotation_time(&s), 6).unwrap();
    let (again, r_again) = store.get("keys").unwrap().unwrap();
    assert_eq!(again, other);
    assert_eq!(r_again, r);

    // A document may not take over a path another one owns.
    let mut thief = Files::new();
    thief
        .insert(CA_BUNDLE, File::public(b"not a bundle".to_vec()))
        .unwrap();
    let err = store.put("thief", None, &thief).unwrap_err();
    assert!(
        err.to_string().contains("owned by the document \"signer\""),
        "{err}"
    );
    let mut thief = Files::new();
    thief
        .insert(
            "certs",
            File::public(b"a file where a directory is".to_vec()),
        )
        .unwrap();
    assert!(store.put("thief", None, &thief).is_err());
    assert!(store.get("thief").unwrap().is_none());
}

fn rewrite_committed(dir: &Path, file: &str, contents: &[u8]) {
    support::committed::rewrite_committed(dir, KEY, file, contents);
}

fn corrupt_and_load(file: &str, contents: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    drop(create(dir.path(), &initial()));
    rewrite_committed(dir.path(), file, contents);
    let path = std::fs::canonicalize(dir.path().join(file)).unwrap();
    let store = FsStore::open(dir.path()).unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = Driver::new(&store)
        .load::<SignerEngine>(KEY)
        .unwrap_err()
        .to_string();
    assert_eq!(std::fs::read(&path).unwrap(), before);
    err
}

#[test]
fn corrupt_store_files_give_errors_naming_the_file() {
    let garbage_pem = b"-----BEGIN CERTIFICATE-----\nnot base64!\n-----END CERTIFICATE-----\n";
    for (file, needle) in [
        (SIGNER_CERT, "signer/tls.crt"),
        (SIGNER_KEY, "signer/tls.key"),
        (CA_BUNDLE, "ca-bundle.crt"),
        ("certs/web/tls.crt", "certs/web/tls.crt"),
    ] {
        let err = corrupt_and_load(file, garbage_pem);
        assert!(err.contains(needle), "{file}: {err}");
    }
    let err = corrupt_and_load(STATE_FILE, b"{ not json");
    assert!(err.contains(STATE_FILE), "{err}");
}

#[test]
fn key_that_does_not_match_its_certificate_is_detected() {
    let other = SignerState::new("other", SignerPolicy::default(), T0, &mut rng(77)).unwrap();
    let err = corrupt_and_load(SIGNER_KEY, other.ca.key.to_pkcs8_pem().unwrap().as_bytes());
    assert!(err.contains("does not match"), "{err}");
}

#[test]
fn unknown_document_version_is_refused_not_reset() {
    let dir = tempfile::tempdir().unwrap();
    drop(create(dir.path(), &initial()));
    let path = std::fs::canonicalize(dir.path().join(STATE_FILE)).unwrap();
    let text = std::fs::read_to_string(&path).unwrap().replacen(
        &format!("\"version\": {}", pki_rotate::signer::document::VERSION),
        "\"version\": 9",
        1,
    );
    rewrite_committed(dir.path(), STATE_FILE, text.as_bytes());
    let store = FsStore::open(dir.path()).unwrap();
    let err = Driver::new(&store).load::<SignerEngine>(KEY).unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::Document(pki_rotate::DocumentError::Unsupported { version: 9, .. })
        ),
        "{err}"
    );
    let err = rotate_once(&store, T0, 1).unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::Document(pki_rotate::DocumentError::Unsupported { .. })
        ),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn missing_store_and_double_init_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        FsStore::open(dir.path().join("nope")),
        Err(RotateError::Store(pki_rotate::StoreError::NotInitialized(
            _
        )))
    ));
    let store = create(dir.path(), &initial());
    let err = Driver::new(&store)
        .create::<SignerEngine>(KEY, &initial())
        .unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::Store(pki_rotate::StoreError::AlreadyInitialized(_))
        ),
        "{err}"
    );
    assert!(err.to_string().contains("already exists"), "{err}");
}

#[test]
fn a_foreign_file_where_a_published_link_belongs_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(CA_BUNDLE), b"someone else's bundle").unwrap();
    let store = FsStore::open_or_create(dir.path()).unwrap();
    let err = Driver::new(&store)
        .create::<SignerEngine>(KEY, &initial())
        .unwrap_err();
    assert!(err.to_string().contains("is not the store's link"), "{err}");
    assert!(err.to_string().contains("found a regular file"), "{err}");
    assert!(store.get(KEY).unwrap().is_none());
    assert_eq!(
        std::fs::read(dir.path().join(CA_BUNDLE)).unwrap(),
        b"someone else's bundle"
    );
}

#[test]
fn readers_never_see_a_half_written_document_while_writers_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = create(dir.path(), &initial());
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|scope| {
        let reader = scope.spawn(|| {
            let reader = FsStore::open(dir.path()).unwrap();
            let mut reads = 0;
            while !stop.load(Ordering::SeqCst) {
                let (doc, _) = load(&reader);
                // Every leaf the document names comes with its certificate and key.
                assert!(doc.leaves.values().all(|l| l.issued.is_some()));
                reads += 1;
            }
            reads
        });
        for i in 0..20 {
            let input = SignerInput::request(
                format!("svc{i}"),
                LeafRequest::server(vec![format!("svc{i}.ns.svc")]),
            );
            Driver::new(&store)
                .step::<SignerEngine, _>(KEY, &input, T0, &mut rng(i))
                .unwrap();
        }
        stop.store(true, Ordering::SeqCst);
        assert!(reader.join().unwrap() > 0);
    });
}

#[test]
fn a_held_write_lock_does_not_block_readers() {
    let dir = tempfile::tempdir().unwrap();
    let store = create(dir.path(), &initial());
    // Another process stuck in the middle of a write holds the lock.
    let holder = std::fs::File::open(dir.path().join(".lock")).unwrap();
    holder.lock().unwrap();
    let started = std::time::Instant::now();
    let (doc, revision) = load(&store);
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    assert_eq!(revision, Revision::new("1"));
    assert_eq!(doc.leaves.len(), 1);
}
