//! Importing a CA that someone else's root signed (the k3s custom-CA
//! topology: organisation root → intermediate → cluster CA).
//!
//! A CA arrives as PEM in one of the ways operators hand it over:
//!
//! - one file holding the CA certificate, its private key and the chain
//!   above it, in any order of blocks (the way StarlingX uploads it);
//! - the certificate (and maybe its chain) in one file, the key in another;
//! - the chain in a file of its own.
//!
//! [`CaImport::parse`] reads them all. The first certificate of the main
//! file is the CA; every further certificate (the rest of the main file,
//! then the chain file) is its chain, **in issuing order**: the CA's issuer
//! first, the root last. A chain in another order is refused and the error
//! names the certificate that is out of place, rather than reordered
//! silently: the same file is also what the operator hands to other tools
//! (k3s, Go's `tls.X509KeyPair`), which expect issuing order too.
//!
//! What is refused, each with its own [`Error`] variant: two private keys
//! ([`Error::TwoPrivateKeys`]), a key without a certificate
//! ([`Error::KeyWithoutCertificate`]), an encrypted key
//! ([`Error::EncryptedKey`]: decrypt it first with `openssl pkcs8`), a
//! chain out of order or broken ([`Error::ChainOutOfOrder`]), a key that
//! does not match the certificate ([`Error::KeyMismatch`]) and a
//! certificate that cannot sign certificates ([`Error::NotACa`]).

use crate::bundle::Bundle;
use crate::ca_key::CaKey;
use crate::cert::{Certificate, KeyUsages};
use crate::error::{Error, Result};
use crate::issue::{CertificateAuthority, Issuer};
use crate::key::PrivateKey;
use crate::pem;
use crate::verify::{
    Purpose, VerifiedPath, VerifyError, VerifyOptions, verify_chain, verify_signature,
};
use rand_core::CryptoRng;
use time::{Duration, OffsetDateTime};

/// A CA certificate with what came with it: its key (when supplied) and
/// the chain above it, checked to be in issuing order.
#[derive(Clone)]
pub struct CaImport {
    /// The CA certificate: the first certificate of the main input.
    pub cert: Certificate,
    /// Its private key, when one was supplied. Not yet checked against
    /// `cert`: [`CaImport::authority`] does that, and validation reports
    /// it as a check of its own.
    pub key: Option<CaKey>,
    /// The certificates above `cert`, issuer first; the last one is the
    /// root when the chain reaches one. Empty when none was supplied.
    pub chain: Vec<Certificate>,
}

impl std::fmt::Debug for CaImport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CaImport")
            .field("cert", &self.cert)
            .field("key", &self.key.as_ref().map(|_| "<private key>"))
            .field("chain", &self.chain)
            .finish()
    }
}

/// Which input a block came from, for error messages.
#[derive(Clone, Copy)]
enum Source {
    Main,
    KeyFile,
    ChainFile,
}

impl Source {
    fn name(self) -> &'static str {
        match self {
            Source::Main => "the CA file",
            Source::KeyFile => "the key file",
            Source::ChainFile => "the chain file",
        }
    }

    /// The certificate in PEM block `block` (1-based) of this input.
    fn certificate(self, block: usize, der: &[u8]) -> Result<Certificate> {
        Certificate::from_der(der).map_err(|e| Error::Import {
            what: self.name(),
            source: Box::new(Error::Pem {
                block,
                reason: "not a certificate".into(),
                source: Some(Box::new(e)),
            }),
        })
    }

    /// The private key of a block of this input labelled `label`, in the
    /// encoding the label names.
    fn private_key(self, label: &str, der: &[u8]) -> Result<PrivateKey> {
        match label {
            "PRIVATE KEY" => PrivateKey::from_pkcs8_der(der),
            "EC PRIVATE KEY" => PrivateKey::from_sec1_der(der),
            "RSA PRIVATE KEY" => PrivateKey::from_pkcs1_der(der),
            other => Err(Error::UnsupportedKey {
                reason: format!("PEM label \"{other}\""),
            }),
        }
        .map_err(|e| Error::Import {
            what: self.name(),
            source: Box::new(e),
        })
    }
}

