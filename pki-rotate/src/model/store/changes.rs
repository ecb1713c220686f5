//! Reading and writing parts of a document: what a step that changes one
//! leaf of ten thousand reads and writes ([`Store::get_paths`],
//! [`Store::put_changes`]).

use super::{Revision, Store, Summary};
use crate::model::document::{File, Files};
use crate::model::error::{Result, RotateError};
use std::collections::{BTreeMap, BTreeSet};

/// What a write changes in a document: files written (added or replaced)
/// and files removed. Declared directories are not changed by it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    written: BTreeMap<String, File>,
    removed: BTreeSet<String>,
}

impl Changes {
    /// No change.
    pub fn new() -> Self {
        Changes::default()
    }

    /// What turns `before` into `after`, over the paths of both: files
    /// whose bytes or secrecy differ, or that are new, are written; files
    /// `after` lacks are removed.
    pub fn between(before: &Files, after: &Files) -> Changes {
        let mut changes = Changes::new();
        for (path, file) in after.iter() {
            if before.file(path) != Some(file) {
                changes.written.insert(path.to_string(), file.clone());
            }
        }
        for (path, _) in before.iter() {
            if after.file(path).is_none() {
                changes.removed.insert(path.to_string());
            }
        }
        changes
    }

    /// Writes `file` at `path`.
    ///
    /// # Errors
    ///
    /// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when `path` is
    /// not a valid file path (see [`validate_path`](crate::validate_path));
    /// nothing changes then.
    pub fn write(&mut self, path: impl Into<String>, file: File) -> Result<()> {
        let path = path.into();
        crate::model::document::validate_path(&path)?;
        self.removed.remove(&path);
        self.written.insert(path, file);
        Ok(())
    }

    /// Removes the file at `path` (nothing when there is none).
    ///
    /// # Errors
    ///
    /// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when `path` is
    /// not a valid file path (see [`validate_path`](crate::validate_path));
    /// nothing changes then.
    pub fn remove(&mut self, path: impl Into<String>) -> Result<()> {
        let path = path.into();
        crate::model::document::validate_path(&path)?;
        self.written.remove(&path);
        self.removed.insert(path);
        Ok(())
    }

    /// The file written at `path`, if any.
    pub fn written_file(&self, path: &str) -> Option<&File> {
        self.written.get(path)
    }

    /// The files written, in path order.
    pub fn written(&self) -> impl Iterator<Item = (&str, &File)> {
        self.written.iter().map(|(p, f)| (p.as_str(), f))
    }

    /// The paths removed, in order.
    pub fn removed(&self) -> impl Iterator<Item = &str> {
        self.removed.iter().map(String::as_str)
    }

    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.written.is_empty() && self.removed.is_empty()
    }

    /// `files` with the changes made.
    ///
    /// # Errors
    ///
    /// None in practice: every path was checked when the change was made. A
    /// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) would name a
    /// path [`Files`] refuses.
    pub fn apply_to(&self, files: &mut Files) -> Result<()> {
        for path in &self.removed {
            files.remove(path);
        }
        for (path, file) in &self.written {
            files.insert(path.clone(), file.clone())?;
        }
        Ok(())
    }
}

/// The files of `files` that `paths` names, with all its declared
/// directories: what [`Store::get_paths`] returns.
pub fn only_paths(files: &Files, paths: &BTreeSet<String>) -> Files {
    let mut out = Files::new();
    for (path, file) in files.iter() {
        if paths.contains(path) {
            // The path was valid in `files`.
            let _ = out.insert(path, file.clone());
        }
    }
    for dir in files.dirs() {
        let _ = out.insert_dir(dir);
    }
    out
}

/// [`Store::put_changes`] for a store that writes whole documents: reads
/// the document, checks its revision, makes the changes and writes it
/// whole with [`Store::put_with_summary`].
///
/// # Errors
///
/// [`StoreError::Conflict`](crate::StoreError::Conflict) when the document is
/// gone or its revision is not `expected`; otherwise those of [`Store::get`]
/// and [`Store::put`].
pub fn put_changes_whole<S: Store + ?Sized>(
    store: &S,
    key: &str,
    expected: &Revision,
    changes: &Changes,
    summary: Option<&Summary>,
) -> Result<Revision> {
    let found = store.get(key)?;
    let mut files = match found {
        Some((files, revision)) if revision == *expected => files,
        other => return Err(conflict(key, expected, other.map(|(_, r)| r))),
    };
    changes.apply_to(&mut files)?;
    store.put_with_summary(key, Some(expected), &files, summary)
}

/// The conflict of a partial write that expected `expected` and found `found`.
pub fn conflict(key: &str, expected: &Revision, found: Option<Revision>) -> RotateError {
    RotateError::Store(crate::StoreError::Conflict {
        key: key.to_string(),
        expected: Some(expected.clone()),
        found,
    })
}
