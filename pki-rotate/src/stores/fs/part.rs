//! Reading some files of a document and committing only what changed
//! ([`crate::Store::get_paths`], [`crate::Store::put_changes`]): what a
//! step that changes one leaf of ten thousand reads and writes.
//!
//! A read of some paths checks the root, `.data`, the generation
//! directory, the manifest, and each directory and file on the paths it
//! reads (owner, mode, a real directory or regular file, the committed
//! digest), not the whole generation. A commit of changes checks the whole
//! generation as every commit does (a damaged file is refused, naming it,
//! and nothing is written), writes the changed files and links the others
//! with their committed digests: it needs no document from the caller.

use super::commit::{Source, Target, next_number};
use super::manifest::check_disjoint;
use super::safety::{Entry, Kind, Tree, check_owner_and_mode, digest, effective_uid};
use super::{FsStore, lock};
use crate::model::document::{File, Files};
use crate::model::error::Result;
use crate::model::store::{Changes, Revision, Summary};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// A read of some paths gives up after this many generations moved under it.
const READ_ATTEMPTS: u32 = 5;

impl FsStore {
    /// [`crate::Store::get_paths`]; `Some(Err(Legacy))` for a store written
    /// before manifests existed, which the caller reads whole. A read that a
    /// commit moved the generation under is made again.
    pub(super) fn read_paths(
        &self,
        key: &str,
        paths: &BTreeSet<String>,
    ) -> Result<Option<std::result::Result<(Files, Revision), Legacy>>> {
        if self.never_written() {
            return Ok(None);
        }
        self.check_root()?;
        // Like every read: finish an interrupted run when the lock is free.
        let held = self.lock_to_repair()?;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let before = self.current_target();
            match self.read_paths_once(key, paths, held.is_some()) {
                Err(_) if attempts < READ_ATTEMPTS && self.current_target() != before => {}
                other => return other,
            }
        }
    }

    fn read_paths_once(
        &self,
        key: &str,
        paths: &BTreeSet<String>,
        repair: bool,
    ) -> Result<Option<std::result::Result<(Files, Revision), Legacy>>> {
        // Of a sharded manifest, only the shards that list `paths`, and of
        // those only the files of `paths`.
        let Some(mut current) = self.current_for_paths(paths)? else {
            return Ok(None);
        };
        if !current.tree.contains_key(super::MANIFEST) {
            return Ok(Some(Err(Legacy)));
        }
        let published = current.top.published();
        self.check_published_names(&published)?;
        if repair {
            self.tidy_published(Some((current.number, &published)));
        }
        let Some(entry) = current.manifest.keys.get(key).cloned() else {
            return Ok(None);
        };
        let wanted: Vec<&str> = entry
            .files
            .keys()
            .filter(|p| paths.contains(*p))
            .map(String::as_str)
            .collect();
        let dir = current.dir.clone();
        self.check_paths(
            &dir,
            &mut current.tree,
            wanted
                .iter()
                .copied()
                .chain(entry.dirs.iter().map(String::as_str)),
        )?;
        let mut files = Files::new();
        for d in &entry.dirs {
            self.expect_dir(&current, d)?;
            files.insert_dir(d.clone())?;
        }
        let mut checked = Vec::with_capacity(wanted.len());
        for relative in wanted {
            let (contents, on_disk) = self.read_committed(&current, &entry, relative)?;
            checked.push((relative.to_string(), on_disk));
            let secret = entry.files.get(relative).copied().unwrap_or(true);
            files.insert(relative, File { contents, secret })?;
        }
        self.remember_verified(&current, checked);
        Ok(Some(Ok((files, Revision::new(entry.revision.to_string())))))
    }

    /// Adds to `tree` each of `paths` under the generation `dir`, and every
    /// directory on the way, after checking its owner and mode as the walk
    /// of the whole generation would. What is missing is left out (the
    /// read then says so); nothing is looked up through an entry that is
    /// not a real directory.
    pub(super) fn check_paths<'p>(
        &self,
        dir: &Path,
        tree: &mut Tree,
        paths: impl IntoIterator<Item = &'p str>,
    ) -> Result<()> {
        let euid = effective_uid();
        for path in paths {
            let ends = path
                .match_indices('/')
                .map(|(i, _)| i)
                .chain(std::iter::once(path.len()));
            for end in ends {
                let walked = &path[..end];
                let entry = match tree.get(walked) {
                    Some(e) => *e,
                    None => {
                        let full = dir.join(walked);
                        let Ok(meta) = fs::symlink_metadata(&full) else {
                            break;
                        };
                        check_owner_and_mode(&full, &meta, euid)?;
                        let entry = Entry::of(&meta);
                        tree.insert(walked.to_string(), entry);
                        entry
                    }
                };
                if entry.kind != Kind::Dir {
                    break;
                }
            }
        }
        Ok(())
    }

    /// [`crate::Store::put_changes`]: None when the document's files have
    /// no committed digests (a store of format 1), which this commit needs
    /// to link them unread; the caller then writes the whole document.
    pub(super) fn write_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> Result<Option<Revision>> {
        let _lock = lock::exclusive(&self.lock_path(), self.lock_timeout)?;
        if let Some(revision) = self.commit_changes_from_spare(key, expected, changes, summary)? {
            return Ok(Some(revision));
        }
        let current = self.current()?;
        let found = current
            .as_ref()
            .and_then(|c| Some((c, c.manifest.keys.get(key)?)));
        let (current, mut entry) = match found {
            Some((c, entry)) if entry.revision.to_string() == expected.as_str() => {
                (c, entry.clone())
            }
            other => {
                let found = other.map(|(_, e)| Revision::new(e.revision.to_string()));
                return Err(crate::model::store::conflict(key, expected, found));
            }
        };
        if entry.files.keys().any(|p| !entry.sha256.contains_key(p)) {
            return Ok(None);
        }
        let mut written = Files::new();
        for (path, file) in changes.written() {
            written.insert(path, file.clone())?;
        }
        let top_level = written.top_level_names();
        self.check_published(&current.top.published(), top_level.into_iter())?;
        // As before every commit: a damaged file is refused, never linked
        // into the next generation (this reads every file of the store).
        self.verify_all(current)?;
        self.tidy(Some(current));

        let mut manifest = self.next_manifest(Some(current), key)?;
        check_disjoint(&manifest, key, &written)?;
        let number = next_number(&self.root, Some(current))?;
        for path in changes.removed() {
            entry.files.remove(path);
            entry.sha256.remove(path);
        }
        for (path, file) in changes.written() {
            entry.files.insert(path.to_string(), file.secret);
            entry
                .sha256
                .insert(path.to_string(), digest(&file.contents));
        }
        entry.revision = number;
        entry.summary = summary.map(|s| s.as_str().to_string());
        manifest.keys.insert(key.to_string(), entry);
        let target = Target::of_changes(key, changes, &manifest, current, number)?;
        self.commit_target(Some(current), number, &manifest, &target)
            .map(Some)
    }
}

/// A store written before manifests existed: read whole.
pub(super) struct Legacy;

impl<'a> Target<'a> {
    /// The next generation after `changes` to `key`: every file as the
    /// current generation has it (linked), but those `changes` writes, and
    /// the new `manifest`.
    fn of_changes(
        key: &str,
        changes: &'a Changes,
        manifest: &super::manifest::Manifest,
        current: &super::manifest::Current,
        number: u64,
    ) -> Result<Target<'a>> {
        let mut target = Target::default();
        for (owner, entry) in &manifest.keys {
            for relative in entry.files.keys() {
                let source = match changes.written_file(relative) {
                    Some(file) if owner == key => Source::Write(std::borrow::Cow::Borrowed(file)),
                    _ => Source::Link,
                };
                target.add_file(relative, source);
            }
            for d in &entry.dirs {
                target.add_dir(d);
            }
        }
        target.add_bookkeeping(manifest, Some(current), number)?;
        Ok(target)
    }
}
