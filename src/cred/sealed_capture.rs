//! The mint hook's capture, sealed once the hook has ended when a store key
//! is given (`PKI_STORE_KEY_FILE`): a credential waits on local disk only
//! until the store holds it, and sealed for all but the hook's own run.
//!
//! The hook writes its stdout straight into `R-A.out` (so nothing is lost
//! if pki dies while it runs); as soon as it has ended, pki replaces that
//! file with the sealed form of what it printed (a temporary file, flushed,
//! renamed over it, the directory flushed). The sealed value is bound to
//! the credential's name and the attempt (`creds/NAME`, `R-A.out`), so a
//! capture cannot be adopted as another attempt's. A capture left by a run
//! that died between the hook's end and the sealing is read in clear.
//! What a mint printed beyond the cap (`R-A.spill`, see `spill.rs`) is
//! written sealed the same way, bound to its own name.

use pki_rotate::sealing::{self, Binding, HEADER_LEN, TAG_LEN};
use std::fs::File;
use std::io::Write;
use std::path::Path;
use zeroize::Zeroizing;

/// The kind a capture's sealed value is bound to.
const KIND: &str = "credential-capture";

/// How much longer than what the hook printed a sealed capture is.
pub const OVERHEAD: u64 = (HEADER_LEN + TAG_LEN) as u64;

fn binding<'a>(key: &'a str, file: &'a str) -> Binding<'a> {
    Binding {
        kind: KIND,
        key,
        path: file,
    }
}

fn names(path: &Path) -> (String, String) {
    let name = path
        .parent()
        .and_then(Path::file_name)
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    (pki_rotate::credential::credential_key(&name), file)
}

/// Replaces the capture at `path` with the sealed form of `printed` (what
/// it holds). Without a store key, leaves it as it is.
pub fn seal(path: &Path, printed: &[u8]) -> Result<(), String> {
    match crate::store_key::key_from_env().map_err(|e| e.message)? {
        Some(store_key) => replace(path, &sealed(&store_key, path, printed)?),
        None => Ok(()),
    }
}

/// Writes `bytes` to a new private file at `path` (replacing any),
/// sealed when a store key is given, in clear otherwise.
pub fn write(path: &Path, bytes: &[u8]) -> Result<(), String> {
    match crate::store_key::key_from_env().map_err(|e| e.message)? {
        Some(store_key) => replace(path, &sealed(&store_key, path, bytes)?),
        None => replace(path, bytes),
    }
}

/// `clear` sealed for the file at `path` (bound to its name).
fn sealed(store_key: &pki_rotate::StoreKey, path: &Path, clear: &[u8]) -> Result<Vec<u8>, String> {
    let (key, file) = names(path);
    sealing::seal(
        store_key,
        binding(&key, &file),
        clear,
        &mut crate::common::os_rng(),
    )
    .map_err(|e| e.to_string())
}

/// Replaces the file at `path` with a private (0600) one holding `bytes`:
/// a temporary file beside it, flushed, renamed over it, the directory
/// flushed.
fn replace(path: &Path, bytes: &[u8]) -> Result<(), String> {
    let io = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = std::path::PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    let mut f = super::hooks::private_file(&tmp, true).map_err(|e| io(&tmp, e))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .map_err(|e| io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io(path, e))?;
    if let Some(dir) = path.parent() {
        File::open(dir)
            .and_then(|d| d.sync_all())
            .map_err(|e| io(dir, e))?;
    }
    Ok(())
}

/// What the capture at `path` holds in clear: `bytes` itself, or opened
/// with the store key when sealed.
pub fn open(path: &Path, bytes: Zeroizing<Vec<u8>>) -> Result<Zeroizing<Vec<u8>>, String> {
    if !sealing::is_sealed(&bytes) {
        return Ok(bytes);
    }
    let keys: Vec<_> = crate::store_key::key_from_env()
        .map_err(|e| e.message)?
        .into_iter()
        .collect();
    let (key, file) = names(path);
    sealing::open(&keys, binding(&key, &file), &bytes).map_err(|e| {
        format!(
            "{}: {e} (PKI_STORE_KEY_FILE names the store key)",
            path.display()
        )
    })
}
