//! The directory store under attack and after accidents: tampered published
//! files, unsafe modes and owners, a planted lock link, crashes and I/O
//! errors at every step of `init`, readers racing commits, old generations,
//! the generation counter's end, and a lock held by someone else.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_rotate::Document as _;
use pki_rotate::signer::document::{SIGNER_BRIDGE, leaf_cert_path, leaf_pem_path};
use pki_rotate::{
    Driver, FsStore, LeafChange, LeafRequest, Revision, RotateError, SignerEngine, SignerInput,
    SignerPolicy, SignerState, Store,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use time::{Duration, OffsetDateTime, macros::datetime};

// 2026-01-01: the day every signer here is created.
const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);
const KEY: &str = "signer";

fn rng(seed: u64) -> ChaCha20Rng {
    // Keys and signatures from this stream: the same seed, the same output.
    pki_core::CryptoProvider::rust_crypto()
        .install_default()
        .expect("only the deterministic provider is installed in tests");
    ChaCha20Rng::seed_from_u64(seed)
}

fn initial(seed: u64) -> SignerState {
    let mut s =
        SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(seed)).unwrap();
    s.request_leaf("web", LeafRequest::server(vec!["web.ns.svc".into()]))
        .unwrap();
    let plan = pki_rotate::signer::plan(&s, &SignerInput::default(), T0).unwrap();
    pki_rotate::signer::apply(&s, plan, &mut rng(seed + 1))
        .unwrap()
        .into_document()
}

fn create(dir: &Path, s: &SignerState) -> FsStore {
    let store = FsStore::open_or_create(dir).unwrap();
    Driver::new(&store).create::<SignerEngine>(KEY, s).unwrap();
    store
}

fn rotation_time(s: &SignerState) -> OffsetDateTime {
    s.rotation_due_at(&s.policy) + Duration::days(1)
}

fn step(
    store: &FsStore,
    input: &SignerInput,
    now: OffsetDateTime,
    seed: u64,
) -> Result<pki_rotate::Step<SignerState, pki_rotate::Event>, RotateError> {
    Driver::new(store)
        .with_max_attempts(1)
        .step::<SignerEngine, _>(KEY, input, now, &mut rng(seed))
}

/// A store after one rotation: bridge B is on every serving chain.
fn rotated(dir: &Path, seed: u64) -> (FsStore, SignerState, OffsetDateTime) {
    let s = initial(seed);
    let store = create(dir, &s);
    let now = rotation_time(&s);
    let after = step(&store, &SignerInput::default(), now, seed + 2)
        .unwrap()
        .document;
    assert!(after.bridge.is_some());
    (store, after, now)
}

fn generations(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".gen-") || n.starts_with(".data.tmp"))
        .collect();
    names.sort();
    names
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// Replaces the file at `path` (a path through the store's links) with
/// whatever `tamper` leaves there.
fn replace(path: &Path, tamper: impl FnOnce(&Path)) {
    let real = path
        .parent()
        .unwrap()
        .canonicalize()
        .unwrap()
        .join(path.file_name().unwrap());
    std::fs::remove_file(&real).unwrap();
    tamper(&real);
}

#[test]
fn a_tampered_bridge_b_is_refused_every_way_and_serving_chains_keep_it() {
    let other_dir = tempfile::tempdir().unwrap();
    let (_, other, _) = rotated(other_dir.path(), 40);
    let other_bridge = other_dir.path().join(SIGNER_BRIDGE);
    let bridge_pem = other.bridge.as_ref().unwrap().to_pem();

    type Tamper = Box<dyn Fn(&Path)>;
    let ways: Vec<(&str, Tamper, &str)> = vec![
        ("missing", Box::new(|_: &Path| {}), "missing"),
        (
            "a directory",
            Box::new(|p: &Path| std::fs::create_dir(p).unwrap()),
            "a directory",
        ),
        (
            "a link to another store's file",
            Box::new({
                let target = other_bridge.clone();
                move |p: &Path| std::os::unix::fs::symlink(&target, p).unwrap()
            }),
            "a symbolic link to",
        ),
        (
            "another store's file",
            Box::new({
                let pem = bridge_pem.clone();
                move |p: &Path| std::fs::write(p, &pem).unwrap()
            }),
            "other content",
        ),
        (
            "foreign content",
            Box::new(|p: &Path| std::fs::write(p, b"not a certificate").unwrap()),
            "other content",
        ),
    ];
    for (i, (way, tamper, found)) in ways.into_iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let (store, state, now) = rotated(dir.path(), 50 + 10 * i as u64);
        let chain_path = dir.path().join(leaf_cert_path("web"));
        let chain_before = std::fs::read(&chain_path).unwrap();
        replace(&dir.path().join(SIGNER_BRIDGE), tamper);

        // A change that re-issues leaves, which would rewrite their chains.
        let input = SignerInput::request("api", LeafRequest::server(vec!["api.ns.svc".into()]));
        let err = step(&store, &input, now, 7).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, RotateError::DamagedStore { .. }),
            "{way}: {text}"
        );
        assert!(text.contains("signer/intermediate-ca.crt"), "{way}: {text}");
        assert!(text.contains(found), "{way}: {text}");
        assert_eq!(std::fs::read(&chain_path).unwrap(), chain_before, "{way}");
        assert!(!dir.path().join("certs/api").exists(), "{way}");
        let bridge = state.bridge.as_ref().unwrap().to_pem();
        assert!(
            String::from_utf8(chain_before).unwrap().contains(&bridge),
            "{way}: the serving chain lost bridge B"
        );
    }
}

