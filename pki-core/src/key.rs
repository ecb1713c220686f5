//! Private keys: ECDSA P-256 (the default), ECDSA P-384 and RSA
//! 2048/3072/4096.
//!
//! Keys are generated from an injected RNG, written as PKCS#8, and read from
//! PKCS#8, SEC1 (`EC PRIVATE KEY`) or PKCS#1 (`RSA PRIVATE KEY`). The private
//! material lives in types that zeroize on drop, and every encoding we hand
//! out is wrapped in [`Zeroizing`].

use crate::error::{Error, Result};
use crate::pem;
use curve::{Curve, P256, P384};
use der::Decode;
use p256::pkcs8::{DecodePrivateKey, EncodePrivateKey, EncodePublicKey};
use rand_core::CryptoRng;
use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::traits::PublicKeyParts;
use sha2::Sha256;
use spki::SubjectPublicKeyInfoOwned;
use std::fmt;
use std::sync::OnceLock;
use zeroize::Zeroizing;

mod algorithm;
pub use algorithm::KeyAlgorithm;

/// When an EC key's stored public point is compared with the one its
/// scalar gives.
#[derive(Clone, Copy, PartialEq, Eq)]
enum PointCheck {
    /// While reading: keys from outside.
    Now,
    /// At the first signature: keys a store wrote (see
    /// [`PrivateKey::from_stored_pem`]).
    AtFirstSignature,
}

mod curve;
#[cfg(feature = "ring")]
mod fast;

#[derive(Clone)]
enum KeyInner {
    P256(Box<EcKey<P256>>),
    P384(Box<EcKey<P384>>),
    Rsa(Box<rsa::pkcs1v15::SigningKey<Sha256>>),
}

/// An EC key (P-256 or P-384), ready to sign only once it has to.
///
/// Making a signing key computes the public point (a scalar multiplication),
/// and a store holding thousands of leaves would pay that for every key on
/// every load although a no-op reconcile signs nothing. So a key read from
/// PKCS#8 keeps the file's own DER, which holds its scalar and public
/// point; the signing key is made on first use, and then the point it
/// derives must equal the one the file carried.
struct EcKey<C: Curve> {
    material: Material<C>,
    /// Boxed: most keys a store holds never sign, and inline it would be
    /// half the key.
    signing: OnceLock<Box<C::Signing>>,
    /// The key as ring's key pair, once it signed through the OS RNG.
    #[cfg(feature = "ring")]
    ring: OnceLock<Option<std::sync::Arc<ring::signature::EcdsaKeyPair>>>,
}

/// What an [`EcKey`] is made from. Keys read from PKCS#8 (every key pki
/// generates is one) keep only the file: a store of 10,000 leaves holds
/// 10,000 of them, and a separate scalar would be a third of each.
enum Material<C: Curve> {
    /// PKCS#8 DER that stores the uncompressed public point beside the
    /// scalar, handed out again unchanged; the scalar is read from it again
    /// when the key first signs.
    Pkcs8 {
        der: Zeroizing<Box<[u8]>>,
        /// Where `der` holds the public point.
        public_at: u16,
    },
    /// The scalar alone (a SEC1 key, a PKCS#8 key without the uncompressed
    /// point, or a key made in memory). Boxed: rare, and inline it would be
    /// the larger variant.
    Scalar(Box<C::Secret>),
}

// By hand: a derive would ask `C: Clone` of the marker type.
impl<C: Curve> Clone for Material<C> {
    fn clone(&self) -> Self {
        match self {
            Material::Pkcs8 { der, public_at } => Material::Pkcs8 {
                der: der.clone(),
                public_at: *public_at,
            },
            Material::Scalar(secret) => Material::Scalar(secret.clone()),
        }
    }
}

// By hand: a derive would ask `C: Clone` of the marker type.
impl<C: Curve> Clone for EcKey<C> {
    fn clone(&self) -> Self {
        EcKey {
            material: self.material.clone(),
            signing: self.signing.clone(),
            #[cfg(feature = "ring")]
            ring: self.ring.clone(),
        }
    }
}

