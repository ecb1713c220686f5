use super::*;
use crate::{
    Document, Driver, Engine, File, Files, FsStore, LeafRequest, MemoryStore, SignerEngine,
    SignerInput, SignerPolicy, SignerState, Store, StoreError,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use time::macros::datetime;

fn key(seed: u64) -> StoreKey {
    StoreKey::generate(&mut ChaCha20Rng::seed_from_u64(seed))
}

fn rng() -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(99)
}

const HERE: Binding<'static> = Binding {
    kind: "signer",
    key: "signer",
    path: "signer/tls.key",
};

fn sealing_reason(e: RotateError) -> String {
    match e {
        RotateError::Store(StoreError::Sealing { reason, .. }) => reason,
        other => panic!("not a sealing error: {other}"),
    }
}

#[test]
fn key_file_round_trips_and_a_changed_id_or_key_is_refused() {
    let k = key(1);
    let text = k.to_file();
    let back = StoreKey::from_file("k", text.as_bytes()).unwrap();
    assert_eq!(back.id(), k.id());
    let wrong_id = text.replace(&k.id_hex(), "0000000000000000");
    let err = StoreKey::from_file("k", wrong_id.as_bytes()).unwrap_err();
    assert!(err.to_string().contains("does not match its key"), "{err}");
    for bad in [
        "",
        "pki-store-key 2\n",
        "pki-store-key 1\nalgorithm aes\n",
        "pki-store-key 1\nalgorithm xchacha20-poly1305\nid 00\nkey zz\n",
        "\u{ff}",
    ] {
        let err = StoreKey::from_file("k", bad.as_bytes()).unwrap_err();
        assert!(!err.to_string().contains('\n'), "{err}");
    }
    assert_ne!(key(1).id(), key(2).id());
}

#[test]
fn a_sealed_value_opens_only_in_its_place_and_under_its_key() {
    let k = key(1);
    let sealed = seal(&k, HERE, b"-----BEGIN PRIVATE KEY-----", &mut rng()).unwrap();
    assert!(is_sealed(&sealed));
    assert!(!sealed.windows(7).any(|w| w == b"PRIVATE"));
    let opened = open(std::slice::from_ref(&k), HERE, &sealed).unwrap();
    assert_eq!(opened.as_slice(), b"-----BEGIN PRIVATE KEY-----");

    // Copied onto another file, another document or another kind.
    for elsewhere in [
        Binding {
            path: "certs/web/tls.key",
            ..HERE
        },
        Binding {
            key: "creds/db",
            ..HERE
        },
        Binding {
            kind: "ca-set",
            ..HERE
        },
    ] {
        let reason =
            sealing_reason(open(std::slice::from_ref(&k), elsewhere, &sealed).unwrap_err());
        assert!(reason.contains("does not open"), "{reason}");
    }
    // Another key, or none.
    let reason = sealing_reason(open(&[key(2)], HERE, &sealed).unwrap_err());
    assert!(
        reason.contains(&format!("under key id {}", k.id_hex())),
        "{reason}"
    );
    let reason = sealing_reason(open(&[], HERE, &sealed).unwrap_err());
    assert!(reason.contains("no store key was given"), "{reason}");
    // A changed byte anywhere: the header's key id is bound too.
    for i in MAGIC.len() + 2..sealed.len() {
        let mut changed = sealed.clone();
        changed[i] ^= 1;
        assert!(
            open(&[k.clone(), key(2)], HERE, &changed).is_err(),
            "byte {i}"
        );
    }
}

#[test]
fn malformed_sealed_values_are_errors() {
    let sealed = seal(&key(1), HERE, b"x", &mut rng()).unwrap();
    for len in 0..sealed.len() {
        let truncated = &sealed[..len];
        if (MAGIC.len()..HEADER_LEN + TAG_LEN).contains(&len) {
            assert!(parse_sealed(truncated).is_err(), "{len}");
        }
        assert!(open(&[key(1)], HERE, truncated).is_err(), "{len}");
    }
    let mut other_version = sealed.clone();
    other_version[MAGIC.len()] = 2;
    assert!(
        parse_sealed(&other_version)
            .unwrap_err()
            .contains("format 2")
    );
    let mut other_alg = sealed.clone();
    other_alg[MAGIC.len() + 1] = 9;
    assert!(
        parse_sealed(&other_alg)
            .unwrap_err()
            .contains("algorithm 9")
    );
}

/// A signer with the leaf `web`.
fn signer() -> SignerState {
    let now = datetime!(2026-01-01 00:00 UTC);
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let state = SignerState::new("service-ca", SignerPolicy::default(), now, &mut rng).unwrap();
    let input = SignerInput::request("web", LeafRequest::server(vec!["web.ns.svc".into()]));
    SignerEngine::step(&state, &input, now, &mut rng)
        .unwrap()
        .document
        .into_owned()
}

