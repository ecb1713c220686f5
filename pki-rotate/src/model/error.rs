//! Errors of the rotation engines, the stores and the driver.

mod credential;
mod document;
mod jose;
mod keyring;
mod set;
mod signer;
mod store;

pub use credential::CredentialError;
pub use document::DocumentError;
pub use jose::JoseError;
pub use keyring::KeyRingError;
pub use set::SetError;
pub use signer::SignerError;
pub use store::StoreError;

use crate::model::Side;
use pki_core::datetime::rfc3339;
use std::path::PathBuf;
use time::OffsetDateTime;

/// Everything that can make a rotation or a store operation fail, by
/// layer: [`StoreError`] (where documents live), [`DocumentError`] (what a
/// store holds, read as a kind), one error per engine ([`SignerError`],
/// [`SetError`], [`KeyRingError`], [`CredentialError`]),
/// and the few every layer shares. A failed operation changes nothing:
/// engines are pure and stores commit atomically. The one exception says
/// so in its name: [`StoreError::UnknownOutcome`], a write whose answer was
/// lost, which may have landed.
///
/// Two store errors matter to a controller that shares its store with
/// other replicas: [`StoreError::Conflict`] means "someone else wrote
/// first: reload and try again", [`StoreError::UnknownOutcome`] means "the
/// write may or may not have landed: step again, which is safe"; everything
/// else means "this cannot succeed as asked". [`RotateError::is_conflict`]
/// and [`RotateError::is_unknown_outcome`] tell them apart. No message
/// names a command-line flag: how to go on is the caller's to say.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RotateError {
    /// A reason, name or message given by a caller that cannot be stored
    /// or printed as it is (empty, too long, or with a control character
    /// that could forge a line or a terminal escape in status).
    #[error("{what} {reason}")]
    InvalidText {
        /// What the text is (`"the override reason"`, …).
        what: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// An error from the certificate model.
    #[error(transparent)]
    Core(#[from] pki_core::Error),
    /// The pre-flight trust check found a server/client combination that
    /// would stop verifying; the plan is not committed.
    #[error(
        "pre-flight trust check failed: {chain} serving chain x {bundle} bundle at {}: {source}",
        rfc3339(*.at)
    )]
    TrustCheckFailed {
        /// Whose serving chain.
        chain: Side,
        /// Whose bundle.
        bundle: Side,
        /// When the cell fails.
        at: OffsetDateTime,
        /// Why path validation failed (boxed: it is large, and rare).
        #[source]
        source: Box<pki_core::VerifyError>,
    },
    /// A certificate or key is already expired at the time of an operation.
    #[error("{what} expired at {}", rfc3339(*.at))]
    Expired {
        /// What expired.
        what: String,
        /// When.
        at: OffsetDateTime,
    },
    /// The key ring refused something: a policy, a token, an import, a
    /// retirement (boxed to keep this enum small).
    #[error(transparent)]
    KeyRing(Box<KeyRingError>),
    /// What a store reports.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A document that cannot be read as the kind asked for.
    #[error(transparent)]
    Document(#[from] DocumentError),
    /// What the signer (service-CA) and external-CA engines refuse.
    #[error(transparent)]
    Signer(#[from] SignerError),
    /// What the CA set engine refuses.
    #[error(transparent)]
    Set(#[from] SetError),
    /// What the credential engine refuses.
    #[error(transparent)]
    Credential(#[from] CredentialError),
}

impl RotateError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        RotateError::Store(StoreError::Io {
            path: path.into(),
            source,
        })
    }
    pub(crate) fn corrupt(location: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        RotateError::Document(DocumentError::Corrupt {
            location: location.into(),
            reason: reason.to_string(),
        })
    }
    pub(crate) fn json(location: impl Into<String>, source: serde_json::Error) -> Self {
        RotateError::Document(DocumentError::Json {
            location: location.into(),
            source,
        })
    }
    pub(crate) fn material(location: impl Into<String>, source: pki_core::Error) -> Self {
        RotateError::Document(DocumentError::Material {
            location: location.into(),
            source,
        })
    }

    /// Whether this is a lost compare-and-swap: reading again and retrying
    /// may succeed. Every other error is final for the same inputs.
    pub fn is_conflict(&self) -> bool {
        matches!(self, RotateError::Store(StoreError::Conflict { .. }))
    }

    /// Whether a write may have landed though it reported no success (its
    /// answer was lost): the store may hold the new document or the old
    /// one. Stepping again is safe (the engines recognise a request they
    /// already applied); retrying it blindly as a conflict is not what the
    /// driver does (see [`crate::Driver::step`]).
    pub fn is_unknown_outcome(&self) -> bool {
        matches!(self, RotateError::Store(StoreError::UnknownOutcome { .. }))
    }

    /// Prefixes the location of a document error with where the document
    /// was read from (a directory, a store URL).
    pub fn within(self, origin: &str) -> Self {
        match self {
            RotateError::Document(DocumentError::Corrupt { location, reason }) => {
                RotateError::Document(DocumentError::Corrupt {
                    location: format!("{origin}: {location}"),
                    reason,
                })
            }
            RotateError::Document(DocumentError::Json { location, source }) => {
                RotateError::Document(DocumentError::Json {
                    location: format!("{origin}: {location}"),
                    source,
                })
            }
            RotateError::Document(DocumentError::Material { location, source }) => {
                RotateError::Document(DocumentError::Material {
                    location: format!("{origin}: {location}"),
                    source,
                })
            }
            RotateError::Document(DocumentError::Unsupported {
                location,
                kind,
                version,
                expected_kind,
                supported,
            }) => RotateError::Document(DocumentError::Unsupported {
                location: format!("{origin}: {location}"),
                kind,
                version,
                expected_kind,
                supported,
            }),
            other => other,
        }
    }
}

/// Result with [`RotateError`].
pub type Result<T, E = RotateError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    #[test]
    fn errors_stay_small_enough_to_return_by_value() {
        // Every fallible function returns this; stay under clippy's
        // large-error limit (128 bytes) by boxing rare, large payloads.
        assert!(std::mem::size_of::<super::RotateError>() < 128);
    }
}