impl<C: Curve> EcKey<C> {
    fn from_signing_key(key: C::Signing) -> Self {
        let signing = OnceLock::new();
        let secret = C::secret_of(&key);
        let _ = signing.set(Box::new(key));
        EcKey {
            material: Material::Scalar(Box::new(secret)),
            signing,
            #[cfg(feature = "ring")]
            ring: OnceLock::new(),
        }
    }

    /// The private scalar: the one held, or read again from the PKCS#8 DER
    /// (which was read once already, so this does not fail in practice).
    fn secret(&self) -> Result<std::borrow::Cow<'_, C::Secret>> {
        match &self.material {
            Material::Scalar(secret) => Ok(std::borrow::Cow::Borrowed(secret)),
            Material::Pkcs8 { der, .. } => {
                let info = pkcs8::PrivateKeyInfoRef::from_der(der);
                let sec1 = info.and_then(|info| sec1_of(&info));
                let secret = sec1
                    .map_err(|e| e.to_string())
                    .and_then(|sec1| C::secret_from_slice(sec1.private_key));
                secret
                    .map(std::borrow::Cow::Owned)
                    .map_err(|e| Error::KeyDecode {
                        reason: format!("PKCS#8 {} key: {e}", C::NAME),
                    })
            }
        }
    }

    /// The signing key; the first call derives the public point and checks it
    /// against the stored one, so a file whose two halves disagree can never
    /// sign.
    fn signing_key(&self) -> Result<&C::Signing> {
        if let Some(key) = self.signing.get() {
            return Ok(key);
        }
        let key = C::signing(&*self.secret()?);
        if let Some(stored) = self.stored_public()
            && C::point(&key).as_slice() != stored
        {
            return Err(Error::KeyDecode {
                reason: format!(
                    "the {} key's stored public point does not belong to its private scalar",
                    C::NAME
                ),
            });
        }
        Ok(self.signing.get_or_init(|| Box::new(key)))
    }

    /// The uncompressed public point stored beside the scalar, if any.
    fn stored_public(&self) -> Option<&[u8]> {
        match &self.material {
            Material::Pkcs8 { der, public_at } => {
                let at = usize::from(*public_at);
                der.get(at..at + C::POINT_LEN)
            }
            Material::Scalar(_) => None,
        }
    }

    /// The public key's SubjectPublicKeyInfo, from the stored point when
    /// there is one (checked to be on the curve: a point decode, no scalar
    /// multiplication). Made from its fields, not encoded and decoded again:
    /// every leaf issued asks for it once.
    fn public_key_info(&self) -> Result<SubjectPublicKeyInfoOwned> {
        let point = match (self.stored_public(), self.signing.get()) {
            (_, Some(key)) => std::borrow::Cow::Owned(C::point(key)),
            (Some(stored), None) => {
                C::verifying_from_point(stored).ok_or_else(|| Error::KeyDecode {
                    reason: format!(
                        "the {} key's stored public point is not on the curve",
                        C::NAME
                    ),
                })?;
                std::borrow::Cow::Borrowed(stored)
            }
            (None, None) => std::borrow::Cow::Owned(C::point(self.signing_key()?)),
        };
        Ok(SubjectPublicKeyInfoOwned {
            algorithm: spki::AlgorithmIdentifierOwned {
                oid: EC_PUBLIC_KEY,
                parameters: Some(der::Any::encode_from(&C::OID).map_err(Error::crypto)?),
            },
            subject_public_key: der::asn1::BitString::from_bytes(&point).map_err(Error::crypto)?,
        })
    }
}

