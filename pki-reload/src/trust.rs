//! [`TrustReloader`]: the current trust bundle, as a rustls verifier of
//! servers (for clients) and of clients (for servers).

use crate::snapshot::{MAX_READS, read_bundle_once};
use crate::watch::{Loaded, Watched, stamp};
use crate::{Acker, ReloadError, ReloadOptions};
use pki_core::Bundle;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, RootCertStore, SignatureScheme};
use std::path::PathBuf;
use std::sync::Arc;

/// One loaded bundle: its token and the verifiers made from it.
struct TrustSnapshot {
    fingerprint: String,
    servers: Arc<WebPkiServerVerifier>,
    clients: Arc<dyn ClientCertVerifier>,
}

/// A trust bundle reloaded when its files change. As a
/// [`ServerCertVerifier`] it verifies servers for a client
/// (`ClientConfig::builder().dangerous().with_custom_certificate_verifier`);
/// as a [`ClientCertVerifier`] it verifies (and requires) client
/// certificates for a server (`with_client_cert_verifier`). Each handshake
/// is verified against one whole bundle: the one loaded when it began
/// verifying.
///
/// The server sends no certificate authority hints to clients (their
/// list would have to outlive a reload); clients send the certificate
/// they have, as pki's do.
pub struct TrustReloader {
    paths: Vec<PathBuf>,
    provider: Arc<CryptoProvider>,
    watched: Watched<TrustSnapshot>,
    acker: Option<Arc<dyn Acker>>,
}

impl std::fmt::Debug for TrustReloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TrustReloader")
            .field("paths", &self.paths)
            .field("fingerprint", &self.fingerprint())
            .finish()
    }
}

impl TrustReloader {
    /// Loads the bundle made of every certificate in `paths` (an error
    /// when one is unusable) and reloads it when a file changes.
    ///
    /// # Errors
    ///
    /// [`ReloadError::NoBundleFile`] when `paths` is empty,
    /// [`ReloadError::Io`] when a file cannot be read, [`ReloadError::Invalid`]
    /// when one holds no certificate or one that cannot be parsed, and
    /// [`ReloadError::Tls`] when rustls refuses a certificate as a trust anchor
    /// or cannot build a verifier.
    pub fn new(
        paths: impl IntoIterator<Item = PathBuf>,
        provider: Arc<CryptoProvider>,
        options: ReloadOptions,
    ) -> Result<Arc<Self>, ReloadError> {
        Self::build(paths, provider, options, None)
    }

    /// Like [`TrustReloader::new`], acknowledging through `acker` the
    /// first bundle and every bundle it loads after.
    ///
    /// # Errors
    ///
    /// The errors of [`TrustReloader::new`]. Nothing is acknowledged when the
    /// first load fails.
    pub fn with_acker(
        paths: impl IntoIterator<Item = PathBuf>,
        provider: Arc<CryptoProvider>,
        options: ReloadOptions,
        acker: Arc<dyn Acker>,
    ) -> Result<Arc<Self>, ReloadError> {
        Self::build(paths, provider, options, Some(acker))
    }

    fn build(
        paths: impl IntoIterator<Item = PathBuf>,
        provider: Arc<CryptoProvider>,
        options: ReloadOptions,
        acker: Option<Arc<dyn Acker>>,
    ) -> Result<Arc<Self>, ReloadError> {
        let paths: Vec<PathBuf> = paths.into_iter().collect();
        if paths.is_empty() {
            return Err(ReloadError::NoBundleFile);
        }
        let first = load(&paths, &provider)?;
        if let Some(acker) = &acker {
            acker.ack(&first.value.fingerprint);
        }
        Ok(Arc::new(TrustReloader {
            watched: Watched::new(first, options.check_interval),
            paths,
            provider,
            acker,
        }))
    }

    /// The token of the bundle in use (`pki fingerprint --bundle`).
    pub fn fingerprint(&self) -> String {
        self.watched.current().fingerprint.clone()
    }

