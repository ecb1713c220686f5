//! Committing: building the next generation (from the spare when there is
//! one), switching `.data` to it, and what happens once it is live.

use super::identity::{Identity, Record, encode, records_path};
use super::manifest::{
    Current, KeyEntry, Manifest, Top, bucket, check_disjoint, shard_path, shards_of,
};
use super::safety::{
    DAMAGED_ADVICE, Entry, Kind, Tree, check_tree, describe, digest, read_regular,
};
use super::stamp::stamp_dirs;
use super::write::{flush, link_or_copy, make_dir, sync_dir, write_unsynced};
use super::{DATA_LINK, FsStore, GEN_PREFIX, MANIFEST_FORMAT, SPARE, io, reason};
use crate::model::document::{File, Files};
use crate::model::error::{Result, RotateError};
use crate::model::store::Revision;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

impl FsStore {
    pub(super) fn commit(
        &self,
        current: Option<&Current>,
        key: &str,
        files: &Files,
        summary: Option<&crate::model::store::Summary>,
    ) -> Result<Revision> {
        let mut manifest = self.next_manifest(current, key)?;
        check_disjoint(&manifest, key, files)?;
        let number = next_number(&self.root, current)?;
        let entry = KeyEntry {
            revision: number,
            files: files
                .iter()
                .map(|(p, f)| (p.to_string(), f.secret))
                .collect(),
            sha256: files
                .iter()
                .map(|(p, f)| (p.to_string(), digest(&f.contents)))
                .collect(),
            dirs: files.dirs().map(str::to_string).collect(),
            summary: summary.map(|s| s.as_str().to_string()),
        };
        let previous_entry = manifest.keys.insert(key.to_string(), entry);
        let target = Target::new(
            current,
            key,
            previous_entry.as_ref(),
            files,
            &manifest,
            number,
        )?;
        self.commit_target(current, number, &manifest, &target)
    }

    /// The manifest the next generation starts from: the current one, with
    /// the digests a store of format 1 did not record for the keys other
    /// than `key` (which the commit rewrites) taken from the files as they
    /// are now (the next read checks them against this).
    pub(super) fn next_manifest(&self, current: Option<&Current>, key: &str) -> Result<Manifest> {
        let mut manifest = current
            .map(|c| c.manifest.clone())
            .unwrap_or_else(|| Manifest {
                format: MANIFEST_FORMAT,
                keys: BTreeMap::new(),
            });
        manifest.format = MANIFEST_FORMAT;
        if let Some(c) = current {
            for (other, entry) in manifest.keys.iter_mut() {
                if other == key {
                    continue;
                }
                for relative in entry.files.keys() {
                    if !entry.sha256.contains_key(relative) {
                        let path = c.dir.join(relative);
                        let (contents, _) = read_regular(&path)?.ok_or_else(|| {
                            RotateError::Store(crate::StoreError::DamagedStore {
                                path: self.root.join(relative),
                                found: describe(&path),
                                expected: format!("a regular file ({})", c.name()),
                                advice: DAMAGED_ADVICE.into(),
                            })
                        })?;
                        entry.sha256.insert(relative.clone(), digest(&contents));
                    }
                }
            }
        }
        Ok(manifest)
    }

    /// Builds the generation `number` that `target` describes, with
    /// `manifest`, and makes it current.
    pub(super) fn commit_target(
        &self,
        current: Option<&Current>,
        number: u64,
        manifest: &Manifest,
        target: &Target<'_>,
    ) -> Result<Revision> {
        let gen_name = format!("{GEN_PREFIX}{number:09}");
        let final_dir = self.root.join(&gen_name);
        let written = self.write_generation(&final_dir, current, target);
        if let Err(e) = written {
            // The previous generation is untouched; leftovers of a crash
            // here are removed by the next run that holds the lock.
            let _ = fs::remove_dir_all(&final_dir);
            return Err(e);
        }
        self.switch_data_link(&gen_name, number, current)?;
        self.settle(current, number, &manifest.published_names(), |c| {
            self.retire(c, &final_dir, number, target)
        });
        Ok(Revision::new(number.to_string()))
    }

