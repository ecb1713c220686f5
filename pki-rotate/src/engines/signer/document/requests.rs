//! The files form's leaf requests: one file per leaf
//! (`leaf-requests/NAME.json`), read back with `pki-state.json` for every
//! leaf or for those a step by parts names.

use super::{Document, LEAF_REQUESTS_DIR, STATE_FILE, VERSION, leaf_request_path, parse_document};
use crate::engines::leaf::{LeafRequest, validate_leaf_name};
use crate::model::document::{File, Files};
use crate::model::error::{Result, RotateError};
use std::collections::BTreeSet;

/// The leaf a path of `leaf-requests/` holds the request of.
pub(super) fn leaf_of_request_path(path: &str) -> Option<&str> {
    path.strip_prefix(LEAF_REQUESTS_DIR)?
        .strip_prefix('/')?
        .strip_suffix(".json")
        .filter(|name| !name.contains('/'))
}

/// Reads the files form's `pki-state.json` and the leaf requests of the
/// leaves `wanted` selects: from `leaf-requests/` in version 3, from the
/// state file itself in older versions.
pub(super) fn parse_files_document(files: &Files, wanted: Wanted<'_>) -> Result<Document> {
    let json = files
        .get(STATE_FILE)
        .ok_or_else(|| RotateError::corrupt(STATE_FILE, "missing"))?;
    let mut doc = parse_document(STATE_FILE, json)?;
    if doc.version < VERSION {
        if let Wanted::Named(names) = wanted {
            doc.leaves.retain(|name, _| names.contains(name));
        }
        return Ok(doc);
    }
    if let Some(name) = doc.leaves.keys().next() {
        return Err(RotateError::corrupt(
            STATE_FILE,
            format!(
                "holds the request of leaf \"{name}\": version {VERSION} keeps leaf requests in {LEAF_REQUESTS_DIR}/"
            ),
        ));
    }
    let mut read = |name: &str, path: &str, bytes: &[u8]| -> Result<()> {
        let request: LeafRequest =
            serde_json::from_slice(bytes).map_err(|e| RotateError::json(path, e))?;
        check_stored_request(path, name, &request)?;
        doc.leaves.insert(name.to_string(), request);
        Ok(())
    };
    match wanted {
        Wanted::All => {
            for (path, bytes) in files.iter() {
                if let Some(name) = leaf_of_request_path(path) {
                    read(name, path, &bytes.contents)?;
                }
            }
        }
        Wanted::Named(names) => {
            for name in names {
                let path = leaf_request_path(name);
                if let Some(bytes) = files.get(&path) {
                    read(name, &path, bytes)?;
                }
            }
        }
    }
    Ok(doc)
}

/// Refuses a stored request of the leaf `name`, read at `location`, exactly
/// when `pki issue` would refuse it: with the same checks (the leaf's name,
/// then [`LeafRequest::validate`]), so that a request no step could issue
/// fails the read that finds it, naming where, instead of every rotation
/// after it. A bad name keeps its own error (it names the leaf, and the C
/// ABI gives it its own result code).
pub(super) fn check_stored_request(
    location: &str,
    name: &str,
    request: &LeafRequest,
) -> Result<()> {
    validate_leaf_name(name)?;
    request
        .validate()
        .map_err(|e| RotateError::corrupt(location, format!("leaf request refused: {e}")))
}

/// Which leaves a read of the files form decodes.
#[derive(Clone, Copy)]
pub(super) enum Wanted<'a> {
    All,
    /// Only these (a step by parts).
    Named(&'a BTreeSet<String>),
}

/// The state file's JSON, without or with the leaf requests inside.
pub(super) fn state_json(doc: &Document) -> Result<Vec<u8>> {
    serde_json::to_vec_pretty(doc).map_err(|e| RotateError::json(STATE_FILE, e))
}

/// A leaf request's file in the files form.
pub(super) fn request_file(name: &str, request: &LeafRequest) -> Result<File> {
    serde_json::to_vec_pretty(request)
        .map(File::public)
        .map_err(|e| RotateError::json(leaf_request_path(name), e))
}
