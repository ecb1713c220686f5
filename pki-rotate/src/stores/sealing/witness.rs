//! Which store key a store's documents are sealed under, told by one
//! sealed value of each: the files a [`SealedStore`](super::SealedStore)
//! reads to refuse a wrong or missing key before a command acts, even a
//! command whose own document holds nothing sealed (a key ring in a
//! directory store publishes its one private file in clear). Each kind
//! names its files ([`Document::sealed_witness_paths`](crate::Document::sealed_witness_paths)); the document's
//! kind is read from its state file, so the first read takes every kind's
//! state file at a fixed path with the paths known without reading.

use super::kind::{Kind, first_witness_read};
use crate::model::document::Files;
use std::collections::BTreeSet;

/// The paths of a document to read next for a value that is sealed
/// wherever a sealing store keeps it (never a file consumers read in
/// clear): at first (`read` None) [`first_witness_read`]; then, for a
/// document of `kind` (None: no kind known, nothing more to read), what
/// its kind names after a read that held `files`. Empty when there is
/// nothing (more) to read.
pub(super) fn next_paths(kind: Option<Kind>, read: Option<&Files>) -> BTreeSet<String> {
    match (kind, read) {
        (_, None) => first_witness_read(),
        (Some(kind), Some(files)) => kind.next_witness_paths(files),
        (None, Some(_)) => BTreeSet::new(),
    }
}

/// Whether a read of a document of `kind` (None: not known from what was
/// read) of `paths` (or whole when None) that found nothing sealed in
/// `files` read every file that could have told its store key: the
/// document is then left out of the check.
pub(super) fn told_all(
    kind: Option<Kind>,
    paths: Option<&BTreeSet<String>>,
    files: &Files,
) -> bool {
    paths.is_none_or(|paths| {
        kind.is_some_and(|kind| {
            kind.first_witness_paths().is_subset(paths) && kind.next_witness_paths(files).is_empty()
        })
    })
}
