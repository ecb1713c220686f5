//! A commit of changes built from the spare by those changes alone: what
//! a step that changes one leaf of ten thousand costs on a directory store.
//!
//! The spare mirrors the live generation exactly, and says so durably: its
//! mark is written only once its entries are on disk (see `spare`). A
//! commit of changes then needs neither to walk nor to check every file:
//!
//! 1. it reads `.manifest.json` and the shards that list the changed paths
//!    (each checked against its digest), and checks the directories on
//!    those paths for owner and mode;
//! 2. it renames the spare to the next generation's name, removes and
//!    writes the changed files there, and writes the changed shards, the
//!    manifest and the index; one flush puts them on disk;
//! 3. it switches `.data`, then brings the generation it replaced up to
//!    date by the same changes (linked from the live one) to be the next
//!    spare.
//!
//! The files it does not change are not read: one damaged by hand is
//! carried into the next generation as it is, and refused, naming it, by
//! the next read of the whole document (a status, a rotation), as on the
//! etcd store. Whatever this commit cannot do alone (no spare that mirrors
//! the live generation, a manifest of an older format, a change that adds
//! or may remove a name at the root, a path another document shares) is
//! left to the whole commit of changes, which walks and checks everything.

use super::commit::next_number;
use super::identity::{Identity, Record, encode, records_path};
use super::manifest::{Current, Top, bucket, generation_name, root_of, shard_path, shards_of};
use super::safety::{check_owner_and_mode, digest, effective_uid, read_regular};
use super::spare::Mark;
use super::stamp::{dirs_unchanged, is_stamped, stamp_dir, stamp_dirs, tree_unchanged};
use super::write::{flush, link_or_copy, make_dir, sync_dir, write_file, write_unsynced};
use super::{FsStore, MANIFEST, MANIFEST_FORMAT, SPARE, SPARE_MARK, io};
use crate::model::document::File;
use crate::model::error::{Result, RotateError};
use crate::model::store::{Changes, Revision, Summary};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// What a commit of changes does to a generation directory: the same to
/// the next generation (built from the spare) and to the one it replaces
/// (which becomes the next spare).
struct Edit {
    /// Files to remove (the document's removed files, emptied shards).
    removed: Vec<String>,
    /// Files to write, with their contents in the next generation.
    written: BTreeMap<String, File>,
    /// Directories that stay even when emptied: the document's declared
    /// ones.
    kept: BTreeSet<String>,
    /// The shards this commit writes, each with its SHA-256 and the files
    /// it lists (key, path): their identity records are written once those
    /// files are (see `identity`), then added to `written`.
    records: BTreeMap<String, (String, Vec<(String, String)>)>,
    /// Every directory of the next generation, when the spare's mark
    /// listed those of the live one: the next spare's mark lists them.
    dirs: Option<BTreeSet<String>>,
}

