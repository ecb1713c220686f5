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

pub use crate::model::error::JoseError;

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
