//! A private key object in a token, as a [`SigningKey`].

use super::errors::Doing;
use super::session::Shared;
use super::uri::{Pkcs11ObjectType, Pkcs11Uri};
use crate::error::{Error, Result};
use crate::key::KeyAlgorithm;
use crate::provider::CryptoProvider;
use crate::signing::SigningKey;
use cryptoki::mechanism::{Mechanism, MechanismType};
use cryptoki::object::{Attribute, AttributeType, KeyType, ObjectClass, ObjectHandle};
use der::{Decode, Encode};
use sha2::Digest;
use spki::SubjectPublicKeyInfoOwned;
use std::fmt;

/// A private key object in a PKCS#11 token: it signs in the token, and
/// only its public key and attributes are in this process.
///
/// Found with [`crate::Pkcs11Token::find_key`] or made with
/// [`crate::Pkcs11Token::generate_key`]. Clones share the token's session.
/// The object handle is kept: a key object destroyed since (by pki or by
/// another program) fails its next signature with
/// [`Error::Pkcs11KeyNotFound`].
#[derive(Clone)]
pub struct Pkcs11Key {
    object: KeyObject,
    algorithm: KeyAlgorithm,
    public_key: SubjectPublicKeyInfoOwned,
}

/// A private key object: where it is and what names it.
#[derive(Clone)]
struct KeyObject {
    shared: Shared,
    handle: ObjectHandle,
    id: Vec<u8>,
    label: Option<String>,
}

impl fmt::Debug for Pkcs11Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pkcs11Key({} {})", self.algorithm, self.uri())
    }
}

/// id-ecPublicKey (RFC 5480 §2.1.1).
const EC_PUBLIC_KEY: der::asn1::ObjectIdentifier =
    der::asn1::ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
/// secp256r1 (RFC 5480 §2.1.1.1).
pub(super) const P256_OID: der::asn1::ObjectIdentifier =
    der::asn1::ObjectIdentifier::new_unwrap("1.2.840.10045.3.1.7");
/// secp384r1 (RFC 5480 §2.1.1.1).
pub(super) const P384_OID: der::asn1::ObjectIdentifier =
    der::asn1::ObjectIdentifier::new_unwrap("1.3.132.0.34");

/// The mechanism a key of `algorithm` signs with, and its name.
pub(super) fn sign_mechanism(algorithm: KeyAlgorithm) -> (MechanismType, &'static str) {
    if algorithm.is_rsa() {
        (MechanismType::SHA256_RSA_PKCS, "CKM_SHA256_RSA_PKCS")
    } else {
        (MechanismType::ECDSA, "CKM_ECDSA")
    }
}

impl Pkcs11Key {
    /// The key of the private key object `handle`: its attributes, its
    /// algorithm and its public key (from the public key object of the same
    /// CKA_ID for EC keys). Refuses a key the token cannot sign with.
    pub(super) fn load(shared: &Shared, handle: ObjectHandle) -> Result<Self> {
        let doing = Doing::new(shared.label(), "reading a private key object");
        let attributes = shared
            .with(|s| {
                s.get_attributes(
                    handle,
                    &[
                        AttributeType::Id,
                        AttributeType::Label,
                        AttributeType::KeyType,
                    ],
                )
            })
            .map_err(|e| doing.error(e))?;
        let (mut id, mut label, mut key_type) = (Vec::new(), None, None);
        for attribute in attributes {
            match attribute {
                Attribute::Id(value) => id = value,
                Attribute::Label(value) => label = String::from_utf8(value).ok(),
                Attribute::KeyType(value) => key_type = Some(value),
                _ => {}
            }
        }
        let object = KeyObject {
            shared: shared.clone(),
            handle,
            id,
            label: label.filter(|l| !l.is_empty()),
        };
        let (algorithm, public_key) = match key_type {
            Some(KeyType::EC) => object.ec_public_key()?,
            Some(KeyType::RSA) => object.rsa_public_key()?,
            other => {
                return Err(Error::UnsupportedKey {
                    reason: format!(
                        "PKCS#11 key {} on token \"{}\" is of type {} (supported: EC P-256, P-384, RSA)",
                        object.uri().describe_object(),
                        shared.label(),
                        other.map_or("unknown".into(), |t| t.to_string())
                    ),
                });
            }
        };
        let (mechanism, name) = sign_mechanism(algorithm);
        if !shared.offers(mechanism) {
            return Err(Error::Pkcs11UnsupportedMechanism {
                token: shared.label().to_owned(),
                mechanism: name.to_owned(),
            });
        }
        Ok(Pkcs11Key {
            object,
            algorithm,
            public_key,
        })
    }

    /// The URI that finds this key again: token, object label, type and id.
    pub fn uri(&self) -> Pkcs11Uri {
        self.object.uri()
    }