    /// Once generation `number` is live: flushes the root, then `retire`s
    /// the generation it replaced (into the spare) and removes any older
    /// one, and publishes the root's links. What fails now is reported as
    /// a warning saying the generation is live, never as a failed commit.
    pub(super) fn settle(
        &self,
        current: Option<&Current>,
        number: u64,
        published: &BTreeSet<String>,
        retire: impl FnOnce(&Current),
    ) {
        let synced = self
            .step("sync directory")
            .and_then(|()| sync_dir(&self.root));
        match synced {
            Ok(()) => {
                let live = super::manifest::generation_name(number);
                let mut leftovers = self.old_generations(&live);
                if let Some(c) = current {
                    // Retired or warned about: either way not removed again.
                    retire(c);
                    leftovers.retain(|n| *n != c.name());
                }
                self.remove_generations(&leftovers, false);
            }
            Err(e) => {
                let previous = match current {
                    Some(c) => format!("generation {}", c.number),
                    None => "an empty store".to_string(),
                };
                self.notice(format!(
                    "warning: {}: generation {number} is live, but flushing the directory to \
                     disk failed ({}): after a power loss the store may come back at \
                     {previous}, which is kept until the next run",
                    self.root.display(),
                    reason(&e)
                ))
            }
        }
        // A store whose links were removed by hand gets them back.
        self.publish(published, number, false);
    }

    /// Builds the generation `target` describes in `tmp`, its final name:
    /// nothing reads a generation before `.data` points to it, and one left
    /// half-built by a crash is removed by the next run like any generation
    /// `.data` does not point to. It starts from the spare when there is one
    /// (the previous generation kept up to date): entries that are already
    /// the right file stay, and only what differs is removed, linked or
    /// written. Everything is on disk when it returns.
    pub(super) fn write_generation(
        &self,
        tmp: &Path,
        current: Option<&Current>,
        target: &Target<'_>,
    ) -> Result<()> {
        if fs::symlink_metadata(tmp).is_ok() {
            fs::remove_dir_all(tmp).map_err(io(tmp))?;
        }
        self.step("create generation directory")?;
        let spare = self.root.join(SPARE);
        let reused = match current {
            Some(_) if fs::symlink_metadata(&spare).is_ok_and(|m| m.is_dir()) => {
                fs::rename(&spare, tmp).map_err(io(tmp))?;
                true
            }
            _ => {
                make_dir(tmp)?;
                false
            }
        };
        // What is in the directory being built: the spare's entries (they
        // become the new generation's, so they pass the same checks), or
        // nothing.
        let mut existing = if reused {
            check_tree(tmp)?
        } else {
            Tree::new()
        };
        let mut touched = BTreeSet::from([tmp.to_path_buf()]);
        let mut written = Vec::new();
        let parent_of = |relative: &str| match relative.rsplit_once('/') {
            Some((parent, _)) => tmp.join(parent),
            None => tmp.to_path_buf(),
        };

        for relative in self.remove_extra(tmp, &existing, target)? {
            touched.insert(parent_of(&relative));
            existing.retain(|r, _| *r != relative && !is_under(r, &relative));
        }

        for dir in &target.dirs {
            if existing.get(dir).is_none_or(|e| e.kind != Kind::Dir) {
                make_dir(&tmp.join(dir))?;
                touched.insert(parent_of(dir));
                touched.insert(tmp.join(dir));
            }
        }
        for (relative, source) in &target.files {
            let path = tmp.join(relative);
            let present = existing.get(relative.as_str());
            match source {
                Source::Link => {
                    let Some(c) = current else { continue };
                    let wanted = c.tree.get(relative.as_str()).map(|e| e.id);
                    if present.is_some_and(|e| e.kind == Kind::File && Some(e.id) == wanted) {
                        continue;
                    }
                    self.step(&format!("link {relative}"))?;
                    if present.is_some() {
                        fs::remove_file(&path).map_err(io(&path))?;
                    }
                    link_or_copy(&c.dir.join(relative), &path)?;
                }
                Source::Write(file) => {
                    self.step(&format!("write {relative}"))?;
                    if present.is_some() {
                        fs::remove_file(&path).map_err(io(&path))?;
                    }
                    write_unsynced(&path, file)?;
                    written.push(path);
                }
                Source::Records => {
                    if present.is_some() {
                        fs::remove_file(&path).map_err(io(&path))?;
                    }
                }
            }
            touched.insert(parent_of(relative));
        }
        self.finish_generation(tmp, target, written, &touched)
    }

