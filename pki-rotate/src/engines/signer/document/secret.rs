//! The signer's files as a Kubernetes Secret's data, and back: each file
//! under its documented data key, the combined `tls.pem` left out and the
//! leaf requests inside `pki-state.json` (a Secret is read and updated
//! whole, so neither would save anything), and the forced rotation's
//! reason under a key of its own.

use super::{
    CA_BUNDLE, CERTS_DIR, FORCED_ROTATION_REASON_KEY, KIND, LEAF_REQUESTS_DIR, SECRET_RENAMES,
    SIGNER_BRIDGE, SIGNER_CERT, SIGNER_CHAIN, SIGNER_KEY, STATE_FILE, VERSION, Wanted, is_leaf_pem,
    leaf_cert_path, leaf_key_path, leaf_of_request_path, leaf_request_path, parse_document,
    parse_files_document, request_file, state_json,
};
use crate::model::document::{File, Files, SecretData, files_to_secret_data};
use crate::model::error::{Result, RotateError};
use zeroize::Zeroizing;

/// The signer's files under their Secret data keys, plus
/// `forced-rotation-reason` when the document records one.
///
/// # Errors
///
/// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when a file maps
/// to no valid Secret data key or shares one with another file; a
/// [`DocumentError`](crate::DocumentError) when `pki-state.json` does not read
/// as the signer's state.
pub fn secret_data_from_files(files: &Files) -> Result<SecretData> {
    let mut kept = Files::new();
    for (path, file) in files
        .iter()
        .filter(|(p, _)| !is_leaf_pem(p) && leaf_of_request_path(p).is_none())
    {
        kept.insert(path, file.clone())?;
    }
    let mut data = files_to_secret_data(&kept, SECRET_RENAMES)?;
    if files.get(STATE_FILE).is_some() {
        let mut doc = parse_files_document(files, Wanted::All)?;
        doc.kind = KIND.to_string();
        doc.version = VERSION;
        data.insert(
            crate::model::document::secret_data_key(STATE_FILE, SECRET_RENAMES),
            Zeroizing::new(state_json(&doc)?),
        );
        if let Some(reason) = doc.forced_rotation_reason {
            data.insert(
                FORCED_ROTATION_REASON_KEY.to_string(),
                Zeroizing::new(reason.into_bytes()),
            );
        }
    }
    Ok(data)
}

/// The signer's files from Secret data: `pki-state.json` says which leaves
/// exist, so which keys to read; `forced-rotation-reason`, when present,
/// replaces the recorded reason in the document.
///
/// # Errors
///
/// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when
/// `pki-state.json` is missing or `forced-rotation-reason` is not UTF-8;
/// [`DocumentError::Unsupported`](crate::DocumentError::Unsupported),
/// [`DocumentError::Json`](crate::DocumentError::Json) or
/// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when the state
/// does not read (as for
/// [`SignerState::from_json`](crate::SignerState::from_json)).
pub fn files_from_secret_data(data: &SecretData) -> Result<Files> {
    let state_key = crate::model::document::secret_data_key(STATE_FILE, SECRET_RENAMES);
    let json = data
        .get(&state_key)
        .ok_or_else(|| RotateError::corrupt(state_key.as_str(), "missing"))?;
    let mut doc = parse_document(&state_key, json)?;
    let leaf_paths: Vec<(String, bool)> = doc
        .leaves
        .keys()
        .flat_map(|name| [(leaf_cert_path(name), false), (leaf_key_path(name), true)])
        .collect();
    let fixed = [
        (SIGNER_CERT, false),
        (SIGNER_KEY, true),
        (SIGNER_BRIDGE, false),
        (SIGNER_CHAIN, false),
        (CA_BUNDLE, false),
    ];
    let paths = fixed
        .into_iter()
        .chain(leaf_paths.iter().map(|(p, s)| (p.as_str(), *s)));
    let mut files = crate::model::document::files_from_secret_data(data, SECRET_RENAMES, paths)?;
    files.insert_dir(CERTS_DIR)?;
    files.insert_dir(LEAF_REQUESTS_DIR)?;
    if let Some(reason) = data.get(FORCED_ROTATION_REASON_KEY) {
        let reason = std::str::from_utf8(reason)
            .map_err(|_| RotateError::corrupt(FORCED_ROTATION_REASON_KEY, "is not UTF-8 text"))?;
        doc.forced_rotation_reason = (!reason.is_empty()).then(|| reason.to_string());
    }
    // Written back in the current version: reading migrated it already.
    doc.kind = KIND.to_string();
    doc.version = VERSION;
    for (name, request) in std::mem::take(&mut doc.leaves) {
        files.insert(leaf_request_path(&name), request_file(&name, &request)?)?;
    }
    files.insert(STATE_FILE, File::public(state_json(&doc)?))?;
    Ok(files)
}
