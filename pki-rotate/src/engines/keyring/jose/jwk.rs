//! Public keys as JWKs (RFC 7517, RFC 7518 §6), their RFC 7638
//! thumbprints, and JWK Sets.

use super::{Algorithm, JoseError, MAX_JWKS_BYTES, malformed, unsupported};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as Base64UrlUnpadded;
use p256::pkcs8::{DecodePublicKey, EncodePublicKey};
use rsa::traits::PublicKeyParts;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use signature::Verifier;

/// A public key of the ring: P-256 or RSA (2048 to 8192 bits).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PublicKey {
    /// An ECDSA P-256 key.
    P256(p256::ecdsa::VerifyingKey),
    /// An RSA key.
    Rsa(rsa::RsaPublicKey),
}

/// RSA moduli accepted: what pki-core accepts for private keys.
const RSA_BITS: std::ops::RangeInclusive<usize> = 2048..=8192;

impl PublicKey {
    /// Reads a SubjectPublicKeyInfo (DER).
    ///
    /// # Errors
    ///
    /// [`JoseError::Malformed`] when `der` is not a SubjectPublicKeyInfo or its
    /// RSA key does not decode; [`JoseError::UnsupportedKey`] for an EC key not
    /// on P-256, an RSA modulus outside 2048 to 8192 bits, or another
    /// algorithm.
    pub fn from_spki_der(der: &[u8]) -> Result<Self, JoseError> {
        let spki = spki::SubjectPublicKeyInfoRef::try_from(der)
            .map_err(|e| malformed("public key", format!("not a SubjectPublicKeyInfo: {e}")))?;
        match spki.algorithm.oid.to_string().as_str() {
            "1.2.840.10045.2.1" => p256::ecdsa::VerifyingKey::from_public_key_der(der)
                .map(PublicKey::P256)
                .map_err(|e| {
                    unsupported(
                        "EC public key",
                        format!(
                            "not a P-256 key ({e}): the key ring signs ES256 tokens with P-256 \
                             and RS256 with RSA; P-384 (ES384) is not supported"
                        ),
                    )
                }),
            "1.2.840.113549.1.1.1" => {
                let key = rsa::RsaPublicKey::from_public_key_der(der)
                    .map_err(|e| malformed("RSA public key", e))?;
                Self::rsa(key)
            }
            other => Err(unsupported(
                "public key",
                format!("algorithm {other} (P-256 and RSA are supported)"),
            )),
        }
    }

    /// Reads a PKCS#1 `RSAPublicKey` (DER), as in `RSA PUBLIC KEY` PEM blocks.
    ///
    /// # Errors
    ///
    /// [`JoseError::Malformed`] when `der` is not an `RSAPublicKey`;
    /// [`JoseError::UnsupportedKey`] for a modulus outside 2048 to 8192 bits.
    pub fn from_pkcs1_der(der: &[u8]) -> Result<Self, JoseError> {
        use rsa::pkcs1::DecodeRsaPublicKey;
        let key =
            rsa::RsaPublicKey::from_pkcs1_der(der).map_err(|e| malformed("RSA public key", e))?;
        Self::rsa(key)
    }

    fn rsa(key: rsa::RsaPublicKey) -> Result<Self, JoseError> {
        let bits = key.size() * 8;
        if !RSA_BITS.contains(&bits) {
            return Err(unsupported(
                "RSA public key",
                format!("{bits}-bit modulus (2048 to 8192 bits are accepted)"),
            ));
        }
        Ok(PublicKey::Rsa(key))
    }

    /// The SubjectPublicKeyInfo DER.
    pub fn to_spki_der(&self) -> Vec<u8> {
        let doc = match self {
            PublicKey::P256(k) => k.to_public_key_der(),
            PublicKey::Rsa(k) => k.to_public_key_der(),
        };
        // Encoding a key that decoded cannot fail; an empty result would
        // fail every later parse loudly rather than silently.
        doc.map(|d| d.as_bytes().to_vec()).unwrap_or_default()
    }

    /// `PUBLIC KEY` PEM.
    pub fn to_pem(&self) -> String {
        pki_core::pem::encode("PUBLIC KEY", &self.to_spki_der())
    }