    /// Removes from the generation being built in `dir` (holding
    /// `existing`) whatever `target` does not have, deepest first; returns
    /// what it removed.
    fn remove_extra(
        &self,
        dir: &Path,
        existing: &Tree,
        target: &Target<'_>,
    ) -> Result<Vec<String>> {
        let mut extra: Vec<(&String, &Entry)> = existing
            .iter()
            .filter(|(relative, e)| match e.kind {
                Kind::Dir => !target.dirs.contains(relative.as_str()),
                Kind::File => !target.files.contains_key(relative.as_str()),
                Kind::Other => true,
            })
            .collect();
        extra.sort_by(|a, b| b.0.cmp(a.0));
        let mut removed: Vec<String> = Vec::new();
        for (relative, e) in extra {
            if removed.iter().any(|r| is_under(relative, r)) {
                continue;
            }
            self.step(&format!("unlink {relative}"))?;
            let path = dir.join(relative);
            match e.kind {
                Kind::Dir => fs::remove_dir_all(&path),
                _ => fs::remove_file(&path),
            }
            .map_err(io(&path))?;
            removed.push(relative.clone());
        }
        Ok(removed)
    }

    /// Once every file of the generation `dir` is there: the identity
    /// records of its shards, the stamp of every directory (not only those
    /// changed: a spare an older build left has none), and one flush.
    fn finish_generation(
        &self,
        dir: &Path,
        target: &Target<'_>,
        mut written: Vec<std::path::PathBuf>,
        touched: &BTreeSet<std::path::PathBuf>,
    ) -> Result<()> {
        written.extend(self.write_records(dir, target)?);
        let dirs: Vec<_> = target.dirs.iter().map(|d| dir.join(d)).collect();
        stamp_dirs(dirs.iter().chain([&dir.to_path_buf()]))?;
        self.step("flush generation")?;
        flush(&self.root, &written, touched)
    }

    /// Writes the identity records of every shard of `target` in the
    /// generation `dir`, whose files are all written: each file's identity
    /// as it is there now.
    fn write_records(&self, dir: &Path, target: &Target<'_>) -> Result<Vec<std::path::PathBuf>> {
        let mut written = Vec::with_capacity(target.shards.len());
        for (bucket, (sha256, files)) in &target.shards {
            let records = files
                .iter()
                .map(|(key, path)| {
                    Ok(Record {
                        key: key.clone(),
                        path: path.clone(),
                        identity: Identity::at(&dir.join(path))?,
                    })
                })
                .collect::<Result<Vec<_>>>()?;
            let path = dir.join(records_path(bucket));
            self.step(&format!("write {}", records_path(bucket)))?;
            let shard = Identity::at(&dir.join(shard_path(bucket)))?;
            write_unsynced(&path, &File::public(encode(sha256, shard, &records)))?;
            written.push(path);
        }
        Ok(written)
    }

