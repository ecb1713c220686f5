//! The small part of JOSE a key ring needs: public keys as JWKs (RFC 7517,
//! RFC 7518 §6), their RFC 7638 thumbprints, JWK Sets, and compact JWS
//! (RFC 7515) with ES256 and RS256 for JWTs (RFC 7519).
//!
//! Written here rather than taken from a JOSE crate: the maintained ones
//! (`jsonwebtoken`, `jose-jwk`, `josekit`) build on other versions of the
//! RustCrypto curves and RSA than the ones this workspace pins (p256 0.14,
//! rsa 0.10 rc) or on OpenSSL, and would bring a second copy of the
//! cryptography. What is needed is small and fully specified: base64url
//! without padding (the `base64` crate pki-core uses, which refuses padding
//! and non-zero trailing bits), two signature
//! algorithms from the crates already used for certificates, and JSON.
//!
//! Parsing is strict and bounded: a token or a JWK Set larger than
//! [`MAX_TOKEN_BYTES`] / [`MAX_JWKS_BYTES`] is refused before decoding,
//! unknown algorithms and `crit` headers are refused, and the algorithm in a
//! token's header must match the type of the key its `kid` names (no
//! algorithm confusion).

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as Base64UrlUnpadded;
use p256::pkcs8::{DecodePublicKey, EncodePublicKey};
use rsa::traits::PublicKeyParts;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use signature::{SignatureEncoding, Signer, Verifier};

/// The largest token [`ParsedToken::parse`] decodes (Kubernetes service-account tokens
/// are about 1 KiB; 64 KiB leaves room for any claims set).
pub const MAX_TOKEN_BYTES: usize = 64 * 1024;
/// The largest JWK Set [`Jwks::parse`] decodes.
pub const MAX_JWKS_BYTES: usize = 1024 * 1024;

/// Why a JOSE object was refused. Every variant says what and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JoseError {
    /// The input is not well formed.
    #[error("{what}: {reason}")]
    Malformed {
        /// Which part (`token header`, `jwks.json key 2`…).
        what: String,
        /// What is wrong.
        reason: String,
    },
    /// The input is larger than what is decoded.
    #[error("{what} is {len} bytes, more than the {max} accepted")]
    TooLarge {
        /// What.
        what: &'static str,
        /// Its size.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The header names an algorithm other than ES256 and RS256.
    #[error("token algorithm \"{0}\" is not accepted (ES256 and RS256 are)")]
    UnsupportedAlgorithm(String),
    /// The header asks for extensions the verifier must understand (RFC 7515 §4.1.11).
    #[error("token header has critical extensions {0}, which are not supported")]
    CriticalHeader(String),
    /// No accepted key has the token's `kid`.
    #[error("token key id \"{0}\" is not an accepted key")]
    UnknownKid(String),
    /// The key was accepted, but its grace period has ended.
    #[error("token key id \"{kid}\" was accepted until {until}, which has passed")]
    KeyNoLongerAccepted {
        /// The key id.
        kid: String,
        /// When acceptance ended (RFC 3339).
        until: String,
    },
    /// The header's algorithm does not fit the key.
    #[error("token algorithm {alg} does not match key \"{kid}\", a {kty} key")]
    AlgorithmMismatch {
        /// The header's algorithm.
        alg: String,
        /// The key id.
        kid: String,
        /// The key's type.
        kty: &'static str,
    },
    /// The signature does not verify with the key.
    #[error("token signature does not verify with key \"{0}\"")]
    BadSignature(String),
    /// `exp` is not after the verification time.
    #[error("token expired: exp {exp} is not after {now}")]
    Expired {
        /// The claim's value.
        exp: i64,
        /// The verification time (Unix seconds).
        now: i64,
    },
    /// `nbf` is after the verification time.
    #[error("token not valid yet: nbf {nbf} is after {now}")]
    NotYetValid {
        /// The claim's value.
        nbf: i64,
        /// The verification time (Unix seconds).
        now: i64,
    },
    /// A key is not usable for signing tokens (type, size, curve).
    #[error("{what}: {reason}")]
    UnsupportedKey {
        /// Which key.
        what: String,
        /// Why.
        reason: String,
    },
}