impl<C: Curve> EcKey<C> {
    /// Reads the EC key of a PKCS#8 `PrivateKeyInfo` whose algorithm
    /// names this curve.
    fn from_pkcs8(
        der: &[u8],
        info: pkcs8::PrivateKeyInfoRef<'_>,
        check: PointCheck,
    ) -> Result<PrivateKey> {
        let bad = |e: &dyn fmt::Display| Error::KeyDecode {
            reason: format!("PKCS#8 {} key: {e}", C::NAME),
        };
        let sec1 = sec1_of(&info).map_err(|e| bad(&e))?;
        if let Some(curve) = sec1.parameters.and_then(|p| p.named_curve())
            && curve != C::OID
        {
            return Err(bad(&format!("inner parameters name curve {curve}")));
        }
        let secret = C::secret_from_slice(sec1.private_key).map_err(|e| bad(&e))?;
        // Only the uncompressed form can be compared byte for byte with
        // what we derive; anything else is derived on first use.
        let public_at = sec1
            .public_key
            .filter(|p| p.len() == C::POINT_LEN && p[0] == 4)
            .and_then(|p| {
                // A slice of `der`: kept as its position in the copy below.
                let at = (p.as_ptr() as usize).wrapping_sub(der.as_ptr() as usize);
                let end = at.checked_add(p.len())?;
                (der.get(at..end) == Some(p)).then_some(u16::try_from(at).ok()?)
            });
        let material = match public_at {
            Some(public_at) => Material::Pkcs8 {
                der: Zeroizing::new(der.into()),
                public_at,
            },
            None => Material::Scalar(Box::new(secret)),
        };
        let key = EcKey::<C> {
            material,
            signing: OnceLock::new(),
            #[cfg(feature = "ring")]
            ring: OnceLock::new(),
        };
        if check == PointCheck::Now {
            key.signing_key()?;
        }
        Ok(PrivateKey {
            inner: C::inner(key),
        })
    }

    /// Reads a SEC1 `ECPrivateKey` of this curve; a public point it
    /// carries must be the scalar's.
    fn from_sec1(der: &[u8]) -> Result<PrivateKey> {
        let secret = C::secret_from_sec1_der(der).map_err(|e| Error::KeyDecode {
            reason: format!("SEC1 {} key: {e}", C::NAME),
        })?;
        Ok(PrivateKey {
            inner: C::inner(EcKey::from_signing_key(C::signing(&secret))),
        })
    }

    /// PKCS#8 DER: the bytes the key was read from, or a new encoding.
    fn pkcs8_der(&self) -> Result<Zeroizing<Vec<u8>>> {
        if let Material::Pkcs8 { der, .. } = &self.material {
            return Ok(Zeroizing::new(der.to_vec()));
        }
        let doc = C::pkcs8(self.signing_key()?).map_err(Error::crypto)?;
        Ok(Zeroizing::new(doc.as_bytes().to_vec()))
    }

    /// Signs `message` with ring under the ring provider, else with
    /// RustCrypto's deterministic ECDSA (RFC 6979): the DER signature.
    fn sign(&self, message: &[u8], with_ring: bool) -> Result<Vec<u8>> {
        #[cfg(feature = "ring")]
        if with_ring && let Some(signature) = fast::sign(self, message) {
            return signature;
        }
        #[cfg(not(feature = "ring"))]
        let _ = with_ring;
        C::sign(self.signing_key()?, message).map_err(Error::crypto)
    }
}

/// The SEC1 `ECPrivateKey` inside an EC PKCS#8 key.
fn sec1_of<'a>(info: &pkcs8::PrivateKeyInfoRef<'a>) -> der::Result<sec1::EcPrivateKey<'a>> {
    sec1::EcPrivateKey::from_der(info.private_key.as_bytes())
}

/// A private key. The secret zeroizes when the value (and every clone) is dropped.
#[derive(Clone)]
pub struct PrivateKey {
    inner: KeyInner,
}

impl fmt::Debug for PrivateKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PrivateKey({})", self.algorithm())
    }
}

/// OIDs used to recognise PKCS#8 key algorithms.
const RSA_ENCRYPTION: der::asn1::ObjectIdentifier =
    der::asn1::ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
const EC_PUBLIC_KEY: der::asn1::ObjectIdentifier =
    der::asn1::ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");

impl PrivateKey {
    /// Generates a new key of the given type with the default provider
    /// ([`crate::CryptoProvider::get_default`]).
    ///
    /// # Errors
    ///
    /// The errors of [`PrivateKey::generate_with`].
    pub fn generate<R: CryptoRng + ?Sized>(algorithm: KeyAlgorithm, rng: &mut R) -> Result<Self> {
        Self::generate_with(&crate::CryptoProvider::get_default(), algorithm, rng)
    }

