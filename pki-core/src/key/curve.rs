//! The NIST curves pki signs with, P-256 and P-384, behind one trait so
//! that one key type ([`super::EcKey`]) serves both.
//!
//! Each method is the curve crate's own function of the same name: the two
//! implementations differ only in the crate they call, which is why a
//! macro writes them.

use super::{EcKey, KeyInner};
use der::asn1::ObjectIdentifier;
use rand_core::CryptoRng;
#[cfg(feature = "ring")]
use zeroize::Zeroizing;

/// A curve of [`super::EcKey`].
pub(super) trait Curve: Sized + 'static {
    /// Its name in messages (`P-256`).
    const NAME: &'static str;
    /// The namedCurve OID (RFC 5480 §2.1.1.1).
    const OID: ObjectIdentifier;
    /// Length of an uncompressed SEC1 point (0x04, x, y).
    const POINT_LEN: usize;
    /// Length of a private scalar.
    const SCALAR_LEN: usize;
    /// ecdsa-with-SHA256 or ecdsa-with-SHA384: the hash RustCrypto (and
    /// ring) sign with on this curve (RFC 5758 §3.2).
    const SIGNATURE_OID: ObjectIdentifier;

    /// The private scalar.
    type Secret: Clone;
    /// The signing key (scalar and public point).
    type Signing: Clone;
    /// The public key.
    type Verifying;

    fn secret_from_slice(bytes: &[u8]) -> Result<Self::Secret, String>;
    fn secret_from_sec1_der(der: &[u8]) -> Result<Self::Secret, String>;
    #[cfg(feature = "ring")]
    fn secret_bytes(secret: &Self::Secret) -> Zeroizing<Vec<u8>>;
    fn signing(secret: &Self::Secret) -> Self::Signing;
    fn secret_of(key: &Self::Signing) -> Self::Secret;
    fn generate<R: CryptoRng + ?Sized>(rng: &mut R) -> Self::Signing;
    /// The uncompressed public point.
    fn point(key: &Self::Signing) -> Vec<u8>;
    fn verifying_from_point(point: &[u8]) -> Option<Self::Verifying>;
    fn pkcs8(key: &Self::Signing) -> pkcs8::Result<pkcs8::SecretDocument>;
    /// Signs with RustCrypto's deterministic ECDSA (RFC 6979): the DER
    /// signature.
    fn sign(key: &Self::Signing, message: &[u8]) -> Result<Vec<u8>, signature::Error>;
    /// The AlgorithmIdentifier of this curve's signatures: the signature
    /// OID, parameters absent (RFC 5758 §3.2).
    fn signature_algorithm() -> spki::AlgorithmIdentifierOwned {
        spki::AlgorithmIdentifierOwned {
            oid: Self::SIGNATURE_OID,
            parameters: None,
        }
    }
    /// The key as [`super::PrivateKey`] holds it.
    fn inner(key: EcKey<Self>) -> KeyInner;
    /// ring's signing algorithm over this curve, with the same hash.
    #[cfg(feature = "ring")]
    fn ring_signing() -> &'static ring::signature::EcdsaSigningAlgorithm;
}

/// Marks P-256 keys.
#[derive(Clone, Copy)]
pub(super) struct P256;
/// Marks P-384 keys.
#[derive(Clone, Copy)]
pub(super) struct P384;

macro_rules! nist_curve {
    ($marker:ident, $krate:ident, $name:literal, $oid:literal,
     $point:literal, $scalar:literal, $sig_oid:literal, $ring:ident) => {
        impl Curve for $marker {
            const NAME: &'static str = $name;
            const OID: ObjectIdentifier = ObjectIdentifier::new_unwrap($oid);
            const POINT_LEN: usize = $point;
            const SCALAR_LEN: usize = $scalar;
            const SIGNATURE_OID: ObjectIdentifier = ObjectIdentifier::new_unwrap($sig_oid);
            type Secret = $krate::SecretKey;
            type Signing = $krate::ecdsa::SigningKey;
            type Verifying = $krate::ecdsa::VerifyingKey;

            fn secret_from_slice(bytes: &[u8]) -> Result<Self::Secret, String> {
                $krate::SecretKey::from_slice(bytes).map_err(|e| e.to_string())
            }
            fn secret_from_sec1_der(der: &[u8]) -> Result<Self::Secret, String> {
                $krate::SecretKey::from_sec1_der(der).map_err(|e| e.to_string())
            }
            #[cfg(feature = "ring")]
            fn secret_bytes(secret: &Self::Secret) -> Zeroizing<Vec<u8>> {
                Zeroizing::new(secret.to_bytes().to_vec())
            }
            fn signing(secret: &Self::Secret) -> Self::Signing {
                $krate::ecdsa::SigningKey::from(secret)
            }
            fn secret_of(key: &Self::Signing) -> Self::Secret {
                $krate::SecretKey::from(key)
            }
            fn generate<R: CryptoRng + ?Sized>(rng: &mut R) -> Self::Signing {
                use $krate::elliptic_curve::Generate;
                $krate::ecdsa::SigningKey::generate_from_rng(rng)
            }
            fn point(key: &Self::Signing) -> Vec<u8> {
                key.verifying_key().to_sec1_point(false).as_bytes().to_vec()
            }
            fn verifying_from_point(point: &[u8]) -> Option<Self::Verifying> {
                $krate::ecdsa::VerifyingKey::from_sec1_bytes(point).ok()
            }
            fn pkcs8(key: &Self::Signing) -> pkcs8::Result<pkcs8::SecretDocument> {
                use $krate::pkcs8::EncodePrivateKey;
                key.to_pkcs8_der()
            }
            fn sign(key: &Self::Signing, message: &[u8]) -> Result<Vec<u8>, signature::Error> {
                use signature::{SignatureEncoding, Signer};
                let signature: $krate::ecdsa::DerSignature = key.try_sign(message)?;
                Ok(signature.to_vec())
            }
            fn inner(key: EcKey<Self>) -> KeyInner {
                KeyInner::$marker(Box::new(key))
            }
            #[cfg(feature = "ring")]
            fn ring_signing() -> &'static ring::signature::EcdsaSigningAlgorithm {
                &ring::signature::$ring
            }
        }
    };
}

nist_curve!(
    P256,
    p256,
    "P-256",
    "1.2.840.10045.3.1.7",
    65,
    32,
    "1.2.840.10045.4.3.2",
    ECDSA_P256_SHA256_ASN1_SIGNING
);
nist_curve!(
    P384,
    p384,
    "P-384",
    "1.3.132.0.34",
    97,
    48,
    "1.2.840.10045.4.3.3",
    ECDSA_P384_SHA384_ASN1_SIGNING
);
