//! The signer's state, in both forms, from arbitrary bytes.
//!
//! Input framing (see `pki_fuzz::split_state_input`): NUL-separated parts
//! are the files `pki-state.json`, `signer/tls.crt`, `signer/tls.key`,
//! `ca-bundle.crt`, `signer/intermediate-ca.crt`, then quadruples (leaf
//! name, `certs/NAME/tls.crt`, `certs/NAME/tls.key`,
//! `leaf-requests/NAME.json`); an empty part is an absent file. The first part is also given to `SignerState::from_json`.
//!
//! Checks: no panic; an accepted state writes `to_json` and `to_files`
//! that read back (same generation, CA, bridge, bundle, leaves, history);
//! the read-only status report (plan + trust matrix) runs at the CA's edges
//! and the extremes of X.509 time without panicking. The files read by
//! parts (the leaves the input names, and one it does not have): accepted
//! whenever the whole read is, with the same CA and those leaves, and
//! written back by parts into files the whole read accepts, with every
//! leaf of the document (unless the part's files declare other directories:
//! an older version's store, which the driver then writes whole).
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

/// The files read and written by parts, for the leaves `files` names.
fn by_parts(files: &pki_rotate::Files, whole: Option<&SignerState>) {
    let mut names: std::collections::BTreeSet<String> = files
        .iter()
        .filter_map(|(p, _)| {
            p.strip_prefix("certs/")
                .and_then(|p| p.split('/').next())
                .or_else(|| p.strip_prefix("leaf-requests/")?.strip_suffix(".json"))
        })
        // The driver asks only for names a leaf can have (its input is
        // checked first); a path such as `leaf-requests/a/b.json` is no
        // leaf's, and the whole read ignores it too.
        .filter(|name| pki_rotate::validate_leaf_name(name).is_ok())
        .map(str::to_string)
        .collect();
    names.insert("absent".to_string());
    let part = match SignerState::from_part(files, &names) {
        Ok(part) => part,
        Err(e) => {
            assert!(
                whole.is_none(),
                "the whole read accepts what the part read refuses: {e}"
            );
            return;
        }
    };
    if let Some(whole) = whole {
        assert_eq!(part.ca.cert, whole.ca.cert);
        for (name, leaf) in &part.leaves {
            assert_eq!(
                Some(&leaf.request),
                whole.leaves.get(name).map(|l| &l.request)
            );
        }
    }
    let written = part.to_files().expect("a part read writes its files");
    if !written.dirs().eq(files.dirs()) {
        return;
    }
    let paths = SignerState::part_paths(&names).expect("the signer is read by parts");
    let read = pki_rotate::store::only_paths(files, &paths);
    let mut merged = files.clone();
    pki_rotate::store::Changes::between(&read, &written)
        .apply_to(&mut merged)
        .expect("the part's paths are valid");
    if let Some(whole) = whole {
        let back = SignerState::from_files(&merged).expect("the files a part leaves read whole");
        assert_eq!(
            back.leaves.keys().collect::<Vec<_>>(),
            whole.leaves.keys().collect::<Vec<_>>()
        );
    }
}

fuzz_target!(|data: &[u8]| {
    let (json, files) = pki_fuzz::split_state_input(data);
    by_parts(&files, SignerState::from_files(&files).ok().as_ref());
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