impl CaImport {
    /// Reads a CA from `main` (certificates, and possibly its key), an
    /// optional separate `key_file` and an optional `chain_file`.
    ///
    /// Text between PEM blocks, CRLF line endings and base64 lines of any
    /// length are accepted (RFC 7468 lax parsing). Blocks other than
    /// certificates and private keys (`EC PARAMETERS`, as `openssl ecparam`
    /// writes them) are ignored.
    ///
    /// # Errors
    ///
    /// - [`Error::Import`] naming the input (`the CA file`, `the key file`,
    ///   `the chain file`) when it cannot be read as PEM or DER, or one of its
    ///   certificates or keys cannot be decoded (the cause is its source);
    /// - [`Error::NoPemBlock`] for an input that holds no block at all;
    /// - [`Error::EncryptedKey`] for an `ENCRYPTED PRIVATE KEY`, and
    ///   [`Error::TwoPrivateKeys`] when the inputs hold more than one key;
    /// - [`Error::NoCertificate`] when the chain file, or all inputs together,
    ///   hold no certificate, and [`Error::KeyWithoutCertificate`] when a key
    ///   came without any;
    /// - the errors of [`check_issuing_order`] when the certificates are not in
    ///   issuing order.
    pub fn parse(main: &[u8], key_file: Option<&[u8]>, chain_file: Option<&[u8]>) -> Result<Self> {
        let mut certs: Vec<Certificate> = Vec::new();
        let mut key: Option<(PrivateKey, String)> = None;
        let mut inputs = vec![(Source::Main, main)];
        inputs.extend(key_file.map(|k| (Source::KeyFile, k)));
        inputs.extend(chain_file.map(|c| (Source::ChainFile, c)));
        for (source, input) in inputs {
            let blocks = pem::read_blocks(input).map_err(|e| Error::Import {
                what: source.name(),
                source: Box::new(e),
            })?;
            if blocks.is_empty() {
                return Err(Error::NoPemBlock {
                    what: source.name(),
                });
            }
            let mut certs_here = 0;
            for (i, block) in blocks.iter().enumerate() {
                let place = format!("{}, PEM block {}", source.name(), i + 1);
                match block.label.as_str() {
                    "CERTIFICATE" | "TRUSTED CERTIFICATE" => {
                        let cert = source.certificate(i + 1, &block.der)?;
                        certs_here += 1;
                        // The same certificate twice (a root pasted into the
                        // CA file and the chain file) is one certificate.
                        if !certs.contains(&cert) {
                            certs.push(cert);
                        }
                    }
                    "ENCRYPTED PRIVATE KEY" => return Err(Error::EncryptedKey { place }),
                    label if label.ends_with("PRIVATE KEY") => {
                        if let Some((_, first)) = &key {
                            return Err(Error::TwoPrivateKeys {
                                first: first.clone(),
                                second: place,
                            });
                        }
                        key = Some((source.private_key(label, &block.der)?, place));
                    }
                    _ => {}
                }
            }
            if matches!(source, Source::ChainFile) && certs_here == 0 {
                return Err(Error::NoCertificate {
                    what: source.name(),
                });
            }
        }
        let mut certs = certs.into_iter();
        let Some(cert) = certs.next() else {
            return match key {
                Some((_, place)) => Err(Error::KeyWithoutCertificate { place }),
                None => Err(Error::NoCertificate {
                    what: Source::Main.name(),
                }),
            };
        };
        let chain: Vec<Certificate> = certs.collect();
        check_issuing_order(&cert, &chain)?;
        Ok(CaImport {
            cert,
            key: key.map(|(k, _)| k.into()),
            chain,
        })
    }

    /// Whether the CA certificate is its own issuer (a root).
    pub fn is_self_signed(&self) -> bool {
        is_self_signed(&self.cert)
    }

    /// The root the chain ends at: the CA itself when self-signed, else the
    /// chain's last certificate when that one is self-signed.
    pub fn root(&self) -> Option<&Certificate> {
        if self.is_self_signed() {
            return Some(&self.cert);
        }
        self.chain.last().filter(|c| is_self_signed(c))
    }

    /// The chain without its root: what servers append to their chains.
    pub fn intermediates(&self) -> &[Certificate] {
        match self.chain.last() {
            Some(last) if is_self_signed(last) => &self.chain[..self.chain.len() - 1],
            _ => &self.chain,
        }
    }

    /// The CA with its key, for signing: the key must be present and match,
    /// and the certificate must be allowed to sign certificates.
    ///
    /// # Errors
    ///
    /// [`Error::MissingPrivateKey`] when no key was supplied,
    /// [`Error::KeyMismatch`] when it is not the certificate's, and
    /// [`Error::NotACa`] when the certificate may not sign certificates (see
    /// [`check_can_sign_certificates`]).
    pub fn authority(&self) -> Result<CertificateAuthority> {
        let key = self.key.clone().ok_or(Error::MissingPrivateKey {
            certificate: self.cert.id(),
        })?;
        if !key.matches(self.cert.public_key()) {
            return Err(Error::KeyMismatch {
                certificate: self.cert.id(),
            });
        }
        check_can_sign_certificates(&self.cert)?;
        CertificateAuthority::new(self.cert.clone(), key)
    }

