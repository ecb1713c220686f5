//! [`StoreError`]: What a store reports: a lost compare-and-swap, a write whose answer was lost, a document that is not there or already is, a backend that failed. A store keeps its files intact or says so: nothing here means a document was half written.

use crate::model::Revision;
use std::path::PathBuf;

/// What a store reports: a lost compare-and-swap, a write whose answer was lost, a document that is not there or already is, a backend that failed. A store keeps its files intact or says so: nothing here means a document was half written.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
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
    /// A write was sent but its answer never came (a timeout, a connection
    /// lost after the request went out), and the store could not find out
    /// whether it was applied: the document may be the new one or the old
    /// one, and a transaction still in flight may yet be applied. Unlike
    /// every other error, this one does not promise that nothing changed.
    /// Rerunning is safe: every mutating request is recorded in the
    /// document, so a repeat of one that landed is "nothing to do".
    #[error(
        "the write of document \"{}\" to {store} may have landed ({detail}); rerunning the command is safe",
        .key.escape_debug()
    )]
    UnknownOutcome {
        /// Which store (its URL or address).
        store: String,
        /// The document's key in that store.
        key: String,
        /// What happened to the request, and what the store found when it
        /// tried to resolve the outcome.
        detail: String,
    },
    /// The driver kept losing the compare-and-swap to other writers.
    #[error("{key}: gave up after {attempts} attempts, each lost to a concurrent writer")]
    TooManyConflicts {
        /// The document's key.
        key: String,
        /// How many times it tried.
        attempts: u32,
    },
    /// No document exists yet at this location. (Which command creates
    /// it is the caller's to say: the CLI names the right `init`.)
    #[error("no pki store at {0}")]
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
    /// be reached. Unlike [`StoreError::Conflict`](crate::StoreError::Conflict), retrying at once is not
    /// expected to help.
    #[error("{store}: {source}")]
    Backend {
        /// Which store (its URL or address).
        store: String,
        /// What went wrong.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync + 'static>,
    },
    /// Sealed private material cannot be opened or written as asked: the
    /// store holds sealed values and no key was given, or they were sealed
    /// under another key, or a sealed value fails to open (changed, or
    /// copied from another document or file). Nothing was written.
    #[error("{location}: {reason}")]
    Sealing {
        /// The document and file, or the store.
        location: String,
        /// What is wrong.
        reason: String,
    },
    /// The directory store is not safe to use: a directory, file or link
    /// of it is writable by group or others or owned by another user, or
    /// its lock file is a symbolic link. Another local user could swap the
    /// CA pki signs with, so nothing is read or written.
    #[error("{}: {reason}; refusing to use the store", .path.display())]
    UnsafeStore {
        /// The offending path.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A published file or link of the directory store no longer matches
    /// what was committed (missing, replaced, changed). The store is used
    /// again only once the path is restored or moved away.
    #[error("{}: found {found} where the store committed {expected}; {advice}", .path.display())]
    DamagedStore {
        /// The published path.
        path: PathBuf,
        /// What is there now.
        found: String,
        /// What the committed generation holds.
        expected: String,
        /// What to do about it.
        advice: String,
    },
    /// Another run held the store's lock for the whole lock timeout.
    #[error(
        "{}: still locked after waiting {}s, {}",
        .path.display(),
        .waited.as_secs_f64(),
        .holder.as_deref().map(|h| format!("held by {h}")).unwrap_or_else(|| "by a run that did not record itself".into())
    )]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How long this run waited.
        waited: std::time::Duration,
        /// Who holds it, as the holder recorded it in the lock file.
        holder: Option<String>,
    },
}

fn describe_revision(r: Option<&Revision>) -> String {
    match r {
        Some(r) => format!("revision {r}"),
        None => "no document".to_string(),
    }
}