    /// The key object's CKA_ID.
    pub fn id(&self) -> &[u8] {
        &self.object.id
    }

    /// The key object's CKA_LABEL, if it has one.
    pub fn label(&self) -> Option<&str> {
        self.object.label.as_deref()
    }

    /// The label of the token that holds the key.
    pub fn token_label(&self) -> &str {
        self.object.shared.label()
    }
}

impl KeyObject {
    fn uri(&self) -> Pkcs11Uri {
        Pkcs11Uri {
            token: Some(self.shared.label().to_owned()),
            object: self.label.clone(),
            object_type: Some(Pkcs11ObjectType::Private),
            id: Some(self.id.clone()),
            ..Pkcs11Uri::default()
        }
    }

    /// The key's public key object (the one with the same CKA_ID).
    fn public_object(&self) -> Result<Option<ObjectHandle>> {
        if self.id.is_empty() {
            return Ok(None);
        }
        let template = [
            Attribute::Class(ObjectClass::PUBLIC_KEY),
            Attribute::Id(self.id.clone()),
        ];
        let doing = Doing::new(self.shared.label(), "finding a public key object");
        let found = self
            .shared
            .with(|s| s.find_objects(&template))
            .map_err(|e| doing.error(e))?;
        Ok(found.first().copied())
    }

    /// The attributes `wanted` of the private key object, or of the public
    /// key object when the private one lacks any of them.
    fn public_attributes(&self, wanted: &[AttributeType]) -> Result<Vec<Attribute>> {
        let doing = Doing::new(self.shared.label(), "reading a public key")
            .object(self.uri().describe_object());
        let read = |handle| {
            self.shared
                .with(|s| s.get_attributes(handle, wanted))
                .map_err(|e| doing.error(e))
        };
        let own = read(self.handle)?;
        if own.len() == wanted.len() {
            return Ok(own);
        }
        match self.public_object()? {
            Some(public) => read(public),
            None => Err(doing.other(&format!(
                "the token holds no public key object with the id of key {}, and the private key does not carry its public key",
                self.uri().describe_object()
            ))),
        }
    }

    /// The algorithm and SubjectPublicKeyInfo of an EC key.
    fn ec_public_key(&self) -> Result<(KeyAlgorithm, SubjectPublicKeyInfoOwned)> {
        let attributes =
            self.public_attributes(&[AttributeType::EcParams, AttributeType::EcPoint])?;
        let (mut params, mut point) = (Vec::new(), Vec::new());
        for attribute in attributes {
            match attribute {
                Attribute::EcParams(value) => params = value,
                Attribute::EcPoint(value) => point = value,
                _ => {}
            }
        }
        let unsupported = |what: String| Error::UnsupportedKey {
            reason: format!(
                "PKCS#11 EC key {} on token \"{}\": {what} (supported: P-256, P-384)",
                self.uri().describe_object(),
                self.shared.label()
            ),
        };
        let curve = der::asn1::ObjectIdentifier::from_der(&params)
            .map_err(|_| unsupported("its CKA_EC_PARAMS is not a named curve".into()))?;
        let (algorithm, point_len) = match curve {
            P256_OID => (KeyAlgorithm::EcdsaP256, 65),
            P384_OID => (KeyAlgorithm::EcdsaP384, 97),
            other => return Err(unsupported(format!("curve {other}"))),
        };
        // CKA_EC_POINT is the DER of an OCTET STRING holding the point
        // (PKCS#11 2.40 §2.3.3); some modules give the bare point.
        let point = if point.len() == point_len && point.first() == Some(&4) {
            point
        } else {
            der::asn1::OctetString::from_der(&point)
                .map(|octets| octets.as_bytes().to_vec())
                .map_err(|_| unsupported("its CKA_EC_POINT is not an uncompressed point".into()))?
        };
        let on_curve = match algorithm {
            KeyAlgorithm::EcdsaP256 => p256::PublicKey::from_sec1_bytes(&point).is_ok(),
            _ => p384::PublicKey::from_sec1_bytes(&point).is_ok(),
        };
        if point.len() != point_len || !on_curve {
            return Err(unsupported(
                "its public point is not an uncompressed point of the curve".into(),
            ));
        }
        let spki = SubjectPublicKeyInfoOwned {
            algorithm: spki::AlgorithmIdentifierOwned {
                oid: EC_PUBLIC_KEY,
                parameters: Some(der::Any::encode_from(&curve).map_err(Error::crypto)?),
            },
            subject_public_key: der::asn1::BitString::from_bytes(&point).map_err(Error::crypto)?,
        };
        Ok((algorithm, spki))
    }