    /// Builds and verifies the path from the CA to the root of its chain
    /// at `at`, with the path verifier (the CA in leaf position, the
    /// supplied intermediates, the root as the only anchor). A CA that is
    /// not self-signed needs its root in the chain.
    ///
    /// # Errors
    ///
    /// - [`Error::ChainVerification`] when a self-signed CA is not valid at
    ///   `at`, or the path from the CA to its root does not verify at `at` (the
    ///   verifier's reason is in the message);
    /// - [`Error::ChainHasNoRoot`] when the CA is not self-signed and the chain
    ///   does not end at a self-signed root;
    /// - [`Error::UnsupportedSignature`] when the self-signature of the CA or
    ///   of the chain's last certificate cannot be checked.
    pub fn verify_to_root(&self, at: OffsetDateTime) -> Result<VerifiedPath> {
        // A root is its own path: only its validity is left to check.
        if self_signed(&self.cert)? {
            if !self.cert.is_valid_at(at) {
                return Err(Error::ChainVerification {
                    certificate: self.cert.id(),
                    reason: format!(
                        "not valid at {} (valid {} to {})",
                        crate::datetime::rfc3339(at),
                        crate::datetime::rfc3339(self.cert.not_before()),
                        crate::datetime::rfc3339(self.cert.not_after())
                    ),
                });
            }
            return Ok(VerifiedPath {
                certs: vec![self.cert.clone()],
            });
        }
        // A root whose signature cannot be checked is reported as such,
        // not as a chain that ends short of a root.
        if let Some(last) = self.chain.last() {
            self_signed(last)?;
        }
        let root = self.root().ok_or_else(|| Error::ChainHasNoRoot {
            last: self.chain.last().unwrap_or(&self.cert).id(),
            issuer: self.chain.last().unwrap_or(&self.cert).issuer().to_string(),
        })?;
        let anchors = Bundle::from_certs([root.clone()]);
        verify_ca_path(&self.cert, self.intermediates(), &anchors, at).map_err(|e| {
            Error::ChainVerification {
                certificate: self.cert.id(),
                reason: e.to_string(),
            }
        })
    }
}

/// A CA ready to sign leaves: what [`CaImport::validate`] and
/// [`import_ca_file`] return once every check passed.
#[derive(Debug, Clone)]
pub struct ValidatedCa {
    /// The CA certificate with its (matching) private key.
    pub authority: CertificateAuthority,
    /// The certificates above it, its issuer first, the root last; empty
    /// when the CA is self-signed (its own root).
    pub chain: Vec<Certificate>,
}

impl ValidatedCa {
    /// The root clients must trust: the chain's last certificate, or the
    /// CA itself when it is self-signed.
    pub fn root(&self) -> &Certificate {
        self.chain.last().unwrap_or(&self.authority.cert)
    }

    /// The chain without its root: what follows the CA in serving chains.
    pub fn intermediates(&self) -> &[Certificate] {
        match self.chain.split_last() {
            Some((_, intermediates)) => intermediates,
            None => &[],
        }
    }

    /// The earliest NotAfter of the CA and its chain: no leaf of the CA
    /// verifies past it.
    pub fn not_after(&self) -> OffsetDateTime {
        self.chain
            .iter()
            .map(Certificate::not_after)
            .fold(self.authority.cert.not_after(), OffsetDateTime::min)
    }
}

impl CaImport {
    /// Checks that this import is a CA to sign with at `at`: its key is
    /// present ([`Error::MissingPrivateKey`]) and matches
    /// ([`Error::KeyMismatch`]); it may sign certificates
    /// ([`Error::NotACa`]); unless self-signed, its chain was supplied up
    /// to a root ([`Error::ChainHasNoRoot`]: never completed from anywhere
    /// else); and the path from it to that root verifies at `at`, validity
    /// of every certificate included ([`Error::ChainVerification`]).
    ///
    /// # Errors
    ///
    /// The errors of [`CaImport::authority`], then those of
    /// [`CaImport::verify_to_root`], as listed above.
    pub fn validate(&self, at: OffsetDateTime) -> Result<ValidatedCa> {
        let authority = self.authority()?;
        self.verify_to_root(at)?;
        Ok(ValidatedCa {
            authority,
            chain: self.chain.clone(),
        })
    }
}