impl FsStore {
    /// [`crate::Store::put_changes`] from the spare, under the lock: None
    /// when this commit cannot be made from the spare alone (the caller
    /// makes the whole commit of changes).
    pub(super) fn commit_changes_from_spare(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> Result<Option<Revision>> {
        let changed: BTreeSet<&str> = changes
            .written()
            .map(|(p, _)| p)
            .chain(changes.removed())
            .collect();
        let buckets: BTreeSet<String> = changed.iter().map(|p| bucket(p)).collect();
        let Some(current) = self.current_with(false, Some(&buckets))? else {
            return Ok(None);
        };
        let sharded =
            current.manifest.format == MANIFEST_FORMAT && current.tree.contains_key(MANIFEST);
        let Some(entry) = current.top.keys.get(key).filter(|_| sharded) else {
            return Ok(None);
        };
        if entry.revision.to_string() != expected.as_str() {
            let found = Some(Revision::new(entry.revision.to_string()));
            return Err(crate::model::store::conflict(key, expected, found));
        }
        let published = current.top.published();
        self.check_published(&published, std::iter::empty())?;
        self.tidy_published(Some((current.number, &published)));
        if !self.spare_mirrors(current.number) || !self.changes_stay_inside(&current, key, changes)
        {
            return Ok(None);
        }
        let Some(dirs) = self.spare_still_mirrors(&current)? else {
            return Ok(None);
        };
        let number = next_number(&self.root, Some(&current))?;
        let (top, mut edit) = next_top(&current, key, changes, summary, number)?;
        edit.dirs = dirs;
        let gen_name = generation_name(number);
        let next = self.root.join(&gen_name);
        if fs::symlink_metadata(&next).is_ok() {
            // Left by a crash and not yet removed: never current.
            fs::remove_dir_all(&next).map_err(io(&next))?;
        }
        // The spare becomes the next generation: nothing reads a generation
        // before `.data` points to it, and one a crash left half-built is
        // removed by the next run like any generation `.data` does not
        // point to.
        self.step("create generation directory")?;
        fs::rename(self.root.join(SPARE), &next).map_err(io(&next))?;
        if let Err(e) = self.build_next(&current, &next, &mut edit) {
            let _ = fs::remove_dir_all(&next);
            return Err(e);
        }
        self.switch_data_link(&gen_name, number, Some(&current))?;
        self.settle(Some(&current), number, &top.published(), |c| {
            self.retire_by_edit(c, &next, number, &edit)
        });
        Ok(Some(Revision::new(number.to_string())))
    }

    /// Makes the next generation in `next` (the spare, renamed) by `edit`:
    /// the changed files, then the identity records of the shards that
    /// list them, the stamps of the directories changed, and one flush.
    /// The records are added to `edit`, for the next spare.
    fn build_next(&self, current: &Current, next: &Path, edit: &mut Edit) -> Result<()> {
        self.step(&format!("unlink {SPARE_MARK}"))?;
        fs::remove_file(next.join(SPARE_MARK)).map_err(io(next))?;
        let (mut written, touched) = self.apply_edit(next, edit, |path, file| {
            write_unsynced(path, file).map(drop)
        })?;
        if let Some(dirs) = edit.dirs.take() {
            edit.dirs = Some(dirs_after(next, dirs, edit));
        }
        for (path, file) in self.write_changed_records(current, next, edit)? {
            written.push(next.join(&path));
            edit.written.insert(path, file);
        }
        stamp_dirs(&touched)?;
        self.step("flush generation")?;
        flush(&self.root, &written, &touched)
    }

    /// Writes in `next` the identity records of the shards `edit` writes:
    /// each file's identity from the live generation's records, or, for a
    /// file this commit wrote (or one the live records do not hold), as it
    /// is in `next`. Returns each records file as written.
    fn write_changed_records(
        &self,
        current: &Current,
        next: &Path,
        edit: &Edit,
    ) -> Result<Vec<(String, File)>> {
        let mut out = Vec::with_capacity(edit.records.len());
        for (bucket, (sha256, files)) in &edit.records {
            let live: BTreeMap<(String, String), Identity> = current
                .top
                .shards
                .get(bucket)
                .and_then(|old| self.read_records(&current.dir, bucket, old, None).ok())
                .flatten()
                .map(|records| records.files)
                .unwrap_or_default()
                .into_iter()
                .map(|r| ((r.key, r.path), r.identity))
                .collect();
            let mut records = Vec::with_capacity(files.len());
            for (key, path) in files {
                let recorded = live.get(&(key.clone(), path.clone()));
                let identity = match recorded {
                    Some(id) if !edit.written.contains_key(path) => *id,
                    _ => Identity::at(&next.join(path))?,
                };
                records.push(Record {
                    key: key.clone(),
                    path: path.clone(),
                    identity,
                });
            }
            let relative = records_path(bucket);
            let path = next.join(&relative);
            self.step(&format!("write {relative}"))?;
            if fs::symlink_metadata(&path).is_ok() {
                fs::remove_file(&path).map_err(io(&path))?;
            }
            let shard = Identity::at(&next.join(shard_path(bucket)))?;
            let file = File::public(encode(sha256, shard, &records));
            write_unsynced(&path, &file)?;
            out.push((relative, file));
        }
        Ok(out)
    }

    /// Whether the spare, marked as a mirror of the live generation, still
    /// is one: its manifest is the live one byte for byte, no directory of
    /// it changed since pki stamped it (see `stamp`), and the live
    /// generation's shards are the ones committed with that manifest (one
    /// replaced there would leave the next generation a manifest that
    /// disagrees with the spare's shard). When it is not, this commit
    /// checks and links every file instead (the whole commit of changes,
    /// which compares each of the spare's entries with the live file).
    /// Some with the spare's directories when its mark lists them (else
    /// the spare was walked).
    fn spare_still_mirrors(&self, current: &Current) -> Result<Option<Option<BTreeSet<String>>>> {
        let spare = self.root.join(SPARE);
        let top = |dir: &Path| read_regular(&dir.join(MANIFEST)).map(|r| r.map(|(b, _)| b));
        let same_top = matches!((top(&spare)?, top(&current.dir)?), (Some(a), Some(b)) if a == b);
        let shards_dir = current.dir.join(super::manifest::SHARDS_DIR);
        let shards_stamped = fs::symlink_metadata(&shards_dir).is_ok_and(|m| is_stamped(&m));
        if !same_top || !shards_stamped {
            return Ok(None);
        }
        let dirs = self.spare_dirs();
        let unchanged = match &dirs {
            Some(dirs) => dirs_unchanged(&spare, dirs)?,
            None => tree_unchanged(&spare)?,
        };
        Ok(unchanged.then_some(dirs))
    }

    /// Whether the spare mirrors generation `number`: its mark says so (a
    /// mark is written once the spare's entries are on disk).
    fn spare_mirrors(&self, number: u64) -> bool {
        let spare = self.root.join(SPARE);
        fs::symlink_metadata(&spare).is_ok_and(|m| m.is_dir()) && !self.spare_is_stale(Some(number))
    }

    /// Whether `changes` to `key` leave the names the store publishes as
    /// they are, touch no path another document has, and write no file
    /// where the spare has a directory: what a commit from the spare alone
    /// can do without knowing the whole generation.
    fn changes_stay_inside(&self, current: &Current, key: &str, changes: &Changes) -> bool {
        let Some(entry) = current.top.keys.get(key) else {
            return false;
        };
        let others: BTreeSet<&str> = current
            .top
            .keys
            .iter()
            .filter(|(k, _)| k.as_str() != key)
            .flat_map(|(_, e)| e.roots.iter().map(String::as_str))
            .collect();
        // A root a declared directory keeps stays however many files go.
        let kept_roots: BTreeSet<&str> = entry.dirs.iter().map(|d| root_of(d)).collect();
        let spare = self.root.join(SPARE);
        let euid = effective_uid();
        let written_fits = changes.written().all(|(path, _)| {
            let root = root_of(path);
            if !entry.roots.contains(root) || others.contains(root) {
                return false;
            }
            // Each existing component on the way is this user's real
            // directory, and the path itself is no directory.
            let mut walked = String::new();
            for (i, component) in path.split('/').enumerate() {
                if i > 0 {
                    walked.push('/');
                }
                walked.push_str(component);
                let at = spare.join(&walked);
                let Ok(meta) = fs::symlink_metadata(&at) else {
                    return true;
                };
                if check_owner_and_mode(&at, &meta, euid).is_err() {
                    return false;
                }
                let last = walked.len() == path.len();
                if meta.file_type().is_symlink() || meta.is_dir() == last {
                    return false;
                }
            }
            true
        });
        written_fits && changes.removed().all(|p| kept_roots.contains(root_of(p)))
    }

    /// Removes and writes what `edit` says in the generation directory
    /// `dir` (`put` makes each written file there); returns the files
    /// written and the directories whose entries changed, to flush.
    fn apply_edit(
        &self,
        dir: &Path,
        edit: &Edit,
        put: impl Fn(&Path, &File) -> Result<()>,
    ) -> Result<(Vec<PathBuf>, BTreeSet<PathBuf>)> {
        let mut touched = BTreeSet::from([dir.to_path_buf()]);
        let mut written = Vec::new();
        for relative in &edit.removed {
            self.step(&format!("unlink {relative}"))?;
            let path = dir.join(relative);
            match fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(RotateError::io(&path, e));
                }
                _ => {}
            }
            // A directory the removal emptied goes too, as a whole commit
            // leaves out a directory no file or declaration needs.
            let mut parent = relative.rsplit_once('/').map(|(p, _)| p);
            while let Some(p) = parent.filter(|p| !edit.kept.contains(*p)) {
                touched.insert(dir.join(p).parent().unwrap_or(dir).to_path_buf());
                if fs::remove_dir(dir.join(p)).is_err() {
                    break;
                }
                parent = p.rsplit_once('/').map(|(p, _)| p);
            }
            touched.insert(path.parent().unwrap_or(dir).to_path_buf());
        }
        for (relative, file) in &edit.written {
            let path = dir.join(relative);
            let mut walked = dir.to_path_buf();
            if let Some((parents, _)) = relative.rsplit_once('/') {
                for component in parents.split('/') {
                    walked.push(component);
                    match fs::symlink_metadata(&walked) {
                        Ok(meta) if meta.is_dir() && !meta.file_type().is_symlink() => {}
                        Ok(_) => {
                            return Err(RotateError::corrupt(
                                walked.display().to_string(),
                                "is not a directory",
                            ));
                        }
                        Err(_) => {
                            make_dir(&walked)?;
                            touched.insert(walked.parent().unwrap_or(dir).to_path_buf());
                        }
                    }
                }
            }
            self.step(&format!("write {relative}"))?;
            if fs::symlink_metadata(&path).is_ok() {
                fs::remove_file(&path).map_err(io(&path))?;
            }
            put(&path, file)?;
            written.push(path);
            touched.insert(walked);
        }
        Ok((written, touched))
    }

    /// Once generation `number` (at `live`) is live and on disk, the one it
    /// replaced becomes the spare, brought up to date by `edit` with files
    /// linked from `live`, then flushed and marked. Anything failing here
    /// deletes it instead (the next whole commit makes a generation anew).
    fn retire_by_edit(&self, previous: &Current, live: &Path, number: u64, edit: &Edit) {
        self.retire_with(previous, |spare| {
            let link = |path: &Path, _: &File| {
                let relative = path
                    .strip_prefix(spare)
                    .map_err(|e| RotateError::corrupt(path.display().to_string(), e.to_string()))?;
                link_or_copy(&live.join(relative), path)
            };
            let (written, touched) = self.apply_edit(spare, edit, link)?;
            self.mark_spare(spare, number, &written, &touched, edit.dirs.as_ref())
        });
    }

    /// Puts the spare's entries on disk, then marks it as a mirror of
    /// generation `number` and puts the mark on disk: a mark on disk says
    /// that every entry before it is too, so a commit may trust the spare
    /// without walking it.
    pub(super) fn mark_spare(
        &self,
        spare: &Path,
        number: u64,
        written: &[PathBuf],
        touched: &BTreeSet<PathBuf>,
        dirs: Option<&BTreeSet<String>>,
    ) -> Result<()> {
        stamp_dirs(touched)?;
        flush(&self.root, written, touched)?;
        let mark = spare.join(SPARE_MARK);
        let _ = fs::remove_file(&mark);
        write_file(&mark, &File::secret(Mark::text(number, dirs)))?;
        // Writing the mark changed the spare's own directory.
        stamp_dir(spare)?;
        sync_dir(spare)
    }
}

