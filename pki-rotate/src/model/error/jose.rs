//! Why a JOSE object (a token, a JWK, a JWK Set) was refused: the key
//! ring's parsing and verification errors, carried by
//! [`KeyRingError::Jose`](super::KeyRingError::Jose).

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
