//! What signs: a CA certificate with its key ([`CertificateAuthority`],
//! or any [`SigningKey`] through an [`Issuer`]), and cross-signing.

use super::*;
use crate::ca_key::CaKey;

/// A CA certificate with its private key: what signs. The key is in this
/// process or an object in a PKCS#11 token ([`CaKey`]).
#[derive(Clone)]
pub struct CertificateAuthority {
    /// The CA certificate.
    pub cert: Certificate,
    /// Its private key.
    pub key: CaKey,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

impl CertificateAuthority {
    /// Pairs a CA certificate with its key, refusing a key that does not
    /// belong to the certificate or a certificate that is not a CA.
    ///
    /// # Errors
    ///
    /// [`Error::KeyMismatch`] when `key` is not the certificate's key, and
    /// [`Error::NotACa`] when basicConstraints cA is not TRUE.
    pub fn new(cert: Certificate, key: impl Into<CaKey>) -> Result<Self> {
        let key = key.into();
        check_pair(&cert, key.matches(cert.public_key()))?;
        Ok(CertificateAuthority { cert, key })
    }

    /// Generates a key and a self-signed root CA in one step.
    ///
    /// # Errors
    ///
    /// The errors of [`PrivateKey::generate`], [`CertificateParams::new`] (an
    /// invalid `common_name`) and [`CertificateParams::self_signed`] (such as a
    /// `lifetime` that is not positive).
    pub fn generate_root<R: CryptoRng + ?Sized>(
        common_name: &str,
        algorithm: crate::key::KeyAlgorithm,
        issued_at: OffsetDateTime,
        lifetime: Duration,
        rng: &mut R,
    ) -> Result<Self> {
        let key = PrivateKey::generate(algorithm, rng)?;
        let params = CertificateParams::new(Profile::RootCa, common_name, issued_at, lifetime)?;
        let cert = params.self_signed(&key, rng)?;
        Ok(CertificateAuthority {
            cert,
            key: key.into(),
        })
    }

    /// Issues `params` for `public_key`.
    ///
    /// # Errors
    ///
    /// The errors of [`CertificateParams::signed_by`].
    pub fn issue<R: CryptoRng + ?Sized>(
        &self,
        params: &CertificateParams,
        public_key: &SubjectPublicKeyInfoOwned,
        rng: &mut R,
    ) -> Result<Certificate> {
        params.signed_by(public_key, self, rng)
    }

    /// This CA as an [`Issuer`]: its certificate and its key.
    pub fn issuer(&self) -> Issuer<'_> {
        Issuer {
            cert: &self.cert,
            key: &self.key,
        }
    }
}

/// A CA certificate and the key that signs for it, wherever that key
/// lives: what [`CertificateParams::signed_with`], [`cross_sign_with`] and
/// [`crate::renew_same_key_with`] sign with. Borrowed, so a token key
/// stays with its owner; [`CertificateAuthority::issuer`] gives one for
/// an in-process key.
#[derive(Clone, Copy)]
pub struct Issuer<'a> {
    pub(super) cert: &'a Certificate,
    pub(super) key: &'a dyn SigningKey,
}

impl std::fmt::Debug for Issuer<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Issuer")
            .field("cert", &self.cert)
            .field("algorithm", &self.key.algorithm())
            .finish()
    }
}

impl<'a> Issuer<'a> {
    /// Pairs a CA certificate with its signing key, refusing a key that
    /// does not belong to the certificate or a certificate that is not a
    /// CA (as [`CertificateAuthority::new`] does).
    ///
    /// # Errors
    ///
    /// [`Error::KeyMismatch`] when `key` is not the certificate's key (or
    /// cannot give its public key), and [`Error::NotACa`] when basicConstraints
    /// cA is not TRUE.
    pub fn new(cert: &'a Certificate, key: &'a dyn SigningKey) -> Result<Self> {
        check_pair(cert, crate::signing::key_matches(key, cert.public_key()))?;
        Ok(Issuer { cert, key })
    }

