//! `pki store-key`: the key that seals private material in a store
//! (`PKI_STORE_KEY_FILE`), and the sealing of every store a command opens.

use crate::common::{CliError, CliResult, StoreArg, os_rng};
use clap::Subcommand;
use pki_rotate::{SealedStore, SealingKeys, Store, StoreKey};
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The environment variable naming the store key file.
pub const KEY_FILE_ENV: &str = "PKI_STORE_KEY_FILE";

/// The longest key file read: a key file is under 200 bytes.
const MAX_KEY_FILE: u64 = 4096;

#[derive(Subcommand)]
pub enum StoreKeyCommand {
    /// Make a new key that seals private material (written 0600; the file
    /// must not exist). Use it with PKI_STORE_KEY_FILE=FILE.
    New {
        /// Where to write the key.
        file: PathBuf,
    },
    /// Re-seal every document of a store under a new key; PKI_STORE_KEY_FILE
    /// names the old key (unset: seal a store whose private files are in
    /// clear). Safe to rerun after an interruption.
    Rotate {
        /// The store: a directory, etcd://HOST:PORT/PREFIX or kube://NAMESPACE/NAME.
        #[arg(value_parser = StoreArg::parse)]
        dir: StoreArg,
        /// The new key file (made with `pki store-key new`).
        #[arg(long = "new", value_name = "FILE")]
        new: PathBuf,
    },
}

/// Runs a `pki store-key` command.
pub fn run(command: StoreKeyCommand) -> CliResult {
    match command {
        StoreKeyCommand::New { file } => new(&file),
        StoreKeyCommand::Rotate { dir, new } => rotate(&dir, &new),
    }
}

fn new(file: &Path) -> CliResult {
    let io = |path: &Path, e: std::io::Error| CliError::new(format!("{}: {e}", path.display()));
    if let Some(parent) = file.parent().filter(|p| !p.as_os_str().is_empty())
        && fs::symlink_metadata(parent).is_err()
    {
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(parent)
            .map_err(|e| io(parent, e))?;
        // Whatever the umask: the mode given to mkdir is masked by it.
        fs::set_permissions(parent, fs::Permissions::from_mode(0o700))
            .map_err(|e| io(parent, e))?;
    }
    let key = StoreKey::generate(&mut os_rng());
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc_o_nofollow())
        .open(file)
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => CliError::new(format!(
                "{}: already exists; a key file is never overwritten",
                file.display()
            )),
            _ => io(file, e),
        })?;
    f.set_permissions(fs::Permissions::from_mode(0o600))
        .map_err(|e| io(file, e))?;
    f.write_all(key.to_file().as_bytes())
        .and_then(|()| f.sync_all())
        .map_err(|e| io(file, e))?;
    crate::outln!("store key {} written to {}", key.id_hex(), file.display());
    Ok(())
}

/// `O_NOFOLLOW`: a link planted at the key's path is refused, not followed.
fn libc_o_nofollow() -> i32 {
    rustix::fs::OFlags::NOFOLLOW.bits() as i32
}

/// Reads a key file, refusing one that other users can read.
fn read_key(path: &Path) -> CliResult<StoreKey> {
    let io = |e: std::io::Error| CliError::new(format!("store key {}: {e}", path.display()));
    let meta = fs::metadata(path).map_err(io)?;
    if !meta.is_file() || meta.len() > MAX_KEY_FILE {
        return Err(CliError::new(format!(
            "store key {}: is not a pki store key file",
            path.display()
        )));
    }
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(CliError::new(format!(
            "store key {}: is readable or writable by others (mode {:o}); chmod 600 it",
            path.display(),
            meta.permissions().mode() & 0o777
        )));
    }
    // Bounded and never waiting on a FIFO, as every file pki reads.
    let bytes = zeroize::Zeroizing::new(
        pki_rotate::input::read_file(path, pki_rotate::input::DEFAULT_MAX_INPUT)
            .map_err(|e| CliError::new(format!("store key {}: {}", path.display(), e.reason())))?,
    );
    Ok(StoreKey::from_file(
        &format!("store key {}", path.display()),
        &bytes,
    )?)
}

/// The key `PKI_STORE_KEY_FILE` names, read once per run; None when unset.
pub fn key_from_env() -> CliResult<Option<StoreKey>> {
    static KEY: OnceLock<Result<Option<StoreKey>, String>> = OnceLock::new();
    let read = || match std::env::var_os(KEY_FILE_ENV) {
        None => Ok(None),
        Some(p) if p.is_empty() => Ok(None),
        Some(p) => read_key(Path::new(&p)).map(Some).map_err(|e| e.message),
    };
    KEY.get_or_init(read).clone().map_err(CliError::new)
}

