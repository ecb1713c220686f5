//! Checks that keep a directory store trustworthy: who owns its paths and
//! who may write them, and whether a published file is still the one the
//! store committed.
//!
//! A store another local user can write is a store whose CA that user can
//! replace, so pki refuses it instead of signing with what it finds. A
//! committed file that changed (missing, a directory, a link, other
//! content) would silently change what pki decides next, so it is refused
//! too, naming the path and what was found there.

use crate::model::error::{Result, RotateError};
use sha2::{Digest, Sha256};
use std::fs::{self, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;
use std::sync::OnceLock;

/// The effective user id of this process, from `/proc/self/status` (the
/// crate has no `unsafe` to call `geteuid`). None where there is no procfs:
/// the owner check is then skipped, the mode check still applies.
pub(super) fn effective_uid() -> Option<u32> {
    static EUID: OnceLock<Option<u32>> = OnceLock::new();
    *EUID.get_or_init(|| {
        let status = fs::read_to_string("/proc/self/status").ok()?;
        let line = status.lines().find(|l| l.starts_with("Uid:"))?;
        // "Uid:  real  effective  saved  filesystem"
        line.split_whitespace().nth(2)?.parse().ok()
    })
}

/// Refuses a path owned by another user or (links aside, whose mode means
/// nothing) writable by group or others.
pub(super) fn check_owner_and_mode(path: &Path, meta: &Metadata, euid: Option<u32>) -> Result<()> {
    if let Some(euid) = euid
        && meta.uid() != euid
    {
        return Err(RotateError::Store(crate::StoreError::UnsafeStore {
            path: path.to_path_buf(),
            reason: format!("is owned by uid {}, but pki runs as uid {euid}", meta.uid()),
        }));
    }
    let writable = meta.mode() & 0o022;
    if !meta.file_type().is_symlink() && writable != 0 {
        let who = match writable {
            0o020 => "group",
            0o002 => "others",
            _ => "group and others",
        };
        return Err(RotateError::Store(crate::StoreError::UnsafeStore {
            path: path.to_path_buf(),
            reason: format!(
                "is writable by {who} (mode {:04o}); make it 0700 (chmod go-w)",
                meta.mode() & 0o7777
            ),
        }));
    }
    Ok(())
}

/// What a walk found at one path of a generation: enough to tell later,
/// without another `stat`, what kind of entry it is and whether a file is
/// still the very file that was checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) kind: Kind,
    /// (device, inode): the same pair is the same file.
    pub(super) id: (u64, u64),
    /// Size, modification and change times: a write changes both times,
    /// and the change time cannot be set back by a user.
    pub(super) stamp: (u64, i64, i64, i64, i64),
}

/// The kind of a walked entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Dir,
    File,
    /// A link or a special file: never part of a generation.
    Other,
}

impl Entry {
    pub(super) fn of(meta: &Metadata) -> Entry {
        let kind = if meta.file_type().is_symlink() {
            Kind::Other
        } else if meta.is_dir() {
            Kind::Dir
        } else if meta.is_file() {
            Kind::File
        } else {
            Kind::Other
        };
        Entry {
            kind,
            id: (meta.dev(), meta.ino()),
            stamp: (
                meta.len(),
                meta.mtime(),
                meta.mtime_nsec(),
                meta.ctime(),
                meta.ctime_nsec(),
            ),
        }
    }
}

/// Every entry under a directory, by path relative to it (`certs/web/tls.crt`).
pub(super) type Tree = std::collections::HashMap<String, Entry>;

