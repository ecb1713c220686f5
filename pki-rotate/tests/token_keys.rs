//! A signer whose CA key is an object in a PKCS#11 token, as its documents
//! keep it: the key's URI and nothing private in every form (files, Secret
//! data, the JSON document), read back to the same document; a key file
//! beside the URI refused; and, without the token, every step that would
//! sign refused before anything is written. (The token itself is proven
//! with SoftHSM2 in the root crate's tests/hsm_signer.rs and hsm_set.rs.)

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_core::{CaKey, KeyAlgorithm, Pkcs11Uri, TokenKey};
use pki_rotate::engines::token_keys::TokenKeys;
use pki_rotate::{
    Document, Driver, ForcedRotation, LeafRequest, MemoryStore, SignerEngine, SignerInput,
    SignerPolicy, SignerState, Store,
};
use support::seed::{T0, rng};

const STORE: &str = "pkcs11:token=ops-hsm";
const KEY: &str = "pkcs11:token=ops-hsm;object=service-ca%20CA%201;type=private;id=%01%02";

/// A signer as `pki init --key-store` leaves it: its CA key named by URI.
fn token_signer() -> SignerState {
    let mut state =
        SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(1)).unwrap();
    let uri = Pkcs11Uri::parse(KEY).unwrap();
    let spki = state.ca.cert.public_key().clone();
    state.ca.key = CaKey::from(TokenKey::new(&uri, KeyAlgorithm::EcdsaP256, spki));
    state.token_keys = Some(TokenKeys::new(&Pkcs11Uri::parse(STORE).unwrap(), &uri));
    state
}

#[test]
fn a_token_key_is_kept_as_its_uri_in_every_form() {
    let state = token_signer();
    let files = state.to_files().unwrap();
    assert!(files.get("signer/tls.key").is_none());
    assert!(
        files
            .iter()
            .all(|(_, f)| !String::from_utf8_lossy(&f.contents).contains("PRIVATE KEY")),
        "no private key material in the files"
    );
    let json = String::from_utf8(files.get("pki-state.json").unwrap().to_vec()).unwrap();
    assert!(json.contains(KEY), "{json}");

    let back = SignerState::from_files(&files).unwrap();
    assert_eq!(back.token_keys, state.token_keys);
    assert_eq!(back.ca.cert, state.ca.cert);
    assert_eq!(back.ca.key.token().unwrap().uri().to_string(), KEY);

    let secret = SignerState::from_secret_data(&state.to_secret_data().unwrap()).unwrap();
    assert_eq!(secret.token_keys, state.token_keys);
    assert!(secret.ca.key.token().is_some());

    let whole = state.to_json().unwrap();
    assert!(!String::from_utf8_lossy(&whole).contains("PRIVATE KEY"));
    let from_json = SignerState::from_json(&whole).unwrap();
    assert_eq!(from_json.token_keys, state.token_keys);

    // A key file beside the URI: one of the two would be a key nobody rotates.
    let mut with_file = files.clone();
    let in_process = SignerState::new("other", SignerPolicy::default(), T0, &mut rng(2)).unwrap();
    with_file
        .insert(
            "signer/tls.key",
            in_process
                .to_files()
                .unwrap()
                .file("signer/tls.key")
                .unwrap()
                .clone(),
        )
        .unwrap();
    let err = SignerState::from_files(&with_file).unwrap_err().to_string();
    assert!(
        err.contains("signer/tls.key") && err.contains("token"),
        "{err}"
    );
}

#[test]
fn without_the_token_a_step_that_signs_is_refused_before_anything_is_written() {
    let store = MemoryStore::new();
    let driver = Driver::new(&store);
    driver
        .create::<SignerEngine>(pki_rotate::signer::KEY, &token_signer())
        .unwrap();
    let before = store.get("signer").unwrap().unwrap();
    let asks = [
        SignerInput::forced(ForcedRotation::new("leaked")),
        SignerInput::request("web", LeafRequest::server(vec!["web.ns.svc".into()])),
    ];
    for input in asks {
        let err = driver
            .step::<SignerEngine, _>(pki_rotate::signer::KEY, &input, T0, &mut rng(3))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("PKI_PKCS11_MODULE") && err.contains("ops-hsm"),
            "{err}"
        );
        assert_eq!(store.get("signer").unwrap().unwrap(), before, "{input:?}");
    }
}