/// Reads one PEM file holding a CA certificate, its private key and, when
/// the CA is not self-signed, the chain above it up to the root (the way
/// StarlingX uploads a CA), and validates it at `at` with
/// [`CaImport::validate`]. Block order is free for the key; certificates
/// come in issuing order (the CA first). Every refusal is a typed
/// [`Error`]: those of [`CaImport::parse`] and of [`CaImport::validate`].
///
/// # Errors
///
/// The errors of [`CaImport::parse`] and of [`CaImport::validate`].
pub fn import_ca_file(pem: &[u8], at: OffsetDateTime) -> Result<ValidatedCa> {
    CaImport::parse(pem, None, None)?.validate(at)
}

/// Verifies a CA certificate (in leaf position) up to `anchors` through
/// `intermediates` at `at`. A CA's extendedKeyUsage, when present, may
/// allow server or client authentication: either verifies.
///
/// # Errors
///
/// The [`VerifyError`](crate::verify::VerifyError) of the verification for
/// server authentication when neither it nor the one for client authentication
/// succeeds: the certificate that expired, the issuer not found, the signature
/// that does not verify, and so on.
pub fn verify_ca_path(
    ca: &Certificate,
    intermediates: &[Certificate],
    anchors: &Bundle,
    at: OffsetDateTime,
) -> std::result::Result<VerifiedPath, crate::verify::VerifyError> {
    match verify_chain(
        ca,
        intermediates,
        anchors,
        &VerifyOptions::new(at, Purpose::ServerAuth),
    ) {
        Ok(path) => Ok(path),
        Err(server) => verify_chain(
            ca,
            intermediates,
            anchors,
            &VerifyOptions::new(at, Purpose::ClientAuth),
        )
        .map_err(|_| server),
    }
}

/// Whether `cert` is self-issued and its signature verifies with its own key.
pub fn is_self_signed(cert: &Certificate) -> bool {
    cert.looks_self_signed() && verify_signature(cert.public_key(), cert).is_ok()
}

/// Whether `issuer` issued `child`: names chain and the signature verifies.
/// A signature that cannot be checked (an algorithm or key pki does not
/// support) is [`Error::UnsupportedSignature`], never a "no": the chain
/// may be intact.
fn issued(issuer: &Certificate, child: &Certificate) -> Result<bool> {
    if !issuer.subject_matches_issuer_of(child) {
        return Ok(false);
    }
    signature_outcome(issuer, child)
}

/// [`is_self_signed`], with [`Error::UnsupportedSignature`] for a
/// self-issued certificate whose signature cannot be checked.
fn self_signed(cert: &Certificate) -> Result<bool> {
    if !cert.looks_self_signed() {
        return Ok(false);
    }
    signature_outcome(cert, cert)
}

fn signature_outcome(issuer: &Certificate, child: &Certificate) -> Result<bool> {
    match verify_signature(issuer.public_key(), child) {
        Ok(()) => Ok(true),
        Err(
            e @ (VerifyError::UnsupportedSignatureAlgorithm { .. }
            | VerifyError::UnsupportedPublicKey { .. }),
        ) => Err(Error::UnsupportedSignature {
            certificate: describe(child),
            source: Box::new(e),
        }),
        Err(_) => Ok(false),
    }
}

/// Checks that `chain` lists the issuers of `ca` in order (each
/// certificate issued the one before it, signature included) and that
/// nothing follows a root; [`Error::ChainOutOfOrder`] names the first
/// certificate out of place, counting the CA as certificate 1.
/// [`CaImport::parse`] applies it to files; a caller holding certificates
/// already parsed applies it itself.
///
/// # Errors
///
/// [`Error::ChainOutOfOrder`] for the first certificate out of place (one that
/// follows a self-signed root, or that did not issue the certificate before
/// it), and [`Error::UnsupportedSignature`] when a signature on the way cannot
/// be checked.
pub fn check_issuing_order(ca: &Certificate, chain: &[Certificate]) -> Result<()> {
    let mut child = ca;
    for (i, next) in chain.iter().enumerate() {
        // Positions as the operator sees them: the CA is certificate 1.
        let position = i + 2;
        if self_signed(child)? {
            return Err(Error::ChainOutOfOrder {
                position,
                certificate: describe(next),
                reason: format!(
                    "it follows the self-signed root {}, which ends the chain",
                    describe(child)
                ),
            });
        }
        if !issued(next, child)? {
            let reason = match chain.iter().position(|c| issued(c, child).unwrap_or(false)) {
                Some(j) => format!(
                    "the issuer of {} is certificate {}; list the CA first, then each issuer, up to the root",
                    describe(child),
                    j + 2
                ),
                None => format!(
                    "it did not issue {} (issuer \"{}\"), and no certificate supplied did",
                    describe(child),
                    child.issuer()
                ),
            };
            return Err(Error::ChainOutOfOrder {
                position,
                certificate: describe(next),
                reason,
            });
        }
        child = next;
    }
    Ok(())
}

