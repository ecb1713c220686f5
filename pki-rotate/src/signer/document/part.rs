//! The signer read and written by parts: its head (`pki-state.json`, the
//! CA, bridges, chain and bundle) and some of its leaves. A step that
//! issues, renews or removes one leaf of ten thousand inside the
//! document's idle promise touches only that part.

use super::{
    CA_BUNDLE, Document, KIND, SIGNER_BRIDGE, SIGNER_CERT, SIGNER_CHAIN, SIGNER_KEY, STATE_FILE,
    VERSION, assemble_files, leaf_cert_path, leaf_key_path, leaf_pem_path, parse_document,
};
use crate::document::{Document as DocumentForm, File, Files};
use crate::error::{Result, RotateError};
use crate::leaf::{LeafRequest, validate_leaf_name};
use crate::signer::SignerState;
use serde_json::value::RawValue;
use std::collections::BTreeMap;
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
/// document has), read from the part's files. Only the requests of those
/// leaves are decoded: the others stay JSON text.
pub(super) fn read(files: &Files, names: &BTreeSet<String>) -> Result<SignerState> {
    let json = state_file(files)?;
    let doc = match parse_raw(json)? {
        Some(raw) => {
            let mut leaves = BTreeMap::new();
            for name in names {
                if let Some(text) = raw.leaves.get(name) {
                    let request: LeafRequest = serde_json::from_str(text.get())
                        .map_err(|e| RotateError::json(STATE_FILE, e))?;
                    leaves.insert(name.clone(), request);
                }
            }
            raw.with_leaves(leaves)
        }
        None => {
            let mut doc = parse_document(STATE_FILE, json)?;
            doc.leaves.retain(|name, _| names.contains(name));
            doc
        }
    };
    assemble_files(doc, files)
}

/// The part's files for `part`, a signer read by [`read`] from `read_files`
/// and changed: its own files, and a `pki-state.json` that keeps every
/// leaf request of the document, with those of `names` as `part` has them.
/// The other requests are copied as the text they were written as.
pub(super) fn files(
    part: &SignerState,
    read_files: &Files,
    names: &BTreeSet<String>,
) -> Result<Files> {
    let json = state_file(read_files)?;
    let mut leaves = match parse_raw(json)? {
        Some(raw) => raw.leaves,
        None => parse_document(STATE_FILE, json)?
            .leaves
            .iter()
            .map(|(name, request)| Ok((name.clone(), raw_request(request)?)))
            .collect::<Result<_>>()?,
    };
    for name in names {
        match part.leaves.get(name) {
            Some(leaf) => leaves.insert(name.clone(), raw_request(&leaf.request)?),
            None => leaves.remove(name),
        };
    }
    let doc = part.document(false)?.with_leaves(leaves);
    let json = serde_json::to_vec_pretty(&doc).map_err(|e| RotateError::json(STATE_FILE, e))?;
    let mut files = DocumentForm::to_files(part)?;
    files.insert(STATE_FILE, File::public(json))?;
    Ok(files)
}

fn state_file(files: &Files) -> Result<&[u8]> {
    files
        .get(STATE_FILE)
        .ok_or_else(|| RotateError::corrupt(STATE_FILE, "missing"))
}

/// The state file of the current version with its leaf requests as text,
/// checked as [`parse_document`] checks it; None for another version or
/// anything that does not read so (then [`parse_document`] reads it, or
/// says what is wrong).
fn parse_raw(json: &[u8]) -> Result<Option<Document<Box<RawValue>>>> {
    let Ok(doc) = serde_json::from_slice::<Document<Box<RawValue>>>(json) else {
        return Ok(None);
    };
    if doc.kind != KIND || doc.version != VERSION {
        return Ok(None);
    }
    doc.policy
        .validate()
        .map_err(|e| RotateError::corrupt(format!("{STATE_FILE}: policy"), e))?;
    for name in doc.leaves.keys() {
        validate_leaf_name(name)?;
    }
    Ok(Some(doc))
}

/// A leaf request as the text a whole write puts in the state file: the
/// pretty form, indented as a member of `leaves` (two levels deep), so that
/// a step by parts writes the very bytes a whole step writes.
fn raw_request(request: &LeafRequest) -> Result<Box<RawValue>> {
    let text =
        serde_json::to_string_pretty(request).map_err(|e| RotateError::json(STATE_FILE, e))?;
    RawValue::from_string(text.replace('\n', "\n    "))
        .map_err(|e| RotateError::json(STATE_FILE, e))
}
