//! What happened, for logs, Kubernetes events and the CLI.

use super::RotationReason;
use crate::engines::leaf::LeafReason;
use pki_core::datetime::rfc3339;
use time::OffsetDateTime;

/// What happened, for logs, Kubernetes events and the CLI.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Event {
    /// The CA was rotated.
    Rotated {
        /// Why.
        reason: RotationReason,
        /// Id of the CA rotated out.
        previous: String,
        /// Id of the new CA.
        current: String,
        /// Until when the previous CA stays trusted (None: distrusted at once).
        #[serde(with = "time::serde::rfc3339::option")]
        previous_trusted_until: Option<OffsetDateTime>,
    },
    /// A leaf was issued or re-issued.
    LeafReissued {
        /// The leaf's name.
        name: String,
        /// Why.
        reason: LeafReason,
        /// The new certificate's id.
        id: String,
    },
    /// Expired certificates left the bundle.
    BundlePruned {
        /// Ids of the certificates removed.
        removed: Vec<String>,
    },
    /// Bridge B expired and is no longer appended to serving chains.
    BridgeRetired {
        /// Its id.
        id: String,
    },
    /// A leaf was removed on request; its certificate and key are gone.
    LeafRemoved {
        /// The leaf's name.
        name: String,
    },
    /// A forced rotation found the CA already rotated by a concurrent
    /// writer; that rotation is recorded as forced and none other is made.
    ForcedRotationSatisfied {
        /// The forced reason, now recorded.
        reason: String,
        /// Id of the CA the concurrent rotation made.
        by: String,
    },
    /// A rotation's new CA key was recorded as intended; the next round
    /// makes it in the token (or adopts it there) and rotates.
    TokenKeyIntended {
        /// The key object's URI.
        uri: String,
    },
    /// A CA key object in the token is no longer trusted and is listed
    /// for destruction.
    TokenKeyRetired {
        /// The key object's URI.
        uri: String,
    },
    /// A retired CA key object was destroyed in the token (or was gone).
    TokenKeyDestroyed {
        /// The key object's URI.
        uri: String,
    },
    /// The request was carried out before: nothing changes.
    AlreadyDone {
        /// What was done, and when.
        note: String,
    },
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Event::Rotated {
                reason,
                previous,
                current,
                previous_trusted_until,
            } => {
                write!(f, "rotated CA {previous} -> {current} ({reason}); ")?;
                match previous_trusted_until {
                    Some(t) => write!(f, "previous CA trusted until {}", rfc3339(*t)),
                    None => write!(f, "previous CA no longer trusted"),
                }
            }
            Event::LeafReissued { name, reason, id } => {
                write!(f, "issued {name} ({id}): {reason}")
            }
            Event::BundlePruned { removed } => {
                write!(
                    f,
                    "removed expired bundle certificates {}",
                    removed.join(", ")
                )
            }
            Event::BridgeRetired { id } => write!(f, "retired expired bridge {id}"),
            Event::LeafRemoved { name } => write!(f, "removed {name}"),
            Event::ForcedRotationSatisfied { reason, by } => write!(
                f,
                "forced rotation ({reason}) already done by a concurrent rotation to {by}; recorded as forced"
            ),
            Event::TokenKeyIntended { uri } => {
                write!(f, "recorded the new CA key {uri}, to make in the token")
            }
            Event::TokenKeyRetired { uri } => {
                write!(f, "retired the CA key {uri}: nothing trusts its CA")
            }
            Event::TokenKeyDestroyed { uri } => write!(f, "destroyed the CA key {uri}"),
            Event::AlreadyDone { note } => write!(f, "nothing to do: {note}"),
        }
    }
}

impl From<crate::engines::token_keys::KeyChange> for Event {
    fn from(change: crate::engines::token_keys::KeyChange) -> Self {
        use crate::engines::token_keys::KeyChange;
        match change {
            KeyChange::Intended(uri) => Event::TokenKeyIntended {
                uri: uri.to_string(),
            },
            KeyChange::Retired(uri) => Event::TokenKeyRetired {
                uri: uri.to_string(),
            },
            KeyChange::Destroyed(uri) => Event::TokenKeyDestroyed {
                uri: uri.to_string(),
            },
        }
    }
}
