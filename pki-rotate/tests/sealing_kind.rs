//! A [`SealedStore`] knows a document's kind from the document (its state
//! file), not from the store key it lives at: under any key, a directory
//! store keeps the files consumers read (leaf keys, the active signing
//! key, the current credential) in clear (0600) and seals the rest, every
//! sealed value is bound to the document's kind, and values sealed by
//! builds that took the kind from the key (bound to `""` under a key of
//! no known kind) still open and are sealed again under the real kind.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_core::KeyAlgorithm;
use pki_rotate::credential::Secret;
use pki_rotate::sealing::{Binding, is_sealed, open, seal};
use pki_rotate::{
    CredentialEngine, CredentialInput, CredentialPolicy, CredentialState, Driver, File, Files,
    FsStore, KeyRing, KeyRingEngine, KeyRingPolicy, LeafRequest, MemoryStore, Roles, SealedStore,
    SealingKeys, SetEngine, SetState, SignerEngine, SignerInput, SignerPolicy, SignerState, Store,
    StoreKey,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::path::Path;
use time::Duration;
use time::macros::datetime;

fn store_key() -> StoreKey {
    StoreKey::generate(&mut ChaCha20Rng::seed_from_u64(1))
}

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

/// 2026-01-01, when every document below is made.
const T0: time::OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

/// The four kinds, each under a key its engine does not default to, made
/// through the driver over `store`: a signer with the leaf `web`, a CA
/// set, a key ring, and a credential with a current value.
fn create_all(store: &dyn Store) {
    let driver = Driver::new(store);
    let mut draw = rng(2);
    let signer = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut draw).unwrap();
    driver
        .create::<SignerEngine>("prod/signer", &signer)
        .unwrap();
    let issue = SignerInput::request("web", LeafRequest::server(vec!["web.ns.svc".into()]));
    driver
        .step::<SignerEngine, _>("prod/signer", &issue, T0, &mut draw)
        .unwrap();

    let roles = Roles {
        serving: true,
        client: true,
    };
    let cas = [("cluster".to_string(), roles)];
    let set = SetState::new(
        &cas,
        KeyAlgorithm::EcdsaP256,
        Duration::days(365),
        T0,
        &mut draw,
    );
    driver
        .create::<SetEngine>("prod/set", &set.unwrap())
        .unwrap();

    let ring = KeyRing::new(KeyRingPolicy::default(), T0, &mut draw).unwrap();
    driver.create::<KeyRingEngine>("prod/keys", &ring).unwrap();

    let policy = CredentialPolicy {
        expire: Duration::hours(720),
        grace: Duration::minutes(10),
    };
    let cred = CredentialState::new("db", policy, None).unwrap();
    driver.create::<CredentialEngine>("prod/db", &cred).unwrap();
    let step = |input: &CredentialInput| {
        driver
            .step::<CredentialEngine, _>("prod/db", input, T0, &mut rng(3))
            .unwrap()
    };
    step(&CredentialInput::Step);
    let minted = step(&CredentialInput::Minted {
        rotation: 1,
        attempt: 1,
        value: Secret::new("cred-3f9c1d0a7be4e2115c"),
    });
    assert!(minted.document.current.is_some());
}

/// The secret files of the document at `key` as stored beneath the
/// sealing store: path, whether sealed, and whether a sealed one opens
/// bound to `kind`.
fn secrets(raw: &dyn Store, key: &str, kind: &str) -> Vec<(String, bool, bool)> {
    let (files, _) = raw.get(key).unwrap().unwrap();
    files
        .iter()
        .filter(|(_, f)| f.secret)
        .map(|(path, f)| {
            let binding = Binding { kind, key, path };
            let sealed = is_sealed(&f.contents);
            let opens = sealed && open(&[store_key()], binding, &f.contents).is_ok();
            (path.to_string(), sealed, opens)
        })
        .collect()
}