    /// Generates a new key of the given type with `provider`: from `rng`
    /// under RustCrypto (same RNG stream, same key), an EC key from the
    /// operating system through ring under ring.
    ///
    /// # Errors
    ///
    /// [`Error::Crypto`] when RSA key generation fails, and
    /// [`Error::KeyDecode`] when ring cannot generate an EC key (under the ring
    /// backend). P-256 and P-384 keys from `rng` under RustCrypto do not fail.
    pub fn generate_with<R: CryptoRng + ?Sized>(
        provider: &crate::CryptoProvider,
        algorithm: KeyAlgorithm,
        rng: &mut R,
    ) -> Result<Self> {
        #[cfg(feature = "ring")]
        if provider.signing() == crate::Backend::Ring {
            match algorithm {
                KeyAlgorithm::EcdsaP256 => return fast::generate::<P256>(),
                KeyAlgorithm::EcdsaP384 => return fast::generate::<P384>(),
                _ => {}
            }
        }
        #[cfg(not(feature = "ring"))]
        let _ = provider;
        let inner = match algorithm {
            KeyAlgorithm::EcdsaP256 => P256::inner(EcKey::from_signing_key(P256::generate(rng))),
            KeyAlgorithm::EcdsaP384 => P384::inner(EcKey::from_signing_key(P384::generate(rng))),
            KeyAlgorithm::Rsa2048 | KeyAlgorithm::Rsa3072 | KeyAlgorithm::Rsa4096 => {
                let bits = match algorithm {
                    KeyAlgorithm::Rsa2048 => 2048,
                    KeyAlgorithm::Rsa3072 => 3072,
                    _ => 4096,
                };
                let key = rsa::RsaPrivateKey::new(rng, bits).map_err(Error::crypto)?;
                KeyInner::Rsa(Box::new(rsa::pkcs1v15::SigningKey::new(key)))
            }
        };
        Ok(PrivateKey { inner })
    }

    /// The key's algorithm.
    pub fn algorithm(&self) -> KeyAlgorithm {
        match &self.inner {
            KeyInner::P256(_) => KeyAlgorithm::EcdsaP256,
            KeyInner::P384(_) => KeyAlgorithm::EcdsaP384,
            KeyInner::Rsa(k) => match k.as_ref().as_ref().size() * 8 {
                0..=2048 => KeyAlgorithm::Rsa2048,
                2049..=3072 => KeyAlgorithm::Rsa3072,
                _ => KeyAlgorithm::Rsa4096,
            },
        }
    }

    /// The public half as a SubjectPublicKeyInfo.
    ///
    /// # Errors
    ///
    /// [`Error::KeyDecode`] when an EC key read by
    /// [`PrivateKey::from_stored_pem`] has a stored public point that is not on
    /// its curve, or whose scalar cannot be read again; [`Error::Crypto`] when
    /// the public key cannot be encoded (not expected for a key pki-core read
    /// or made).
    pub fn public_key(&self) -> Result<SubjectPublicKeyInfoOwned> {
        let der = match &self.inner {
            KeyInner::P256(k) => return k.public_key_info(),
            KeyInner::P384(k) => return k.public_key_info(),
            KeyInner::Rsa(k) => k
                .as_ref()
                .as_ref()
                .to_public_key()
                .to_public_key_der()
                .map_err(Error::crypto)?,
        };
        SubjectPublicKeyInfoOwned::from_der(der.as_bytes()).map_err(Error::crypto)
    }

    /// The public key's SubjectPublicKeyInfo DER.
    ///
    /// # Errors
    ///
    /// The errors of [`PrivateKey::public_key`], and [`Error::Crypto`] when its
    /// DER cannot be encoded.
    pub fn public_key_der(&self) -> Result<Vec<u8>> {
        der::Encode::to_der(&self.public_key()?).map_err(Error::crypto)
    }

