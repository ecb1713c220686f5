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

mod jwk;
mod token;

pub use jwk::{Jwks, PublicKey, jwk_thumbprint};
pub use token::{ParsedToken, parse_claims};
pub(crate) use token::{TokenSigner, sign};

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

fn unsupported(what: impl Into<String>, reason: impl std::fmt::Display) -> JoseError {
    JoseError::UnsupportedKey {
        what: what.into(),
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests;
