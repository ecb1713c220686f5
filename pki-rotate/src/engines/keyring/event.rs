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
        }
    }
}
