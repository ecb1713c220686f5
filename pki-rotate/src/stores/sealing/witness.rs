//! Which store key a store's documents are sealed under, told by one
//! sealed value of each: the files a [`SealedStore`](super::SealedStore)
//! reads to refuse a wrong or missing key before a command acts, even a
//! command whose own document holds nothing sealed (a key ring in a
//! directory store publishes its one private file in clear).

use crate::model::document::Files;
use std::collections::BTreeSet;

/// The paths of the document at store key `key` to read next for a value
/// that is sealed wherever a sealing store keeps it (never a file
/// consumers read in clear), given what the paths named last held (None
/// at first). Empty when there is nothing (more) to read: the kind keeps
/// no such value at a path known without reading its state, or the last
/// read found none.
pub(super) fn next_paths(key: &str, read: Option<&Files>) -> BTreeSet<String> {
    let fixed = |path: &str| match read {
        None => BTreeSet::from([path.to_string()]),
        Some(_) => BTreeSet::new(),
    };
    match key {
        // The CA key.
        crate::engines::signer::STORE_KEY => fixed(crate::engines::signer::document::SIGNER_KEY),
        // The active key: sealed everywhere but in a directory store.
        crate::engines::keyring::STORE_KEY => fixed(crate::engines::keyring::document::ACTIVE_KEY),
        // Each CA's key, named by the set's state.
        crate::engines::set::STORE_KEY => match read {
            None => BTreeSet::from([crate::engines::set::document::STATE_FILE.to_string()]),
            Some(files) => crate::engines::set::document::ca_key_paths(files),
        },
        _ => BTreeSet::new(),
    }
}

/// Whether a read of the document at `key` (of `paths`, or whole when
/// None) that found nothing sealed in `files` read every file that could
/// have told its store key: the document is then left out of the check.
pub(super) fn told_all(key: &str, paths: Option<&BTreeSet<String>>, files: &Files) -> bool {
    paths.is_none_or(|paths| {
        next_paths(key, None).is_subset(paths) && next_paths(key, Some(files)).is_empty()
    })
}
