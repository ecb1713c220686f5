//! Files written by the first release (format version 1, see
//! `data/v1/README.md`) still load, and the next write migrates them
//! without losing a key or breaking a published path.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::tree;

use pki_core::{ExpectedName, Purpose, VerifyOptions, verify_chain};
use pki_rotate::Document as _;
use pki_rotate::SecretData;
use pki_rotate::signer::document::{SIGNER_KEY, STATE_FILE};
use pki_rotate::{
    Driver, FsStore, LeafRequest, Revision, RotationReason, SignerEngine, SignerInput, SignerState,
    Store,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::path::Path;
use time::macros::datetime;
use tree::copy_tree;
use zeroize::Zeroizing;

const DATA: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/v1");

/// What the first release's store holds (see the README's commands).
fn assert_is_the_v1_signer(s: &SignerState) {
    assert_eq!(s.leaves.len(), 2);
    assert_eq!(s.history.len(), 2);
    assert!(matches!(
        s.history[0].reason,
        RotationReason::Expiring { .. }
    ));
    assert_eq!(
        s.history[1].reason,
        RotationReason::Forced {
            reason: "key ceremony".into()
        }
    );
    assert_eq!(s.forced_rotation_reason.as_deref(), Some("key ceremony"));
    assert!(s.bridge.is_some());
    assert_eq!(s.bundle.len(), 2);
    assert!(s.leaves.values().all(|l| l.issued.is_some()));
    // The web leaf still verifies through bridge B for a client holding only
    // the CA before the forced rotation, two days after it.
    let at = datetime!(2027-03-03 00:00 UTC);
    let web = s.leaves["web"].issued.as_ref().unwrap();
    let chain = s.serving_chain(&web.cert);
    let old_ca = pki_core::Certificate::from_pem(
        s.previous
            .as_ref()
            .unwrap()
            .certificate
            .as_ref()
            .unwrap()
            .as_bytes(),
    )
    .unwrap();
    let mut opts = VerifyOptions::new(at, Purpose::ServerAuth);
    opts.name = Some(ExpectedName::Dns("web.ns.svc".into()));
    verify_chain(
        &chain[0],
        &chain[1..],
        &pki_core::Bundle::from_certs([old_ca]),
        &opts,
    )
    .unwrap();
}

#[test]
fn a_v1_directory_store_loads_and_the_next_write_migrates_it() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&Path::new(DATA).join("store"), dir.path());
    let store = FsStore::open(dir.path()).unwrap();
    let driver = Driver::new(&store);
    let (before, revision) = driver.load::<SignerEngine>("signer").unwrap();
    assert_eq!(revision, Revision::new("5"));
    assert_is_the_v1_signer(&before);
    let ca_key = std::fs::read(dir.path().join(SIGNER_KEY)).unwrap();

    let input = SignerInput::request("api", LeafRequest::server(vec!["api.ns.svc".into()]));
    let step = driver
        .step::<SignerEngine, _>(
            "signer",
            &input,
            datetime!(2027-03-02 00:00 UTC),
            &mut ChaCha20Rng::seed_from_u64(1),
        )
        .unwrap();
    assert!(step.changed);
    assert_eq!(step.revision, Revision::new("6"));

    // The published paths still resolve, the CA key is the same, and the
    // document is now version 3 without a generation, its leaf requests in
    // files of their own.
    assert_eq!(std::fs::read(dir.path().join(SIGNER_KEY)).unwrap(), ca_key);
    let doc = std::fs::read_to_string(dir.path().join(STATE_FILE)).unwrap();
    assert!(doc.contains("\"kind\": \"signer\""), "{doc}");
    assert!(doc.contains("\"version\": 3"), "{doc}");
    assert!(!doc.contains("generation"), "{doc}");
    assert!(!doc.contains("\"leaves\""), "{doc}");
    let api = std::fs::read_to_string(dir.path().join("leaf-requests/api.json")).unwrap();
    assert!(api.contains("api.ns.svc"), "{api}");
    assert!(dir.path().join("certs/api/tls.crt").exists());
    let (after, _) = driver.load::<SignerEngine>("signer").unwrap();
    assert_eq!(after.ca.cert, before.ca.cert);
    assert_eq!(after.history, before.history);
    assert_eq!(after.leaves.len(), 3);
    assert_eq!(store.keys().unwrap(), ["signer"]);
}

#[test]
fn a_v1_json_document_loads() {
    let json = std::fs::read(Path::new(DATA).join("state.json")).unwrap();
    let s = SignerState::from_json(&json).unwrap();
    assert_is_the_v1_signer(&s);
    // Written again, it is the current version and reads back the same.
    let again = SignerState::from_json(&s.to_json().unwrap()).unwrap();
    assert_eq!(*again.to_json().unwrap(), *s.to_json().unwrap());
}

#[test]
fn v1_secret_data_loads() {
    let mut data = SecretData::new();
    for entry in std::fs::read_dir(Path::new(DATA).join("secret")).unwrap() {
        let entry = entry.unwrap();
        data.insert(
            entry.file_name().to_string_lossy().into_owned(),
            Zeroizing::new(std::fs::read(entry.path()).unwrap()),
        );
    }
    let s = SignerState::from_secret_data(&data).unwrap();
    assert_is_the_v1_signer(&s);
    // The same keys come back out, plus nothing else.
    let out = s.to_secret_data().unwrap();
    let mut keys_in: Vec<&String> = data.keys().collect();
    let mut keys_out: Vec<&String> = out.keys().collect();
    keys_in.sort();
    keys_out.sort();
    assert_eq!(keys_in, keys_out);
    // Which entries are keys is decided by the document: renaming a key
    // file's Secret key does not make it load as something else.
    let mut renamed = data.clone();
    let key = renamed.remove("certs.web.tls.key").unwrap();
    renamed.insert("certs.web.tls.key.bak".into(), key);
    let s = SignerState::from_secret_data(&renamed).unwrap();
    assert!(s.leaves["web"].issued.is_none());
}

#[test]
fn a_v1_directory_store_reads_the_same_through_the_store_trait() {
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&Path::new(DATA).join("store"), dir.path());
    let store = FsStore::open(dir.path()).unwrap();
    let (files, _) = store.get("signer").unwrap().unwrap();
    let from_files = SignerState::from_files(&files).unwrap();
    let json = std::fs::read(Path::new(DATA).join("state.json")).unwrap();
    let from_json = SignerState::from_json(&json).unwrap();
    assert_eq!(
        *from_files.to_json().unwrap(),
        *from_json.to_json().unwrap()
    );
    assert!(store.get("keys").unwrap().is_none());
}
