//! What a step did, for logs and the CLI.

use super::KeyRotationReason;
use pki_core::datetime::rfc3339;
use time::OffsetDateTime;

/// What a step did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum KeyRingEvent {
    /// A new key became active.
    Rotated {
        /// Why.
        reason: KeyRotationReason,
        /// The previous active key id.
        previous: String,
        /// The new active key id.
        current: String,
        /// Until when the previous key stays accepted (always set now;
        /// None only in older histories).
        #[serde(with = "time::serde::rfc3339::option")]
        previous_accepted_until: Option<OffsetDateTime>,
    },
    /// An accepted key's grace ended and it was removed.
    Expired {
        /// Its key id.
        kid: String,
    },
    /// A key was retired on request.
    Retired {
        /// Its key id.
        kid: String,
    },
    /// A forced reason was recorded without a rotation: a concurrent
    /// writer had just rotated.
    ForcedRotationSatisfied {
        /// The reason.
        reason: String,
        /// The active key id the concurrent rotation made.
        by: String,
    },
    /// A rotation's new key was recorded; the next round makes it in the
    /// token (or adopts it there).
    TokenKeyIntended {
        /// The key object's URI.
        uri: String,
    },
    /// A key object in the token is no longer accepted and is listed for
    /// destruction.
    TokenKeyRetired {
        /// The key object's URI.
        uri: String,
    },
    /// A retired key object was destroyed in the token (or was gone).
    TokenKeyDestroyed {
        /// The key object's URI.
        uri: String,
    },
}

impl std::fmt::Display for KeyRingEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyRingEvent::Rotated {
                reason,
                previous,
                current,
                previous_accepted_until,
            } => {
                write!(
                    f,
                    "rotated signing key {previous} -> {current} ({reason}); "
                )?;
                match previous_accepted_until {
                    Some(t) => write!(f, "previous key accepted until {}", rfc3339(*t)),
                    None => write!(f, "previous key (imported) accepted until retired"),
                }
            }
            KeyRingEvent::Expired { kid } => {
                write!(f, "removed key {kid}: its grace period has ended")
            }
            KeyRingEvent::Retired { kid } => write!(f, "retired key {kid}"),
            KeyRingEvent::ForcedRotationSatisfied { reason, by } => write!(
                f,
                "forced rotation ({reason}) already done by a concurrent rotation to {by}; recorded as forced"
            ),
            KeyRingEvent::TokenKeyIntended { uri } => {
                write!(
                    f,
                    "recorded the new signing key {uri}, to make in the token"
                )
            }
            KeyRingEvent::TokenKeyRetired { uri } => {
                write!(f, "retired the signing key {uri}: it is no longer accepted")
            }
            KeyRingEvent::TokenKeyDestroyed { uri } => {
                write!(f, "destroyed the signing key {uri}")
            }
        }
    }
}