    /// The algorithm and SubjectPublicKeyInfo of an RSA key, encoded as an
    /// in-process RSA key's is (through the same crate).
    fn rsa_public_key(&self) -> Result<(KeyAlgorithm, SubjectPublicKeyInfoOwned)> {
        use rsa::pkcs1::DecodeRsaPublicKey;
        use rsa::pkcs8::EncodePublicKey;
        use rsa::traits::PublicKeyParts;
        let attributes =
            self.public_attributes(&[AttributeType::Modulus, AttributeType::PublicExponent])?;
        let (mut modulus, mut exponent) = (Vec::new(), Vec::new());
        for attribute in attributes {
            match attribute {
                Attribute::Modulus(value) => modulus = value,
                Attribute::PublicExponent(value) => exponent = value,
                _ => {}
            }
        }
        let bad = |e: &dyn fmt::Display| Error::KeyDecode {
            reason: format!(
                "PKCS#11 RSA key {} on token \"{}\": {e}",
                self.uri().describe_object(),
                self.shared.label()
            ),
        };
        let pkcs1 = rsa_public_key_der(&modulus, &exponent).map_err(|e| bad(&e))?;
        let key = rsa::RsaPublicKey::from_pkcs1_der(&pkcs1).map_err(|e| bad(&e))?;
        let bits = key.size() * 8;
        let algorithm = match bits {
            0..=2047 => return Err(Error::RsaKeyTooSmall { bits }),
            2048 => KeyAlgorithm::Rsa2048,
            2049..=3072 => KeyAlgorithm::Rsa3072,
            _ => KeyAlgorithm::Rsa4096,
        };
        let der = key.to_public_key_der().map_err(Error::crypto)?;
        let spki = SubjectPublicKeyInfoOwned::from_der(der.as_bytes()).map_err(Error::crypto)?;
        Ok((algorithm, spki))
    }
}

/// `RSAPublicKey ::= SEQUENCE { modulus INTEGER, publicExponent INTEGER }`
/// (RFC 8017 §A.1.1) from the big-endian magnitudes a token gives.
fn rsa_public_key_der(modulus: &[u8], exponent: &[u8]) -> der::Result<Vec<u8>> {
    let modulus = der::asn1::UintRef::new(modulus)?;
    let exponent = der::asn1::UintRef::new(exponent)?;
    let len = (modulus.encoded_len()? + exponent.encoded_len()?)?;
    let mut out = Vec::new();
    der::Header::new(der::Tag::Sequence, len).encode_to_vec(&mut out)?;
    modulus.encode_to_vec(&mut out)?;
    exponent.encode_to_vec(&mut out)?;
    Ok(out)
}

impl SigningKey for Pkcs11Key {
    fn algorithm(&self) -> KeyAlgorithm {
        self.algorithm
    }

    fn public_key(&self) -> Result<SubjectPublicKeyInfoOwned> {
        Ok(self.public_key.clone())
    }

    /// Signs in the token. ECDSA: the SHA-256 (P-256) or SHA-384 (P-384)
    /// digest of `message` with CKM_ECDSA, r‖s made a DER signature; RSA:
    /// `message` with CKM_SHA256_RSA_PKCS. `provider` is not used.
    fn sign(&self, message: &[u8], _provider: &CryptoProvider) -> Result<Vec<u8>> {
        let (_, name) = sign_mechanism(self.algorithm);
        let object = &self.object;
        let doing = Doing::new(object.shared.label(), "signing")
            .mechanism(name)
            .object(object.uri().describe_object());
        let sign = |mechanism: &Mechanism, data: &[u8]| {
            object
                .shared
                .with(|s| s.sign(mechanism, object.handle, data))
                .map_err(|e| doing.error(e))
        };
        let bad_length = |raw: &[u8]| {
            doing.other(&format!(
                "the token returned {} bytes, not an r\u{2016}s ECDSA signature",
                raw.len()
            ))
        };
        match self.algorithm {
            KeyAlgorithm::EcdsaP256 => {
                let raw = sign(&Mechanism::Ecdsa, &sha2::Sha256::digest(message))?;
                let signature =
                    p256::ecdsa::Signature::from_slice(&raw).map_err(|_| bad_length(&raw))?;
                Ok(signature.to_der().as_bytes().to_vec())
            }
            KeyAlgorithm::EcdsaP384 => {
                let raw = sign(&Mechanism::Ecdsa, &sha2::Sha384::digest(message))?;
                let signature =
                    p384::ecdsa::Signature::from_slice(&raw).map_err(|_| bad_length(&raw))?;
                Ok(signature.to_der().as_bytes().to_vec())
            }
            KeyAlgorithm::Rsa2048 | KeyAlgorithm::Rsa3072 | KeyAlgorithm::Rsa4096 => {
                sign(&Mechanism::Sha256RsaPkcs, message)
            }
        }
    }
}
