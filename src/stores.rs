//! Store URLs (`etcd://HOST:PORT/PREFIX`, `etcds://` over TLS,
//! `kube://[CONTEXT@]NAMESPACE/NAME`), the environment that configures
//! their TLS and authentication, and `pki export`.

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
    if pki_kube::is_kube_url(url) {
        return pki_kube::KubeUrl::parse(url)
            .map(drop)
            .map_err(|e| e.to_string());
    }
    if !pki_etcd::is_etcd_url(url) {
        let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or(url);
        return Err(format!(
            "store URL scheme \"{scheme}\" is not supported: use a directory, etcd://HOST:PORT/PREFIX, etcds://HOST:PORT/PREFIX or kube://[CONTEXT@]NAMESPACE/NAME"
        ));
    }
    pki_etcd::EtcdUrl::parse(url)
        .map(drop)
        .map_err(|e| e.to_string())
}

/// Opens the store a URL names: an unreachable server fails here, within
/// the connect timeout, with one line. A `kube://` store finds its
/// credentials as kubectl does (`KUBECONFIG` or `~/.kube/config`, CONTEXT
/// choosing a context; else the in-cluster service account).
pub fn open_url(url: &str) -> CliResult<Box<dyn Store + Send + Sync>> {
    if pki_kube::is_kube_url(url) {
        let mut store = pki_kube::KubeStore::from_url(url).map_err(|e| match e {
            pki_kube::OpenError::Store(e) => CliError::from(e),
            other => CliError::new(other.to_string()),
        })?;
        // What could not be published for consumers (the write stands), on
        // stderr, one line each as the directory store's notices.
        store.set_notice_hook(Some(Box::new(|notice| {
            eprintln!("pki: {}", crate::common::one_line(notice))
        })));
        return Ok(Box::new(store));
    }
    Ok(Box::new(open_etcd(url)?))
}

/// Opens an etcd store with the TLS and authentication settings of the
/// environment ([`etcd_options`]).
pub fn open_etcd(url: &str) -> CliResult<pki_etcd::EtcdStore> {
    let parsed = pki_etcd::EtcdUrl::parse(url).map_err(|e| CliError::new(e.to_string()))?;
    let options = etcd_options(&parsed)?;
    pki_etcd::EtcdStore::open(&parsed, options).map_err(CliError::from)
}

/// The CA bundle that verifies the etcd servers (required for `etcds://`).
const ENV_CACERT: &str = "PKI_ETCD_CACERT";
/// The client certificate chain, with [`ENV_KEY`].
const ENV_CERT: &str = "PKI_ETCD_CERT";
/// The client certificate's key.
const ENV_KEY: &str = "PKI_ETCD_KEY";
/// The etcd user, with [`ENV_PASSWORD_FILE`].
const ENV_USER: &str = "PKI_ETCD_USER";
/// A file holding the user's password.
const ENV_PASSWORD_FILE: &str = "PKI_ETCD_PASSWORD_FILE";

/// The store options the environment gives for `url`: TLS for `etcds://`
/// (`PKI_ETCD_CACERT`, and `PKI_ETCD_CERT` with `PKI_ETCD_KEY`), a user
/// (`PKI_ETCD_USER` with `PKI_ETCD_PASSWORD_FILE`). A variable set to the
/// empty string counts as unset. Settings that cannot be used together,
/// and files that cannot be read, are one-line errors naming the variable.
pub fn etcd_options(url: &pki_etcd::EtcdUrl) -> CliResult<pki_etcd::EtcdOptions> {
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    let fail = |message: String| CliError::new(format!("{url}: {message}"));
    let (ca, cert, key) = (var(ENV_CACERT), var(ENV_CERT), var(ENV_KEY));
    let identity = match (&cert, &key) {
        (Some(cert), Some(key)) => Some((Path::new(cert), Path::new(key))),
        (None, None) => None,
        (Some(_), None) => return Err(fail(format!("{ENV_CERT} is set but {ENV_KEY} is not"))),
        (None, Some(_)) => return Err(fail(format!("{ENV_KEY} is set but {ENV_CERT} is not"))),
    };
    let tls = match (url.tls(), ca) {
        (true, Some(ca)) => {
            // Bounded, and never waiting on a FIFO: see pki_rotate::input.
            let read = |name: &str, path: &Path| {
                pki_rotate::input::read_file(path, pki_rotate::input::DEFAULT_MAX_INPUT)
                    .map_err(|e| fail(format!("{name}: cannot read {e}")))
            };
            let tls = pki_etcd::EtcdTls::new(read(ENV_CACERT, Path::new(&ca))?);
            Some(match identity {
                Some((cert, key)) => tls.with_identity(read(ENV_CERT, cert)?, read(ENV_KEY, key)?),
                None => tls,
            })
        }
        (true, None) => {
            return Err(fail(format!(
                "set {ENV_CACERT} to the CA bundle that verifies the etcd servers"
            )));
        }
        (false, ca) => {
            if let Some(name) = [(ENV_CACERT, &ca), (ENV_CERT, &cert)]
                .iter()
                .find_map(|(name, v)| v.is_some().then_some(name))
            {
                return Err(fail(format!(
                    "{name} is set but the store URL is plaintext: use etcds://"
                )));
            }
            None
        }
    };
    let user = match (var(ENV_USER), var(ENV_PASSWORD_FILE)) {
        (Some(user), Some(file)) => {
            let user = user
                .into_string()
                .map_err(|_| fail(format!("{ENV_USER} is not UTF-8")))?;
            Some(
                pki_etcd::EtcdUser::from_password_file(user, Path::new(&file))
                    .map_err(|e| fail(format!("{ENV_PASSWORD_FILE}: {e}")))?,
            )
        }
        (None, None) => None,
        (Some(_), None) => {
            return Err(fail(format!(
                "{ENV_USER} is set but {ENV_PASSWORD_FILE} is not"
            )));
        }
        (None, Some(_)) => {
            return Err(fail(format!(
                "{ENV_PASSWORD_FILE} is set but {ENV_USER} is not"
            )));
        }
    };
    Ok(pki_etcd::EtcdOptions {
        tls,
        user,
        ..pki_etcd::EtcdOptions::default()
    })
}