    /// Looks at the files now; whether a new bundle was swapped in.
    ///
    /// # Errors
    ///
    /// The errors of [`TrustReloader::new`], when a file changed and the bundle
    /// cannot be loaded again; the bundle in use stays, nothing is
    /// acknowledged, and [`TrustReloader::last_error`] keeps the error until a
    /// reload succeeds.
    pub fn refresh(&self) -> Result<bool, ReloadError> {
        self.check(true)
    }

    /// How many bundles were loaded (1 after the first).
    pub fn generation(&self) -> u64 {
        self.watched.generation()
    }

    /// Why the last reload failed, until one succeeds.
    pub fn last_error(&self) -> Option<ReloadError> {
        self.watched.last_error()
    }

    fn check(&self, force: bool) -> Result<bool, ReloadError> {
        let swapped = self
            .watched
            .check(&self.paths, force, || load(&self.paths, &self.provider))?;
        if swapped && let Some(acker) = &self.acker {
            acker.ack(&self.watched.current().fingerprint);
        }
        Ok(swapped)
    }

    /// The bundle to verify this handshake with.
    fn snapshot(&self) -> Arc<TrustSnapshot> {
        // A failed reload is kept for `last_error`; verification goes on
        // with the bundle already loaded.
        let _ = self.check(false);
        self.watched.current()
    }
}

/// Reads every certificate of `paths` into one bundle, retrying while a
/// file changes under the reads.
fn load(
    paths: &[PathBuf],
    provider: &Arc<CryptoProvider>,
) -> Result<Loaded<TrustSnapshot>, ReloadError> {
    let mut attempts = 0;
    // Each file is whole (published by a rename), so even a read during
    // changes is a bundle of some generation; files that kept changing
    // through every read are taken as read, but with the stamp from before
    // the read: the files of after differ from it, so the next check
    // loads them.
    let (certs, loaded_stamp) = loop {
        attempts += 1;
        let before = stamp(paths)?;
        let (certs, _) = read_bundle_once(paths)?;
        let after = stamp(paths)?;
        if before == after || attempts >= MAX_READS {
            break (certs, before);
        }
    };
    let bundle = Bundle::from_certs(certs);
    let mut roots = RootCertStore::empty();
    for cert in bundle.certs() {
        roots
            .add(CertificateDer::from(cert.der().to_vec()))
            .map_err(|e| ReloadError::Tls(format!("{}: {e}", cert.id())))?;
    }
    let roots = Arc::new(roots);
    let servers = WebPkiServerVerifier::builder_with_provider(roots.clone(), provider.clone())
        .build()
        .map_err(|e| ReloadError::Tls(e.to_string()))?;
    let clients = WebPkiClientVerifier::builder_with_provider(roots, provider.clone())
        .build()
        .map_err(|e| ReloadError::Tls(e.to_string()))?;
    Ok(Loaded {
        value: Arc::new(TrustSnapshot {
            fingerprint: pki_rotate::uptake::bundle_fingerprint(&bundle),
            servers,
            clients,
        }),
        stamp: loaded_stamp,
    })
}

/// Which handshake signature a peer made: the two rules differ (TLS 1.3
/// restricts the schemes), the provider's algorithms are the same.
#[derive(Clone, Copy)]
enum Tls {
    V12,
    V13,
}

impl TrustReloader {
    /// The handshake signature check both verifier roles share: it needs the
    /// peer's certificate only, not the reloaded bundle.
    fn signature(
        &self,
        version: Tls,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.provider.signature_verification_algorithms;
        match version {
            Tls::V12 => rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms),
            Tls::V13 => rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms),
        }
    }
}

impl ServerCertVerifier for TrustReloader {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        self.snapshot().servers.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        )
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signature(Tls::V12, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signature(Tls::V13, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

impl ClientCertVerifier for TrustReloader {
    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        &[]
    }

    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        self.snapshot()
            .clients
            .verify_client_cert(end_entity, intermediates, now)
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signature(Tls::V12, message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.signature(Tls::V13, message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}
