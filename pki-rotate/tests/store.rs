//! The filesystem store: atomic commits, fault injection at every write,
//! serialised concurrent runs, clear errors on corrupt files.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_rotate::state::{CA_BUNDLE, SIGNER_CERT, SIGNER_KEY, STATE_FILE};
use pki_rotate::{
    FsStore, LeafRequest, MemoryStore, RotateError, SignerPolicy, SignerState, Store, reconcile,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier};
use time::{Duration, OffsetDateTime, macros::datetime};

// 2026-01-01: the day every signer here is created.
const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

fn initial() -> SignerState {
    let mut s = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap();
    s.request_leaf("web", LeafRequest::server(vec!["web.ns.svc".into()]))
        .unwrap();
    let (s, _, _) = reconcile(&s, &s.policy.clone(), T0, None, &mut rng(2)).unwrap();
    s
}

fn rotation_time(s: &SignerState) -> OffsetDateTime {
    s.rotation_due_at(&s.policy) + Duration::days(1)
}

/// Every regular file under `dir`, following the published links.
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

/// One controller step: load, reconcile at `now`, compare-and-swap.
fn rotate_once(store: &FsStore, now: OffsetDateTime, seed: u64) -> Result<u64, RotateError> {
    let (state, generation) = store.load()?;
    let (next, _, _) = reconcile(&state, &state.policy, now, None, &mut rng(seed))?;
    store.compare_and_swap(generation, &next)
}

#[test]
fn store_roundtrips_state_and_publishes_the_layout() {
    let dir = tempfile::tempdir().unwrap();
    let s = initial();
    let store = FsStore::create(dir.path(), &s).unwrap();
    let (loaded, generation) = store.load().unwrap();
    assert_eq!(generation, 1);
    assert_eq!(*loaded.to_json(1).unwrap(), *s.to_json(1).unwrap());
    for key in [SIGNER_KEY, "certs/web/tls.key"] {
        let mode = std::fs::metadata(dir.path().join(key))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{key}");
    }
    let bundle = std::fs::read(dir.path().join(CA_BUNDLE)).unwrap();
    assert_eq!(pki_core::Bundle::from_pem(&bundle).unwrap(), s.bundle);
}

#[test]
fn failure_at_each_write_leaves_old_state_and_next_run_completes_rotation() {
    let s = initial();
    let now = rotation_time(&s);

    // Count the write steps of a clean rotation.
    let counting = tempfile::tempdir().unwrap();
    let mut store = FsStore::create(counting.path(), &s).unwrap();
    let steps = Arc::new(AtomicUsize::new(0));
    let counter = steps.clone();
    store.set_write_hook(Some(Box::new(move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
        Ok(())
    })));
    rotate_once(&store, now, 3).unwrap();
    let total = steps.load(Ordering::SeqCst);
    assert!(total >= 8, "only {total} write steps observed");

    for fail_at in 0..total {
        let dir = tempfile::tempdir().unwrap();
        let mut store = FsStore::create(dir.path(), &s).unwrap();
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
            matches!(err, RotateError::Io { .. }),
            "step {fail_at}: {err}"
        );
        assert_eq!(
            snapshot(dir.path()),
            before,
            "step {fail_at} changed the store"
        );
        let (loaded, generation) = store.load().unwrap();
        assert_eq!(generation, 1);
        assert_eq!(loaded.ca.cert, s.ca.cert, "step {fail_at}");

        store.set_write_hook(None);
        assert_eq!(rotate_once(&store, now, 3).unwrap(), 2, "step {fail_at}");
        let (rotated, _) = store.load().unwrap();
        assert_ne!(rotated.ca.cert, s.ca.cert);
        assert_eq!(rotated.history.len(), 1);
    }
}

