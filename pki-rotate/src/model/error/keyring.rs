//! The key ring's errors, carried by [`RotateError::KeyRing`].

use super::JoseError;
use crate::model::error::RotateError;

/// Errors of the key ring, carried by [`RotateError::KeyRing`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyRingError {
    /// The policy is refused.
    #[error("key ring policy refused: {0}")]
    Policy(String),
    /// A token, JWK or JWK Set was refused.
    #[error(transparent)]
    Jose(#[from] JoseError),
    /// A key set to import holds nothing usable, or something unusable.
    #[error("{location}: {reason}")]
    Import {
        /// Which file or block.
        location: String,
        /// What is wrong.
        reason: String,
    },
    /// Retiring a key was refused.
    #[error("cannot retire key \"{kid}\": {reason}")]
    Retire {
        /// The key id.
        kid: String,
        /// Why.
        reason: String,
    },
    /// The time given is before the active key became active. Deliberate:
    /// nothing the ring does can happen before its own active key existed,
    /// so such a time says the clock is behind, and acting on it would
    /// date tokens and history before the key that made them.
    #[error(
        "cannot {action} at {now}: the active key became active only at {since}, so the clock or the time given is behind (refusing to date anything before the key that makes it); use {since} or later"
    )]
    ClockBehind {
        /// What was refused: `sign a token`, `step the key ring`.
        action: &'static str,
        /// The time given (RFC 3339).
        now: String,
        /// When the active key became active (RFC 3339).
        since: String,
    },
    /// A token was not signed: its claims would outlive the grace period.
    #[error("refusing to sign: {0}")]
    TokenLifetime(String),
}

impl From<KeyRingError> for RotateError {
    fn from(e: KeyRingError) -> Self {
        RotateError::KeyRing(Box::new(e))
    }
}

impl From<JoseError> for RotateError {
    fn from(e: JoseError) -> Self {
        KeyRingError::Jose(e).into()
    }
}