    /// Makes `gen_name` current by renaming a new link over `.data`. On
    /// failure the temporary link and the new generation are removed and
    /// the error says the store is unchanged; if the rename took effect
    /// although it reported an error, that is a warning, not a failure.
    pub(super) fn switch_data_link(
        &self,
        gen_name: &str,
        number: u64,
        current: Option<&Current>,
    ) -> Result<()> {
        let tmp_link = self.root.join(format!("{DATA_LINK}.tmp"));
        let data = self.root.join(DATA_LINK);
        let _ = fs::remove_file(&tmp_link);
        let switched = self
            .step("create data link")
            .and_then(|()| std::os::unix::fs::symlink(gen_name, &tmp_link).map_err(io(&tmp_link)))
            .and_then(|()| self.step("switch data link"))
            .and_then(|()| fs::rename(&tmp_link, &data).map_err(io(&data)));
        let Err(e) = switched else {
            return Ok(());
        };
        let _ = fs::remove_file(&tmp_link);
        if self.current_target().as_deref() == Some(gen_name) {
            self.notice(format!(
                "warning: {}: switching to generation {number} reported an error ({}), but it is live",
                data.display(),
                reason(&e)
            ));
            return Ok(());
        }
        let _ = fs::remove_dir_all(self.root.join(gen_name));
        let unchanged = match current {
            Some(c) => format!("the store is unchanged at generation {}", c.number),
            None => "the store is unchanged (still empty)".to_string(),
        };
        let kind = match &e {
            RotateError::Store(crate::StoreError::Io { source, .. }) => source.kind(),
            _ => std::io::ErrorKind::Other,
        };
        Err(RotateError::Store(crate::StoreError::Io {
            path: data,
            source: std::io::Error::new(
                kind,
                format!(
                    "switching to generation {number} failed ({}); {unchanged}",
                    reason(&e)
                ),
            ),
        }))
    }
}

/// The number of the generation after `current`: refused at the last one.
pub(super) fn next_number(root: &Path, current: Option<&Current>) -> Result<u64> {
    match current {
        None => Ok(1),
        Some(c) => c.number.checked_add(1).ok_or_else(|| {
            RotateError::corrupt(
                root.join(DATA_LINK).display().to_string(),
                format!(
                    "points to generation {}, the last one this store can count: \
                     refusing to wrap to generation 0; copy the documents into a new store",
                    c.number
                ),
            )
        }),
    }
}

/// Where a file of the next generation comes from.
pub(super) enum Source<'a> {
    /// Unchanged: the current generation's file, hard-linked.
    Link,
    /// New or changed: written.
    Write(std::borrow::Cow<'a, File>),
    /// A shard's identity records: written once the files they describe
    /// are (see `identity`).
    Records,
}

/// What the next generation holds: every file with where it comes from,
/// and every directory (parents included).
#[derive(Default)]
pub(super) struct Target<'a> {
    pub(super) files: BTreeMap<String, Source<'a>>,
    pub(super) dirs: BTreeSet<String>,
    /// Each shard's bucket, with the SHA-256 of its JSON and the files it
    /// lists (key, path): what its identity records describe.
    pub(super) shards: BTreeMap<String, (String, Vec<(String, String)>)>,
}