    /// The algorithm tokens signed by this key use.
    pub fn algorithm(&self) -> Algorithm {
        match self {
            PublicKey::P256(_) => Algorithm::Es256,
            PublicKey::Rsa(_) => Algorithm::Rs256,
        }
    }

    /// The JWK `kty`.
    pub fn kty(&self) -> &'static str {
        match self {
            PublicKey::P256(_) => "EC",
            PublicKey::Rsa(_) => "RSA",
        }
    }

    /// The JWK's required members (RFC 7638 §3.2), in lexicographic order:
    /// exactly what the thumbprint hashes.
    fn required_members(&self) -> Vec<(&'static str, String)> {
        match self {
            PublicKey::P256(k) => {
                // Uncompressed SEC1: 0x04 ‖ x ‖ y, each 32 bytes: the JWK
                // keeps them full length, leading zeros included (RFC 7518 §6.2.1.2).
                let point = k.to_sec1_point(false);
                let bytes = point.as_bytes();
                let (x, y) = bytes[1..].split_at(32);
                vec![
                    ("crv", "P-256".to_string()),
                    ("kty", "EC".to_string()),
                    ("x", Base64UrlUnpadded.encode(x)),
                    ("y", Base64UrlUnpadded.encode(y)),
                ]
            }
            PublicKey::Rsa(k) => vec![
                // Minimal big-endian octets, as RFC 7518 §6.3.1 requires.
                ("e", Base64UrlUnpadded.encode(k.e_bytes())),
                ("kty", "RSA".to_string()),
                ("n", Base64UrlUnpadded.encode(k.n_bytes())),
            ],
        }
    }

    /// The RFC 7638 thumbprint (SHA-256, base64url): the key's `kid`.
    pub fn thumbprint(&self) -> String {
        thumbprint_of(&self.required_members())
    }

    /// The key as a JWK: required members, then `kid` (the thumbprint),
    /// `use: sig` and `alg`.
    pub fn to_jwk(&self) -> Map<String, Value> {
        let mut jwk = Map::new();
        for (name, value) in self.required_members() {
            jwk.insert(name.to_string(), Value::String(value));
        }
        jwk.insert("kid".into(), Value::String(self.thumbprint()));
        jwk.insert("use".into(), Value::String("sig".into()));
        jwk.insert(
            "alg".into(),
            Value::String(self.algorithm().as_str().into()),
        );
        jwk
    }

    /// Reads a JWK (public members only; private members are refused so a
    /// private key never ends up published by mistake).
    ///
    /// # Errors
    ///
    /// [`JoseError::Malformed`] naming `what` for a private member (`d`), a
    /// missing or malformed member, an `alg` that does not fit the key, or a
    /// `kid` that is not its thumbprint; [`JoseError::UnsupportedKey`] for a
    /// key type other than EC and RSA, a curve other than P-256 or an RSA size
    /// outside 2048 to 8192 bits.
    pub fn from_jwk(jwk: &Map<String, Value>, what: &str) -> Result<Self, JoseError> {
        if jwk.contains_key("d") {
            return Err(malformed(
                what,
                "holds a private key (\"d\"); give public keys only",
            ));
        }
        let key = match jwk_member(jwk, "kty", what)? {
            "EC" => p256_from_jwk(jwk, what)?,
            "RSA" => rsa_from_jwk(jwk, what)?,
            other => {
                return Err(unsupported(
                    what,
                    format!("key type \"{}\" (EC and RSA only)", other.escape_debug()),
                ));
            }
        };
        key.check_alg_and_kid(jwk, what)?;
        Ok(key)
    }

    /// A JWK's optional `alg` and `kid` must describe this key: a `kid`
    /// that is not its thumbprint would let one key pass for another.
    fn check_alg_and_kid(&self, jwk: &Map<String, Value>, what: &str) -> Result<(), JoseError> {
        if let Some(alg) = jwk.get("alg")
            && alg.as_str() != Some(self.algorithm().as_str())
        {
            return Err(malformed(
                what,
                format!("\"alg\" {alg} does not fit a {} key", self.kty()),
            ));
        }
        if let Some(kid) = jwk.get("kid")
            && kid.as_str() != Some(self.thumbprint().as_str())
        {
            return Err(malformed(
                what,
                format!(
                    "\"kid\" {kid} is not the key's RFC 7638 thumbprint {}",
                    self.thumbprint()
                ),
            ));
        }
        Ok(())
    }

    /// Verifies a JWS signature over `signing_input`.
    pub(super) fn verify(&self, signing_input: &[u8], sig: &[u8]) -> bool {
        match self {
            PublicKey::P256(k) => match p256::ecdsa::Signature::from_slice(sig) {
                // Both (r, s) and (r, n − s) are valid ECDSA signatures and
                // JOSE signers produce either; normalising accepts both.
                Ok(s) => k.verify(signing_input, &s.normalize_s()).is_ok(),
                Err(_) => false,
            },
            PublicKey::Rsa(k) => match rsa::pkcs1v15::Signature::try_from(sig) {
                Ok(s) => rsa::pkcs1v15::VerifyingKey::<Sha256>::new(k.clone())
                    .verify(signing_input, &s)
                    .is_ok(),
                Err(_) => false,
            },
        }
    }
}