/// The manifest top of generation `number` after `changes` to `key`, and
/// the edit that makes that generation from the spare: the changed files,
/// the shards that list them, `.manifest.json` and `.index.json`.
fn next_top(
    current: &Current,
    key: &str,
    changes: &Changes,
    summary: Option<&Summary>,
    number: u64,
) -> Result<(Top, Edit)> {
    // The shards the changes fall in, as read for this commit (every
    // key's files in them: a shard is written whole).
    let buckets: BTreeSet<String> = changes
        .written()
        .map(|(p, _)| p)
        .chain(changes.removed())
        .map(bucket)
        .collect();
    let mut manifest = current.manifest.clone();
    let mut edit = Edit {
        removed: Vec::new(),
        written: BTreeMap::new(),
        kept: BTreeSet::new(),
        records: BTreeMap::new(),
        dirs: None,
    };
    let entry = manifest
        .keys
        .get_mut(key)
        .ok_or_else(|| RotateError::corrupt(key, "is not in the manifest it was just read from"))?;
    for path in changes.removed() {
        if entry.files.remove(path).is_some() {
            entry.sha256.remove(path);
            edit.removed.push(path.to_string());
        }
    }
    for (path, file) in changes.written() {
        entry.files.insert(path.to_string(), file.secret);
        entry
            .sha256
            .insert(path.to_string(), digest(&file.contents));
        edit.written.insert(path.to_string(), file.clone());
    }
    edit.kept = entry.dirs.clone();
    let mut top = current.top.clone();
    let shards = shards_of(&manifest)?;
    for b in &buckets {
        match shards.get(b) {
            Some(json) => {
                let sha256 = digest(json);
                top.shards.insert(b.clone(), sha256.clone());
                edit.written
                    .insert(shard_path(b), File::public(json.clone()));
                edit.records
                    .insert(b.clone(), (sha256, listed(&manifest, b)));
            }
            None => {
                if top.shards.remove(b).is_some() {
                    edit.removed.push(shard_path(b));
                    edit.removed.push(records_path(b));
                }
            }
        }
    }
    let top_entry = top
        .keys
        .get_mut(key)
        .ok_or_else(|| RotateError::corrupt(key, "is not in the manifest it was just read from"))?;
    top_entry.revision = number;
    top_entry.summary = summary.map(|s| s.as_str().to_string());
    for (path, file) in top.files(number)? {
        edit.written.insert(path.to_string(), file);
    }
    // The shards' directory stays when its last shard goes.
    edit.kept.insert(super::manifest::SHARDS_DIR.to_string());
    Ok((top, edit))
}

/// The files of `manifest` that shard `b` lists, as (key, path).
fn listed(manifest: &super::manifest::Manifest, b: &str) -> Vec<(String, String)> {
    manifest
        .keys
        .iter()
        .flat_map(|(key, entry)| {
            entry
                .files
                .keys()
                .filter(|p| bucket(p) == b)
                .map(move |p| (key.clone(), p.clone()))
        })
        .collect()
}

/// The directories of the generation `dir` after `edit`, from those it had
/// before: only the directories on the edit's paths can have come or gone.
fn dirs_after(dir: &Path, mut dirs: BTreeSet<String>, edit: &Edit) -> BTreeSet<String> {
    let paths = edit.removed.iter().chain(edit.written.keys());
    for path in paths {
        let mut parent = path.rsplit_once('/').map(|(p, _)| p);
        while let Some(p) = parent {
            if fs::symlink_metadata(dir.join(p)).is_ok_and(|m| m.is_dir()) {
                dirs.insert(p.to_string());
            } else {
                dirs.remove(p);
            }
            parent = p.rsplit_once('/').map(|(p, _)| p);
        }
    }
    dirs
}
