//! The directory store under attack: tampered published files, unsafe
//! modes and owners, a planted lock link, a mismatched `tls.pem`, modes
//! under any umask, refused first writes and stores nested in another's
//! files.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_rotate::Document as _;
use pki_rotate::signer::document::{SIGNER_BRIDGE, leaf_cert_path, leaf_pem_path};
use pki_rotate::{
    Driver, FsStore, LeafRequest, Revision, RotateError, SignerEngine, SignerInput, SignerState,
    Store,
};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

mod support;

use support::fs::*;

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
            matches!(
                err,
                RotateError::Store(pki_rotate::StoreError::DamagedStore { .. })
            ),
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
    assert!(
        matches!(
            err,
            RotateError::Store(pki_rotate::StoreError::DamagedStore { .. })
        ),
        "{text}"
    );
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
                matches!(
                    err,
                    RotateError::Store(pki_rotate::StoreError::UnsafeStore { .. })
                ),
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
            matches!(
                err,
                RotateError::Store(pki_rotate::StoreError::UnsafeStore { .. })
            ),
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
        assert!(
            matches!(
                err,
                RotateError::Store(pki_rotate::StoreError::UnsafeStore { .. })
            ),
            "{text}"
        );
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
        assert!(
            matches!(
                err,
                RotateError::Store(pki_rotate::StoreError::DamagedStore { .. })
            ),
            "{err}"
        );
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
        assert!(
            matches!(
                err,
                RotateError::Store(pki_rotate::StoreError::UnsafeStore { .. })
            ),
            "{err}"
        );
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
