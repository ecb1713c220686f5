//! Store URLs (`etcd://HOST:PORT/PREFIX`) and `pki export`.

use crate::common::{CliError, CliResult, StoreArg};
use pki_rotate::credential::credential_key;
use pki_rotate::{Files, Store};
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// The documents `pki export` looks for, by store key.
const EXPORTED_KEYS: &[&str] = &[
    pki_rotate::signer::STORE_KEY,
    pki_rotate::set::STORE_KEY,
    pki_rotate::keyring::STORE_KEY,
];

/// Checks a store URL's syntax (bad usage when wrong).
pub fn check_url(url: &str) -> Result<(), String> {
    if !pki_etcd::is_etcd_url(url) {
        let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or(url);
        return Err(format!(
            "store URL scheme \"{scheme}\" is not supported: use a directory or etcd://HOST:PORT/PREFIX"
        ));
    }
    pki_etcd::EtcdUrl::parse(url)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Opens the store a URL names: an unreachable server fails here, within
/// the connect timeout, with one line.
pub fn open_url(url: &str) -> CliResult<Box<dyn Store + Send + Sync>> {
    match pki_etcd::EtcdStore::from_url(url) {
        Ok(store) => Ok(Box::new(store)),
        Err(e) => Err(CliError::new(e.to_string())),
    }
}

/// `pki export STORE OUTDIR`: every document's files (the signer's, the
/// set's, the key ring's, each credential's), in the directory layout.
pub fn export(store: &StoreArg, out: &Path) -> CliResult {
    // Without the store key, sealed private files are left out: public
    // files need no key.
    let has_key = crate::store_key::key_from_env()?.is_some();
    let opened = if has_key {
        store.open()?
    } else {
        store.open_unsealed()?
    };
    if fs::symlink_metadata(out.join(".data")).is_ok() {
        return Err(CliError::new(format!(
            "{} is a pki directory store: export writes plain files, choose another directory",
            out.display()
        )));
    }
    // The fixed documents, then every credential (`creds/NAME`).
    let keys: Vec<String> = EXPORTED_KEYS
        .iter()
        .map(|k| k.to_string())
        .chain(crate::cred::list(store)?.iter().map(|n| credential_key(n)))
        .collect();
    let mut found = 0;
    for key in &keys {
        let Some((files, revision)) = opened.get(key)? else {
            continue;
        };
        let files = if has_key {
            files
        } else {
            crate::store_key::without_sealed(files)?
        };
        write_files(out, &files)?;
        found += 1;
        crate::outln!(
            "exported {key} (revision {revision}, {} files) to {}",
            files.len(),
            out.display()
        );
    }
    if found == 0 {
        return Err(CliError::new(format!("{store}: holds no pki document")));
    }
    Ok(())
}

/// Writes each file through a temporary name and a rename, so a consumer
/// reading OUTDIR sees each file whole. Secret files get 0600, directories 0700.
fn write_files(out: &Path, files: &Files) -> CliResult {
    let io = |path: &Path, e: std::io::Error| CliError::new(format!("{}: {e}", path.display()));
    let make_dir = |dir: &Path| -> CliResult {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|e| io(dir, e))
    };
    make_dir(out)?;
    for dir in files.dirs() {
        make_dir(&out.join(dir))?;
    }
    for (relative, file) in files.iter() {
        let path = out.join(relative);
        if let Some(parent) = path.parent() {
            make_dir(parent)?;
        }
        let tmp = path.with_file_name(format!(
            ".{}.tmp",
            path.file_name()
                .map(|n| n.to_string_lossy())
                .unwrap_or_default()
        ));
        let mode = if file.secret { 0o600 } else { 0o644 };
        let _ = fs::remove_file(&tmp);
        let mut f = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)
            .map_err(|e| io(&tmp, e))?;
        f.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(|e| io(&tmp, e))?;
        f.write_all(&file.contents).map_err(|e| io(&tmp, e))?;
        f.sync_all().map_err(|e| io(&tmp, e))?;
        fs::rename(&tmp, &path).map_err(|e| io(&path, e))?;
    }
    Ok(())
}