#[test]
fn a_replaced_published_link_is_refused_and_a_missing_one_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _, now) = rotated(dir.path(), 60);
    let signer = dir.path().join("signer");

    // A hand-made copy of signer/ without bridge B, where the link was.
    std::fs::remove_file(&signer).unwrap();
    std::fs::create_dir(&signer).unwrap();
    std::fs::write(signer.join("tls.crt"), b"copy").unwrap();
    let err = step(&store, &SignerInput::default(), now, 8).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, RotateError::DamagedStore { .. }), "{text}");
    assert!(text.contains(&signer.display().to_string()), "{text}");
    assert!(text.contains("a directory"), "{text}");
    assert!(text.contains("move it away"), "{text}");
    assert!(store.get(KEY).is_err(), "a read must refuse it too");

    // A link to somewhere else is refused the same way.
    std::fs::remove_dir_all(&signer).unwrap();
    std::os::unix::fs::symlink("/nonexistent/signer", &signer).unwrap();
    let text = store.get(KEY).unwrap_err().to_string();
    assert!(
        text.contains("a symbolic link to /nonexistent/signer"),
        "{text}"
    );

    // Moved away: the next run, even a read, puts the link back and says so.
    std::fs::remove_file(&signer).unwrap();
    store.take_notices();
    store.get(KEY).unwrap().unwrap();
    let notices = store.take_notices();
    assert_eq!(
        notices,
        [format!("repaired {} (was missing)", signer.display())]
    );
    assert_eq!(
        std::fs::read_link(&signer).unwrap(),
        Path::new(".data/signer")
    );
    assert!(dir.path().join(SIGNER_BRIDGE).is_file());
}

#[test]
fn directories_and_files_writable_by_others_are_refused_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let store = create(dir.path(), &initial(70));
    let generation = dir.path().join(".data").canonicalize().unwrap();
    for (path, mode) in [
        (dir.path().to_path_buf(), 0o777),
        (dir.path().to_path_buf(), 0o770),
        (generation.clone(), 0o707),
        (generation.join("certs"), 0o777),
        (generation.join("certs/web"), 0o770),
        (generation.join("certs/web/tls.key"), 0o666),
    ] {
        let before = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
        set_mode(&path, mode);
        for what in ["read", "write"] {
            let err = match what {
                "read" => store.get(KEY).map(drop).unwrap_err(),
                _ => store
                    .put(
                        KEY,
                        Some(&Revision::new("1")),
                        &initial(71).to_files().unwrap(),
                    )
                    .map(drop)
                    .unwrap_err(),
            };
            let text = err.to_string();
            assert!(
                matches!(err, RotateError::UnsafeStore { .. }),
                "{what} {}: {text}",
                path.display()
            );
            assert!(text.contains(&path.display().to_string()), "{text}");
            assert!(text.contains("writable by"), "{text}");
        }
        assert!(FsStore::open(dir.path()).is_err() || path != dir.path());
        set_mode(&path, before);
    }
    store.get(KEY).unwrap().unwrap();
}

#[test]
fn paths_owned_by_another_user_are_refused() {
    let is_root = std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(2) == Some("0"));
    if !is_root {
        // chown to another user needs root; the mode checks above still run.
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let store = create(dir.path(), &initial(80));
    let generation = dir.path().join(".data").canonicalize().unwrap();
    for path in [
        generation.clone(),
        generation.join("signer"),
        dir.path().join("ca-bundle.crt"),
        dir.path().join(".data"),
        dir.path().join(".lock"),
    ] {
        std::os::unix::fs::lchown(&path, Some(65534), Some(65534)).unwrap();
        let err = store.get(KEY).map(drop).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(err, RotateError::UnsafeStore { .. }),
            "{}: {text}",
            path.display()
        );
        assert!(text.contains(&path.display().to_string()), "{text}");
        assert!(text.contains("owned by uid 65534"), "{text}");
        std::os::unix::fs::lchown(&path, Some(0), Some(0)).unwrap();
    }
    store.get(KEY).unwrap().unwrap();
}

