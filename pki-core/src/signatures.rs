//! Signatures: the public keys that check them, the check itself over the
//! exact signed bytes (ring or RustCrypto, as the provider says), and the
//! cache of outcomes a bundle carries.
//!
//! Below the certificates, which remember their decoded key here; path
//! validation ([`crate::verify`]) takes the signed bytes out of a
//! certificate and asks this module whether they verify.
//!
//! The signed message is the TBSCertificate exactly as it appears in the
//! certificate's original DER: re-encoding a decoded structure may change
//! bytes (a non-canonical length, a time format) and then a valid
//! signature would fail, or worse, the verifier would check something
//! other than what was signed.

mod cache;

pub use cache::SignatureCache;

use crate::provider::{Backend, CryptoProvider};
use der::asn1::ObjectIdentifier;
use der::{Encode, Tagged};
use sha2::{Digest, Sha256, Sha384, Sha512};
use signature::Verifier;
use signature::hazmat::PrehashVerifier;
use spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};

const ECDSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
const ECDSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.3");
const RSA_SHA256: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.11");
const RSA_SHA384: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.12");
const RSA_SHA512: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.13");
pub(crate) const EC_PUBLIC_KEY: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
pub(crate) const SECP256R1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
pub(crate) const SECP384R1: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.3.132.0.34");
pub(crate) const RSA_ENCRYPTION: ObjectIdentifier =
    ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");

/// Smallest and largest RSA moduli accepted, in bits. 2048 is the floor of
/// NIST SP 800-131A and the CA/Browser Forum (§6.1.5); 8192 is the ceiling
/// of the `rsa` crate and bounds the cost of one check.
const RSA_MIN_BITS: usize = 2048;
const RSA_MAX_BITS: usize = 8192;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Hash {
    Sha256,
    Sha384,
    Sha512,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scheme {
    Ecdsa(Hash),
    RsaPkcs1(Hash),
}

/// Why a signature check failed, before the caller adds which certificates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SigFailure {
    /// TBSCertificate.signature differs from Certificate.signatureAlgorithm.
    AlgorithmMismatch {
        inner: ObjectIdentifier,
        outer: ObjectIdentifier,
    },
    /// The algorithm (or its parameters) is not supported.
    UnsupportedAlgorithm(ObjectIdentifier),
    /// The issuer key is not one we accept.
    UnsupportedKey(String),
    /// The certificate's structure does not allow a check.
    Malformed(&'static str),
    /// The signature does not verify (or the key type does not fit the algorithm).
    Invalid,
}

impl SigFailure {
    /// Whether the outcome depends only on the (key, message, signature)
    /// triple, so that a cache may remember it.
    pub(crate) fn is_cacheable(&self) -> bool {
        matches!(self, SigFailure::Invalid)
    }
}

/// The pieces a signature check needs, borrowed from a certificate.
pub(crate) struct Signed<'a> {
    pub(crate) tbs: &'a [u8],
    pub(crate) signature: &'a [u8],
    pub(crate) scheme: Scheme,
}

/// A public key decoded as the signature checks use it, by the RustCrypto
/// parsers whichever backend does the arithmetic: an ECDSA key (its point
/// checked to be on the curve) or an RSA key (its size and exponent
/// checked), or why the key cannot check a signature of that kind.
pub(crate) struct DecodedKey {
    ec: Result<EcPublicKey, SigFailure>,
    /// The key and the RSAPublicKey DER it was decoded from (what ring reads).
    rsa: Result<(rsa::RsaPublicKey, Box<[u8]>), SigFailure>,
}

impl DecodedKey {
    pub(crate) fn of(spki: &SubjectPublicKeyInfoOwned) -> Self {
        // A key of the other type is refused at once, without decoding.
        DecodedKey {
            ec: ec_key(spki),
            rsa: rsa_key(spki).map(|key| {
                let pkcs1 = spki.subject_public_key.as_bytes().unwrap_or_default();
                (key, pkcs1.into())
            }),
        }
    }

    /// The key as an RSA key, or why it is not one this verifier accepts.
    pub(crate) fn rsa(&self) -> Result<&rsa::RsaPublicKey, &SigFailure> {
        self.rsa.as_ref().map(|(key, _)| key)
    }
}

