//! Compact JWS (RFC 7515) for JWTs (RFC 7519): signing with ES256 or
//! RS256, and parsing and verifying tokens.

use super::{Algorithm, JoseError, MAX_TOKEN_BYTES, PublicKey, malformed, unsupported};
use crate::engines::keyring::KeyRingError;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as Base64UrlUnpadded;
use serde_json::{Map, Value};
use sha2::Sha256;
use signature::{SignatureEncoding, Signer};

/// A private key that signs tokens, built from a pki-core key.
pub(crate) enum TokenSigner {
    P256(p256::ecdsa::SigningKey),
    Rsa(Box<rsa::pkcs1v15::SigningKey<Sha256>>),
    /// A key object in a PKCS#11 token, signing there.
    Token(Box<pki_core::TokenKey>),
}

impl TokenSigner {
    /// The signer of `key`: in this process, read back from its PKCS#8
    /// form (pki-core keeps its key types private, and PKCS#8 is the one
    /// form both sides speak); in a token, the token's object.
    pub(crate) fn new(key: &pki_core::CaKey) -> Result<Self, JoseError> {
        use p256::pkcs8::DecodePrivateKey;
        let key = match key {
            pki_core::CaKey::InProcess(key) => key,
            pki_core::CaKey::Token(key) => return Self::in_token(key),
        };
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

    fn in_token(key: &pki_core::TokenKey) -> Result<Self, JoseError> {
        match key.algorithm() {
            pki_core::KeyAlgorithm::EcdsaP384 => Err(unsupported(
                format!("active key {}", key.uri()),
                "a P-384 key signs ES384, which the key ring does not sign",
            )),
            _ => Ok(TokenSigner::Token(Box::new(key.clone()))),
        }
    }

    fn algorithm(&self) -> Algorithm {
        match self {
            TokenSigner::P256(_) => Algorithm::Es256,
            TokenSigner::Rsa(_) => Algorithm::Rs256,
            TokenSigner::Token(key) if key.algorithm().is_rsa() => Algorithm::Rs256,
            TokenSigner::Token(_) => Algorithm::Es256,
        }
    }

    /// The signature of `input` as JWS carries it. A token signs through
    /// pki-core's [`pki_core::SigningKey`], which gives the X.509 form: an
    /// RSASSA-PKCS1-v1_5 signature is the same in both; an ECDSA one is DER
    /// there, its r and s put back here as the 64 bytes r‖s of ES256
    /// (RFC 7518 §3.4).
    fn sign(&self, input: &[u8]) -> crate::Result<Vec<u8>> {
        let failed = |e: signature::Error| KeyRingError::Jose(unsupported("active key", e));
        match self {
            // RFC 6979 deterministic ECDSA: same key and message, same token.
            TokenSigner::P256(k) => {
                let s: p256::ecdsa::Signature = k.try_sign(input).map_err(failed)?;
                Ok(s.to_bytes().to_vec())
            }
            TokenSigner::Rsa(k) => {
                let s: rsa::pkcs1v15::Signature = k.try_sign(input).map_err(failed)?;
                Ok(s.to_vec())
            }
            TokenSigner::Token(key) => {
                let provider = pki_core::CryptoProvider::get_default();
                let uri = key.uri().to_string();
                let key = pki_core::CaKey::Token(key.clone());
                let signature = pki_core::SigningKey::sign(&key, input, &provider)?;
                if key.algorithm().is_rsa() {
                    return Ok(signature);
                }
                let s = p256::ecdsa::Signature::from_der(&signature).map_err(|e| {
                    pki_core::Error::Pkcs11 {
                        operation: format!("signing a token with {uri}"),
                        reason: format!("the token's ECDSA signature does not read back: {e}"),
                    }
                })?;
                Ok(s.to_bytes().to_vec())
            }
        }
    }
}

/// Signs `claims` (a JSON object, used byte for byte as the payload) as a
/// compact JWS with header `{"alg","kid","typ":"JWT"}`.
pub(crate) fn sign(signer: &TokenSigner, kid: &str, claims: &[u8]) -> crate::Result<String> {
    parse_claims(claims).map_err(KeyRingError::Jose)?;
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
///
/// # Errors
///
/// [`JoseError::TooLarge`] over [`MAX_TOKEN_BYTES`]; [`JoseError::Malformed`]
/// when `claims` is not JSON or not an object.
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
    ///
    /// # Errors
    ///
    /// [`JoseError::TooLarge`] over [`MAX_TOKEN_BYTES`];
    /// [`JoseError::Malformed`] for text that is not three base64url parts, a
    /// header that is not a JSON object with a string `alg` and `kid`, or
    /// claims that are not a JSON object; [`JoseError::UnsupportedAlgorithm`]
    /// for an `alg` other than ES256 and RS256; [`JoseError::CriticalHeader`]
    /// when the header has `crit`.
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
    ///
    /// # Errors
    ///
    /// [`JoseError::AlgorithmMismatch`] when the token's algorithm does not fit
    /// `key`, [`JoseError::BadSignature`] when the signature does not verify.
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
    ///
    /// # Errors
    ///
    /// [`JoseError::Expired`] when `now` is at or after `exp`,
    /// [`JoseError::NotYetValid`] when it is before `nbf`, and
    /// [`JoseError::Malformed`] when either claim is not a NumericDate.
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
