//! P-256 and P-384 key generation and signing with ring, when the crypto
//! provider in force is ring's (`feature = "ring"`; see
//! [`crate::CryptoProvider`]).
//!
//! ring draws its randomness from the operating system itself (its RNG
//! trait is sealed), so what it makes is not a function of the RNG an
//! engine is handed: the RustCrypto provider keeps that property (a seeded
//! RNG gives the same keys, serials and certificates every time), and ring
//! generates keys and signs several times faster.

use super::curve::Curve;
use super::{EcKey, PrivateKey};
use crate::error::{Error, Result};
use std::sync::Arc;
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
                let scalar = C::secret_bytes(&*self.secret().ok()?);
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

/// Signs `message` with ring: the DER signature, or None when ring cannot
/// use the key (the RustCrypto path then signs, and reports what is wrong).
pub(super) fn sign<C: Curve>(key: &EcKey<C>, message: &[u8]) -> Option<Result<Vec<u8>>> {
    let pair = key.ring_pair()?;
    Some(
        pair.sign(&ring::rand::SystemRandom::new(), message)
            .map(|signature| signature.as_ref().to_vec())
            .map_err(|_| failed("sign")),
    )
}
