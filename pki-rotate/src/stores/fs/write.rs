//! Writing files and directories with exact modes, whatever the umask, and
//! putting them on disk.

use super::io;
use crate::model::document::File;
use crate::model::error::{Result, RotateError};
use std::collections::BTreeSet;
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub(super) fn make_dir(path: &Path) -> Result<()> {
    DirBuilder::new()
        .mode(0o700)
        .create(path)
        .map_err(io(path))?;
    // The umask may have cleared bits but never adds any; set the mode
    // anyway so the directory is exactly 0700.
    fs::set_permissions(path, fs::Permissions::from_mode(0o700)).map_err(io(path))
}

pub(super) fn link_or_copy(from: &Path, to: &Path) -> Result<()> {
    match fs::hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(_) => {
            // A filesystem without hard links: copy, keeping the mode.
            let contents = zeroize::Zeroizing::new(fs::read(from).map_err(io(from))?);
            let meta = fs::metadata(from).map_err(io(from))?;
            let secret = meta.mode() & 0o077 == 0;
            write_file(to, &File { contents, secret })
        }
    }
}

/// Writes a new file (it must not exist) with its mode, and flushes it.
pub(super) fn write_file(path: &Path, file: &File) -> Result<()> {
    let f = write_unsynced(path, file)?;
    f.sync_all().map_err(io(path))
}

/// Writes a new file (it must not exist) with its mode; the caller flushes.
pub(super) fn write_unsynced(path: &Path, file: &File) -> Result<fs::File> {
    let mode = if file.secret { 0o600 } else { 0o644 };
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io(path))?;
    // The umask may have cleared bits but never adds any; set the mode
    // explicitly so a permissive umask cannot widen a key's access.
    f.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(io(path))?;
    f.write_all(&file.contents).map_err(io(path))?;
    Ok(f)
}

/// Puts the files `written` and the entries of the directories `touched`
/// on disk. On Linux that is one `syncfs` of the store's filesystem: a
/// flush per file and per directory costs a disk cache flush each, and a
/// commit of one leaf touches a handful of each. Elsewhere each is flushed.
pub(super) fn flush(root: &Path, written: &[PathBuf], touched: &BTreeSet<PathBuf>) -> Result<()> {
    #[cfg(target_os = "linux")]
    {
        let _ = (written, touched);
        let dir = fs::File::open(root).map_err(io(root))?;
        rustix::fs::syncfs(&dir).map_err(|e| RotateError::io(root, e.into()))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = root;
        for path in written {
            fs::File::open(path)
                .and_then(|f| f.sync_all())
                .map_err(io(path))?;
        }
        for d in touched.iter().rev() {
            sync_dir(d)?;
        }
        Ok(())
    }
}

pub(super) fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| RotateError::io(dir, e))
}