fn published(path: &str) -> bool {
    let parts: Vec<_> = path.split('/').collect();
    matches!(
        parts.as_slice(),
        ["certs", _, "tls.key" | "tls.pem"]
            | ["targets", _, "certs", _, "tls.key"]
            | ["keys", "active.key"]
            | ["creds", _, "current" | "old"]
    )
}

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn under_other_store_keys_a_directory_store_publishes_as_under_the_default_ones() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FsStore::open_or_create(dir.path()).unwrap();
    let sealed = SealedStore::new(&fs, SealingKeys::single(store_key()), rng(4), true);
    create_all(&sealed);
    let mut clear = Vec::new();
    for (key, kind) in [
        ("prod/signer", "signer"),
        ("prod/set", "ca-set"),
        ("prod/keys", "key-ring"),
        ("prod/db", "credential"),
    ] {
        let files = secrets(&fs, key, kind);
        assert!(!files.is_empty(), "{key}");
        for (path, is_sealed, opens) in files {
            assert_eq!(is_sealed, !published(&path), "{key}: {path}");
            assert_eq!(opens, is_sealed, "{key}: {path} bound to {kind}");
            if !is_sealed {
                #[cfg(unix)]
                assert_eq!(mode(&dir.path().join(&path)), 0o600, "{path}");
                clear.push(path);
            }
        }
    }
    assert_eq!(
        clear,
        [
            "certs/web/tls.key",
            "certs/web/tls.pem",
            "keys/active.key",
            "creds/db/current"
        ]
    );
    let leaf_key = std::fs::read(dir.path().join("certs/web/tls.key")).unwrap();
    assert!(leaf_key.starts_with(b"-----BEGIN PRIVATE KEY-----"));
    assert!(is_sealed(
        &std::fs::read(dir.path().join("signer/tls.key")).unwrap()
    ));
    assert!(is_sealed(
        &std::fs::read(dir.path().join("set/cas/cluster/ca.key")).unwrap()
    ));

    // Every document reads back through the sealing store.
    let driver = Driver::new(&sealed);
    driver.load::<SignerEngine>("prod/signer").unwrap();
    driver.load::<SetEngine>("prod/set").unwrap();
    driver.load::<KeyRingEngine>("prod/keys").unwrap();
    driver.load::<CredentialEngine>("prod/db").unwrap();
}

#[test]
fn under_other_store_keys_a_shared_store_seals_every_private_file_bound_to_its_kind() {
    let raw = MemoryStore::new();
    let sealed = SealedStore::new(&raw, SealingKeys::single(store_key()), rng(4), false);
    create_all(&sealed);
    for (key, kind) in [
        ("prod/signer", "signer"),
        ("prod/set", "ca-set"),
        ("prod/keys", "key-ring"),
        ("prod/db", "credential"),
    ] {
        for (path, is_sealed, opens) in secrets(&raw, key, kind) {
            assert!(is_sealed && opens, "{key}: {path}");
        }
    }
    let (cred, _) = Driver::new(&sealed)
        .load::<CredentialEngine>("prod/db")
        .unwrap();
    assert_eq!(
        cred.current.unwrap().value.as_bytes(),
        b"cred-3f9c1d0a7be4e2115c"
    );
}

/// Seals every secret file of the document at `key` in `raw` as builds
/// that took the kind from the store key did: bound to `kind` (`""` for
/// a key of no known kind), published files included.
fn seal_as_before(raw: &dyn Store, key: &str, kind: &str) {
    let (files, revision) = raw.get(key).unwrap().unwrap();
    let mut old = Files::new();
    for dir in files.dirs() {
        old.insert_dir(dir).unwrap();
    }
    for (path, file) in files.iter() {
        let file = if file.secret {
            let binding = Binding { kind, key, path };
            File::secret(seal(&store_key(), binding, &file.contents, &mut rng(5)).unwrap())
        } else {
            file.clone()
        };
        old.insert(path, file).unwrap();
    }
    raw.put(key, Some(&revision), &old).unwrap();
}

#[test]
fn values_sealed_under_another_key_by_earlier_builds_open_and_are_sealed_again_by_kind() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FsStore::open_or_create(dir.path()).unwrap();
    // Made in clear, then sealed whole and bound to "" as earlier builds
    // sealed a document under a key of no known kind.
    create_all(&fs);
    for key in ["prod/signer", "prod/set", "prod/keys", "prod/db"] {
        seal_as_before(&fs, key, "");
    }
    assert!(is_sealed(
        &std::fs::read(dir.path().join("certs/web/tls.key")).unwrap()
    ));
    let sealed = SealedStore::new(&fs, SealingKeys::single(store_key()), rng(6), true);
    let driver = Driver::new(&sealed);
    driver.load::<SignerEngine>("prod/signer").unwrap();
    driver.load::<SetEngine>("prod/set").unwrap();
    driver.load::<KeyRingEngine>("prod/keys").unwrap();
    driver.load::<CredentialEngine>("prod/db").unwrap();

    // The next write seals under the document's kind and publishes.
    let (files, revision) = sealed.get("prod/signer").unwrap().unwrap();
    sealed.put("prod/signer", Some(&revision), &files).unwrap();
    for (path, is_sealed, opens) in secrets(&fs, "prod/signer", "signer") {
        assert_eq!(
            (is_sealed, opens),
            (!published(&path), !published(&path)),
            "{path}"
        );
    }
    let leaf_key = std::fs::read(dir.path().join("certs/web/tls.key")).unwrap();
    assert!(leaf_key.starts_with(b"-----BEGIN PRIVATE KEY-----"));

    // Re-sealing does the same for each document, once.
    for (key, kind) in [
        ("prod/set", "ca-set"),
        ("prod/keys", "key-ring"),
        ("prod/db", "credential"),
    ] {
        assert!(sealed.reseal(key).unwrap(), "{key}");
        assert!(
            !sealed.reseal(key).unwrap(),
            "{key}: a rerun writes nothing"
        );
        for (path, is_sealed, opens) in secrets(&fs, key, kind) {
            assert_eq!(
                (is_sealed, opens),
                (!published(&path), !published(&path)),
                "{path}"
            );
        }
    }
    assert!(!sealed.reseal("prod/signer").unwrap());
}

