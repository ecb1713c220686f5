//! Which kind a document is, told by the document itself: every kind keeps
//! a state file (the [`Envelope`] naming its kind) at a path of its own
//! ([`Document::state_file`]). A [`SealedStore`](super::SealedStore) binds
//! sealed values to that kind and leaves a kind's published secrets in
//! clear; the store key the document lives at decides nothing, but for
//! reading values sealed by builds that took the kind from it
//! ([`legacy_binding`]).

use crate::engines::credential::CredentialState;
use crate::engines::keyring::KeyRing;
use crate::engines::set::SetState;
use crate::engines::signer::SignerState;
use crate::model::document::{Document, Envelope, File, Files};
use std::collections::BTreeSet;

/// What a sealing store knows of a kind of document, from its
/// [`Document`] impl.
#[derive(Clone, Copy)]
pub(super) struct Kind {
    /// [`Document::KIND`]: bound into each sealed value.
    pub(super) name: &'static str,
    /// [`Document::published_secret`].
    pub(super) published_secret: fn(&str) -> bool,
    /// [`Document::state_file`].
    state_file: fn(Option<&str>) -> Option<String>,
    /// [`Document::KINDLESS_VERSIONS`].
    kindless_versions: &'static [u32],
    /// [`Document::sealed_witness_paths`].
    witness_paths: fn(Option<&Files>) -> BTreeSet<String>,
}

impl std::fmt::Debug for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

impl PartialEq for Kind {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

const fn entry<D: Document>() -> Kind {
    Kind {
        name: D::KIND,
        published_secret: D::published_secret,
        state_file: D::state_file,
        kindless_versions: D::KINDLESS_VERSIONS,
        witness_paths: D::sealed_witness_paths,
    }
}

/// Every kind of document a sealing store knows.
const KINDS: [Kind; 4] = [
    entry::<SignerState>(),
    entry::<SetState>(),
    entry::<KeyRing>(),
    entry::<CredentialState>(),
];

impl Kind {
    /// Whether `path` is where this kind keeps its state file.
    fn is_state_file(&self, path: &str) -> bool {
        (self.state_file)(Some(path)).as_deref() == Some(path)
    }

    /// The kind the clear state file `bytes` at one of this kind's state
    /// paths names: this one when its envelope says so (or it is of a
    /// version from before kinds), else None (no kind this build knows:
    /// the document is sealed whole).
    pub(super) fn named_by(self, bytes: &[u8]) -> Option<Kind> {
        let envelope = Envelope::probe("", bytes).ok()?;
        let ours = match envelope.kind.as_deref() {
            Some(kind) => kind == self.name,
            None => self.kindless_versions.contains(&envelope.version),
        };
        ours.then_some(self)
    }

    /// [`Document::sealed_witness_paths`] after a read that held `files`.
    pub(super) fn next_witness_paths(self, files: &Files) -> BTreeSet<String> {
        (self.witness_paths)(Some(files))
    }

    /// [`Document::sealed_witness_paths`] before any read.
    pub(super) fn first_witness_paths(self) -> BTreeSet<String> {
        (self.witness_paths)(None)
    }
}

/// The files of `files` at some kind's state path, each with that kind.
pub(super) fn state_files(files: &Files) -> impl Iterator<Item = (&str, &File, Kind)> {
    files.iter().filter_map(|(path, file)| {
        KINDS
            .iter()
            .find(|k| k.is_state_file(path))
            .map(|k| (path, file, *k))
    })
}

/// Whether `path` is some kind's state file.
pub(super) fn is_state_file(path: &str) -> bool {
    KINDS.iter().any(|k| k.is_state_file(path))
}

/// The state files a document holding the files at `paths` may have,
/// with those every document of a kind has at a fixed path: what a read
/// of `paths` also reads to learn the document's kind.
pub(super) fn state_paths_near<'a>(paths: impl IntoIterator<Item = &'a str>) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = KINDS.iter().filter_map(|k| (k.state_file)(None)).collect();
    for path in paths {
        out.extend(KINDS.iter().filter_map(|k| (k.state_file)(Some(path))));
    }
    out
}

/// What a witness read reads first: every kind's state file at a fixed
/// path and the witness paths known without reading.
pub(super) fn first_witness_read() -> BTreeSet<String> {
    let mut out = state_paths_near([]);
    for kind in KINDS {
        out.extend(kind.first_witness_paths());
    }
    out
}

/// The kind builds before this one bound values sealed at store key
/// `key` to, taking it from the key: each engine's default key named its
/// kind (a credential's, any key under `creds/`), any other key `""`.
/// Only a fallback for opening values those builds sealed: a value that
/// opens only under it is sealed again under its document's kind by the
/// next write of it (and by [`SealedStore::reseal`](super::SealedStore::reseal)).
pub(super) fn legacy_binding(key: &str) -> &'static str {
    match key {
        crate::engines::signer::STORE_KEY => SignerState::KIND,
        crate::engines::set::STORE_KEY => SetState::KIND,
        crate::engines::keyring::STORE_KEY => KeyRing::KIND,
        _ if key.starts_with(&crate::engines::credential::credential_key("")) => {
            CredentialState::KIND
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_is_found_at_its_own_state_file_only() {
        let kinds: Vec<_> = [
            "pki-state.json",
            "set/state.json",
            "keys/key-ring.json",
            "creds/db/state.json",
            "certs/web/tls.key",
            "creds/db/current",
            "state.json",
        ]
        .iter()
        .map(|p| KINDS.iter().find(|k| k.is_state_file(p)).map(|k| k.name))
        .collect();
        assert_eq!(
            kinds,
            [
                Some("signer"),
                Some("ca-set"),
                Some("key-ring"),
                Some("credential"),
                None,
                None,
                None
            ]
        );
        assert!(state_paths_near(["creds/db/current"]).contains("creds/db/state.json"));
    }

    #[test]
    fn the_envelope_must_name_the_kind_of_its_path() {
        let signer = KINDS[0];
        assert_eq!(
            signer.named_by(br#"{"kind":"signer","version":3}"#),
            Some(signer)
        );
        assert_eq!(signer.named_by(br#"{"version":1}"#), Some(signer));
        assert_eq!(signer.named_by(br#"{"version":2}"#), None);
        assert_eq!(signer.named_by(br#"{"kind":"key-ring","version":1}"#), None);
        assert_eq!(signer.named_by(b"not json"), None);
        assert_eq!(KINDS[2].named_by(br#"{"version":1}"#), None);
    }
}