#[test]
fn leftovers_of_an_interrupted_run_are_ignored_and_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let s = initial();
    let store = FsStore::create(dir.path(), &s).unwrap();
    // A run killed while writing generation 2 leaves a partial directory.
    let partial = dir.path().join(".gen-000000002.tmp/signer");
    std::fs::create_dir_all(&partial).unwrap();
    std::fs::write(partial.join("tls.crt"), b"half a cert").unwrap();
    std::fs::create_dir_all(dir.path().join(".gen-000000002")).unwrap();
    assert_eq!(store.load().unwrap().1, 1);
    assert_eq!(rotate_once(&store, rotation_time(&s), 4).unwrap(), 2);
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".gen-"))
        .collect();
    assert_eq!(names, [".gen-000000002"]);
}

#[test]
fn concurrent_runs_are_serialised_by_the_lock() {
    let dir = tempfile::tempdir().unwrap();
    drop(FsStore::create(dir.path(), &initial()).unwrap());
    let threads = 4;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let path = dir.path().to_path_buf();
            let barrier = barrier.clone();
            std::thread::spawn(move || {
                barrier.wait();
                let store = FsStore::open(&path).unwrap();
                let (mut state, generation) = store.load().unwrap();
                // Give another run the chance to interleave, if the lock let it.
                std::thread::sleep(std::time::Duration::from_millis(20));
                state
                    .request_leaf(
                        &format!("svc{i}"),
                        LeafRequest::server(vec![format!("svc{i}.ns.svc")]),
                    )
                    .unwrap();
                let (next, _, _) = reconcile(
                    &state,
                    &state.policy,
                    T0 + Duration::days(1),
                    None,
                    &mut rng(i as u64),
                )
                .unwrap();
                store.compare_and_swap(generation, &next).unwrap()
            })
        })
        .collect();
    let mut generations: Vec<u64> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    generations.sort();
    assert_eq!(generations, [2, 3, 4, 5]);
    let (state, _) = FsStore::open(dir.path()).unwrap().load().unwrap();
    assert_eq!(state.leaves.len(), threads + 1);
}

#[test]
fn compare_and_swap_refuses_a_stale_generation() {
    let s = initial();
    let mem = MemoryStore::new(&s).unwrap();
    let (state, generation) = mem.load().unwrap();
    assert_eq!(mem.compare_and_swap(generation, &state).unwrap(), 2);
    let err = mem.compare_and_swap(generation, &state).unwrap_err();
    assert!(matches!(
        err,
        RotateError::Conflict {
            expected: 1,
            found: 2
        }
    ));
}

fn corrupt_and_load(file: &str, contents: &[u8]) -> String {
    let dir = tempfile::tempdir().unwrap();
    drop(FsStore::create(dir.path(), &initial()).unwrap());
    // Published paths are links into the current generation: corrupt the file itself.
    let path = std::fs::canonicalize(dir.path().join(file)).unwrap();
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, contents).unwrap();
    let store = FsStore::open(dir.path()).unwrap();
    let before = std::fs::read(&path).unwrap();
    let err = store.load().unwrap_err().to_string();
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
fn unknown_state_version_is_refused_not_reset() {
    let dir = tempfile::tempdir().unwrap();
    drop(FsStore::create(dir.path(), &initial()).unwrap());
    let path = std::fs::canonicalize(dir.path().join(STATE_FILE)).unwrap();
    let text =
        std::fs::read_to_string(&path)
            .unwrap()
            .replacen("\"version\": 1", "\"version\": 9", 1);
    std::fs::remove_file(&path).unwrap();
    std::fs::write(&path, &text).unwrap();
    let store = FsStore::open(dir.path()).unwrap();
    let err = store.load().unwrap_err();
    assert!(
        matches!(err, RotateError::UnsupportedStateVersion { found: 9, .. }),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
}

#[test]
fn missing_store_and_double_init_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    assert!(matches!(
        FsStore::open(dir.path().join("nope")),
        Err(RotateError::NotInitialized(_))
    ));
    drop(FsStore::create(dir.path(), &initial()).unwrap());
    assert!(matches!(
        FsStore::create(dir.path(), &initial()),
        Err(RotateError::AlreadyInitialized(_))
    ));
}