pub(crate) fn spki_label(spki: &SubjectPublicKeyInfoOwned) -> String {
    let der = spki.to_der().unwrap_or_default();
    let h = hex::encode(Sha256::digest(der));
    format!("spki:{}", &h[..16])
}

pub(crate) fn scheme(alg: &AlgorithmIdentifierOwned) -> Result<Scheme, SigFailure> {
    let unsupported = || SigFailure::UnsupportedAlgorithm(alg.oid);
    let null_or_absent = match &alg.parameters {
        None => true,
        Some(p) => p.tag() == der::Tag::Null && p.value().is_empty(),
    };
    let scheme = match alg.oid {
        // RFC 5758 §3.2: the parameters MUST be absent.
        ECDSA_SHA256 if alg.parameters.is_none() => Scheme::Ecdsa(Hash::Sha256),
        ECDSA_SHA384 if alg.parameters.is_none() => Scheme::Ecdsa(Hash::Sha384),
        // RFC 4055 §5: NULL; some encoders omit it, which is harmless.
        RSA_SHA256 if null_or_absent => Scheme::RsaPkcs1(Hash::Sha256),
        RSA_SHA384 if null_or_absent => Scheme::RsaPkcs1(Hash::Sha384),
        RSA_SHA512 if null_or_absent => Scheme::RsaPkcs1(Hash::Sha512),
        _ => return Err(unsupported()),
    };
    Ok(scheme)
}

/// Verifies `signed` with `key`, with ring when the `ring` feature is on
/// and with the RustCrypto crates otherwise. Both backends accept exactly
/// the same keys and signatures: the key, its size and the signature
/// encoding are checked by the RustCrypto parsers in either case, and only
/// the final arithmetic differs.
pub(crate) fn check(key: &DecodedKey, signed: &Signed<'_>) -> Result<(), SigFailure> {
    check_with(CryptoProvider::get_default().verification(), key, signed)
}

/// [`check`] with the given backend, whichever the provider names (the
/// tests compare the two).
pub(crate) fn check_with(
    backend: Backend,
    key: &DecodedKey,
    signed: &Signed<'_>,
) -> Result<(), SigFailure> {
    match backend {
        #[cfg(feature = "ring")]
        Backend::Ring => ring_backend::check(key, signed),
        Backend::RustCrypto => rust_crypto::check(key, signed),
    }
}

/// The pure-Rust backend (the default).
mod rust_crypto {
    use super::*;

    pub(crate) fn check(key: &DecodedKey, signed: &Signed<'_>) -> Result<(), SigFailure> {
        match signed.scheme {
            Scheme::Ecdsa(hash) => {
                let digest = |hash| -> Vec<u8> {
                    match hash {
                        Hash::Sha256 => Sha256::digest(signed.tbs).to_vec(),
                        Hash::Sha384 => Sha384::digest(signed.tbs).to_vec(),
                        // Not produced by `scheme`.
                        Hash::Sha512 => Sha512::digest(signed.tbs).to_vec(),
                    }
                };
                // Each curve's own hash through `verify`, any other as a
                // prehash (FIPS 186-5 §6.4.1: a shorter digest is the
                // integer it encodes).
                let ok = match key.ec.as_ref().map_err(Clone::clone)? {
                    EcPublicKey::P256(key, _) => {
                        let sig = p256::ecdsa::Signature::from_der(signed.signature)
                            .map_err(|_| SigFailure::Invalid)?;
                        match hash {
                            Hash::Sha256 => key.verify(signed.tbs, &sig),
                            other => key.verify_prehash(&digest(other), &sig),
                        }
                    }
                    EcPublicKey::P384(key, _) => {
                        let sig = p384::ecdsa::Signature::from_der(signed.signature)
                            .map_err(|_| SigFailure::Invalid)?;
                        match hash {
                            Hash::Sha384 => key.verify(signed.tbs, &sig),
                            other => key.verify_prehash(&digest(other), &sig),
                        }
                    }
                };
                ok.map_err(|_| SigFailure::Invalid)
            }
            Scheme::RsaPkcs1(hash) => {
                let (key, _) = key.rsa.as_ref().map_err(Clone::clone)?;
                let key = key.clone();
                let sig = rsa::pkcs1v15::Signature::try_from(signed.signature)
                    .map_err(|_| SigFailure::Invalid)?;
                let ok = match hash {
                    Hash::Sha256 => {
                        rsa::pkcs1v15::VerifyingKey::<Sha256>::new(key).verify(signed.tbs, &sig)
                    }
                    Hash::Sha384 => {
                        rsa::pkcs1v15::VerifyingKey::<Sha384>::new(key).verify(signed.tbs, &sig)
                    }
                    Hash::Sha512 => {
                        rsa::pkcs1v15::VerifyingKey::<Sha512>::new(key).verify(signed.tbs, &sig)
                    }
                };
                ok.map_err(|_| SigFailure::Invalid)
            }
        }
    }
}

