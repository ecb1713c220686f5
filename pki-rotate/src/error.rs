//! Errors of the rotation engines, the stores and the driver.

use crate::preflight::Side;
use crate::store::Revision;
use pki_core::datetime::rfc3339;
use std::path::PathBuf;
use time::OffsetDateTime;

/// Everything that can make a rotation or a store operation fail. A failed
/// operation changes nothing: engines are pure and stores commit atomically.
/// The one exception says so in its name: [`RotateError::UnknownOutcome`],
/// a write whose answer was lost, which may have landed.
///
/// Three variants matter to a controller that shares its store with other
/// replicas: [`RotateError::Conflict`] means "someone else wrote first:
/// reload and try again", [`RotateError::UnknownOutcome`] means "the write
/// may or may not have landed: step again, which is safe", everything else
/// means "this cannot succeed as asked". [`RotateError::is_conflict`] and
/// [`RotateError::is_unknown_outcome`] tell them apart.
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
    /// A document that reads, but whose parts do not belong together (see
    /// [`crate::Document::problems`]): nothing is decided over it.
    #[error("{location} is inconsistent: {}; nothing was written", .problems.join("; "))]
    InconsistentDocument {
        /// The store and document.
        location: String,
        /// What does not hold, one sentence each.
        problems: Vec<String>,
    },
    /// A leaf the CA cannot issue so that clients accept it (a name outside
    /// an imported CA's name constraints, a path length the chain forbids):
    /// refused before anything is written.
    #[error("certificate {name} refused: {reason}")]
    LeafRefused {
        /// The leaf's name.
        name: String,
        /// Why its certificate would not verify.
        reason: String,
    },
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
    /// A leaf request would change the leaf's kind or drop some of its
    /// names; that takes an explicit replacement (`pki issue --replace`).
    #[error(
        "certificate \"{}\": {changes}; that takes an explicit replacement (clients relying on it may stop working)",
        .name.escape_debug()
    )]
    LeafChangeNeedsReplace {
        /// The leaf's name.
        name: String,
        /// What would change, in words.
        changes: String,
    },
    /// A rotation would leave consumers unable to verify each other (see
    /// [`crate::preflight::rotation_trust_breaks`]); it is refused unless
    /// the operator allows it with a reason.
    #[error(
        "rotation refused: it breaks trust: {}; it goes ahead only with an operator's reason, recorded",
        .breaks.join("; ")
    )]
    TrustBreak {
        /// Which consumers break and until when, one entry each.
        breaks: Vec<String>,
    },
    /// A supplied CA failed validation: each failed check with what it
    /// found. Nothing was written.
    #[error("{}", describe_failed_checks(.failed, *.forced))]
    ValidationFailed {
        /// The checks that failed.
        failed: Vec<crate::signer::OverriddenCheck>,
        /// Whether a forced rotation was asked for (some checks cannot be forced).
        forced: bool,
    },
    /// Same-key renewal of an imported CA: only its issuer can renew it.
    #[error(
        "CA {ca} was imported: renewal needs the external signer; have it issue a new certificate on the same key and supply that as the replacement"
    )]
    ImportedCaRenewal {
        /// The CA's id.
        ca: String,
    },
    /// A forced service-CA rotation of an imported CA: pki does not
    /// generate the replacement of a CA someone else signed.
    #[error(
        "CA {ca} was imported: pki does not generate its replacement (forced reason \"{reason}\"); supply the new CA as the replacement"
    )]
    ImportedCaRotation {
        /// The CA's id.
        ca: String,
        /// The forced reason given.
        reason: String,
    },
    /// A CA set operation names a CA the set does not have.
    #[error("no CA named \"{}\" in the set", .0.escape_debug())]
    SetUnknownCa(String),
    /// A CA set operation names a target the set does not have.
    #[error("no target named \"{}\" in the set", .0.escape_debug())]
    SetUnknownTarget(String),
    /// A CA set request is not valid as given (a bad name, a role the CA
    /// does not have, a lifetime that cannot work).
    #[error("{0}")]
    SetInvalid(String),
    /// The operation is not allowed in the set's current step.
    #[error("cannot {action} in step {step}: {reason}")]
    SetWrongStep {
        /// What was asked (`advance`, `start`, `abort`…).
        action: &'static str,
        /// The current step.
        step: crate::set::SetStep,
        /// Why not, and what to do instead.
        reason: String,
    },
    /// The step cannot advance: targets have not acknowledged the current
    /// material (or failed), and no override was given.
    #[error(
        "cannot advance from {step}: waiting for {waiting} (ack them, or pass an override reason)"
    )]
    SetStepBlocked {
        /// The current step.
        step: crate::set::SetStep,
        /// What it waits for, comma-separated.
        waiting: String,
    },
    /// An acknowledgement names a fingerprint other than the one the target
    /// must load now.
    #[error(
        "target \"{target}\": fingerprint {given} is not what it must load in step {step} (expected {expected}): reload the target's files and ack again"
    )]
    SetStaleFingerprint {
        /// The target.
        target: String,
        /// The fingerprint given.
        given: String,
        /// The fingerprint of the target's current files.
        expected: String,
        /// The current step.
        step: crate::set::SetStep,
    },
    /// A target marked failed must be retried before it acknowledges.
    #[error("target \"{target}\" failed ({reason}): run retry first")]
    SetTargetFailed {
        /// The target.
        target: String,
        /// The recorded failure.
        reason: String,
    },
    /// A new CA (generated or imported) is refused: it does not live long
    /// enough, has the key of the CA in use, or (imported) is no CA with a
    /// verifying chain to a root.
    #[error("new CA for \"{ca}\" refused: {reason}")]
    SetCaRefused {
        /// The CA's name in the set.
        ca: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The pre-flight trust matrix of a CA set transition has a red cell.
    #[error("pre-flight trust check failed: {0}")]
    SetTrustBroken(String),
    /// An abort would strand targets (see [`crate::set`]'s strand rule) and
    /// no override reason was given.
    #[error(
        "cannot abort in {step}: it goes to {to} and would strand {stranded}: {why} (ack them, or pass an override reason)"
    )]
    SetAbortStrands {
        /// The current step.
        step: crate::set::SetStep,
        /// Where the abort goes from this step.
        to: crate::set::SetStep,
        /// The targets it would strand, comma-separated.
        stranded: String,
        /// Why they would be stranded.
        why: String,
    },
    /// A credential name is not usable (it becomes a store key and a
    /// directory name, `creds/NAME/`).
    #[error(
        "invalid credential name \"{}\": use 1-64 characters of a-z, 0-9, '-', '_' and '.', not starting with '.'",
        .0.escape_debug()
    )]
    InvalidCredentialName(String),
    /// A credential policy that cannot keep a credential working (a grace
    /// period as long as the expiry, a zero expiry…).
    #[error("credential policy: {0}")]
    InvalidCredentialPolicy(String),
    /// The embedder reported a result the credential's document does not
    /// wait for (a mint of another rotation, a revocation of the current
    /// credential…). Nothing is recorded.
    #[error("credential \"{name}\": {reason}")]
    UnexpectedCredentialReport {
        /// The credential.
        name: String,
        /// What was reported and what the document waits for.
        reason: String,
    },
    /// A mint owner (who runs a credential's mint attempt) that is empty,
    /// too long or holds characters outside `[A-Za-z0-9._:@/-]`.
    #[error(
        "invalid mint owner \"{}\": use 1-128 characters of A-Z, a-z, 0-9 and . _ : @ / -",
        .0.escape_debug()
    )]
    InvalidMintOwner(String),
    /// Advancing a credential kept finding another bookkeeping step due
    /// after the bound: a store that does not keep what is written, or a
    /// bug. Each step taken was committed.
    #[error(
        "credential \"{name}\": still stepping after {steps} steps: refusing to loop (a store that does not keep its writes?)"
    )]
    CredentialNotSettling {
        /// The credential.
        name: String,
        /// The steps taken.
        steps: u32,
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

    /// Whether a write may have landed though it reported no success (its
    /// answer was lost): the store may hold the new document or the old
    /// one. Stepping again is safe (the engines recognise a request they
    /// already applied); retrying it blindly as a conflict is not what the
    /// driver does (see [`crate::Driver::step`]).
    pub fn is_unknown_outcome(&self) -> bool {
        matches!(self, RotateError::UnknownOutcome { .. })
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

fn describe_failed_checks(failed: &[crate::signer::OverriddenCheck], forced: bool) -> String {
    let list: Vec<String> = failed
        .iter()
        .map(|c| format!("{}: {}", c.name, c.detail))
        .collect();
    let hint = if forced {
        "key-matches and is-ca cannot be forced"
    } else {
        "an operator's reason overrides all but key-matches and is-ca"
    };
    format!(
        "supplied CA refused, failed check(s): {} ({hint})",
        list.join("; ")
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn errors_stay_small_enough_to_return_by_value() {
        // Every fallible function returns this; stay under clippy's
        // large-error limit (128 bytes) by boxing rare, large payloads.
        assert!(std::mem::size_of::<super::RotateError>() < 128);
    }
}
