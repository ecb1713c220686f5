//! Errors of the rotation engines and stores.

use std::path::PathBuf;
use time::OffsetDateTime;

/// Everything that can make a rotation or a store operation fail. A failed
/// operation changes nothing: engines are pure and stores commit atomically.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RotateError {
    /// An error from the certificate model.
    #[error(transparent)]
    Core(#[from] pki_core::Error),
    /// The time given is before the current CA's NotBefore: the clock is
    /// wrong or went backwards, and nothing is decided on it.
    #[error(
        "time {now} is before the current CA's NotBefore {not_before}: refusing to act on a clock that is behind the CA"
    )]
    ClockBeforeCa {
        /// The time given.
        now: String,
        /// The CA's NotBefore.
        not_before: String,
    },
    /// A forced rotation was requested with an empty reason.
    #[error("a forced rotation needs a non-empty reason")]
    EmptyForcedReason,
    /// A forced rotation asked for a grace period that ends before it starts.
    #[error("forced rotation grace period must be positive, got {0}")]
    InvalidGrace(String),
    /// A leaf name is not usable (it becomes a directory name).
    #[error(
        "invalid certificate name \"{0}\": use 1-64 characters of a-z, 0-9, '-', '_' and '.', not starting with '.'"
    )]
    InvalidLeafName(String),
    /// A leaf refresh fraction outside (0, 1).
    #[error("leaf refresh fraction must be between 0 and 1 (exclusive), got {0}")]
    InvalidRefreshFraction(f64),
    /// The state document has a version this build does not understand.
    #[error(
        "state format version {found} is not supported (this build reads version {supported}); refusing to reset it"
    )]
    UnsupportedStateVersion {
        /// The version found.
        found: u32,
        /// The version this build reads.
        supported: u32,
    },
    /// The state document or a store file is malformed.
    #[error("{location}: {reason}")]
    CorruptState {
        /// Which file or field.
        location: String,
        /// What is wrong.
        reason: String,
    },
    /// The state changed since it was loaded (compare-and-swap lost).
    #[error("state changed concurrently: expected generation {expected}, found {found}")]
    Conflict {
        /// The generation the caller loaded.
        expected: u64,
        /// The generation now in the store.
        found: u64,
    },
    /// No state exists yet at this location.
    #[error("no pki store at {0} (run `pki init` first)")]
    NotInitialized(PathBuf),
    /// A store already exists where a new one was to be created.
    #[error("a pki store already exists at {0}")]
    AlreadyInitialized(PathBuf),
    /// A filesystem operation failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The pre-flight trust check found a server/client combination that
    /// would stop verifying; the plan is not committed.
    #[error("pre-flight trust check failed: {cell}: {reason}")]
    TrustCheckFailed {
        /// Which serving chain against which bundle, at which time.
        cell: String,
        /// Why it does not verify.
        reason: String,
    },
    /// A certificate or key is already expired at the time of an operation.
    #[error("{what} expired at {at}")]
    Expired {
        /// What expired.
        what: String,
        /// When.
        at: String,
    },
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
    pub(crate) fn clock(now: OffsetDateTime, not_before: OffsetDateTime) -> Self {
        RotateError::ClockBeforeCa {
            now: pki_core::datetime::rfc3339(now),
            not_before: pki_core::datetime::rfc3339(not_before),
        }
    }
}

/// Result with [`RotateError`].
pub type Result<T, E = RotateError> = std::result::Result<T, E>;
