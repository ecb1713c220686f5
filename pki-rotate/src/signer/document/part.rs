//! The signer read and written by parts: its head (`pki-state.json`, the
//! CA, bridges, chain and bundle) and some of its leaves, each with its
//! request file. A step that issues, renews or removes one leaf of ten
//! thousand inside the document's idle promise touches only that part.

use super::{
    CA_BUNDLE, SIGNER_BRIDGE, SIGNER_CERT, SIGNER_CHAIN, SIGNER_KEY, STATE_FILE, Wanted,
    assemble_files, leaf_cert_path, leaf_key_path, leaf_pem_path, leaf_request_path,
    parse_files_document,
};
use crate::document::{Document as DocumentForm, Files};
use crate::error::Result;
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
        .chain(names.iter().flat_map(|n| {
            [
                leaf_request_path(n),
                leaf_cert_path(n),
                leaf_key_path(n),
                leaf_pem_path(n),
            ]
        }))
        .collect()
}

/// The signer as if it kept only the leaves `names` (those of them the
/// document has), read from the part's files.
pub(super) fn read(files: &Files, names: &BTreeSet<String>) -> Result<SignerState> {
    assemble_files(parse_files_document(files, Wanted::Named(names))?, files)
}

/// The part's files for `part`, a signer read by [`read`] and changed:
/// exactly the files a whole write puts at the part's paths. A store of an
/// older version, whose state file holds every leaf request, has no
/// `leaf-requests/` directory: the part's files declare it, which the
/// driver takes as the sign to write the whole document (and migrate it).
pub(super) fn files(part: &SignerState) -> Result<Files> {
    DocumentForm::to_files(part)
}
