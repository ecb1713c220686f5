//! A document's files sealed and opened, by the kind its state file names.

use super::super::kind::{self, Kind, legacy_binding};
use super::super::{Binding, is_sealed, open, parse_sealed, seal, sealing_error};
use super::SealedStore;
use crate::model::document::{File, Files};
use crate::model::error::Result;
use crate::model::store::{Changes, Revision, conflict};
use rand_core::CryptoRng;
use std::collections::BTreeSet;
use zeroize::Zeroizing;

/// Where the kind of a document that `changes` change is read.
pub(super) enum KindSource {
    /// The changes write a state file: these are the files they write.
    Written(Files),
    /// The state files to read from the document as stored.
    Stored(BTreeSet<String>),
}

impl KindSource {
    /// Where to read the kind of the document `changes` change: the state
    /// file they write, else the one the document has beside the files
    /// they change.
    pub(super) fn of(changes: &Changes) -> Result<KindSource> {
        let mut written = Files::new();
        for (path, file) in changes.written() {
            written.insert(path, file.clone())?;
        }
        if kind::state_files(&written).next().is_some() {
            return Ok(KindSource::Written(written));
        }
        let changed = changes.written().map(|(p, _)| p).chain(changes.removed());
        Ok(KindSource::Stored(kind::state_paths_near(changed)))
    }
}

/// `paths` with the state files a document holding them may have, when
/// they name none: what a read of some of a document's files reads to
/// learn its kind. None when `paths` already names a state file.
pub(super) fn with_state_paths(paths: &BTreeSet<String>) -> Option<BTreeSet<String>> {
    if paths.iter().any(|p| kind::is_state_file(p)) {
        return None;
    }
    let mut wanted = kind::state_paths_near(paths.iter().map(String::as_str));
    wanted.extend(paths.iter().cloned());
    Some(wanted)
}

impl<S, R: CryptoRng> SealedStore<S, R> {
    pub(super) fn stays_clear(&self, kind: Option<Kind>, path: &str) -> bool {
        self.published_in_clear
            && kind.is_some_and(|k| (k.published_secret)(path))
            && self.clear_only.is_none_or(|rule| rule(path))
    }

    /// The kind of the document at `key` whose files (as the store beneath
    /// keeps them) are `files`: what its state file names, opened first
    /// when sealed. None when no state file names a kind this build knows,
    /// or two name different ones: the document is then sealed whole,
    /// bound to the kind `""`.
    pub(super) fn kind_in(&self, key: &str, files: &Files) -> Result<Option<Kind>> {
        let mut found: Option<Option<Kind>> = None;
        for (path, file, candidate) in kind::state_files(files) {
            let named = if is_sealed(&file.contents) {
                candidate.named_by(&self.open_value(key, Some(candidate), path, &file.contents)?)
            } else {
                candidate.named_by(&file.contents)
            };
            match found {
                None => found = Some(named),
                Some(k) if k == named => {}
                Some(_) => return Ok(None),
            }
        }
        Ok(found.flatten())
    }

    /// The kind of the document at `key` from the state files read at
    /// `expected` (`read`): a write of changes based on another revision
    /// is a conflict.
    pub(super) fn kind_stored(
        &self,
        key: &str,
        expected: &Revision,
        read: Option<(Files, Revision)>,
    ) -> Result<Option<Kind>> {
        match read {
            Some((files, revision)) if revision == *expected => self.kind_in(key, &files),
            other => Err(conflict(key, expected, other.map(|(_, r)| r))),
        }
    }

    /// Opens the sealed value at `path` of the document of `kind` at
    /// `key`: bound to its kind, or, as builds before this one sealed it,
    /// to the kind they took from the store key ([`legacy_binding`]) or to
    /// `""`. The error is the one of the document's own binding.
    fn open_value(
        &self,
        key: &str,
        kind: Option<Kind>,
        path: &str,
        sealed: &[u8],
    ) -> Result<Zeroizing<Vec<u8>>> {
        let own = kind.map_or("", |k| k.name);
        let binding = |kind| Binding { kind, key, path };
        let first = open(&self.keys.open_with, binding(own), sealed);
        let Err(error) = first else {
            return first;
        };
        let mut fallbacks = vec![legacy_binding(key), ""];
        fallbacks.dedup();
        for fallback in fallbacks.into_iter().filter(|k| *k != own) {
            if let Ok(clear) = open(&self.keys.open_with, binding(fallback), sealed) {
                return Ok(clear);
            }
        }
        Err(error)
    }

