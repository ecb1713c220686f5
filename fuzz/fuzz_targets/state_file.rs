//! The signer's state, in both forms, from arbitrary bytes.
//!
//! Input framing (see `pki_fuzz::split_state_input`): NUL-separated parts
//! are the files `pki-state.json`, `signer/tls.crt`, `signer/tls.key`,
//! `ca-bundle.crt`, `signer/intermediate-ca.crt`, then triples (leaf name,
//! `certs/NAME/tls.crt`, `certs/NAME/tls.key`); an empty part is an absent
//! file. The first part is also given to `SignerState::from_json`.
//!
//! Checks: no panic; an accepted state writes `to_json` and `to_files`
//! that read back (same generation, CA, bridge, bundle, leaves, history);
//! the read-only status report (plan + trust matrix) runs at the CA's edges
//! and the extremes of X.509 time without panicking.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pki_rotate::Document as _;
use pki_rotate::SignerState;
use pki_rotate::status::SignerStatus;

fn same(a: &SignerState, b: &SignerState) {
    assert_eq!(a.ca.cert, b.ca.cert);
    assert_eq!(
        a.ca.key.public_key_der().ok(),
        b.ca.key.public_key_der().ok()
    );
    assert_eq!(a.bridge, b.bridge);
    assert_eq!(a.bundle, b.bundle);
    assert_eq!(a.previous, b.previous);
    assert_eq!(a.forced_rotation_reason, b.forced_rotation_reason);
    assert_eq!(a.history, b.history);
    assert_eq!(a.policy.rotation, b.policy.rotation);
    assert_eq!(a.policy.key_algorithm, b.policy.key_algorithm);
    assert_eq!(a.policy.keep_previous_root, b.policy.keep_previous_root);
    assert_eq!(
        a.leaves.keys().collect::<Vec<_>>(),
        b.leaves.keys().collect::<Vec<_>>()
    );
    for (x, y) in a.leaves.values().zip(b.leaves.values()) {
        assert_eq!(x.request, y.request);
        assert_eq!(
            x.issued.as_ref().map(|i| &i.cert),
            y.issued.as_ref().map(|i| &i.cert)
        );
    }
}

fn check(state: &SignerState) {
    let json = state.to_json().expect("an accepted state writes JSON");
    let back = SignerState::from_json(&json).expect("our own JSON re-reads");
    same(state, &back);

    let files = state.to_files().expect("an accepted state writes files");
    let back = SignerState::from_files(&files).expect("our own files re-read");
    same(state, &back);

    let data = state
        .to_secret_data()
        .expect("an accepted state writes Secret data");
    let back = SignerState::from_secret_data(&data).expect("our own Secret data re-reads");
    same(state, &back);

    for now in pki_fuzz::edge_times(&state.ca.cert) {
        match SignerStatus::of(state, now) {
            Ok(status) => {
                let _ = format!("{status:?}");
            }
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let (json, files) = pki_fuzz::split_state_input(data);
    match SignerState::from_json(json) {
        Ok(state) => check(&state),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    match SignerState::from_files(&files) {
        Ok(state) => check(&state),
        Err(e) => assert!(!e.to_string().is_empty()),
    }
    // The same files as Secret data: the document decides which keys it reads.
    if let Ok(data) = pki_rotate::signer::document::secret_data_from_files(&files) {
        match SignerState::from_secret_data(&data) {
            Ok(state) => check(&state),
            Err(e) => assert!(!e.to_string().is_empty()),
        }
    }
});
