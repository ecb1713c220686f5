//! [`crate::Store::verify`] on a directory store: every file of a
//! document found to be the one committed, at the cost of a `stat` a file.
//!
//! The current generation's manifest (its top) names every shard and its
//! digest; beside each shard lie the identity records of its files (see
//! `identity`). Each recorded file is looked at without being read: a
//! regular file of this user, not writable by others, with the recorded
//! inode, size and modification time is the file committed. Any other is
//! read and checked against its SHA-256 (a store copied elsewhere has new
//! inodes and only costs more), and refused, naming it, when it differs;
//! records that are missing or not bound to their shard mean that shard's
//! files are all read and checked. A generation of a format without
//! records is read whole.

use super::identity::{Identity, Record, Records, decode, records_path};
use super::manifest::{bucket, shard_path};
use super::safety::{check_owner_and_mode, effective_uid, read_regular};
use super::{FsStore, MANIFEST, MANIFEST_FORMAT};
use crate::model::error::{Result, RotateError};
use crate::model::store::{Revision, Store};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

/// Below this many files one thread looks at them; above, two share the
/// work (the `stat` system call dominates, about a microsecond each on a
/// virtual machine).
const PARALLEL_FROM: usize = 2048;

/// Where the shards lie in a generation.
const SHARDS_PREFIX: &str = ".manifest/";

impl FsStore {
    /// [`crate::Store::verify`].
    pub(super) fn verify_files(&self, key: &str) -> Result<Option<Revision>> {
        if self.never_written() {
            return Ok(None);
        }
        self.check_root()?;
        let _held = self.lock_to_repair()?;
        let Some(current) = self.current_with(false, Some(&BTreeSet::new()))? else {
            return Ok(None);
        };
        let Some(entry) = current.top.keys.get(key) else {
            return Ok(None);
        };
        let revision = Revision::new(entry.revision.to_string());
        let recorded =
            current.manifest.format == MANIFEST_FORMAT && current.tree.contains_key(MANIFEST);
        if !recorded {
            return Ok(self.get(key)?.map(|(_, revision)| revision));
        }
        // Each shard is looked at like the files it lists: its records
        // name its identity first.
        let mut unrecorded = BTreeSet::new();
        let mut records = Vec::new();
        for (bucket, shard_sha256) in &current.top.shards {
            match self.read_records(&current.dir, bucket, shard_sha256, Some(key))? {
                Some(found) => {
                    records.push(Record {
                        key: String::new(),
                        path: shard_path(bucket),
                        identity: found.shard,
                    });
                    records.extend(found.files);
                }
                None => {
                    unrecorded.insert(bucket.clone());
                }
            }
        }
        let mut differing = differing(&current.dir, &records)?;
        // A shard that differs is read and checked against the manifest's
        // digest, with all its files: the records it came with vouch for
        // nothing then.
        differing.retain(|path| match path.strip_prefix(SHARDS_PREFIX) {
            Some(name) => {
                unrecorded.insert(name.trim_end_matches(".json").to_string());
                false
            }
            None => true,
        });
        self.read_and_check(key, unrecorded, &differing)?;
        Ok(Some(revision))
    }

    /// The records of `key` (None: all) beside shard `bucket`, when they are bound to
    /// the shard with SHA-256 `shard_sha256`.
    pub(super) fn read_records(
        &self,
        dir: &Path,
        bucket: &str,
        shard_sha256: &str,
        key: Option<&str>,
    ) -> Result<Option<Records>> {
        let path = dir.join(records_path(bucket));
        let Ok(meta) = fs::symlink_metadata(&path) else {
            return Ok(None);
        };
        check_owner_and_mode(&path, &meta, effective_uid())?;
        Ok(read_regular(&path)?.and_then(|(bytes, _)| decode(&bytes, shard_sha256, key)))
    }

    /// Reads and checks against their digests every file of `key` in the
    /// shards `unrecorded`, and the files `differing`, as any read of them
    /// does.
    fn read_and_check(
        &self,
        key: &str,
        unrecorded: BTreeSet<String>,
        differing: &[String],
    ) -> Result<()> {
        let differing: BTreeSet<&str> = differing.iter().map(String::as_str).collect();
        let mut buckets = unrecorded.clone();
        buckets.extend(differing.iter().map(|p| bucket(p)));
        if buckets.is_empty() {
            return Ok(());
        }
        let Some(mut current) = self.current_with(false, Some(&buckets))? else {
            return Ok(());
        };
        let Some(entry) = current.manifest.keys.get(key).cloned() else {
            return Ok(());
        };
        let wanted: Vec<&str> = entry
            .files
            .keys()
            .map(String::as_str)
            .filter(|p| differing.contains(p) || unrecorded.contains(&bucket(p)))
            .collect();
        let dir = current.dir.clone();
        self.check_paths(&dir, &mut current.tree, wanted.iter().copied())?;
        for relative in wanted {
            self.read_committed(&current, &entry, relative)?;
        }
        Ok(())
    }
}

/// The recorded files that are not, by the look of them, the file
/// recorded (another inode, size or time; missing; not a regular file).
/// A file of another user or writable by others is refused outright.
fn differing(dir: &Path, records: &[Record]) -> Result<Vec<String>> {
    let euid = effective_uid();
    let look = |chunk: &[Record]| -> Result<Vec<String>> {
        let mut differ = Vec::new();
        for r in chunk {
            let path = dir.join(&r.path);
            match fs::symlink_metadata(&path) {
                Ok(meta) if meta.is_file() => {
                    check_owner_and_mode(&path, &meta, euid)?;
                    if Identity::of(&meta) != r.identity {
                        differ.push(r.path.clone());
                    }
                }
                _ => differ.push(r.path.clone()),
            }
        }
        Ok(differ)
    };
    if records.len() < PARALLEL_FROM {
        return look(records);
    }
    let half = records.len().div_ceil(2);
    let (first, second) = std::thread::scope(|scope| {
        let other = scope.spawn(|| look(&records[half..]));
        (look(&records[..half]), other.join())
    });
    let mut differ = first?;
    differ.extend(
        second.map_err(|_| {
            RotateError::io(dir, std::io::Error::other("checking the files failed"))
        })??,
    );
    Ok(differ)
}