#[test]
fn a_lock_file_that_is_a_link_is_refused_and_nothing_is_created_at_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let target = elsewhere.path().join("created-by-pki");
    let store = create(dir.path(), &initial(90));
    let lock = dir.path().join(".lock");
    std::fs::remove_file(&lock).unwrap();
    std::os::unix::fs::symlink(&target, &lock).unwrap();
    let errors = [
        store.get(KEY).map(drop).unwrap_err(),
        store.keys().map(drop).unwrap_err(),
        step(&store, &SignerInput::default(), T0, 10)
            .map(drop)
            .unwrap_err(),
        FsStore::open_or_create(dir.path())
            .unwrap()
            .put("other", None, &pki_rotate::Files::new())
            .map(drop)
            .unwrap_err(),
    ];
    for err in errors {
        let text = err.to_string();
        assert!(matches!(err, RotateError::UnsafeStore { .. }), "{text}");
        assert!(
            text.contains(".lock") && text.contains("symbolic link"),
            "{text}"
        );
    }
    assert!(!target.exists());
    assert!(
        std::fs::read_dir(elsewhere.path())
            .unwrap()
            .next()
            .is_none()
    );
}

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
        Err(RotateError::AlreadyInitialized(_)) => assert!(live_before, "{what}"),
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
        assert!(matches!(err, RotateError::LockTimeout { .. }), "{text}");
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

#[test]
fn a_tls_pem_that_does_not_match_tls_crt_and_tls_key_is_refused() {
    let s = initial(170);
    let mut files = s.to_files().unwrap();
    let pem = files.get(&leaf_pem_path("web")).unwrap().to_vec();
    assert!(pem.starts_with(files.get(&leaf_cert_path("web")).unwrap()));
    SignerState::from_files(&files).unwrap();
    files
        .insert(
            leaf_pem_path("web"),
            pki_rotate::File::secret(b"x".to_vec()),
        )
        .unwrap();
    let err = SignerState::from_files(&files).unwrap_err().to_string();
    assert!(err.contains("certs/web/tls.pem"), "{err}");
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
    let mark = std::fs::read_to_string(dir.path().join(".spare/.mirrors")).unwrap();
    assert_eq!(mark, "2");

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
    // The new leaf's three files, the document and the manifest; nothing
    // per existing leaf.
    assert!(touched.len() <= 6, "{touched:?}");
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

/// Set by [`store_writes_under_a_umask`] for the copy of this test binary it
/// runs under a umask: the directory to write the store in.
const UMASK_CHILD_DIR: &str = "PKI_FS_HARDENING_UMASK_DIR";

/// Every entry under `dir`, links not followed: relative path → mode bits,
/// with `d` for a directory and `l` for a link in front.
fn modes_under(dir: &Path) -> std::collections::BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut std::collections::BTreeMap<String, String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let relative = path
                .strip_prefix(base)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let mode = meta.permissions().mode() & 0o7777;
            let kind = if meta.is_dir() {
                "d"
            } else if meta.file_type().is_symlink() {
                "l"
            } else {
                "-"
            };
            out.insert(relative, format!("{kind}{mode:04o}"));
            if meta.is_dir() {
                walk(base, &path, out);
            }
        }
    }
    let mut out = std::collections::BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Not a test of its own: the body [`a_store_written_under_any_umask_sets_every_mode_itself`]
/// runs in a copy of this binary started under a umask (it does nothing
/// when run directly). Four commits: the second makes the spare, the third
/// and fourth start from it.
#[test]
fn store_writes_under_a_umask() {
    let Some(dir) = std::env::var_os(UMASK_CHILD_DIR) else {
        return;
    };
    let dir = Path::new(&dir);
    let store = create(dir, &initial(300));
    let mut revision = None;
    for round in 0..3u8 {
        let mut files = pki_rotate::Files::new();
        files
            .insert("extra/key.pem", pki_rotate::File::secret(vec![round; 8]))
            .unwrap();
        files
            .insert("extra/public.pem", pki_rotate::File::public(vec![round; 4]))
            .unwrap();
        revision = Some(store.put("extra", revision.as_ref(), &files).unwrap());
    }
    let (files, _) = store.get("extra").unwrap().unwrap();
    assert_eq!(files.get("extra/key.pem").unwrap().to_vec(), vec![2u8; 8]);
}