    /// The CA certificate.
    pub fn cert(&self) -> &'a Certificate {
        self.cert
    }

    /// The signing key.
    pub fn key(&self) -> &'a dyn SigningKey {
        self.key
    }
}

/// Cross-signs `target` with `signer`: the result has the target's exact
/// Subject, SubjectPublicKeyInfo and SubjectKeyIdentifier (and all its other
/// extensions except the AuthorityKeyIdentifier), the signer's subject as
/// issuer, AKI = the signer's SKI, a fresh serial, NotBefore = the target's
/// NotBefore and NotAfter = `not_after`.
///
/// # Errors
///
/// The errors of [`cross_sign_with`].
pub fn cross_sign<R: CryptoRng + ?Sized>(
    target: &Certificate,
    signer: &CertificateAuthority,
    not_after: OffsetDateTime,
    rng: &mut R,
) -> Result<Certificate> {
    cross_sign_with(target, &signer.issuer(), not_after, rng)
}

/// [`cross_sign`] with any [`Issuer`]: the signer's key may be in this
/// process or in a token (a rotation's bridges, signed by the old and the
/// new key).
///
/// # Errors
///
/// [`Error::Issuance`] when `not_after` is not after the target's NotBefore,
/// [`Error::Time`] when it cannot be encoded, the signer's key's error when it
/// cannot sign (for a key in a token, [`Error::Pkcs11`] and the other `Pkcs11…`
/// variants), and [`Error::Crypto`] when encoding fails.
pub fn cross_sign_with<R: CryptoRng + ?Sized>(
    target: &Certificate,
    signer: &Issuer<'_>,
    not_after: OffsetDateTime,
    rng: &mut R,
) -> Result<Certificate> {
    resign(target, signer, target.not_before(), not_after, rng)
}

/// [`cross_sign`] with a NotBefore of the caller's choosing: same-key
/// renewal re-signs a CA with its own key over a new validity window.
pub(crate) fn resign<R: CryptoRng + ?Sized>(
    target: &Certificate,
    signer: &Issuer<'_>,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    rng: &mut R,
) -> Result<Certificate> {
    let tbs = target.x509().tbs_certificate();
    if not_after <= not_before {
        return Err(Error::issuance(format!(
            "cross-signed NotAfter {} is not after NotBefore {}",
            crate::datetime::rfc3339(not_after),
            crate::datetime::rfc3339(not_before)
        )));
    }
    let aki_oid = <AuthorityKeyIdentifier as der::oid::AssociatedOid>::OID;
    let mut extensions: Vec<Extension> = tbs
        .extensions()
        .map(|e| e.iter().filter(|x| x.extn_id != aki_oid).cloned().collect())
        .unwrap_or_default();
    if let Some(signer_ski) = signer.cert.ski() {
        extensions.push(
            authority_key_id(signer_ski)?
                .to_extension_for(tbs.subject())
                .map_err(Error::crypto)?,
        );
    }
    build(
        Some(signer.cert.subject_der()),
        tbs.subject(),
        &extensions
            .into_iter()
            .map(ExtensionDer::Value)
            .collect::<Vec<_>>(),
        not_before,
        not_after,
        tbs.subject_public_key_info(),
        signer.key,
        rng,
    )
}

/// Refuses a CA certificate whose key does not match (`key_matches` is
/// whether it does) or that is not a CA: the checks of
/// [`CertificateAuthority::new`] and [`Issuer::new`].
fn check_pair(cert: &Certificate, key_matches: bool) -> Result<()> {
    if !key_matches {
        return Err(Error::KeyMismatch {
            certificate: cert.id(),
        });
    }
    if !cert.is_ca() {
        return Err(Error::NotACa {
            certificate: cert.id(),
            reason: "basicConstraints cA is not TRUE".into(),
        });
    }
    Ok(())
}
