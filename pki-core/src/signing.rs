//! One signing interface for a CA's key, wherever the key lives.
//!
//! A [`SigningKey`] knows its algorithm and its public key and signs a
//! message (a TBSCertificate), the shape of rustls's and rcgen's
//! `SigningKey`. [`PrivateKey`] is one (the key in this process); with the
//! `pkcs11` feature, `Pkcs11Key` is another (a key object in a PKCS#11
//! token, which never leaves it). Issuance takes either through
//! [`crate::Issuer`].

use crate::error::{Error, Result};
use crate::key::{KeyAlgorithm, PrivateKey};
use crate::provider::CryptoProvider;
use spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};

/// A key that signs certificates: in this process or in a token.
///
/// Implementations sign with the hash pki pairs with each algorithm
/// ([`signature_algorithm`]): ECDSA P-256 with SHA-256, P-384 with SHA-384,
/// RSA with PKCS#1 v1.5 and SHA-256; the signature is what a certificate's
/// signatureValue BIT STRING holds (a DER `ECDSA-Sig-Value` for ECDSA).
pub trait SigningKey: Send + Sync {
    /// The key's algorithm.
    fn algorithm(&self) -> KeyAlgorithm;

    /// The public half as a SubjectPublicKeyInfo.
    ///
    /// # Errors
    ///
    /// A key in this process fails only when its public key cannot be encoded,
    /// or for a stored EC point that is not on its curve
    /// ([`Error::KeyDecode`]); other implementations return their own error.
    fn public_key(&self) -> Result<SubjectPublicKeyInfoOwned>;

    /// Signs `message`. `provider` chooses the backend of a key in this
    /// process (see [`CryptoProvider`]); a key in a token signs with the
    /// token and ignores it.
    ///
    /// # Errors
    ///
    /// A key in this process returns [`Error::Crypto`] when the signer fails
    /// and [`Error::KeyDecode`] when a stored key's halves disagree. A key in a
    /// token returns [`Error::Pkcs11TokenNotOpen`] when no token was opened for
    /// it and the `Pkcs11…` variants the token gives.
    fn sign(&self, message: &[u8], provider: &CryptoProvider) -> Result<Vec<u8>>;

    /// The AlgorithmIdentifier of this key's signatures. The default is
    /// [`signature_algorithm`] of [`SigningKey::algorithm`].
    ///
    /// # Errors
    ///
    /// The default does not fail; an implementation may return its own error
    /// when it cannot name its algorithm.
    fn signature_algorithm(&self) -> Result<AlgorithmIdentifierOwned> {
        Ok(signature_algorithm(self.algorithm()))
    }
}

impl SigningKey for PrivateKey {
    fn algorithm(&self) -> KeyAlgorithm {
        PrivateKey::algorithm(self)
    }

    fn public_key(&self) -> Result<SubjectPublicKeyInfoOwned> {
        PrivateKey::public_key(self)
    }

    fn sign(&self, message: &[u8], provider: &CryptoProvider) -> Result<Vec<u8>> {
        PrivateKey::sign(self, message, provider)
    }

    fn signature_algorithm(&self) -> Result<AlgorithmIdentifierOwned> {
        PrivateKey::signature_algorithm(self)
    }
}

/// ecdsa-with-SHA256 (1.2.840.10045.4.3.2), RFC 5758 §3.2.
const ECDSA_WITH_SHA256: der::asn1::ObjectIdentifier =
    der::asn1::ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.2");
/// ecdsa-with-SHA384 (1.2.840.10045.4.3.3), RFC 5758 §3.2.
const ECDSA_WITH_SHA384: der::asn1::ObjectIdentifier =
    der::asn1::ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.3");
/// sha256WithRSAEncryption (1.2.840.113549.1.1.11), RFC 4055 §5.
const SHA256_WITH_RSA: der::asn1::ObjectIdentifier =
    der::asn1::ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.11");

/// The AlgorithmIdentifier of the signatures pki makes with a key of
/// `algorithm`: ecdsa-with-SHA256 or -SHA384 without parameters (RFC 5758
/// §3.2), sha256WithRSAEncryption with NULL parameters (RFC 4055 §5) for
/// every RSA size. The same bytes as an in-process key's.
pub fn signature_algorithm(algorithm: KeyAlgorithm) -> AlgorithmIdentifierOwned {
    match algorithm {
        KeyAlgorithm::EcdsaP256 => AlgorithmIdentifierOwned {
            oid: ECDSA_WITH_SHA256,
            parameters: None,
        },
        KeyAlgorithm::EcdsaP384 => AlgorithmIdentifierOwned {
            oid: ECDSA_WITH_SHA384,
            parameters: None,
        },
        KeyAlgorithm::Rsa2048 | KeyAlgorithm::Rsa3072 | KeyAlgorithm::Rsa4096 => {
            AlgorithmIdentifierOwned {
                oid: SHA256_WITH_RSA,
                parameters: Some(der::asn1::Null.into()),
            }
        }
    }
}

/// Whether `key` is the private half of `spki`. A key whose public half
/// cannot be read is not.
pub(crate) fn key_matches(key: &dyn SigningKey, spki: &SubjectPublicKeyInfoOwned) -> bool {
    key.public_key().is_ok_and(|own| &own == spki)
}

/// The error of a signature that came back empty: a token or an
/// implementation that signs nothing must not yield a certificate.
pub(crate) fn check_signature(signature: &[u8]) -> Result<()> {
    if signature.is_empty() {
        return Err(Error::crypto("the signing key returned an empty signature"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;

    #[test]
    fn signature_algorithm_of_each_key_type_is_the_in_process_keys_own() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        for algorithm in [
            KeyAlgorithm::EcdsaP256,
            KeyAlgorithm::EcdsaP384,
            KeyAlgorithm::Rsa2048,
        ] {
            let key =
                PrivateKey::generate_with(&CryptoProvider::rust_crypto(), algorithm, &mut rng)
                    .expect("key");
            let own = PrivateKey::signature_algorithm(&key).expect("own");
            assert_eq!(signature_algorithm(algorithm), own, "{algorithm}");
            let encoded = |a: &AlgorithmIdentifierOwned| der::Encode::to_der(a).expect("der");
            assert_eq!(encoded(&signature_algorithm(algorithm)), encoded(&own));
        }
        // Every RSA size signs with SHA-256.
        for algorithm in [KeyAlgorithm::Rsa3072, KeyAlgorithm::Rsa4096] {
            assert_eq!(
                signature_algorithm(algorithm),
                signature_algorithm(KeyAlgorithm::Rsa2048)
            );
        }
    }
}