/// The string member `name` of a JWK; absent or not a string is malformed.
fn jwk_member<'a>(
    jwk: &'a Map<String, Value>,
    name: &str,
    what: &str,
) -> Result<&'a str, JoseError> {
    match jwk.get(name) {
        Some(Value::String(s)) => Ok(s.as_str()),
        Some(_) => Err(malformed(what, format!("\"{name}\" is not a string"))),
        None => Err(malformed(what, format!("has no \"{name}\""))),
    }
}

/// The bytes of the base64url member `name` of a JWK (RFC 7515 §2:
/// unpadded).
fn jwk_bytes(jwk: &Map<String, Value>, name: &str, what: &str) -> Result<Vec<u8>, JoseError> {
    Base64UrlUnpadded
        .decode(jwk_member(jwk, name, what)?)
        .map_err(|_| malformed(what, format!("\"{name}\" is not unpadded base64url")))
}

/// An EC JWK: P-256 only, with full-length coordinates, so that one key
/// has one encoding and one thumbprint.
fn p256_from_jwk(jwk: &Map<String, Value>, what: &str) -> Result<PublicKey, JoseError> {
    let crv = jwk_member(jwk, "crv", what)?;
    if crv != "P-256" {
        return Err(unsupported(what, format!("curve \"{crv}\" (P-256 only)")));
    }
    let (x, y) = (jwk_bytes(jwk, "x", what)?, jwk_bytes(jwk, "y", what)?);
    if x.len() != 32 || y.len() != 32 {
        return Err(malformed(
            what,
            "P-256 coordinates must be 32 bytes each (RFC 7518 §6.2.1.2)",
        ));
    }
    let mut sec1 = Vec::with_capacity(65);
    sec1.push(4);
    sec1.extend_from_slice(&x);
    sec1.extend_from_slice(&y);
    p256::ecdsa::VerifyingKey::from_sec1_bytes(&sec1)
        .map(PublicKey::P256)
        .map_err(|_| malformed(what, "x and y are not a point on P-256"))
}

/// An RSA JWK: minimal octets (one key, one thumbprint) and a size within
/// [`RSA_BITS`], checked before the numbers are built.
fn rsa_from_jwk(jwk: &Map<String, Value>, what: &str) -> Result<PublicKey, JoseError> {
    let (n, e) = (jwk_bytes(jwk, "n", what)?, jwk_bytes(jwk, "e", what)?);
    if n.first() == Some(&0) || e.first() == Some(&0) {
        return Err(malformed(
            what,
            "\"n\" and \"e\" must be minimal octets, without leading zeros",
        ));
    }
    if n.len() > RSA_BITS.end() / 8 || e.len() > 8 {
        return Err(unsupported(what, "RSA modulus or exponent too large"));
    }
    let n = rsa::BoxedUint::from_be_slice_vartime(&n);
    let e = rsa::BoxedUint::from_be_slice_vartime(&e);
    let key = rsa::RsaPublicKey::new_with_size_limits(n, e, RSA_BITS)
        .map_err(|err| unsupported(what, format!("RSA key: {err}")))?;
    Ok(PublicKey::Rsa(key))
}