#[test]
fn a_store_written_under_any_umask_sets_every_mode_itself() {
    // 0277 clears the owner's write bit: nothing may keep the umask's mode.
    for umask in ["000", "077", "0277"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("umask {umask}; exec \"$0\" \"$@\""))
            .arg(std::env::current_exe().unwrap())
            .args(["--exact", "store_writes_under_a_umask", "--test-threads=1"])
            .env(UMASK_CHILD_DIR, &dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "umask {umask}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let modes = modes_under(&dir);
        assert!(
            modes.contains_key(".spare/.mirrors"),
            "umask {umask}: {modes:?}"
        );
        for (path, mode) in &modes {
            let private = path.ends_with(".key")
                || path.ends_with("key.pem")
                // Bookkeeping is private too: the lock and the spare's mark.
                || path == ".lock"
                || path.ends_with(".mirrors");
            match mode.as_bytes()[0] {
                b'l' => {}
                b'd' => assert_eq!(mode, "d0700", "umask {umask}: {path}"),
                _ if private => assert_eq!(mode, "-0600", "umask {umask}: {path}"),
                // Public files are 0644 whatever the umask; a document may
                // keep others private.
                _ => assert!(
                    mode == "-0644" || mode == "-0600",
                    "umask {umask}: {path} {mode}"
                ),
            }
        }
    }
}

/// Everything under `dir`, links not followed: path → kind, mode, content.
fn snapshot(dir: &Path) -> std::collections::BTreeMap<String, (String, Vec<u8>)> {
    modes_under(dir)
        .into_iter()
        .map(|(path, mode)| {
            let full = dir.join(&path);
            let content = match mode.as_bytes()[0] {
                b'-' => std::fs::read(&full).unwrap(),
                b'l' => std::fs::read_link(&full)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes(),
                _ => Vec::new(),
            };
            (path, (mode, content))
        })
        .collect()
}

#[test]
fn a_refused_first_write_leaves_the_directory_as_it_found_it() {
    for planted in ["signer", "ca-bundle.crt"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("store");
        std::fs::create_dir(&dir).unwrap();
        set_mode(&dir, 0o700);
        std::fs::write(dir.join(planted), "someone else's file").unwrap();
        let before = snapshot(&dir);
        let store = FsStore::open_or_create(&dir).unwrap();
        // What `pki init` does: read, then create.
        assert!(store.get(KEY).unwrap().is_none());
        assert!(store.keys().unwrap().is_empty());
        let err = Driver::new(&store)
            .create::<SignerEngine>(KEY, &initial(310))
            .unwrap_err();
        assert!(matches!(err, RotateError::DamagedStore { .. }), "{err}");
        assert!(err.to_string().contains(planted), "{err}");
        assert_eq!(snapshot(&dir), before, "{planted}: left something behind");
    }
}

#[test]
fn a_store_inside_another_stores_published_files_is_refused_before_anything_is_created() {
    let tmp = tempfile::tempdir().unwrap();
    let outer = tmp.path().join("outer");
    let store = create(&outer, &initial(320));
    let before = snapshot(tmp.path());
    // Through a published link (certs -> .data/certs), through .data, and
    // straight into the generation or the spare: the outer store's next
    // write replaces that directory, and the inner store with it.
    let generation = std::fs::read_link(outer.join(".data")).unwrap();
    for inside in [
        outer.join("certs/inner"),
        outer.join("certs/web/deeper/inner"),
        outer.join(".data/inner"),
        outer.join(&generation).join("inner"),
    ] {
        let err = FsStore::open_or_create(&inside).unwrap_err();
        assert!(matches!(err, RotateError::UnsafeStore { .. }), "{err}");
        let text = err.to_string();
        assert!(text.contains(&*outer.to_string_lossy()), "{text}");
        assert!(text.contains("inside the directory store"), "{text}");
        assert_eq!(snapshot(tmp.path()), before, "{}", inside.display());
    }
    // Beside the published files, a nested store is fine.
    let beside = FsStore::open_or_create(outer.join("inner")).unwrap();
    Driver::new(&beside)
        .create::<SignerEngine>(KEY, &initial(321))
        .unwrap();
    step(
        &store,
        &SignerInput::default(),
        rotation_time(&initial(320)),
        322,
    )
    .unwrap();
    assert!(beside.get(KEY).unwrap().is_some());
}