/// The ring backend (feature `ring`): the same decisions as
/// [`rust_crypto`] about keys and encodings, ring's arithmetic. No RNG is
/// involved in verification.
#[cfg(feature = "ring")]
mod ring_backend {
    use super::*;
    use ring::signature as rs;

    pub(crate) fn check(key: &DecodedKey, signed: &Signed<'_>) -> Result<(), SigFailure> {
        let (algorithm, public, signature): (&dyn rs::VerificationAlgorithm, &[u8], Vec<u8>) =
            match signed.scheme {
                Scheme::Ecdsa(hash) => {
                    // Keys and signatures are handed over as the RustCrypto
                    // parsers accepted them (the point uncompressed, the
                    // signature as its two scalars, each checked to be in
                    // range), so that ring sees exactly that.
                    let invalid = |_| SigFailure::Invalid;
                    match key.ec.as_ref().map_err(Clone::clone)? {
                        EcPublicKey::P256(_, point) => {
                            let sig = p256::ecdsa::Signature::from_der(signed.signature)
                                .map_err(invalid)?;
                            // ring's fixed form (r || s) where it has one:
                            // no DER to write and read again.
                            match hash {
                                Hash::Sha256 => (
                                    &rs::ECDSA_P256_SHA256_FIXED,
                                    &point[..],
                                    sig.to_bytes().to_vec(),
                                ),
                                Hash::Sha384 => (
                                    &rs::ECDSA_P256_SHA384_ASN1,
                                    &point[..],
                                    sig.to_der().as_bytes().to_vec(),
                                ),
                                // Not produced by `scheme`; ring has no SHA-512 here.
                                Hash::Sha512 => return rust_crypto::check(key, signed),
                            }
                        }
                        EcPublicKey::P384(_, point) => {
                            let sig = p384::ecdsa::Signature::from_der(signed.signature)
                                .map_err(invalid)?;
                            match hash {
                                Hash::Sha384 => (
                                    &rs::ECDSA_P384_SHA384_FIXED,
                                    &point[..],
                                    sig.to_bytes().to_vec(),
                                ),
                                Hash::Sha256 => (
                                    &rs::ECDSA_P384_SHA256_ASN1,
                                    &point[..],
                                    sig.to_der().as_bytes().to_vec(),
                                ),
                                Hash::Sha512 => return rust_crypto::check(key, signed),
                            }
                        }
                    }
                }
                Scheme::RsaPkcs1(hash) => {
                    let (_, pkcs1) = key.rsa.as_ref().map_err(Clone::clone)?;
                    let algorithm: &dyn rs::VerificationAlgorithm = match hash {
                        Hash::Sha256 => &rs::RSA_PKCS1_2048_8192_SHA256,
                        Hash::Sha384 => &rs::RSA_PKCS1_2048_8192_SHA384,
                        Hash::Sha512 => &rs::RSA_PKCS1_2048_8192_SHA512,
                    };
                    (algorithm, &pkcs1[..], signed.signature.to_vec())
                }
            };
        rs::UnparsedPublicKey::new(algorithm, public)
            .verify(signed.tbs, &signature)
            .map_err(|_| SigFailure::Invalid)
    }
}

/// An ECDSA public key on a curve this verifier accepts, with its
/// uncompressed point (what ring reads).
#[cfg_attr(not(feature = "ring"), allow(dead_code))]
pub(crate) enum EcPublicKey {
    P256(p256::ecdsa::VerifyingKey, Box<[u8]>),
    P384(p384::ecdsa::VerifyingKey, Box<[u8]>),
}

