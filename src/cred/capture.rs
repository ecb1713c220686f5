//! The capture directory of one credential (`CAPTURE/NAME/`): its lock and
//! its owner id.
//!
//! ```text
//! CAPTURE/NAME/.lock    held by the reconciler working here (0600)
//! CAPTURE/NAME/.owner   who this capture directory is to the store (0600)
//! ```
//!
//! The owner id names this capture directory in the credential's
//! document: a mint attempt recorded by a reconciler working here is
//! recorded with it, and only a reconciler working here runs that attempt
//! (or adopts what its hook captured after a crash). A reconciler with
//! another capture directory — another host, or the same store reached
//! through another URL spelling — is told to wait instead. The id is
//! `HOST:RANDOM`: the host only helps a person find where an attempt runs.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The lock file, in the credential's capture directory.
const LOCK_FILE: &str = ".lock";
/// The owner id file, in the credential's capture directory.
const OWNER_FILE: &str = ".owner";
/// More than an owner id ever takes (128 bytes and a newline).
const OWNER_FILE_LIMIT: u64 = 4096;

fn io_err(path: &Path, e: std::io::Error) -> String {
    format!("{}: {e}", path.display())
}

/// Takes the capture directory's lock, waiting for another reconciler
/// working here: one at a time per capture directory. The lock file is
/// 0600 whatever the umask (the directory is 0700: `hooks::private_dir`).
pub fn lock(dir: &Path) -> Result<File, String> {
    let path = dir.join(LOCK_FILE);
    let file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(|e| io_err(&path, e))?;
    file.set_permissions(fs::Permissions::from_mode(0o600))
        .map_err(|e| io_err(&path, e))?;
    file.lock().map_err(|e| io_err(&path, e))?;
    Ok(file)
}

/// The owner id of the capture directory, made (durably, before anything
/// can record it) the first time. Call with the lock held.
pub fn owner(dir: &Path) -> Result<String, String> {
    let path = dir.join(OWNER_FILE);
    match pki_rotate::input::read_file(&path, OWNER_FILE_LIMIT) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            if pki_rotate::credential::validate_owner(text.trim()).is_ok() {
                return Ok(text.trim().to_string());
            }
            // Cut short by a crash before any document named it.
        }
        Err(pki_rotate::input::InputError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e.to_string()),
    }
    let mut random = [0u8; 12];
    rand_core::Rng::fill_bytes(&mut crate::common::os_rng(), &mut random);
    let id = format!("{}:{}", host(), hex::encode(random));
    let tmp = dir.join(".owner.tmp");
    let write = || -> std::io::Result<()> {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
        f.write_all(format!("{id}\n").as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &path)?;
        File::open(dir)?.sync_all()
    };
    write().map_err(|e| io_err(&path, e))?;
    Ok(id)
}

/// This host's name, as an owner id may hold it.
fn host() -> String {
    let name = fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| fs::read_to_string("/etc/hostname"))
        .unwrap_or_default();
    let name: String = name
        .trim()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
        .take(63)
        .collect();
    if name.is_empty() {
        "host".to_string()
    } else {
        name
    }
}