fn describe(cert: &Certificate) -> String {
    format!("\"{}\" ({})", cert.subject(), cert.id())
}

/// Refuses a certificate that may not sign certificates: basicConstraints
/// cA must be TRUE, and keyUsage, when present, must include keyCertSign.
///
/// # Errors
///
/// [`Error::NotACa`] when basicConstraints cA is not TRUE, or keyUsage is
/// present without keyCertSign.
pub fn check_can_sign_certificates(cert: &Certificate) -> Result<()> {
    if !cert.is_ca() {
        return Err(Error::NotACa {
            certificate: cert.id(),
            reason: "basicConstraints cA is not TRUE".into(),
        });
    }
    if let Some(ku) = cert.key_usage()
        && !ku.0.contains(KeyUsages::KeyCertSign)
    {
        return Err(Error::NotACa {
            certificate: cert.id(),
            reason: "keyUsage does not include keyCertSign".into(),
        });
    }
    Ok(())
}

/// Renews `ca` on its own key: a new self-signed certificate with the same
/// Subject, SubjectPublicKeyInfo and SubjectKeyIdentifier (every other
/// extension copied), a fresh serial, valid from `issued_at` minus the
/// default backdate for `lifetime`. Certificates the old one issued verify
/// under the new one, and SPKI pins do not change.
///
/// # Errors
///
/// The errors of [`renew_same_key_with`].
pub fn renew_same_key<R: CryptoRng + ?Sized>(
    ca: &CertificateAuthority,
    issued_at: OffsetDateTime,
    lifetime: Duration,
    rng: &mut R,
) -> Result<Certificate> {
    renew_same_key_with(&ca.issuer(), issued_at, lifetime, rng)
}

/// [`renew_same_key`] for a CA whose key may be in a token.
///
/// # Errors
///
/// - [`Error::Issuance`] when the CA is not self-signed (or its self-signature
///   cannot be checked), or `lifetime` is not positive;
/// - [`Error::Time`] when the new validity falls outside what a certificate can
///   encode;
/// - the signing key's error when it cannot sign (for a key in a token,
///   [`Error::Pkcs11`] and the other `Pkcs11…` variants), and [`Error::Crypto`]
///   when encoding fails.
pub fn renew_same_key_with<R: CryptoRng + ?Sized>(
    ca: &Issuer<'_>,
    issued_at: OffsetDateTime,
    lifetime: Duration,
    rng: &mut R,
) -> Result<Certificate> {
    if !is_self_signed(ca.cert()) {
        return Err(Error::issuance(format!(
            "{} is not self-signed: only its issuer can renew it",
            ca.cert().id()
        )));
    }
    if lifetime <= Duration::ZERO {
        return Err(Error::issuance("lifetime must be positive"));
    }
    let not_before = crate::datetime::truncate(crate::datetime::add(
        issued_at,
        -crate::issue::DEFAULT_BACKDATE,
    )?);
    let not_after = crate::datetime::truncate(crate::datetime::add(issued_at, lifetime)?);
    crate::issue::resign(ca.cert(), ca, not_before, not_after, rng)
}

/// The root a set of certificates leads to: from the first certificate,
/// through the issuers among `certs`, up to a self-signed one. When that
/// walk ends short of a root, the first self-signed certificate of `certs`.
pub fn chain_root(certs: &[Certificate]) -> Option<&Certificate> {
    let mut current = certs.first()?;
    // Each step moves to another certificate of the set; a set of n
    // certificates has no path longer than n.
    for _ in 0..certs.len() {
        if is_self_signed(current) {
            return Some(current);
        }
        match certs
            .iter()
            .find(|c| *c != current && issued(c, current).unwrap_or(false))
        {
            Some(issuer) => current = issuer,
            None => break,
        }
    }
    certs.iter().find(|c| is_self_signed(c))
}