pub(crate) fn ec_key(spki: &SubjectPublicKeyInfoOwned) -> Result<EcPublicKey, SigFailure> {
    if spki.algorithm.oid != EC_PUBLIC_KEY {
        // An ECDSA signature cannot come from a key of another type.
        return Err(SigFailure::Invalid);
    }
    let curve = spki
        .algorithm
        .parameters
        .as_ref()
        .and_then(|p| p.decode_as::<ObjectIdentifier>().ok());
    match curve {
        Some(SECP256R1 | SECP384R1) => {}
        Some(other) => {
            return Err(SigFailure::UnsupportedKey(format!(
                "EC key on curve {other} (accepted: P-256, P-384)"
            )));
        }
        None => {
            return Err(SigFailure::UnsupportedKey(
                "EC key without a named curve (explicit or missing parameters)".into(),
            ));
        }
    }
    let bytes = spki.subject_public_key.as_bytes().ok_or_else(|| {
        SigFailure::UnsupportedKey("EC public key BIT STRING has unused bits".into())
    })?;
    let not_a_point = |name: &str| {
        SigFailure::UnsupportedKey(format!("EC public key is not a valid {name} point"))
    };
    if curve == Some(SECP384R1) {
        p384::ecdsa::VerifyingKey::from_sec1_bytes(bytes)
            .map(|key| {
                let point = key.to_sec1_point(false).as_bytes().into();
                EcPublicKey::P384(key, point)
            })
            .map_err(|_| not_a_point("P-384"))
    } else {
        p256::ecdsa::VerifyingKey::from_sec1_bytes(bytes)
            .map(|key| {
                let point = key.to_sec1_point(false).as_bytes().into();
                EcPublicKey::P256(key, point)
            })
            .map_err(|_| not_a_point("P-256"))
    }
}

pub(crate) fn rsa_key(spki: &SubjectPublicKeyInfoOwned) -> Result<rsa::RsaPublicKey, SigFailure> {
    use rsa::pkcs1::DecodeRsaPublicKey;
    use rsa::traits::PublicKeyParts;
    if spki.algorithm.oid != RSA_ENCRYPTION {
        return Err(SigFailure::Invalid);
    }
    let bytes = spki.subject_public_key.as_bytes().ok_or_else(|| {
        SigFailure::UnsupportedKey("RSA public key BIT STRING has unused bits".into())
    })?;
    let key = rsa::RsaPublicKey::from_pkcs1_der(bytes)
        .map_err(|e| SigFailure::UnsupportedKey(format!("RSA public key: {e}")))?;
    let n = key.n_bytes();
    let bits = modulus_bits(&n);
    if !(RSA_MIN_BITS..=RSA_MAX_BITS).contains(&bits) {
        return Err(SigFailure::UnsupportedKey(format!(
            "RSA key of {bits} bits (accepted: {RSA_MIN_BITS} to {RSA_MAX_BITS})"
        )));
    }
    if !bits.is_multiple_of(8) {
        return Err(SigFailure::UnsupportedKey(format!(
            "RSA key of {bits} bits, not a whole number of bytes (CA/B Forum §6.1.5)"
        )));
    }
    // An even exponent (2 included) is not an RSA key; ring refuses it too.
    if key.e_bytes().last().is_none_or(|low| low % 2 == 0) {
        return Err(SigFailure::UnsupportedKey(
            "RSA public exponent is even (it must be odd and at least 3)".into(),
        ));
    }
    Ok(key)
}

pub(crate) fn modulus_bits(n: &[u8]) -> usize {
    let mut bytes = n.iter().skip_while(|b| **b == 0);
    match bytes.next() {
        None => 0,
        Some(first) => 8 * bytes.count() + (8 - first.leading_zeros() as usize),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modulus_bits_counts_from_the_first_set_bit() {
        assert_eq!(modulus_bits(&[0x00, 0x80, 0x00]), 16);
        assert_eq!(modulus_bits(&[0x01, 0x00]), 9);
        assert_eq!(modulus_bits(&[]), 0);
    }
}