fn malformed(what: impl Into<String>, reason: impl std::fmt::Display) -> JoseError {
    JoseError::Malformed {
        what: what.into(),
        reason: reason.to_string(),
    }
}

/// A JWS algorithm this module signs and verifies with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algorithm {
    /// ECDSA P-256 with SHA-256, signature r ‖ s (RFC 7518 §3.4).
    Es256,
    /// RSASSA-PKCS1-v1_5 with SHA-256 (RFC 7518 §3.3).
    Rs256,
}

impl Algorithm {
    /// The `alg` header value.
    pub fn as_str(self) -> &'static str {
        match self {
            Algorithm::Es256 => "ES256",
            Algorithm::Rs256 => "RS256",
        }
    }

    fn parse(s: &str) -> Result<Self, JoseError> {
        match s {
            "ES256" => Ok(Algorithm::Es256),
            "RS256" => Ok(Algorithm::Rs256),
            other => Err(JoseError::UnsupportedAlgorithm(
                other.escape_debug().to_string(),
            )),
        }
    }
}

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
    pub fn from_jwk(jwk: &Map<String, Value>, what: &str) -> Result<Self, JoseError> {
        let member = |name: &str| -> Result<&str, JoseError> {
            match jwk.get(name) {
                Some(Value::String(s)) => Ok(s.as_str()),
                Some(_) => Err(malformed(what, format!("\"{name}\" is not a string"))),
                None => Err(malformed(what, format!("has no \"{name}\""))),
            }
        };
        let bytes = |name: &str| -> Result<Vec<u8>, JoseError> {
            Base64UrlUnpadded
                .decode(member(name)?)
                .map_err(|_| malformed(what, format!("\"{name}\" is not unpadded base64url")))
        };
        if jwk.contains_key("d") {
            return Err(malformed(
                what,
                "holds a private key (\"d\"); give public keys only",
            ));
        }
        let key = match member("kty")? {
            "EC" => {
                let crv = member("crv")?;
                if crv != "P-256" {
                    return Err(unsupported(what, format!("curve \"{crv}\" (P-256 only)")));
                }
                let (x, y) = (bytes("x")?, bytes("y")?);
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
                    .map_err(|_| malformed(what, "x and y are not a point on P-256"))?
            }
            "RSA" => {
                let (n, e) = (bytes("n")?, bytes("e")?);
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
                PublicKey::Rsa(key)
            }
            other => {
                return Err(unsupported(
                    what,
                    format!("key type \"{}\" (EC and RSA only)", other.escape_debug()),
                ));
            }
        };
        if let Some(alg) = jwk.get("alg")
            && alg.as_str() != Some(key.algorithm().as_str())
        {
            return Err(malformed(
                what,
                format!("\"alg\" {alg} does not fit a {} key", key.kty()),
            ));
        }
        if let Some(kid) = jwk.get("kid")
            && kid.as_str() != Some(key.thumbprint().as_str())
        {
            return Err(malformed(
                what,
                format!(
                    "\"kid\" {kid} is not the key's RFC 7638 thumbprint {}",
                    key.thumbprint()
                ),
            ));
        }
        Ok(key)
    }

    /// Verifies a JWS signature over `signing_input`.
    fn verify(&self, signing_input: &[u8], sig: &[u8]) -> bool {
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

fn unsupported(what: impl Into<String>, reason: impl std::fmt::Display) -> JoseError {
    JoseError::UnsupportedKey {
        what: what.into(),
        reason: reason.to_string(),
    }
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

/// A private key that signs tokens, built from a pki-core key.
pub(crate) enum TokenSigner {
    P256(p256::ecdsa::SigningKey),
    Rsa(Box<rsa::pkcs1v15::SigningKey<Sha256>>),
}

impl TokenSigner {
    /// Reads the key back from its PKCS#8 form: pki-core keeps its key
    /// types private, and PKCS#8 is the one form both sides speak.
    pub(crate) fn new(key: &pki_core::PrivateKey) -> Result<Self, JoseError> {
        use p256::pkcs8::DecodePrivateKey;
        let der = key
            .to_pkcs8_der()
            .map_err(|e| unsupported("active key", e))?;
        if key.algorithm().is_rsa() {
            let k = rsa::RsaPrivateKey::from_pkcs8_der(&der)
                .map_err(|e| unsupported("active key", e))?;
            Ok(TokenSigner::Rsa(Box::new(rsa::pkcs1v15::SigningKey::new(
                k,
            ))))
        } else {
            p256::ecdsa::SigningKey::from_pkcs8_der(&der)
                .map(TokenSigner::P256)
                .map_err(|e| unsupported("active key", e))
        }
    }

    fn algorithm(&self) -> Algorithm {
        match self {
            TokenSigner::P256(_) => Algorithm::Es256,
            TokenSigner::Rsa(_) => Algorithm::Rs256,
        }
    }

    fn sign(&self, input: &[u8]) -> Result<Vec<u8>, JoseError> {
        match self {
            // RFC 6979 deterministic ECDSA: same key and message, same token.
            TokenSigner::P256(k) => {
                let s: p256::ecdsa::Signature = k
                    .try_sign(input)
                    .map_err(|e| unsupported("active key", e))?;
                Ok(s.to_bytes().to_vec())
            }
            TokenSigner::Rsa(k) => {
                let s: rsa::pkcs1v15::Signature = k
                    .try_sign(input)
                    .map_err(|e| unsupported("active key", e))?;
                Ok(s.to_vec())
            }
        }
    }
}

/// Signs `claims` (a JSON object, used byte for byte as the payload) as a
/// compact JWS with header `{"alg","kid","typ":"JWT"}`.
pub(crate) fn sign(signer: &TokenSigner, kid: &str, claims: &[u8]) -> Result<String, JoseError> {
    parse_claims(claims)?;
    let header = serde_json::json!({
        "alg": signer.algorithm().as_str(),
        "kid": kid,
        "typ": "JWT",
    });
    let mut token = Base64UrlUnpadded.encode(header.to_string().as_bytes());
    token.push('.');
    token.push_str(&Base64UrlUnpadded.encode(claims));
    let sig = signer.sign(token.as_bytes())?;
    token.push('.');
    token.push_str(&Base64UrlUnpadded.encode(&sig));
    Ok(token)
}

/// Reads a claims set: a JSON object.
pub fn parse_claims(claims: &[u8]) -> Result<Map<String, Value>, JoseError> {
    if claims.len() > MAX_TOKEN_BYTES {
        return Err(JoseError::TooLarge {
            what: "claims",
            len: claims.len(),
            max: MAX_TOKEN_BYTES,
        });
    }
    match serde_json::from_slice::<Value>(claims) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(malformed("claims", "is not a JSON object")),
        Err(e) => Err(malformed("claims", format!("not JSON: {e}"))),
    }
}

/// A compact JWS, split and decoded but not verified.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedToken {
    /// The header's `alg`.
    pub algorithm: Algorithm,
    /// The header's `kid`.
    pub kid: String,
    /// The claims.
    pub claims: Map<String, Value>,
    signing_input: Vec<u8>,
    signature: Vec<u8>,
}

