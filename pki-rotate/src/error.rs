//! Errors of the rotation engines, the stores and the driver.

use crate::preflight::Side;
use crate::store::Revision;
use pki_core::datetime::rfc3339;
use std::path::PathBuf;
use time::OffsetDateTime;

/// Everything that can make a rotation or a store operation fail. A failed
/// operation changes nothing: engines are pure and stores commit atomically.
///
/// Two variants matter to a controller that shares its store with other
/// replicas: [`RotateError::Conflict`] means "someone else wrote first:
/// reload and try again", everything else means "this cannot succeed as
/// asked". [`RotateError::is_conflict`] tells them apart.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RotateError {
    /// An error from the certificate model.
    #[error(transparent)]
    Core(#[from] pki_core::Error),
    /// The time given is before the current CA's NotBefore: the clock is
    /// wrong or went backwards, and nothing is decided on it.
    #[error(
        "time {} is before the current CA's NotBefore {}: refusing to act on a clock that is behind the CA",
        rfc3339(*.now),
        rfc3339(*.not_before)
    )]
    ClockBeforeCa {
        /// The time given.
        now: OffsetDateTime,
        /// The CA's NotBefore.
        not_before: OffsetDateTime,
    },
    /// A forced rotation was requested with an empty reason.
    #[error("a forced rotation needs a non-empty reason")]
    EmptyForcedReason,
    /// A forced rotation asked for a grace period that ends before it starts.
    #[error("forced rotation grace period must be positive, got {}", pki_core::policy::human(*.0))]
    InvalidGrace(time::Duration),
    /// A leaf name is not usable (it becomes a directory name).
    #[error(
        "invalid certificate name \"{}\": use 1-64 characters of a-z, 0-9, '-', '_' and '.', not starting with '.'",
        .0.escape_debug()
    )]
    InvalidLeafName(String),
    /// A change names a leaf the document does not keep.
    #[error("no certificate named \"{}\"", .0.escape_debug())]
    UnknownLeaf(String),
    /// A leaf refresh fraction outside (0, 1).
    #[error("leaf refresh fraction must be between 0 and 1 (exclusive), got {0}")]
    InvalidRefreshFraction(f64),
    /// A document has a kind or a version this build does not read. It is
    /// never reset or overwritten because of it.
    #[error("{location}: {}", describe_unsupported(.kind, *.version, .expected_kind, *.supported))]
    UnsupportedDocument {
        /// Where the document was read from.
        location: String,
        /// The kind found (None: the document names no kind).
        kind: Option<String>,
        /// The version found.
        version: u32,
        /// The kind the caller asked for.
        expected_kind: &'static str,
        /// The newest version of that kind this build reads.
        supported: u32,
    },
    /// A document or one of its files is not valid JSON of the expected shape.
    #[error("{location}: {source}")]
    Json {
        /// Which file or field.
        location: String,
        /// The parser's error.
        #[source]
        source: serde_json::Error,
    },
    /// A certificate or key of a document does not decode.
    #[error("{location}: {source}")]
    Material {
        /// Which file.
        location: String,
        /// What is wrong with it.
        #[source]
        source: pki_core::Error,
    },
    /// A document is inconsistent or incomplete (a file is missing, the
    /// bundle lacks the current CA…).
    #[error("{location}: {reason}")]
    CorruptState {
        /// Which file or field.
        location: String,
        /// What is wrong.
        reason: String,
    },
    /// Another writer changed the document since it was read (the
    /// compare-and-swap lost). Nothing was written; read again and retry.
    #[error(
        "{key}: changed concurrently (expected {}, found {})",
        describe_revision(.expected.as_ref()),
        describe_revision(.found.as_ref())
    )]
    Conflict {
        /// The document's key in its store.
        key: String,
        /// The revision the writer read (None: it expected no document).
        expected: Option<Revision>,
        /// The revision in the store now, when the store knows it (None:
        /// no document, or not reported).
        found: Option<Revision>,
    },
    /// The driver kept losing the compare-and-swap to other writers.
    #[error("{key}: gave up after {attempts} attempts, each lost to a concurrent writer")]
    TooManyConflicts {
        /// The document's key.
        key: String,
        /// How many times it tried.
        attempts: u32,
    },
    /// No document exists yet at this location.
    #[error("no pki store at {0} (run `pki init` first)")]
    NotInitialized(String),
    /// A document already exists where a new one was to be created.
    #[error("a pki store already exists at {0}")]
    AlreadyInitialized(String),
    /// A store key is not usable.
    #[error("invalid store key \"{}\": {reason}", .key.escape_debug())]
    InvalidKey {
        /// The key.
        key: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A filesystem operation failed.
    #[error("{}: {source}", .path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A store backend (a database, a remote service) failed or could not
    /// be reached. Unlike [`RotateError::Conflict`], retrying at once is not
    /// expected to help.
    #[error("{store}: {source}")]
    Backend {
        /// Which store (its URL or address).
        store: String,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
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
    KeyRing(Box<crate::keyring::KeyRingError>),
}

fn describe_unsupported(
    kind: &Option<String>,
    version: u32,
    expected: &str,
    supported: u32,
) -> String {
    match kind.as_deref() {
        Some(k) if k != expected => format!(
            "holds a \"{}\" document, not a {expected} document",
            k.escape_debug()
        ),
        _ => format!(
            "{expected} document version {version} is not supported (this build reads versions up to {supported}); refusing to reset it"
        ),
    }
}

fn describe_revision(r: Option<&Revision>) -> String {
    match r {
        Some(r) => format!("revision {r}"),
        None => "no document".to_string(),
    }
}

impl RotateError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        RotateError::Io {
            path: path.into(),
            source,
        }
    }
    pub(crate) fn corrupt(location: impl Into<String>, reason: impl std::fmt::Display) -> Self {
        RotateError::CorruptState {
            location: location.into(),
            reason: reason.to_string(),
        }
    }
    pub(crate) fn json(location: impl Into<String>, source: serde_json::Error) -> Self {
        RotateError::Json {
            location: location.into(),
            source,
        }
    }
    pub(crate) fn material(location: impl Into<String>, source: pki_core::Error) -> Self {
        RotateError::Material {
            location: location.into(),
            source,
        }
    }

    /// Whether this is a lost compare-and-swap: reading again and retrying
    /// may succeed. Every other error is final for the same inputs.
    pub fn is_conflict(&self) -> bool {
        matches!(self, RotateError::Conflict { .. })
    }

    /// Prefixes the location of a document error with where the document
    /// was read from (a directory, a store URL).
    pub fn within(self, origin: &str) -> Self {
        match self {
            RotateError::CorruptState { location, reason } => RotateError::CorruptState {
                location: format!("{origin}: {location}"),
                reason,
            },
            RotateError::Json { location, source } => RotateError::Json {
                location: format!("{origin}: {location}"),
                source,
            },
            RotateError::Material { location, source } => RotateError::Material {
                location: format!("{origin}: {location}"),
                source,
            },
            RotateError::UnsupportedDocument {
                location,
                kind,
                version,
                expected_kind,
                supported,
            } => RotateError::UnsupportedDocument {
                location: format!("{origin}: {location}"),
                kind,
                version,
                expected_kind,
                supported,
            },
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
