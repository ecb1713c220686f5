//! [`SetError`]: What the CA set engine refuses.

/// What the CA set engine refuses.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SetError {
    /// A CA set operation names a CA the set does not have.
    #[error("no CA named \"{}\" in the set", .0.escape_debug())]
    UnknownCa(String),
    /// A CA set operation names a target the set does not have.
    #[error("no target named \"{}\" in the set", .0.escape_debug())]
    UnknownTarget(String),
    /// A CA set request is not valid as given (a bad name, a role the CA
    /// does not have, a lifetime that cannot work).
    #[error("{0}")]
    Invalid(String),
    /// The operation is not allowed in the set's current step.
    #[error("cannot {action} in step {step}: {reason}")]
    WrongStep {
        /// What was asked (`advance`, `start`, `abort`…).
        action: &'static str,
        /// The current step.
        step: crate::model::SetStep,
        /// Why not, and what to do instead.
        reason: String,
    },
    /// The step cannot advance: targets have not acknowledged the current
    /// material (or failed), and no override was given.
    #[error(
        "cannot advance from {step}: waiting for {waiting} (ack them, or pass an override reason)"
    )]
    StepBlocked {
        /// The current step.
        step: crate::model::SetStep,
        /// What it waits for, comma-separated.
        waiting: String,
    },
    /// An acknowledgement names a fingerprint other than the one the target
    /// must load now.
    #[error(
        "target \"{target}\": fingerprint {given} is not what it must load in step {step} (expected {expected}): reload the target's files and ack again"
    )]
    StaleFingerprint {
        /// The target.
        target: String,
        /// The fingerprint given.
        given: String,
        /// The fingerprint of the target's current files.
        expected: String,
        /// The current step.
        step: crate::model::SetStep,
    },
    /// A target marked failed must be retried before it acknowledges.
    #[error("target \"{target}\" failed ({reason}): run retry first")]
    TargetFailed {
        /// The target.
        target: String,
        /// The recorded failure.
        reason: String,
    },
    /// A new CA (generated or imported) is refused: it does not live long
    /// enough, has the key of the CA in use, or (imported) is no CA with a
    /// verifying chain to a root.
    #[error("new CA for \"{ca}\" refused: {reason}")]
    CaRefused {
        /// The CA's name in the set.
        ca: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The pre-flight trust matrix of a CA set transition has a red cell.
    #[error("pre-flight trust check failed: {0}")]
    TrustBroken(String),
    /// An abort would strand targets (see [`crate::engines::set`]'s strand rule) and
    /// no override reason was given.
    #[error(
        "cannot abort in {step}: it goes to {to} and would strand {stranded}: {why} (ack them, or pass an override reason)"
    )]
    AbortStrands {
        /// The current step.
        step: crate::model::SetStep,
        /// Where the abort goes from this step.
        to: crate::model::SetStep,
        /// The targets it would strand, comma-separated.
        stranded: String,
        /// Why they would be stranded.
        why: String,
    },
}
