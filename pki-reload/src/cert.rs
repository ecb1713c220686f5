//! [`CertReloader`]: the current certificate and key of a leaf, for rustls
//! servers and clients.

use crate::snapshot::{MAX_READS, read_pair_once};
use crate::watch::{Loaded, Watched, stamp};
use crate::{CertFiles, ReloadError, ReloadOptions};
use rustls::SignatureScheme;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::server::ClientHello;
use rustls::sign::CertifiedKey;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A leaf's certificate and key, reloaded when their files change: a
/// server's [`ResolvesServerCert`](rustls::server::ResolvesServerCert) and
/// a client's [`ResolvesClientCert`](rustls::client::ResolvesClientCert).
pub struct CertReloader {
    files: CertFiles,
    paths: Vec<PathBuf>,
    provider: Arc<CryptoProvider>,
    watched: Watched<CertifiedKey>,
}

impl std::fmt::Debug for CertReloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertReloader")
            .field("files", &self.files)
            .field("generation", &self.watched.generation())
            .finish()
    }
}

impl CertReloader {
    /// Loads `files` now (an error when they are unusable) and reloads
    /// them when they change, with `provider`'s key loader.
    ///
    /// # Errors
    ///
    /// - [`ReloadError::Io`] when a file cannot be read (missing, too large,
    ///   not a regular file);
    /// - [`ReloadError::Invalid`] when the chain file holds no certificate or
    ///   one that cannot be parsed, or the key file holds no usable key;
    /// - [`ReloadError::Mismatch`] when the key did not match the chain's first
    ///   certificate in any of the reads (the files kept changing, or never
    ///   belong together);
    /// - [`ReloadError::Tls`] when `provider` refuses the key.
    pub fn new(
        files: CertFiles,
        provider: Arc<CryptoProvider>,
        options: ReloadOptions,
    ) -> Result<Arc<Self>, ReloadError> {
        let first = load(&files, &provider)?;
        Ok(Arc::new(CertReloader {
            paths: vec![files.cert.clone(), files.key.clone()],
            files,
            provider,
            watched: Watched::new(first, options.check_interval),
        }))
    }

    /// The signer's leaf `name` in the directory store `store`.
    ///
    /// # Errors
    ///
    /// The errors of [`CertReloader::new`].
    pub fn leaf(
        store: &Path,
        name: &str,
        provider: Arc<CryptoProvider>,
        options: ReloadOptions,
    ) -> Result<Arc<Self>, ReloadError> {
        Self::new(CertFiles::leaf(store, name), provider, options)
    }

    /// The certificate and key to present: the files are looked at when
    /// the check interval has passed. A failed reload keeps the previous
    /// material (see [`CertReloader::last_error`]).
    pub fn certified_key(&self) -> Arc<CertifiedKey> {
        // The error is kept for `last_error`; the handshake goes on with
        // the material it has.
        let _ = self.check(false);
        self.watched.current()
    }

    /// Looks at the files now; whether new material was swapped in.
    ///
    /// # Errors
    ///
    /// The errors of [`CertReloader::new`], when the files changed and the new
    /// ones cannot be loaded; the material in use stays, and
    /// [`CertReloader::last_error`] keeps the error until a reload succeeds.
    pub fn refresh(&self) -> Result<bool, ReloadError> {
        self.check(true)
    }

    fn check(&self, force: bool) -> Result<bool, ReloadError> {
        self.watched
            .check(&self.paths, force, || load(&self.files, &self.provider))
    }

    /// How many times material was loaded (1 after the first load).
    pub fn generation(&self) -> u64 {
        self.watched.generation()
    }

    /// Why the last reload failed, until one succeeds.
    pub fn last_error(&self) -> Option<ReloadError> {
        self.watched.last_error()
    }
}

impl rustls::server::ResolvesServerCert for CertReloader {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.certified_key())
    }
}

impl rustls::client::ResolvesClientCert for CertReloader {
    fn resolve(
        &self,
        _root_hint_subjects: &[&[u8]],
        _sigschemes: &[SignatureScheme],
    ) -> Option<Arc<CertifiedKey>> {
        Some(self.certified_key())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

/// Reads the chain and key until both come from one generation: the
/// files' stamps unchanged across the reads and the key matching the
/// leaf's public key.
fn load(files: &CertFiles, provider: &CryptoProvider) -> Result<Loaded<CertifiedKey>, ReloadError> {
    let paths = [files.cert.clone(), files.key.clone()];
    for _ in 0..MAX_READS {
        let before = stamp(&paths)?;
        let Some(pair) = read_pair_once(files)? else {
            continue;
        };
        let after = stamp(&paths)?;
        if before != after {
            continue;
        }
        let der = pair
            .key
            .to_pkcs8_der()
            .map_err(|e| ReloadError::invalid(&files.key, e))?;
        let signing = provider
            .key_provider
            .load_private_key(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(der.to_vec())))
            .map_err(|e| ReloadError::Tls(e.to_string()))?;
        let chain = pair
            .chain
            .iter()
            .map(|c| CertificateDer::from(c.der().to_vec()))
            .collect();
        return Ok(Loaded {
            value: Arc::new(CertifiedKey::new(chain, signing)),
            stamp: after,
        });
    }
    Err(ReloadError::Mismatch {
        cert: files.cert.clone(),
        key: files.key.clone(),
        attempts: MAX_READS,
    })
}