    /// PKCS#8 DER of the private key.
    ///
    /// # Errors
    ///
    /// [`Error::Crypto`] when the encoder fails (not expected for a key
    /// pki-core read or made). An EC key read from PKCS#8 gives back the
    /// bytes it was read from, unchecked.
    pub fn to_pkcs8_der(&self) -> Result<Zeroizing<Vec<u8>>> {
        let doc = match &self.inner {
            KeyInner::P256(k) => return k.pkcs8_der(),
            KeyInner::P384(k) => return k.pkcs8_der(),
            KeyInner::Rsa(k) => k.as_ref().as_ref().to_pkcs8_der(),
        }
        .map_err(Error::crypto)?;
        Ok(Zeroizing::new(doc.as_bytes().to_vec()))
    }

    /// PKCS#8 PEM (`PRIVATE KEY`) of the private key.
    ///
    /// # Errors
    ///
    /// The errors of [`PrivateKey::to_pkcs8_der`].
    pub fn to_pkcs8_pem(&self) -> Result<Zeroizing<String>> {
        let der = self.to_pkcs8_der()?;
        Ok(Zeroizing::new(pem::encode("PRIVATE KEY", &der)))
    }

    /// Reads a key from PEM: `PRIVATE KEY` (PKCS#8), `EC PRIVATE KEY` (SEC1)
    /// or `RSA PRIVATE KEY` (PKCS#1). The input must hold exactly one key block;
    /// other blocks (such as a certificate in the same file) are ignored.
    ///
    /// An EC key whose file also carries a public point is checked: the
    /// point must be the one its private scalar gives.
    ///
    /// # Errors
    ///
    /// - [`Error::Pem`] or [`Error::Der`] when the input cannot be read (see
    ///   [`crate::pem::read_blocks`]);
    /// - [`Error::NoPemBlock`] when it holds no private key block, and
    ///   [`Error::KeyDecode`] when it holds more than one;
    /// - [`Error::UnsupportedKey`] for another `… PRIVATE KEY` label (such as
    ///   `ENCRYPTED PRIVATE KEY`);
    /// - the errors of [`PrivateKey::from_pkcs8_der`],
    ///   [`PrivateKey::from_sec1_der`] or [`PrivateKey::from_pkcs1_der`] for
    ///   the key itself (an EC key whose stored public point does not match its
    ///   scalar is an [`Error::KeyDecode`]).
    pub fn from_pem(input: &[u8]) -> Result<Self> {
        Self::from_pem_checked(input, PointCheck::Now)
    }

    /// Like [`PrivateKey::from_pem`], for keys a store wrote and vouches for
    /// (its integrity check has already matched the bytes): an EC key's
    /// public point is taken from the file, and checked against the private
    /// scalar at the key's first signature instead of now. Loading a store
    /// of thousands of leaves then costs no scalar multiplication per key.
    /// A key whose two halves disagree still never signs, but until then
    /// [`PrivateKey::public_key`] reports the stored point: do not use this
    /// for keys from outside.
    ///
    /// # Errors
    ///
    /// The errors of [`PrivateKey::from_pem`], except that a stored EC public
    /// point that does not match its scalar is found at the first signature,
    /// not here.
    pub fn from_stored_pem(input: &[u8]) -> Result<Self> {
        Self::from_pem_checked(input, PointCheck::AtFirstSignature)
    }

    fn from_pem_checked(input: &[u8], check: PointCheck) -> Result<Self> {
        let blocks = pem::read_blocks(input)?;
        let mut keys = blocks.iter().filter(|b| b.label.ends_with("PRIVATE KEY"));
        let Some(block) = keys.next() else {
            return Err(Error::NoPemBlock {
                what: "private key input (expected PRIVATE KEY, EC PRIVATE KEY or RSA PRIVATE KEY)",
            });
        };
        if keys.next().is_some() {
            return Err(Error::KeyDecode {
                reason: "input holds more than one private key".into(),
            });
        }
        match block.label.as_str() {
            "PRIVATE KEY" => Self::from_pkcs8_der_checked(&block.der, check),
            "EC PRIVATE KEY" => Self::from_sec1_der(&block.der),
            "RSA PRIVATE KEY" => Self::from_pkcs1_der(&block.der),
            other => Err(Error::UnsupportedKey {
                reason: format!("PEM label \"{other}\" (encrypted keys are not supported)"),
            }),
        }
    }