    /// The files (of a document of `kind`) as the store beneath keeps them.
    pub(super) fn seal_files(&self, key: &str, kind: Option<Kind>, files: &Files) -> Result<Files> {
        let Some(sealing_key) = &self.keys.seal_with else {
            return Ok(files.clone());
        };
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Files::new();
        for dir in files.dirs() {
            out.insert_dir(dir)?;
        }
        for (path, file) in files.iter() {
            if !file.secret || self.stays_clear(kind, path) {
                out.insert(path, file.clone())?;
                continue;
            }
            let binding = Binding {
                kind: kind.map_or("", |k| k.name),
                key,
                path,
            };
            let sealed = seal(sealing_key, binding, &file.contents, &mut *rng)?;
            out.insert(path, File::secret(sealed))?;
        }
        Ok(out)
    }

    /// `changes` (to a document of `kind`) with the files it writes sealed
    /// as [`Self::seal_files`] seals them.
    pub(super) fn seal_changes(
        &self,
        key: &str,
        kind: Option<Kind>,
        changes: &Changes,
    ) -> Result<Changes> {
        let mut written = Files::new();
        for (path, file) in changes.written() {
            written.insert(path, file.clone())?;
        }
        let mut sealed = Changes::new();
        for (path, file) in self.seal_files(key, kind, &written)?.iter() {
            sealed.write(path, file.clone())?;
        }
        for path in changes.removed() {
            sealed.remove(path)?;
        }
        Ok(sealed)
    }

    /// The files (of a document of `kind`) as the document reads them.
    pub(super) fn open_files(&self, key: &str, kind: Option<Kind>, files: Files) -> Result<Files> {
        if !files.iter().any(|(_, f)| is_sealed(&f.contents)) {
            return Ok(files);
        }
        let mut out = Files::new();
        for dir in files.dirs() {
            out.insert_dir(dir)?;
        }
        for (path, file) in files.iter() {
            if !is_sealed(&file.contents) {
                out.insert(path, file.clone())?;
                continue;
            }
            if !file.secret {
                return Err(sealing_error(
                    &format!("{path} in {key}"),
                    "is a sealed value in a public file".into(),
                ));
            }
            let contents = self.open_value(key, kind, path, &file.contents)?;
            out.insert(
                path,
                File {
                    contents,
                    secret: true,
                },
            )?;
        }
        Ok(out)
    }

    /// Opens the first sealed secret file of `files` (of the document of
    /// `kind` at `key`) with the keys: whether there was one. A wrong or
    /// missing key is the error [`open`] gives.
    pub(super) fn opens_a_witness(
        &self,
        key: &str,
        kind: Option<Kind>,
        files: &Files,
    ) -> Result<bool> {
        let Some((path, file)) = files
            .iter()
            .find(|(_, f)| f.secret && is_sealed(&f.contents))
        else {
            return Ok(false);
        };
        self.open_value(key, kind, path, &file.contents)?;
        Ok(true)
    }

    /// Whether the files as stored are exactly as this store would write
    /// them now: every private file sealed under the sealing key and bound
    /// to the document's kind (or in clear where it stays clear), or
    /// everything clear without a key.
    pub(super) fn is_current(&self, key: &str, stored: &Files) -> Result<bool> {
        let kind = self.kind_in(key, stored)?;
        let own = |path| Binding {
            kind: kind.map_or("", |k| k.name),
            key,
            path,
        };
        Ok(stored.iter().filter(|(_, f)| f.secret).all(|(path, f)| {
            match (&self.keys.seal_with, is_sealed(&f.contents)) {
                (None, sealed) => !sealed,
                (Some(_), false) => self.stays_clear(kind, path),
                (Some(k), true) => {
                    !self.stays_clear(kind, path)
                        && parse_sealed(&f.contents).is_ok_and(|(h, _)| h.key_id == k.id())
                        && open(std::slice::from_ref(k), own(path), &f.contents).is_ok()
                }
            }
        }))
    }
}
