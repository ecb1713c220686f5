//! [`Snapshot`]: one consistent read of what a consumer loads, without
//! rustls: for embedders that hand the files to another TLS stack (the C
//! ABI's `pki_snapshot_load`, Go's `crypto/tls`).

use crate::watch::stamp;
use crate::{CertFiles, ReloadError};
use pki_core::{Bundle, Certificate, PrivateKey};
use std::path::PathBuf;
use zeroize::Zeroizing;

/// How many times the files are read before giving up on finding them
/// from one generation. A directory store switches generations with one
/// rename, so a second read already sees one.
pub(crate) const MAX_READS: u32 = 4;

/// A leaf's chain and key from one generation, checked to match, and the
/// trust bundle read in the same pass, with its pki token.
pub struct Snapshot {
    /// The chain file as read (PEM): the leaf first.
    pub chain_pem: Vec<u8>,
    /// The key file as read (PEM). Zeroed when dropped.
    pub key_pem: Zeroizing<Vec<u8>>,
    /// Every bundle file as read, one after the other (PEM).
    pub bundle_pem: Vec<u8>,
    /// The bundle's token: `pki fingerprint --bundle` of the same
    /// certificates, what `pki ack` takes.
    pub fingerprint: String,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("fingerprint", &self.fingerprint)
            .finish_non_exhaustive()
    }
}

impl Snapshot {
    /// Reads `files` and the bundle made of `bundle`'s files until every
    /// file's stamp held still across the reads and the key matches the
    /// leaf's public key.
    ///
    /// # Errors
    ///
    /// - [`ReloadError::Io`] when a file cannot be read;
    /// - [`ReloadError::NoBundleFile`] when `bundle` is empty;
    /// - [`ReloadError::Invalid`] when the chain file or a bundle file holds no
    ///   certificate or one that cannot be parsed, or the key file holds no
    ///   usable key;
    /// - [`ReloadError::Mismatch`] when no read found the files still and the
    ///   key matching the leaf.
    pub fn read(files: &CertFiles, bundle: &[PathBuf]) -> Result<Self, ReloadError> {
        if bundle.is_empty() {
            return Err(ReloadError::NoBundleFile);
        }
        let paths: Vec<PathBuf> = [files.cert.clone(), files.key.clone()]
            .into_iter()
            .chain(bundle.iter().cloned())
            .collect();
        for _ in 0..MAX_READS {
            let before = stamp(&paths)?;
            let Some(pair) = read_pair_once(files)? else {
                continue;
            };
            let (_, bundle_pem) = read_bundle_once(bundle)?;
            if stamp(&paths)? != before {
                continue;
            }
            let bundle_certs = Bundle::from_pem(&bundle_pem)
                .map_err(|e| ReloadError::invalid(bundle.first().map_or(&files.cert, |p| p), e))?;
            return Ok(Snapshot {
                chain_pem: pair.chain_pem,
                key_pem: pair.key_pem,
                bundle_pem,
                fingerprint: pki_rotate::uptake::bundle_fingerprint(&bundle_certs),
            });
        }
        Err(ReloadError::Mismatch {
            cert: files.cert.clone(),
            key: files.key.clone(),
            attempts: MAX_READS,
        })
    }
}

/// Reads a published file whole: bounded, and never waiting on a FIFO
/// put in its place (see [`pki_rotate::input`]).
fn read(path: &std::path::Path) -> Result<Vec<u8>, ReloadError> {
    pki_rotate::input::read_file(path, pki_rotate::input::DEFAULT_MAX_INPUT)
        .map_err(ReloadError::input)
}

/// A chain and its key as read and parsed.
pub(crate) struct Pair {
    pub chain: Vec<Certificate>,
    pub key: PrivateKey,
    pub chain_pem: Vec<u8>,
    pub key_pem: Zeroizing<Vec<u8>>,
}

/// Reads the chain and the key once: None when the key does not match the
/// leaf (the two came from different generations).
pub(crate) fn read_pair_once(files: &CertFiles) -> Result<Option<Pair>, ReloadError> {
    let chain_pem = read(&files.cert)?;
    let key_pem = Zeroizing::new(read(&files.key)?);
    let chain =
        Certificate::all_from_pem(&chain_pem).map_err(|e| ReloadError::invalid(&files.cert, e))?;
    let leaf = chain
        .first()
        .ok_or_else(|| ReloadError::invalid(&files.cert, "holds no certificate"))?;
    let key =
        PrivateKey::from_stored_pem(&key_pem).map_err(|e| ReloadError::invalid(&files.key, e))?;
    if !key.matches_certificate(leaf) {
        return Ok(None);
    }
    Ok(Some(Pair {
        chain,
        key,
        chain_pem,
        key_pem,
    }))
}

/// Reads the bundle files once: their certificates and their PEM, one
/// file after the other. A file without a certificate is an error.
pub(crate) fn read_bundle_once(
    paths: &[PathBuf],
) -> Result<(Vec<Certificate>, Vec<u8>), ReloadError> {
    let mut certs = Vec::new();
    let mut all = Vec::new();
    for path in paths {
        let pem = read(path)?;
        let found = Certificate::all_from_pem(&pem).map_err(|e| ReloadError::invalid(path, e))?;
        if found.is_empty() {
            return Err(ReloadError::invalid(path, "holds no certificate"));
        }
        certs.extend(found);
        if !all.is_empty() && !all.ends_with(b"\n") {
            all.push(b'\n');
        }
        all.extend_from_slice(&pem);
    }
    Ok((certs, all))
}