    /// Reads a PKCS#8 DER private key (P-256, P-384 or RSA ≥ 2048 bits).
    /// An EC key's stored public point, when present, must match its scalar.
    ///
    /// # Errors
    ///
    /// - [`Error::KeyDecode`] when `der` is not a PKCS#8 PrivateKeyInfo, its
    ///   key cannot be decoded, an EC key's stored public point does not match
    ///   its scalar, or an RSA key is inconsistent;
    /// - [`Error::UnsupportedKey`] for another algorithm than RSA or EC, an EC
    ///   curve other than P-256 or P-384, or an RSA key over 8192 bits;
    /// - [`Error::RsaKeyTooSmall`] for an RSA key under 2048 bits.
    pub fn from_pkcs8_der(der: &[u8]) -> Result<Self> {
        Self::from_pkcs8_der_checked(der, PointCheck::Now)
    }

    fn from_pkcs8_der_checked(der: &[u8], check: PointCheck) -> Result<Self> {
        let info = pkcs8::PrivateKeyInfoRef::from_der(der).map_err(|e| Error::KeyDecode {
            reason: format!("not a PKCS#8 PrivateKeyInfo: {e}"),
        })?;
        let oid = info.algorithm.oid;
        if oid == RSA_ENCRYPTION {
            let key = rsa::RsaPrivateKey::from_pkcs8_der(der).map_err(|e| Error::KeyDecode {
                reason: format!("PKCS#8 RSA key: {e}"),
            })?;
            Self::from_rsa(key)
        } else if oid == EC_PUBLIC_KEY {
            let curve = info
                .algorithm
                .parameters
                .as_ref()
                .and_then(|p| p.decode_as::<der::asn1::ObjectIdentifier>().ok());
            match curve {
                Some(P256::OID) => EcKey::<P256>::from_pkcs8(der, info, check),
                Some(P384::OID) => EcKey::<P384>::from_pkcs8(der, info, check),
                other => Err(Error::UnsupportedKey {
                    reason: format!(
                        "EC key on curve {} (supported: P-256, P-384)",
                        other
                            .map(|c| c.to_string())
                            .unwrap_or_else(|| "<none>".into())
                    ),
                }),
            }
        } else {
            Err(Error::UnsupportedKey {
                reason: format!("PKCS#8 key algorithm {oid} (supported: P-256, P-384, RSA)"),
            })
        }
    }

    /// Reads a SEC1 DER EC private key (P-256 or P-384). The curve is the
    /// one the key names, or without parameters the one its scalar's
    /// length gives.
    ///
    /// # Errors
    ///
    /// [`Error::KeyDecode`] when `der` is not a SEC1 EC private key, or names
    /// no curve and has a scalar that fits neither curve;
    /// [`Error::UnsupportedKey`] for a curve other than P-256 or P-384.
    pub fn from_sec1_der(der: &[u8]) -> Result<Self> {
        let bad = |e: &dyn fmt::Display| Error::KeyDecode {
            reason: format!("SEC1 EC key: {e}"),
        };
        let sec1 = sec1::EcPrivateKey::from_der(der).map_err(|e| bad(&e))?;
        let curve = match sec1.parameters.and_then(|p| p.named_curve()) {
            Some(oid) => oid,
            None if sec1.private_key.len() == P256::SCALAR_LEN => P256::OID,
            None if sec1.private_key.len() == P384::SCALAR_LEN => P384::OID,
            None => {
                return Err(bad(&format!(
                    "no named curve, and a scalar of {} bytes fits neither P-256 nor P-384",
                    sec1.private_key.len()
                )));
            }
        };
        match curve {
            P256::OID => EcKey::<P256>::from_sec1(der),
            P384::OID => EcKey::<P384>::from_sec1(der),
            other => Err(Error::UnsupportedKey {
                reason: format!("EC key on curve {other} (supported: P-256, P-384)"),
            }),
        }
    }