/// `pki export STORE OUTDIR`: every document's files (the signer's, the
/// set's, the key ring's, each credential's), in the directory layout.
/// Each document is read and checked as the other commands check it
/// before anything is written, so a document they refuse (one that does
/// not decode, a CA key that is not its certificate's) is not published
/// either. With the store key, private files are written in clear (0600);
/// without it, a store holding sealed values gives its public files only
/// (a store that never sealed anything gives all, as without sealing).
pub fn export(store: &StoreArg, out: &Path) -> CliResult {
    let has_key = crate::store_key::key_from_env()?.is_some();
    // Without the key the store is read as it is: its public files need
    // none. With it, a key that is not the store's is refused.
    let opened = if has_key {
        store.open()?
    } else {
        store.open_unsealed()?
    };
    if pki_rotate::FsStore::is_store(out) {
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
    let mut documents = Vec::new();
    for key in &keys {
        let Some((files, revision)) = opened.get(key)? else {
            continue;
        };
        let location = format!("{} (document \"{key}\")", opened.location());
        check_document(key, &location, &files)?;
        documents.push((key, revision, files));
    }
    if documents.is_empty() {
        return Err(CliError::new(format!("{store}: holds no pki document")));
    }
    let sealed = documents.iter().any(|(_, _, files)| holds_sealed(files));
    if sealed && !has_key {
        for (_, _, files) in &mut documents {
            *files = public_only(files)?;
        }
    }
    for (key, revision, files) in &documents {
        write_files(out, files)?;
        crate::outln!(
            "exported {key} (revision {revision}, {} files) to {}",
            files.len(),
            out.display()
        );
    }
    Ok(())
}

/// Refuses the document at `key` as the commands that act on it would:
/// when it does not decode or its parts do not belong together. A
/// document read without the store key that holds sealed values cannot
/// be decoded; only its public files are exported, which need no check
/// of the private ones.
fn check_document(key: &str, location: &str, files: &Files) -> CliResult {
    use pki_rotate::{CredentialState, KeyRing, SetState, SignerState, read_checked};
    if holds_sealed(files) {
        return Ok(());
    }
    match key {
        pki_rotate::signer::STORE_KEY => read_checked::<SignerState>(location, files).map(drop),
        pki_rotate::set::STORE_KEY => read_checked::<SetState>(location, files).map(drop),
        pki_rotate::keyring::STORE_KEY => read_checked::<KeyRing>(location, files).map(drop),
        _ => read_checked::<CredentialState>(location, files).map(drop),
    }
    .map_err(CliError::from)
}

/// Whether `files` hold a sealed value (read without the store key).
fn holds_sealed(files: &Files) -> bool {
    files
        .iter()
        .any(|(_, f)| pki_rotate::sealing::is_sealed(&f.contents))
}

/// The public files alone: what export writes of a sealed store without
/// its key. A directory store keeps the private files consumers read (leaf
/// keys, the active signing key, current credentials) in clear, but they
/// are private all the same.
fn public_only(files: &Files) -> CliResult<Files> {
    let mut out = Files::new();
    for dir in files.dirs() {
        out.insert_dir(dir)?;
    }
    for (path, file) in files.iter() {
        if !file.secret && !pki_rotate::sealing::is_sealed(&file.contents) {
            out.insert(path, file.clone())?;
        }
    }
    Ok(out)
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