#[test]
fn under_the_default_keys_values_keep_the_binding_earlier_builds_gave_them() {
    let raw = MemoryStore::new();
    let sealed = SealedStore::new(&raw, SealingKeys::single(store_key()), rng(7), false);
    let driver = Driver::new(&sealed);
    let mut draw = rng(8);
    let signer = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut draw).unwrap();
    driver.create::<SignerEngine>("signer", &signer).unwrap();
    let ring = KeyRing::new(KeyRingPolicy::default(), T0, &mut draw).unwrap();
    driver.create::<KeyRingEngine>("keys", &ring).unwrap();
    // Written now: bound to the kind earlier builds took from these keys.
    for (key, kind) in [("signer", "signer"), ("keys", "key-ring")] {
        for (path, is_sealed, opens) in secrets(&raw, key, kind) {
            assert!(is_sealed && opens, "{key}: {path}");
        }
    }
    // Written by an earlier build: the same binding, read as it was; and
    // a signer an earlier build sealed at the key ring's key (bound to
    // "key-ring") opens too, and is bound to "signer" once re-sealed.
    let earlier = MemoryStore::new();
    Driver::new(&earlier)
        .create::<SignerEngine>("signer", &signer)
        .unwrap();
    seal_as_before(&earlier, "signer", "signer");
    let sealed = SealedStore::new(&earlier, SealingKeys::single(store_key()), rng(9), false);
    Driver::new(&sealed).load::<SignerEngine>("signer").unwrap();
    assert!(
        !sealed.reseal("signer").unwrap(),
        "already as this build seals"
    );

    let other = MemoryStore::new();
    Driver::new(&other)
        .create::<SignerEngine>("keys", &signer)
        .unwrap();
    seal_as_before(&other, "keys", "key-ring");
    let sealed = SealedStore::new(&other, SealingKeys::single(store_key()), rng(9), false);
    Driver::new(&sealed).load::<SignerEngine>("keys").unwrap();
    assert!(sealed.reseal("keys").unwrap());
    for (path, is_sealed, opens) in secrets(&other, "keys", "signer") {
        assert!(is_sealed && opens, "{path}");
    }
}

#[test]
fn reads_and_writes_of_some_files_of_a_document_learn_its_kind_from_its_state_file() {
    use std::collections::BTreeSet;
    let dir = tempfile::tempdir().unwrap();
    let fs = FsStore::open_or_create(dir.path()).unwrap();
    let sealed = SealedStore::new(&fs, SealingKeys::single(store_key()), rng(10), true);
    create_all(&sealed);
    let (whole, revision) = sealed.get("prod/signer").unwrap().unwrap();

    // A read of the CA key alone opens it, and returns it alone.
    let ca_key = BTreeSet::from(["signer/tls.key".to_string()]);
    let (part, _) = sealed.get_paths("prod/signer", &ca_key).unwrap().unwrap();
    assert_eq!(
        part.iter().map(|(p, _)| p).collect::<Vec<_>>(),
        ["signer/tls.key"]
    );
    assert_eq!(part.get("signer/tls.key"), whole.get("signer/tls.key"));

    // Changes that leave the state file alone: the leaf key stays clear,
    // the CA key is sealed bound to the signer.
    let mut changes = pki_rotate::store::Changes::new();
    let leaf = whole.file("certs/web/tls.key").unwrap().clone();
    changes.write("certs/copy/tls.key", leaf).unwrap();
    let ca = whole.file("signer/tls.key").unwrap().clone();
    changes.write("signer/tls.key", ca).unwrap();
    sealed
        .put_changes("prod/signer", &revision, &changes, None)
        .unwrap();
    let copy = std::fs::read(dir.path().join("certs/copy/tls.key")).unwrap();
    assert!(copy.starts_with(b"-----BEGIN PRIVATE KEY-----"));
    for (path, is_sealed, opens) in secrets(&fs, "prod/signer", "signer") {
        assert_eq!(
            (is_sealed, opens),
            (!published(&path), !published(&path)),
            "{path}"
        );
    }
    // Changes based on an older revision are a conflict, whatever they hold.
    let err = sealed
        .put_changes("prod/signer", &revision, &changes, None)
        .unwrap_err();
    assert!(err.is_conflict(), "{err}");
}