    /// Reads a PKCS#1 DER RSA private key (at least 2048 bits).
    ///
    /// # Errors
    ///
    /// [`Error::KeyDecode`] when `der` is not a PKCS#1 RSA private key or the
    /// key is inconsistent, [`Error::RsaKeyTooSmall`] under 2048 bits, and
    /// [`Error::UnsupportedKey`] over 8192 bits.
    pub fn from_pkcs1_der(der: &[u8]) -> Result<Self> {
        let key = rsa::RsaPrivateKey::from_pkcs1_der(der).map_err(|e| Error::KeyDecode {
            reason: format!("PKCS#1 RSA key: {e}"),
        })?;
        Self::from_rsa(key)
    }

    fn from_rsa(key: rsa::RsaPrivateKey) -> Result<Self> {
        let bits = key.size() * 8;
        if bits < 2048 {
            return Err(Error::RsaKeyTooSmall { bits });
        }
        if bits > 8192 {
            return Err(Error::UnsupportedKey {
                reason: format!("RSA key of {bits} bits (at most 8192 are accepted)"),
            });
        }
        key.validate().map_err(|e| Error::KeyDecode {
            reason: format!("RSA key is inconsistent: {e}"),
        })?;
        Ok(PrivateKey {
            inner: KeyInner::Rsa(Box::new(rsa::pkcs1v15::SigningKey::new(key))),
        })
    }

    /// Whether this key is the private half of `spki`.
    pub fn matches(&self, spki: &SubjectPublicKeyInfoOwned) -> bool {
        self.public_key().map(|own| &own == spki).unwrap_or(false)
    }

    /// Whether this key is the private half of `cert`'s public key. The two
    /// SubjectPublicKeyInfo encodings are compared first (DER is canonical,
    /// so equal keys almost always encode alike), which needs no decoding of
    /// the certificate; only when they differ are the decoded forms compared.
    pub fn matches_certificate(&self, cert: &crate::Certificate) -> bool {
        self.public_key_der()
            .is_ok_and(|own| own.as_slice() == cert.spki_der())
            || self.matches(cert.public_key())
    }

    /// The AlgorithmIdentifier of this key's signatures: ecdsa-with-SHA256
    /// or -SHA384 without parameters (RFC 5758 §3.2), sha256WithRSAEncryption
    /// with NULL ones (RFC 4055 §5), as the signature crates give them.
    pub(crate) fn signature_algorithm(&self) -> Result<spki::AlgorithmIdentifierOwned> {
        match &self.inner {
            KeyInner::P256(_) => Ok(P256::signature_algorithm()),
            KeyInner::P384(_) => Ok(P384::signature_algorithm()),
            KeyInner::Rsa(k) => {
                spki::DynSignatureAlgorithmIdentifier::signature_algorithm_identifier(k.as_ref())
                    .map_err(Error::crypto)
            }
        }
    }

    /// Signs `message` (a TBSCertificate) with `provider`'s signing backend
    /// (an EC key signs with ring under the ring provider): the signature
    /// as the certificate's BIT STRING holds it.
    pub(crate) fn sign(&self, message: &[u8], provider: &crate::CryptoProvider) -> Result<Vec<u8>> {
        #[cfg(feature = "ring")]
        let with_ring = provider.signing() == crate::Backend::Ring;
        #[cfg(not(feature = "ring"))]
        let with_ring = {
            let _ = provider;
            false
        };
        match &self.inner {
            KeyInner::P256(k) => k.sign(message, with_ring),
            KeyInner::P384(k) => k.sign(message, with_ring),
            KeyInner::Rsa(k) => {
                use signature::{SignatureEncoding, Signer};
                let signature: rsa::pkcs1v15::Signature =
                    k.as_ref().try_sign(message).map_err(Error::crypto)?;
                Ok(signature.to_vec())
            }
        }
    }
}

#[cfg(test)]
mod tests;
