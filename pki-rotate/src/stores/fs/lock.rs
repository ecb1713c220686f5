//! `DIR/.lock`: the store's advisory lock, opened without following links,
//! waited for with a bound, and naming its holder.
//!
//! Writers hold it exclusively for the whole commit and write who they are
//! into it, so a run that gives up waiting can say who is in the way.
//! Readers never wait for it (see `FsStore::get`).

use super::safety::{check_owner_and_mode, effective_uid};
use crate::model::error::{Result, RotateError};
use std::fs::{self, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long a writer waits for another run to release the lock by default:
/// long enough for any commit (they take milliseconds), short enough that a
/// stuck run is reported instead of piling up cron jobs.
pub const DEFAULT_LOCK_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest a holder description read back from the lock file may be.
const HOLDER_MAX: usize = 300;

/// A held lock; released when dropped (closing the file releases `flock`).
pub(super) struct Lock {
    file: fs::File,
    /// Whether this run wrote itself into the file as the holder.
    recorded: bool,
}

impl Drop for Lock {
    fn drop(&mut self) {
        // Cleared while still held, so the file names a holder only while
        // one runs, and a finished run leaves the store as it found it.
        if self.recorded {
            let _ = self.file.set_len(0);
        }
    }
}

/// Opens the lock file, creating it (0600) when missing. A symbolic link
/// is refused, never followed: a link would let whoever planted it make pki
/// create or truncate a file elsewhere.
fn open(path: &Path) -> Result<fs::File> {
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        // O_NONBLOCK: a FIFO planted at the name must not hang the open.
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC | libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                RotateError::Store(crate::StoreError::UnsafeStore {
                    path: path.to_path_buf(),
                    reason: "is a symbolic link, not the store's lock file (remove it)".into(),
                })
            } else {
                RotateError::io(path, e)
            }
        })?;
    let meta = file.metadata().map_err(|e| RotateError::io(path, e))?;
    if !meta.is_file() {
        return Err(RotateError::Store(crate::StoreError::UnsafeStore {
            path: path.to_path_buf(),
            reason: "is not a regular file, so not the store's lock file (remove it)".into(),
        }));
    }
    check_owner_and_mode(path, &meta, effective_uid())?;
    // Created 0600 less the umask: set it exactly, so that a umask that
    // clears the owner's write bit cannot make the next run's open fail.
    if meta.permissions().mode() & 0o7777 != 0o600 {
        file.set_permissions(fs::Permissions::from_mode(0o600))
            .map_err(|e| RotateError::io(path, e))?;
    }
    Ok(file)
}

/// Takes the lock exclusively without waiting: None when someone holds it.
pub(super) fn try_exclusive(path: &Path) -> Result<Option<Lock>> {
    let file = open(path)?;
    match file.try_lock() {
        Ok(()) => {
            record_holder(&file);
            Ok(Some(Lock {
                file,
                recorded: true,
            }))
        }
        Err(fs::TryLockError::WouldBlock) => Ok(None),
        Err(fs::TryLockError::Error(e)) => Err(RotateError::io(path, e)),
    }
}

/// Takes the lock shared without waiting: None when a writer holds it.
pub(super) fn try_shared(path: &Path) -> Result<Option<Lock>> {
    let file = open(path)?;
    match file.try_lock_shared() {
        Ok(()) => Ok(Some(Lock {
            file,
            recorded: false,
        })),
        Err(fs::TryLockError::WouldBlock) => Ok(None),
        Err(fs::TryLockError::Error(e)) => Err(RotateError::io(path, e)),
    }
}

/// Takes the lock exclusively, waiting at most `timeout` for another run to
/// release it; then fails naming the holder.
pub(super) fn exclusive(path: &Path, timeout: Duration) -> Result<Lock> {
    let file = open(path)?;
    let started = Instant::now();
    let mut pause = Duration::from_millis(5);
    loop {
        match file.try_lock() {
            Ok(()) => break,
            Err(fs::TryLockError::WouldBlock) => {}
            Err(fs::TryLockError::Error(e)) => return Err(RotateError::io(path, e)),
        }
        let waited = started.elapsed();
        if waited >= timeout {
            return Err(RotateError::Store(crate::StoreError::LockTimeout {
                path: path.to_path_buf(),
                waited,
                holder: read_holder(&file),
            }));
        }
        std::thread::sleep(pause.min(timeout - waited));
        pause = (pause * 2).min(Duration::from_millis(200));
    }
    record_holder(&file);
    Ok(Lock {
        file,
        recorded: true,
    })
}

/// Writes "pid N (command line) since TIME" into the lock file. Best
/// effort: it only feeds the message of a run that times out waiting.
fn record_holder(mut file: &fs::File) {
    let command: String = std::env::args()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .take(200)
        .collect();
    let since = time::OffsetDateTime::now_utc()
        .format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default();
    let text = format!("pid {} ({command}) since {since}\n", std::process::id());
    let _ = file
        .set_len(0)
        .and_then(|()| file.rewind())
        .and_then(|()| file.write_all(text.as_bytes()));
}

/// What the holder recorded, on one line, if anything.
fn read_holder(mut file: &fs::File) -> Option<String> {
    let mut text = String::new();
    file.rewind().ok()?;
    file.take(HOLDER_MAX as u64)
        .read_to_string(&mut text)
        .ok()?;
    let line: String = text
        .lines()
        .next()?
        .chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    (!line.trim().is_empty()).then(|| line.trim().to_string())
}