fn raw_has_clear_private(store: &MemoryStore, key: &str) -> Vec<String> {
    let (files, _) = store.get(key).unwrap().unwrap();
    files
        .iter()
        .filter(|(_, f)| f.contents.windows(11).any(|w| w == b"PRIVATE KEY"))
        .map(|(p, _)| p.to_string())
        .collect()
}

#[test]
fn every_private_file_is_sealed_in_a_shared_store_and_the_document_reads_back() {
    let raw = MemoryStore::new();
    let sealed = SealedStore::new(&raw, SealingKeys::single(key(1)), rng(), false);
    let doc = signer();
    Driver::new(&sealed)
        .create::<SignerEngine>("signer", &doc)
        .unwrap();
    assert_eq!(raw_has_clear_private(&raw, "signer"), Vec::<String>::new());
    let (files, _) = raw.get("signer").unwrap().unwrap();
    for (path, file) in files.iter() {
        assert_eq!(file.secret, is_sealed(&file.contents), "{path}");
    }
    let (back, _) = Driver::new(&sealed).load::<SignerEngine>("signer").unwrap();
    assert_eq!(back.to_files().unwrap(), doc.to_files().unwrap());

    // Without the key, or with another, reading is refused with one line.
    for keys in [SealingKeys::none(), SealingKeys::single(key(2))] {
        let other = SealedStore::new(&raw, keys, rng(), false);
        let err = Driver::new(&other)
            .load::<SignerEngine>("signer")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("tls.key in signer") && !err.contains('\n'),
            "{err}"
        );
    }
}

#[test]
fn a_directory_store_keeps_what_consumers_read_in_clear_and_seals_the_ca_key() {
    let dir = tempfile::tempdir().unwrap();
    let fs = FsStore::open_or_create(dir.path()).unwrap();
    let sealed = SealedStore::new(&fs, SealingKeys::single(key(1)), rng(), true);
    Driver::new(&sealed)
        .create::<SignerEngine>("signer", &signer())
        .unwrap();
    let read = |p: &str| std::fs::read(dir.path().join(p)).unwrap();
    assert!(is_sealed(&read("signer/tls.key")));
    assert!(read("certs/web/tls.key").starts_with(b"-----BEGIN PRIVATE KEY-----"));
    assert!(
        read("certs/web/tls.pem")
            .windows(11)
            .any(|w| w == b"PRIVATE KEY")
    );
    Driver::new(&sealed).load::<SignerEngine>("signer").unwrap();
}

#[test]
fn a_store_of_consumer_objects_keeps_leaf_keys_in_clear_and_seals_the_rest() {
    let raw = MemoryStore::new();
    let sealed = SealedStore::new(&raw, SealingKeys::single(key(1)), rng(), true)
        .clear_only(crate::is_published_leaf_key);
    Driver::new(&sealed)
        .create::<SignerEngine>("signer", &signer())
        .unwrap();
    let (files, _) = raw.get("signer").unwrap().unwrap();
    assert!(is_sealed(files.get("signer/tls.key").unwrap()));
    let leaf_key = files.get("certs/web/tls.key").unwrap();
    assert!(leaf_key.starts_with(b"-----BEGIN PRIVATE KEY-----"));
    // Without the rule, every published secret file would be in clear; with
    // a rule refusing everything, none is.
    let none =
        SealedStore::new(&raw, SealingKeys::single(key(1)), rng(), true).clear_only(|_| false);
    Driver::new(&none)
        .create::<SignerEngine>("other", &signer())
        .unwrap();
    let (files, _) = raw.get("other").unwrap().unwrap();
    assert!(is_sealed(files.get("certs/web/tls.key").unwrap()));
    Driver::new(&sealed).load::<SignerEngine>("signer").unwrap();
}

#[test]
fn a_sealed_file_copied_onto_another_file_fails_to_open() {
    let raw = MemoryStore::new();
    let sealed = SealedStore::new(&raw, SealingKeys::single(key(1)), rng(), false);
    Driver::new(&sealed)
        .create::<SignerEngine>("signer", &signer())
        .unwrap();
    let (mut files, rev) = raw.get("signer").unwrap().unwrap();
    let ca_key = File::secret(files.get("signer/tls.key").unwrap().to_vec());
    files.insert("certs/web/tls.key", ca_key).unwrap();
    raw.put("signer", Some(&rev), &files).unwrap();
    let err = Driver::new(&sealed)
        .load::<SignerEngine>("signer")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("certs/web/tls.key in signer") && err.contains("does not open"),
        "{err}"
    );
    // The same document under another store key.
    raw.put("other", None, &files).unwrap();
    assert!(sealed.get("other").is_err());
}