/// A store as every command uses it: sealed with the key from the
/// environment, or refusing sealed values when none is given. A store
/// holding sealed values refuses a wrong or missing key before the command
/// acts, whichever of its documents the command reads. A directory store
/// leaves the files consumers read in clear.
pub fn seal(
    store: Box<dyn Store + Send + Sync>,
    directory: bool,
) -> CliResult<Box<dyn Store + Send + Sync>> {
    Ok(Box::new(sealed(store, directory)?))
}

/// [`seal`], for a command that only reports on public material (a key
/// ring's status, a token's verification): without a key it reads what
/// holds nothing sealed, as consumers read public files; a key that is not
/// the store's is still refused.
pub fn seal_for_public_reads(
    store: Box<dyn Store + Send + Sync>,
    directory: bool,
) -> CliResult<Box<dyn Store + Send + Sync>> {
    Ok(Box::new(
        sealed(store, directory)?.reading_public_without_key(),
    ))
}

fn sealed(
    store: Box<dyn Store + Send + Sync>,
    directory: bool,
) -> CliResult<SealedStore<Box<dyn Store + Send + Sync>, pki_core::OsRng>> {
    let keys = match key_from_env()? {
        Some(key) => SealingKeys::single(key),
        None => SealingKeys::none(),
    };
    // The documents of the CLI: a new one joins them only with their key,
    // and their sealed values tell which key the store is sealed under.
    let documents = [
        pki_rotate::signer::STORE_KEY,
        pki_rotate::set::STORE_KEY,
        pki_rotate::keyring::STORE_KEY,
    ]
    .map(String::from);
    Ok(sealed_store(store, keys, directory)
        .check_creates_against(documents.clone())
        .check_key_against(documents))
}

/// `store` sealed with `keys`, leaving in clear what consumers read where
/// the store publishes it: a directory store's published files; a
/// `kube://` store's leaf keys, which it publishes in each leaf's
/// `kubernetes.io/tls` Secret (CA keys, key rings and credentials stay
/// sealed there).
fn sealed_store<S: Store>(
    store: S,
    keys: SealingKeys,
    directory: bool,
) -> SealedStore<S, pki_core::OsRng> {
    let kube = pki_kube::is_kube_url(&store.location());
    let sealed = SealedStore::new(store, keys, os_rng(), directory || kube);
    if kube && !directory {
        sealed.clear_only(pki_rotate::is_published_leaf_key)
    } else {
        sealed
    }
}

fn rotate(dir: &StoreArg, new_file: &Path) -> CliResult {
    let new = read_key(new_file)?;
    let new_id = new.id_hex();
    let keys = SealingKeys::rotating(key_from_env()?, new);
    match dir {
        // etcd keeps the values it replaced in its history: compacted
        // once every document is re-sealed.
        StoreArg::Url(url) if pki_etcd::is_etcd_url(url) => {
            let store = crate::stores::open_etcd(url)?;
            let documents = store.keys()?;
            reseal_all(dir, &store, &documents, keys, false, &new_id)?;
            compact(url, &store, &new_id)
        }
        // Opened as every command opens them (a directory with its lock
        // timeout and notices; a kube:// store, whose replaced shards go
        // with each commit), and re-sealed document by document as the
        // store lists them.
        _ => {
            let store = dir.open_unsealed()?;
            let documents = store.keys()?;
            let directory = matches!(dir, StoreArg::Dir(_));
            reseal_all(dir, &store, &documents, keys, directory, &new_id)
        }
    }
}

/// Re-seals each of `documents` under the new key of `keys`.
fn reseal_all(
    dir: &StoreArg,
    store: impl Store,
    documents: &[String],
    keys: SealingKeys,
    directory: bool,
    new_id: &str,
) -> CliResult {
    let store = sealed_store(store, keys, directory);
    let mut resealed = 0;
    for key in documents {
        if store.reseal(key)? {
            resealed += 1;
            crate::outln!("re-sealed {key} under key {new_id}");
        }
    }
    crate::outln!(
        "{dir}: {resealed} of {} documents re-sealed; every private file is sealed under key {new_id}",
        documents.len()
    );
    Ok(())
}

/// Compacts the etcd cluster's history up to now, so that no earlier
/// revision (where the private files are in clear or under the old key)
/// can be read any more. Run on every rotation, so that a rerun after a
/// failed compaction compacts.
fn compact(url: &str, store: &pki_etcd::EtcdStore, new_id: &str) -> CliResult {
    let revision = store.compact_history().map_err(|e| {
        CliError::new(format!(
            "every private file is sealed under key {new_id}, but earlier revisions still hold them as they were: {e}; rerun this command (it re-seals nothing and compacts again)"
        ))
    })?;
    crate::outln!(
        "{url}: etcd's history compacted up to revision {revision}: earlier revisions, of every key in the cluster, can no longer be read (see the book's chapter on sealing, about etcd's backups)"
    );
    Ok(())
}