/// Checks `dir` and everything under it: each entry owned by this user
/// and (links aside) not writable by others. Returns what it found, so
/// that what kind each entry is can be checked where it is read without
/// asking the filesystem again.
pub(super) fn check_tree(dir: &Path) -> Result<Tree> {
    let euid = effective_uid();
    let meta = fs::symlink_metadata(dir).map_err(|e| RotateError::io(dir, e))?;
    check_owner_and_mode(dir, &meta, euid)?;
    let mut tree = Tree::new();
    if !meta.is_dir() {
        return Ok(tree);
    }
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    while let Some((d, prefix)) = pending.pop() {
        for item in fs::read_dir(&d).map_err(|e| RotateError::io(&d, e))? {
            let item = item.map_err(|e| RotateError::io(&d, e))?;
            // Relative to the open directory: no path walk per entry, and
            // a link is described, never followed.
            let meta = item
                .metadata()
                .map_err(|e| RotateError::io(item.path(), e))?;
            check_owner_and_mode(&item.path(), &meta, euid)?;
            let name = item.file_name();
            let relative = format!("{prefix}{}", name.to_string_lossy());
            let entry = Entry::of(&meta);
            if entry.kind == Kind::Dir {
                pending.push((item.path(), format!("{relative}/")));
            }
            tree.insert(relative, entry);
        }
    }
    Ok(tree)
}

/// Checks `dir` itself as [`check_tree`] does, without walking it: the
/// entries read later are checked one by one.
pub(super) fn check_tree_shallow(dir: &Path) -> Result<Tree> {
    let meta = fs::symlink_metadata(dir).map_err(|e| RotateError::io(dir, e))?;
    check_owner_and_mode(dir, &meta, effective_uid())?;
    Ok(Tree::new())
}

/// What to do about a damaged committed file.
pub(super) const DAMAGED_ADVICE: &str = "the committed generation is damaged and pki will not \
    guess what it held: restore the file (from a backup or the store's consumers), or move the \
    store aside and start a new one";

/// What is at `path`, in words: "missing", "a directory", "a symbolic link
/// to X", "a regular file", "a special file".
pub(super) fn describe(path: &Path) -> String {
    match fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => "nothing (missing)".into(),
        Err(e) => format!("something unreadable ({e})"),
        Ok(meta) => {
            let kind = meta.file_type();
            if kind.is_symlink() {
                match fs::read_link(path) {
                    Ok(target) => format!("a symbolic link to {}", target.display()),
                    Err(_) => "a symbolic link".into(),
                }
            } else if kind.is_dir() {
                "a directory".into()
            } else if kind.is_file() {
                "a regular file".into()
            } else {
                "a special file".into()
            }
        }
    }
}

/// SHA-256 of `contents`, lower-case hex.
pub(super) fn digest(contents: &[u8]) -> String {
    hex::encode(Sha256::digest(contents))
}

/// The largest file a directory store reads.
const MAX_COMMITTED_FILE: u64 = 64 * 1024 * 1024;

/// Reads a committed file without following a link at its name. Returns
/// None when it is not a regular file (the caller describes what it is)
/// or is larger than any committed file can be; else its contents and what
/// it is on disk.
pub(super) fn read_regular(path: &Path) -> Result<Option<(zeroize::Zeroizing<Vec<u8>>, Entry)>> {
    let mut file = match OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(None),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(RotateError::io(path, e)),
    };
    let meta = file.metadata().map_err(|e| RotateError::io(path, e))?;
    if !meta.is_file() {
        return Ok(None);
    }
    // Exactly the size it had when opened: committed files never change,
    // and anything appended since would fail the digest check anyway.
    // No committed file comes near this (a manifest shard of ten thousand
    // leaves is a few kilobytes): a larger one is damage, and reading it
    // would only fill the memory.
    if meta.len() > MAX_COMMITTED_FILE {
        return Ok(None);
    }
    let len =
        usize::try_from(meta.len()).map_err(|e| RotateError::io(path, std::io::Error::other(e)))?;
    let mut contents = zeroize::Zeroizing::new(vec![0; len]);
    file.read_exact(&mut contents)
        .map_err(|e| RotateError::io(path, e))?;
    Ok(Some((contents, Entry::of(&meta))))
}