#[test]
fn reseal_moves_every_value_to_the_new_key_and_reruns_change_nothing() {
    let raw = MemoryStore::new();
    let doc = signer();
    let old = SealedStore::new(&raw, SealingKeys::single(key(1)), rng(), false);
    Driver::new(&old)
        .create::<SignerEngine>("signer", &doc)
        .unwrap();
    let rotating = SealedStore::new(
        &raw,
        SealingKeys::rotating(Some(key(1)), key(2)),
        rng(),
        false,
    );
    assert!(rotating.reseal("signer").unwrap());
    assert!(
        !rotating.reseal("signer").unwrap(),
        "a rerun writes nothing"
    );
    assert!(!rotating.reseal("absent").unwrap());
    let new = SealedStore::new(&raw, SealingKeys::single(key(2)), rng(), false);
    let (back, _) = Driver::new(&new).load::<SignerEngine>("signer").unwrap();
    assert_eq!(back.to_files().unwrap(), doc.to_files().unwrap());
    assert!(Driver::new(&old).load::<SignerEngine>("signer").is_err());

    // A store from before sealing is sealed by the same call.
    let clear = MemoryStore::new();
    Driver::new(&clear)
        .create::<SignerEngine>("signer", &doc)
        .unwrap();
    assert!(!raw_has_clear_private(&clear, "signer").is_empty());
    let first = SealedStore::new(&clear, SealingKeys::rotating(None, key(2)), rng(), false);
    assert!(first.reseal("signer").unwrap());
    assert!(raw_has_clear_private(&clear, "signer").is_empty());
}

#[test]
fn a_create_beside_sealed_documents_needs_their_key() {
    let raw = MemoryStore::new();
    let sealed = SealedStore::new(&raw, SealingKeys::single(key(1)), rng(), false);
    Driver::new(&sealed)
        .create::<SignerEngine>("signer", &signer())
        .unwrap();
    let neighbours = || vec!["signer".to_string(), "keys".to_string()];
    for keys in [SealingKeys::none(), SealingKeys::single(key(2))] {
        let other = SealedStore::new(&raw, keys, rng(), false).check_creates_against(neighbours());
        let err = other.put("keys", None, &Files::new()).unwrap_err();
        sealing_reason(err);
        assert!(raw.get("keys").unwrap().is_none(), "nothing written");
    }
    let same = SealedStore::new(&raw, SealingKeys::single(key(1)), rng(), false)
        .check_creates_against(neighbours());
    same.put("keys", None, &Files::new()).unwrap();
}

#[test]
fn a_store_checked_against_its_sealed_documents_refuses_another_key_even_where_nothing_is_sealed() {
    let raw = MemoryStore::new();
    let sealed = SealedStore::new(&raw, SealingKeys::single(key(1)), rng(), false);
    Driver::new(&sealed)
        .create::<SignerEngine>("signer", &signer())
        .unwrap();
    // A document with nothing sealed in it.
    let revision = raw.put("keys", None, &Files::new()).unwrap();
    let witnesses = || vec!["signer".to_string(), "keys".to_string()];
    let store = |keys: SealingKeys| {
        SealedStore::new(&raw, keys, rng(), false).check_key_against(witnesses())
    };
    for keys in [SealingKeys::none(), SealingKeys::single(key(2))] {
        let err = store(keys.clone()).get("keys").unwrap_err();
        assert!(sealing_reason(err).contains("sealed"));
        let err = store(keys.clone())
            .put("keys", Some(&revision), &Files::new())
            .unwrap_err();
        sealing_reason(err);
        let err = store(keys.clone())
            .get_paths("keys", &Default::default())
            .unwrap_err();
        sealing_reason(err);
    }
    assert_eq!(
        raw.get("keys").unwrap().unwrap().1,
        revision,
        "nothing written"
    );
    // A read of some of a witness's files that holds none of its sealed
    // ones checks it still.
    let state = std::collections::BTreeSet::from(["pki-state.json".to_string()]);
    let err = store(SealingKeys::single(key(2)))
        .get_paths("signer", &state)
        .unwrap_err();
    assert!(sealing_reason(err).contains("not under the store key given"));
    // Reads of public material need no key, but not another key.
    let public = store(SealingKeys::none()).reading_public_without_key();
    assert!(public.get("keys").unwrap().is_some());
    sealing_reason(
        public
            .put("keys", Some(&revision), &Files::new())
            .unwrap_err(),
    );
    let other = store(SealingKeys::single(key(2))).reading_public_without_key();
    sealing_reason(other.get("keys").unwrap_err());
    // The store's key acts; without the check, another key reads a
    // document with nothing sealed as before.
    let right = store(SealingKeys::single(key(1)));
    assert!(right.get("keys").unwrap().is_some());
    right.put("keys", Some(&revision), &Files::new()).unwrap();
    let unchecked = SealedStore::new(&raw, SealingKeys::single(key(2)), rng(), false);
    assert!(unchecked.get("keys").unwrap().is_some());
}
