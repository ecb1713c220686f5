//! P-256 and P-384 key generation and signing with ring, for randomness from the
//! operating system (`feature = "ring"`).
//!
//! Everything pki-core draws from an RNG is a function of the RNG's
//! stream: a seeded RNG gives the same keys, serials and certificates every
//! time, which is what makes engines testable. RustCrypto's ECDSA keeps that
//! property; ring cannot, since it draws its randomness from the operating
//! system itself (its RNG trait is sealed). So ring is used exactly when the
//! caller passes the operating system's RNG ([`crate::OsRng`]), whose stream
//! cannot be repeated anyway: the CLI and the C ABI do, and generate keys and
//! sign several times faster for it. Any other RNG takes the RustCrypto path.

use super::curve::Curve;
use super::{EcKey, PrivateKey};
use crate::error::{Error, Result};
use std::sync::Arc;
use x509_cert::builder::{Builder, CertificateBuilder, Profile as BuilderProfile};
use x509_cert::der::asn1::BitStringRef;
use x509_cert::der::{Encode, Header, Length, Tag};
use x509_cert::spki::{AlgorithmIdentifierOwned, DynSignatureAlgorithmIdentifier};
use zeroize::Zeroizing;

use ring::signature::EcdsaKeyPair;

fn failed(what: &str) -> Error {
    Error::KeyDecode {
        reason: format!("ring could not {what}"),
    }
}

/// A new key on curve `C` from the operating system's randomness.
pub(super) fn generate<C: Curve>() -> Result<PrivateKey> {
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(C::ring_signing(), &rng)
        .map_err(|_| failed(&format!("generate a {} key", C::NAME)))?;
    // ring computed the public point it stores beside the scalar: it is
    // taken as it is, not derived again with RustCrypto.
    let der = Zeroizing::new(pkcs8.as_ref().to_vec());
    PrivateKey::from_pkcs8_der_checked(&der, super::PointCheck::AtFirstSignature)
}

impl<C: Curve> EcKey<C> {
    /// The uncompressed public point: the stored one, or derived.
    fn public_point(&self) -> Result<Vec<u8>> {
        match (self.stored_public(), self.signing.get()) {
            (Some(stored), _) => Ok(stored.to_vec()),
            (None, Some(key)) => Ok(C::point(key)),
            (None, None) => Ok(C::point(self.signing_key()?)),
        }
    }

    /// The key as ring's key pair, made once; ring checks that the public
    /// point is the scalar's. None when ring refuses it (the RustCrypto path
    /// then signs, and reports what is wrong).
    fn ring_pair(&self) -> Option<Arc<EcdsaKeyPair>> {
        self.ring
            .get_or_init(|| {
                let point = self.public_point().ok()?;
                let scalar = C::secret_bytes(&self.secret);
                EcdsaKeyPair::from_private_key_and_public_key(
                    C::ring_signing(),
                    scalar.as_slice(),
                    &point,
                    &ring::rand::SystemRandom::new(),
                )
                .ok()
                .map(Arc::new)
            })
            .clone()
    }
}

/// What the certificate builder needs of a signer besides the signature:
/// its public key and the signature algorithm.
struct RingSigner<C: Curve> {
    verifying: C::Verifying,
}

impl<C: Curve> signature::Keypair for RingSigner<C> {
    type VerifyingKey = C::Verifying;
    fn verifying_key(&self) -> Self::VerifyingKey {
        self.verifying.clone()
    }
}

impl<C: Curve> DynSignatureAlgorithmIdentifier for RingSigner<C> {
    fn signature_algorithm_identifier(&self) -> x509_cert::spki::Result<AlgorithmIdentifierOwned> {
        // RFC 5758 §3.2: the parameters are absent.
        Ok(AlgorithmIdentifierOwned {
            oid: C::SIGNATURE_OID,
            parameters: None,
        })
    }
}

/// Signs the certificate `builder` describes with ring, or returns the
/// builder when ring cannot use the key. The certificate's DER is put
/// together from the TBSCertificate the builder encoded for signing, as
/// the builder's own `assemble` would encode it, without building (and
/// encoding again) the decoded certificate.
pub(super) fn sign<C: Curve, P: BuilderProfile>(
    key: &EcKey<C>,
    mut builder: CertificateBuilder<P>,
) -> Result<std::result::Result<Vec<u8>, CertificateBuilder<P>>> {
    let Some(pair) = key.ring_pair() else {
        return Ok(Err(builder));
    };
    let point = key.public_point()?;
    let verifying =
        C::verifying_from_point(&point).ok_or_else(|| failed("read the key's public point"))?;
    let signer = RingSigner::<C> { verifying };
    let tbs = builder.finalize(&signer).map_err(Error::crypto)?;
    let signature = pair
        .sign(&ring::rand::SystemRandom::new(), &tbs)
        .map_err(|_| failed("sign"))?;
    // Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm,
    // signatureValue BIT STRING }
    let algorithm = signer
        .signature_algorithm_identifier()
        .and_then(|a| a.to_der().map_err(Into::into))
        .map_err(Error::crypto)?;
    let bits = BitStringRef::from_bytes(signature.as_ref())
        .and_then(|b| b.to_der())
        .map_err(Error::crypto)?;
    let content = Length::try_from(tbs.len() + algorithm.len() + bits.len())
        .and_then(|len| Header::new(Tag::Sequence, len).to_der())
        .map_err(Error::crypto)?;
    Ok(Ok([content, tbs, algorithm, bits].concat()))
}