impl ParsedToken {
    /// Splits and decodes a compact JWS. Surrounding ASCII whitespace (a
    /// final newline in a token file) is ignored.
    pub fn parse(token: &[u8]) -> Result<Self, JoseError> {
        if token.len() > MAX_TOKEN_BYTES {
            return Err(JoseError::TooLarge {
                what: "token",
                len: token.len(),
                max: MAX_TOKEN_BYTES,
            });
        }
        let token = token.trim_ascii();
        let text = std::str::from_utf8(token).map_err(|_| malformed("token", "is not ASCII"))?;
        let parts: Vec<&str> = text.split('.').collect();
        if parts.len() != 3 {
            return Err(malformed(
                "token",
                format!(
                    "has {} dot-separated parts, a compact JWS has 3",
                    parts.len()
                ),
            ));
        }
        let decode = |part: &str, what: &str| {
            Base64UrlUnpadded
                .decode(part)
                .map_err(|_| malformed(format!("token {what}"), "is not unpadded base64url"))
        };
        let header_bytes = decode(parts[0], "header")?;
        let header: Map<String, Value> = match serde_json::from_slice(&header_bytes) {
            Ok(Value::Object(map)) => map,
            Ok(_) => return Err(malformed("token header", "is not a JSON object")),
            Err(e) => return Err(malformed("token header", format!("not JSON: {e}"))),
        };
        let alg = header
            .get("alg")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("token header", "has no string \"alg\""))?;
        let algorithm = Algorithm::parse(alg)?;
        if let Some(crit) = header.get("crit") {
            return Err(JoseError::CriticalHeader(crit.to_string()));
        }
        let kid = header
            .get("kid")
            .and_then(Value::as_str)
            .ok_or_else(|| malformed("token header", "has no string \"kid\""))?
            .to_string();
        let payload = decode(parts[1], "payload")?;
        let claims = parse_claims(&payload).map_err(|e| match e {
            JoseError::Malformed { reason, .. } => malformed("token payload", reason),
            other => other,
        })?;
        let signature = decode(parts[2], "signature")?;
        Ok(ParsedToken {
            algorithm,
            kid,
            claims,
            signing_input: text.as_bytes()[..parts[0].len() + 1 + parts[1].len()].to_vec(),
            signature,
        })
    }

    /// Checks the signature with `key` (which the caller found by `kid`).
    pub fn verify_signature(&self, key: &PublicKey) -> Result<(), JoseError> {
        if key.algorithm() != self.algorithm {
            return Err(JoseError::AlgorithmMismatch {
                alg: self.algorithm.as_str().to_string(),
                kid: self.kid.clone(),
                kty: key.kty(),
            });
        }
        if key.verify(&self.signing_input, &self.signature) {
            Ok(())
        } else {
            Err(JoseError::BadSignature(self.kid.clone()))
        }
    }

    /// Checks `exp` and `nbf`, when present, against `now` (Unix seconds):
    /// valid while nbf ≤ now < exp (RFC 7519 §4.1.4-5, no leeway).
    pub fn check_time(&self, now: i64) -> Result<(), JoseError> {
        let number = |name: &str| -> Result<Option<i64>, JoseError> {
            match self.claims.get(name) {
                None => Ok(None),
                Some(Value::Number(n)) => {
                    // NumericDate may be fractional: compare on whole seconds,
                    // rounding toward the stricter side.
                    if let Some(i) = n.as_i64() {
                        Ok(Some(i))
                    } else if let Some(f) = n.as_f64().filter(|f| f.is_finite()) {
                        Ok(Some(if name == "exp" {
                            f.floor() as i64
                        } else {
                            f.ceil() as i64
                        }))
                    } else {
                        Err(malformed(
                            format!("token claim \"{name}\""),
                            "is out of range",
                        ))
                    }
                }
                Some(_) => Err(malformed(
                    format!("token claim \"{name}\""),
                    "is not a NumericDate",
                )),
            }
        };
        if let Some(exp) = number("exp")?
            && now >= exp
        {
            return Err(JoseError::Expired { exp, now });
        }
        if let Some(nbf) = number("nbf")?
            && now < nbf
        {
            return Err(JoseError::NotYetValid { nbf, now });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The RSA key of RFC 7638 §3.1 (from RFC 7517 Appendix A.1).
    const RFC7638_N: &str = "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw";
    const RFC7638_THUMBPRINT: &str = "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs";

    fn rfc_jwk() -> Map<String, Value> {
        let v = serde_json::json!({
            "kty": "RSA",
            "n": RFC7638_N,
            "e": "AQAB",
            "alg": "RS256",
            "kid": "2011-04-29",
        });
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn thumbprint_matches_the_rfc_7638_worked_example() {
        assert_eq!(jwk_thumbprint(&rfc_jwk()).unwrap(), RFC7638_THUMBPRINT);
        // Through the key: decoding n and e and encoding them again must
        // give the same members, so the kid we publish is the RFC's.
        let mut jwk = rfc_jwk();
        jwk.remove("kid");
        let key = PublicKey::from_jwk(&jwk, "RFC 7638 key").unwrap();
        assert_eq!(key.thumbprint(), RFC7638_THUMBPRINT);
        assert_eq!(key.to_jwk()["n"], RFC7638_N);
        assert_eq!(key.to_jwk()["kid"], RFC7638_THUMBPRINT);
        // And through SPKI DER, the form the ring stores.
        let again = PublicKey::from_spki_der(&key.to_spki_der()).unwrap();
        assert_eq!(again.thumbprint(), RFC7638_THUMBPRINT);
    }

    #[test]
    fn a_jwk_whose_kid_is_not_its_thumbprint_is_refused() {
        let err = PublicKey::from_jwk(&rfc_jwk(), "k").unwrap_err();
        assert!(err.to_string().contains("not the key's RFC 7638"), "{err}");
    }

    #[test]
    fn ec_coordinates_are_full_length_even_with_leading_zeros() {
        use rand_chacha::ChaCha20Rng;
        use rand_core::SeedableRng;
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        // About one key in 128 has a coordinate starting with a zero byte.
        let mut seen_leading_zero = false;
        for _ in 0..600 {
            let key = pki_core::PrivateKey::generate(pki_core::KeyAlgorithm::EcdsaP256, &mut rng)
                .unwrap();
            let public = PublicKey::from_spki_der(&key.public_key_der().unwrap()).unwrap();
            let jwk = public.to_jwk();
            for c in ["x", "y"] {
                let bytes = Base64UrlUnpadded
                    .decode(jwk[c].as_str().unwrap_or_default())
                    .unwrap();
                assert_eq!(bytes.len(), 32);
                seen_leading_zero |= bytes[0] == 0;
            }
            assert_eq!(PublicKey::from_jwk(&jwk, "k").unwrap(), public);
        }
        assert!(
            seen_leading_zero,
            "the sample never exercised a leading zero"
        );
    }

    fn signer_and_key(alg: pki_core::KeyAlgorithm) -> (TokenSigner, PublicKey) {
        use rand_chacha::ChaCha20Rng;
        use rand_core::SeedableRng;
        let key = pki_core::PrivateKey::generate(alg, &mut ChaCha20Rng::seed_from_u64(9)).unwrap();
        let public = PublicKey::from_spki_der(&key.public_key_der().unwrap()).unwrap();
        (TokenSigner::new(&key).unwrap(), public)
    }

    #[test]
    fn tokens_round_trip_and_tampering_is_caught() {
        for alg in [
            pki_core::KeyAlgorithm::EcdsaP256,
            pki_core::KeyAlgorithm::Rsa2048,
        ] {
            let (signer, public) = signer_and_key(alg);
            let kid = public.thumbprint();
            let claims = br#"{"sub":"system:serviceaccount:ns:sa","exp":2000}"#;
            let token = sign(&signer, &kid, claims).unwrap();
            let parsed = ParsedToken::parse(token.as_bytes()).unwrap();
            assert_eq!(parsed.kid, kid);
            parsed.verify_signature(&public).unwrap();
            parsed.check_time(1999).unwrap();
            assert!(matches!(
                parsed.check_time(2000),
                Err(JoseError::Expired { .. })
            ));
            // The payload is the claims byte for byte.
            let payload = token.split('.').nth(1).unwrap_or_default();
            assert_eq!(Base64UrlUnpadded.decode(payload).unwrap(), claims);
            // Another payload under the same signature does not verify.
            let forged_payload = Base64UrlUnpadded.encode(br#"{"sub":"admin"}"#);
            let mut parts: Vec<&str> = token.split('.').collect();
            parts[1] = &forged_payload;
            let forged = parts.join(".");
            let err = ParsedToken::parse(forged.as_bytes())
                .unwrap()
                .verify_signature(&public)
                .unwrap_err();
            assert!(matches!(err, JoseError::BadSignature(_)), "{err}");
        }
    }

    #[test]
    fn high_s_ecdsa_signatures_verify_as_other_signers_produce_them() {
        let (signer, public) = signer_and_key(pki_core::KeyAlgorithm::EcdsaP256);
        let token = sign(&signer, "k", b"{}").unwrap();
        let parts: Vec<&str> = token.split('.').collect();
        let sig = Base64UrlUnpadded.decode(parts[2]).unwrap();
        let s = p256::ecdsa::Signature::from_slice(&sig).unwrap();
        let (r, s_bytes) = s.split_scalars();
        let high = p256::ecdsa::Signature::from_scalars(r, -*s_bytes).unwrap();
        let other = format!(
            "{}.{}.{}",
            parts[0],
            parts[1],
            Base64UrlUnpadded.encode(high.to_bytes())
        );
        ParsedToken::parse(other.as_bytes())
            .unwrap()
            .verify_signature(&public)
            .unwrap();
    }

    #[test]
    fn algorithm_confusion_and_odd_headers_are_refused() {
        let (_, ec) = signer_and_key(pki_core::KeyAlgorithm::EcdsaP256);
        let (rsa_signer, _) = signer_and_key(pki_core::KeyAlgorithm::Rsa2048);
        let token = sign(&rsa_signer, "k", b"{}").unwrap();
        let err = ParsedToken::parse(token.as_bytes())
            .unwrap()
            .verify_signature(&ec)
            .unwrap_err();
        assert!(matches!(err, JoseError::AlgorithmMismatch { .. }), "{err}");
        let enc = |v: &str| Base64UrlUnpadded.encode(v.as_bytes());
        for (header, expect) in [
            (r#"{"alg":"none","kid":"k"}"#, "\"none\" is not accepted"),
            (r#"{"alg":"HS256","kid":"k"}"#, "\"HS256\" is not accepted"),
            (
                r#"{"alg":"ES256","kid":"k","crit":["exp"]}"#,
                "critical extensions",
            ),
            (r#"{"alg":"ES256"}"#, "no string \"kid\""),
            (r#"[1]"#, "not a JSON object"),
        ] {
            let t = format!("{}.{}.{}", enc(header), enc("{}"), enc("sig"));
            let err = ParsedToken::parse(t.as_bytes()).unwrap_err().to_string();
            assert!(err.contains(expect), "{header}: {err}");
        }
        for bad in [
            "",
            "a.b",
            "a.b.c.d",
            "!!.e30.AA",
            "e30.e30.A===",
            "\u{e9}.a.b",
        ] {
            assert!(ParsedToken::parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn jwks_round_trips_and_refuses_private_or_short_keys() {
        let (_, ec) = signer_and_key(pki_core::KeyAlgorithm::EcdsaP256);
        let (_, rsa) = signer_and_key(pki_core::KeyAlgorithm::Rsa2048);
        let set = Jwks {
            keys: vec![ec.clone(), rsa.clone()],
        };
        let json = set.to_json();
        assert_eq!(Jwks::parse(json.as_bytes()).unwrap(), set);
        let mut with_d = ec.to_jwk();
        with_d.insert("d".into(), Value::String("AAAA".into()));
        let doc = serde_json::json!({"keys": [with_d]}).to_string();
        assert!(
            Jwks::parse(doc.as_bytes())
                .unwrap_err()
                .to_string()
                .contains("private key")
        );
        let short = serde_json::json!({"keys": [{"kty":"RSA","n":"AQAB","e":"AQAB"}]}).to_string();
        assert!(Jwks::parse(short.as_bytes()).is_err());
        for bad in ["", "[]", "{}", r#"{"keys":{}}"#, r#"{"keys":[1]}"#] {
            assert!(Jwks::parse(bad.as_bytes()).is_err(), "{bad:?}");
        }
    }
}