/// RFC 7638 §3: SHA-256 over the required members, sorted, without
/// whitespace, then base64url. Member values here are base64url or fixed
/// names, which JSON encodes without escapes, so serde_json's string
/// encoding is the canonical one.
fn thumbprint_of(members: &[(&str, String)]) -> String {
    let mut json = String::from("{");
    for (i, (name, value)) in members.iter().enumerate() {
        if i > 0 {
            json.push(',');
        }
        json.push_str(&Value::String((*name).to_string()).to_string());
        json.push(':');
        json.push_str(&Value::String(value.clone()).to_string());
    }
    json.push('}');
    Base64UrlUnpadded.encode(Sha256::digest(json.as_bytes()))
}

/// The RFC 7638 thumbprint of a JWK given as JSON members (only the
/// required members of its `kty` are hashed; the others are ignored).
///
/// # Errors
///
/// [`JoseError::Malformed`] when a required member is missing or not a string;
/// [`JoseError::UnsupportedKey`] for a `kty` other than EC and RSA.
pub fn jwk_thumbprint(jwk: &Map<String, Value>) -> Result<String, JoseError> {
    let kty = jwk
        .get("kty")
        .and_then(Value::as_str)
        .ok_or_else(|| malformed("JWK", "has no string \"kty\""))?;
    let names: &[&'static str] = match kty {
        "EC" => &["crv", "kty", "x", "y"],
        "RSA" => &["e", "kty", "n"],
        other => {
            return Err(unsupported(
                "JWK",
                format!("key type \"{}\"", other.escape_debug()),
            ));
        }
    };
    let mut members = Vec::new();
    for name in names {
        let value = jwk
            .get(*name)
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("JWK", format!("has no string \"{name}\"")))?;
        members.push((*name, value.to_string()));
    }
    Ok(thumbprint_of(&members))
}

/// A JWK Set (RFC 7517 §5): `{"keys": [...]}`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Jwks {
    /// The keys, in order.
    pub keys: Vec<PublicKey>,
}

impl Jwks {
    /// Serialises as `{"keys": [...]}`, one JWK per key, with a final newline.
    pub fn to_json(&self) -> String {
        let keys: Vec<Value> = self
            .keys
            .iter()
            .map(|k| Value::Object(k.to_jwk()))
            .collect();
        let mut out = serde_json::to_string_pretty(&serde_json::json!({ "keys": keys }))
            .unwrap_or_else(|_| "{\"keys\":[]}".into());
        out.push('\n');
        out
    }

    /// Reads a JWK Set. Every key must be a public P-256 or RSA key whose
    /// `kid`, when present, is its thumbprint.
    ///
    /// # Errors
    ///
    /// [`JoseError::TooLarge`] over [`MAX_JWKS_BYTES`];
    /// [`JoseError::Malformed`] when it is not JSON or not an object with a
    /// `keys` array; and those of [`PublicKey::from_jwk`] for each key, naming
    /// it by its position.
    pub fn parse(bytes: &[u8]) -> Result<Self, JoseError> {
        if bytes.len() > MAX_JWKS_BYTES {
            return Err(JoseError::TooLarge {
                what: "JWK Set",
                len: bytes.len(),
                max: MAX_JWKS_BYTES,
            });
        }
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| malformed("JWK Set", e.to_string()))?;
        let keys = value
            .as_object()
            .and_then(|o| o.get("keys"))
            .and_then(Value::as_array)
            .ok_or_else(|| malformed("JWK Set", "is not an object with a \"keys\" array"))?;
        let mut out = Vec::with_capacity(keys.len());
        for (i, key) in keys.iter().enumerate() {
            let what = format!("JWK Set key {}", i + 1);
            let jwk = key
                .as_object()
                .ok_or_else(|| malformed(what.clone(), "is not an object"))?;
            out.push(PublicKey::from_jwk(jwk, &what)?);
        }
        Ok(Jwks { keys: out })
    }
}
