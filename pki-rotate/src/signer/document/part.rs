//! The signer read and written by parts: its head (`pki-state.json`, the
//! CA, bridges, chain and bundle) and some of its leaves. A step that
//! issues, renews or removes one leaf of ten thousand inside the
//! document's idle promise touches only that part.

use super::{
    CA_BUNDLE, SIGNER_BRIDGE, SIGNER_CERT, SIGNER_CHAIN, SIGNER_KEY, STATE_FILE, assemble_files,
    leaf_cert_path, leaf_key_path, leaf_pem_path, parse_document,
};
use crate::document::{Document as DocumentForm, File, Files};
use crate::error::{Result, RotateError};
use crate::signer::SignerState;
use std::collections::BTreeSet;

/// The head's files and those of the leaves `names`.
pub(super) fn paths(names: &BTreeSet<String>) -> BTreeSet<String> {
    let head = [
        STATE_FILE,
        SIGNER_CERT,
        SIGNER_KEY,
        SIGNER_BRIDGE,
        SIGNER_CHAIN,
        CA_BUNDLE,
    ];
    head.into_iter()
        .map(str::to_string)
        .chain(
            names
                .iter()
                .flat_map(|n| [leaf_cert_path(n), leaf_key_path(n), leaf_pem_path(n)]),
        )
        .collect()
}

/// The signer as if it kept only the leaves `names` (those of them the
/// document has), read from the part's files.
pub(super) fn read(files: &Files, names: &BTreeSet<String>) -> Result<SignerState> {
    let json = files
        .get(STATE_FILE)
        .ok_or_else(|| RotateError::corrupt(STATE_FILE, "missing"))?;
    let mut doc = parse_document(STATE_FILE, json)?;
    doc.leaves.retain(|name, _| names.contains(name));
    assemble_files(doc, files)
}

/// The part's files for `part`, a signer read by [`read`] from `read_files`
/// and changed: its own files, and a `pki-state.json` that keeps every
/// leaf request of the document, with those of `names` as `part` has them.
pub(super) fn files(
    part: &SignerState,
    read_files: &Files,
    names: &BTreeSet<String>,
) -> Result<Files> {
    let json = read_files
        .get(STATE_FILE)
        .ok_or_else(|| RotateError::corrupt(STATE_FILE, "missing"))?;
    let mut requests = parse_document(STATE_FILE, json)?.leaves;
    for name in names {
        match part.leaves.get(name) {
            Some(leaf) => requests.insert(name.clone(), leaf.request.clone()),
            None => requests.remove(name),
        };
    }
    let mut doc = part.document(false)?;
    doc.leaves = requests;
    let json = serde_json::to_vec_pretty(&doc).map_err(|e| RotateError::json(STATE_FILE, e))?;
    let mut files = DocumentForm::to_files(part)?;
    files.insert(STATE_FILE, File::public(json))?;
    Ok(files)
}
