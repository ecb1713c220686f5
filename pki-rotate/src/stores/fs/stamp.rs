//! Directory stamps: how a commit of changes knows, without reading ten
//! thousand leaves, that the spare still mirrors the live generation.
//!
//! Every directory of a generation (and of the spare) gets a fixed
//! modification time, the *stamp*, once pki has finished changing its
//! entries. The kernel sets a directory's modification time to the current
//! time whenever an entry is created, removed or renamed in it, so a
//! directory that still carries the stamp has exactly the entries pki left
//! there: no file replaced, added or removed, no subdirectory swapped.
//! Checking the spare is then one `stat` per directory (a leaf's directory
//! holds its three files), not one per file, and no reading at all.
//!
//! What a stamp cannot show is a file written in place: such a file is
//! shared with the live generation (the spare holds hard links), so the
//! damage is the live store's, found by `status --check`, which compares
//! each file with what its commit recorded (see `identity`), and refused
//! by every read of that file.
//!
//! Consumers never look at these directories' times: they read files, and
//! the directories they reach change generation at each commit anyway.

use super::safety::check_owner_and_mode;
use crate::model::error::{Result, RotateError};
use std::collections::BTreeSet;
use std::fs::{self, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The stamp: 2000-01-01T00:00:00Z, a time no directory is really changed
/// at, in whole seconds (filesystems with coarse times keep it exactly).
const STAMP_SECONDS: i64 = 946_684_800;

/// Below this many directories one thread stats them; above, the work is
/// shared (a `stat` costs about a microsecond on a virtual machine, most
/// of it the system call itself).
const PARALLEL_FROM: usize = 1024;

/// Sets the stamp on the directory `dir` (not following a link).
pub(super) fn stamp_dir(dir: &Path) -> Result<()> {
    let times = rustix::fs::Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: 0,
            tv_nsec: rustix::fs::UTIME_OMIT,
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: STAMP_SECONDS,
            tv_nsec: 0,
        },
    };
    rustix::fs::utimensat(
        rustix::fs::CWD,
        dir,
        &times,
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )
    .map_err(|e| RotateError::io(dir, e.into()))
}

/// Sets the stamp on every directory of `dirs`.
/// Sets the stamp on every directory of `dirs` that exists (a commit that
/// removed a directory may still list it as changed).
pub(super) fn stamp_dirs<'a>(dirs: impl IntoIterator<Item = &'a PathBuf>) -> Result<()> {
    dirs.into_iter()
        .filter(|d| fs::symlink_metadata(d).is_ok_and(|m| m.is_dir()))
        .try_for_each(|d| stamp_dir(d))
}

/// Whether a directory's metadata carries the stamp.
pub(super) fn is_stamped(meta: &Metadata) -> bool {
    meta.is_dir()
        && !meta.file_type().is_symlink()
        && meta.mtime() == STAMP_SECONDS
        && meta.mtime_nsec() == 0
}

/// Whether `dir` and every directory under it still carry the stamp and
/// are this user's and not writable by others: nothing in the tree was
/// added, removed or replaced since pki stamped it. A directory whose
/// link count says it has no subdirectory (2: itself and its parent's
/// entry) is not listed; others are, for their subdirectories.
pub(super) fn tree_unchanged(dir: &Path) -> Result<bool> {
    let euid = super::safety::effective_uid();
    let mut level = vec![dir.to_path_buf()];
    while !level.is_empty() {
        let listed = match stat_all(&level, euid)? {
            Some(listed) => listed,
            None => return Ok(false),
        };
        let mut next = Vec::new();
        for parent in listed {
            for item in fs::read_dir(&parent).map_err(|e| RotateError::io(&parent, e))? {
                let item = item.map_err(|e| RotateError::io(&parent, e))?;
                let kind = item
                    .file_type()
                    .map_err(|e| RotateError::io(item.path(), e))?;
                if kind.is_dir() {
                    next.push(item.path());
                }
            }
        }
        level = next;
    }
    Ok(true)
}

/// Whether `root` and each of `dirs` (relative to it) still carry the
/// stamp, as [`tree_unchanged`] finds it, when the list of the tree's
/// directories is known: no listing at all. A directory that is not in
/// the list could only have appeared by changing a listed one.
pub(super) fn dirs_unchanged(root: &Path, dirs: &BTreeSet<String>) -> Result<bool> {
    let all: Vec<PathBuf> = std::iter::once(root.to_path_buf())
        .chain(dirs.iter().map(|d| root.join(d)))
        .collect();
    Ok(stat_all(&all, super::safety::effective_uid())?.is_some())
}

/// Stats every directory of `dirs`: None when one lacks the stamp or is
/// not a real directory; else those that have subdirectories to list.
fn stat_all(dirs: &[PathBuf], euid: Option<u32>) -> Result<Option<Vec<PathBuf>>> {
    let check = |chunk: &[PathBuf]| -> Result<Option<Vec<PathBuf>>> {
        let mut listed = Vec::new();
        for dir in chunk {
            let meta = match fs::symlink_metadata(dir) {
                Ok(meta) => meta,
                Err(_) => return Ok(None),
            };
            if !is_stamped(&meta) || check_owner_and_mode(dir, &meta, euid).is_err() {
                return Ok(None);
            }
            if meta.nlink() != 2 {
                listed.push(dir.clone());
            }
        }
        Ok(Some(listed))
    };
    if dirs.len() < PARALLEL_FROM {
        return check(dirs);
    }
    let half = dirs.len().div_ceil(2);
    let (first, second) = std::thread::scope(|scope| {
        let other = scope.spawn(|| check(&dirs[half..]));
        let mine = check(&dirs[..half]);
        (mine, other.join())
    });
    let second = second.map_err(|_| {
        RotateError::io(
            dirs[half].as_path(),
            std::io::Error::other("checking the directories' stamps failed"),
        )
    })?;
    Ok(match (first?, second?) {
        (Some(mut a), Some(b)) => {
            a.extend(b);
            Some(a)
        }
        _ => None,
    })
}