impl<'a> Target<'a> {
    /// The next generation: the other keys' files as they are, this key's
    /// `files` (those whose committed digest and secrecy did not change are
    /// linked, not rewritten) and the new manifest.
    fn new(
        current: Option<&Current>,
        key: &str,
        previous_entry: Option<&KeyEntry>,
        files: &'a Files,
        manifest: &Manifest,
        number: u64,
    ) -> Result<Target<'a>> {
        let mut target = Target::default();
        if let Some(c) = current {
            for (other, entry) in &c.manifest.keys {
                if other == key {
                    continue;
                }
                for relative in entry.files.keys() {
                    target.add_file(relative, Source::Link);
                }
                for d in &entry.dirs {
                    target.add_dir(d);
                }
            }
        }
        let new_digests = manifest.keys.get(key).map(|e| &e.sha256);
        for (relative, file) in files.iter() {
            let unchanged = match (current, previous_entry) {
                (Some(c), Some(prev)) if prev.files.get(relative) == Some(&file.secret) => {
                    match (
                        prev.sha256.get(relative),
                        new_digests.and_then(|d| d.get(relative)),
                    ) {
                        (Some(old), Some(new)) => old == new,
                        // A store of format 1 has no digest: compare bytes.
                        _ => same_contents(&c.dir.join(relative), &file.contents),
                    }
                }
                _ => false,
            };
            let source = if unchanged {
                Source::Link
            } else {
                Source::Write(std::borrow::Cow::Borrowed(file))
            };
            target.add_file(relative, source);
        }
        for d in files.dirs() {
            target.add_dir(d);
        }
        target.add_bookkeeping(manifest, current, number)?;
        Ok(target)
    }

    /// The `.manifest.json`, shards and `.index.json` of generation
    /// `number`, from `manifest`: a shard that `current` has with the same
    /// digest is linked, not written again.
    pub(super) fn add_bookkeeping(
        &mut self,
        manifest: &Manifest,
        current: Option<&Current>,
        number: u64,
    ) -> Result<()> {
        let mut top = Top::of(manifest);
        for (key, entry) in &manifest.keys {
            for path in entry.files.keys() {
                let listed = &mut self.shards.entry(bucket(path)).or_default().1;
                listed.push((key.clone(), path.clone()));
            }
        }
        for (bucket, json) in shards_of(manifest)? {
            let sha256 = digest(&json);
            if let Some(shard) = self.shards.get_mut(&bucket) {
                shard.0.clone_from(&sha256);
            }
            let unchanged = current.is_some_and(|c| c.top.shards.get(&bucket) == Some(&sha256));
            // An unchanged shard lists files that are all linked, so the
            // same inodes: its records still hold (when there are any).
            let records = records_path(&bucket);
            let recorded = current.is_some_and(|c| {
                c.manifest.format == MANIFEST_FORMAT
                    && c.tree.get(&records).is_some_and(|e| e.kind == Kind::File)
            });
            let source = if unchanged && recorded {
                self.shards.remove(&bucket);
                Source::Link
            } else {
                Source::Records
            };
            self.add_file(&records, source);
            let source = if unchanged {
                Source::Link
            } else {
                Source::Write(std::borrow::Cow::Owned(File::public(json)))
            };
            self.add_file(&shard_path(&bucket), source);
            top.shards.insert(bucket, sha256);
        }
        self.add_top(&top, number)
    }

    /// The `.manifest.json` and `.index.json` of generation `number`, from
    /// `top`.
    pub(super) fn add_top(&mut self, top: &Top, number: u64) -> Result<()> {
        for (path, file) in top.files(number)? {
            self.add_file(path, Source::Write(std::borrow::Cow::Owned(file)));
        }
        Ok(())
    }

    pub(super) fn add_file(&mut self, relative: &str, source: Source<'a>) {
        if let Some((parent, _)) = relative.rsplit_once('/') {
            self.add_dir(parent);
        }
        self.files.insert(relative.to_string(), source);
    }

    pub(super) fn add_dir(&mut self, relative: &str) {
        for (end, _) in relative
            .match_indices('/')
            .chain(std::iter::once((relative.len(), "")))
        {
            self.dirs.insert(relative[..end].to_string());
        }
    }
}

/// Whether `path` lies inside the directory `dir` (both relative).
pub(super) fn is_under(path: &str, dir: &str) -> bool {
    path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}

pub(super) fn same_contents(path: &Path, contents: &[u8]) -> bool {
    match fs::metadata(path) {
        Ok(meta) if meta.len() == contents.len() as u64 => fs::read(path)
            .map(|old| zeroize::Zeroizing::new(old).as_slice() == contents)
            .unwrap_or(false),
        _ => false,
    }
}
