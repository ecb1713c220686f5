//! The signer read and written by parts: its head (`pki-state.json`, the
//! CA, bridges, chain and bundle) and some of its leaves, each with its
//! request file. A step that issues, renews or removes one leaf of ten
//! thousand inside the document's idle promise touches only that part.

use super::{
    CA_BUNDLE, SIGNER_BRIDGE, SIGNER_CERT, SIGNER_CHAIN, SIGNER_KEY, STATE_FILE, Wanted,
    assemble_files, leaf_cert_path, leaf_key_path, leaf_pem_path, leaf_request_path,
    parse_files_document,
};
use crate::engines::signer::SignerState;
use crate::model::document::Files;
use crate::model::error::Result;
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
