//! [`SignerError`]: What the signer (service-CA) and external-CA engines refuse.

use pki_core::datetime::rfc3339;
use time::OffsetDateTime;

/// What the signer (service-CA) and external-CA engines refuse.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SignerError {
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
    /// A renewal names a leaf the document does not keep (removing one is
    /// nothing to do).
    #[error("no certificate named \"{}\"", .0.escape_debug())]
    UnknownLeaf(String),
    /// A leaf refresh fraction outside (0, 1).
    #[error("leaf refresh fraction must be between 0 and 1 (exclusive), got {0}")]
    InvalidRefreshFraction(f64),
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
    /// [`crate::engines::signer::rotation_trust_breaks`]); it is refused unless
    /// the operator allows it with a reason.
    #[error(
        "rotation refused: {summary}: it breaks trust: {}; it goes ahead only with an operator's reason, recorded",
        .breaks.join("; ")
    )]
    TrustBreak {
        /// What is refused, in a few words: which guard holds, with the
        /// reload interval it assumes
        /// ([`crate::engines::preflight::refusal_summary`]).
        summary: String,
        /// Which consumers break and until when, one entry each.
        breaks: Vec<String>,
        /// The refusal rests on a reload interval the policy does not set:
        /// consumers are assumed to reload within M.
        reload_interval_assumed: bool,
    },
    /// A supplied CA failed validation: each failed check with what it
    /// found. Nothing was written.
    #[error("{}", describe_failed_checks(.failed, *.forced))]
    ValidationFailed {
        /// The checks that failed.
        failed: Vec<crate::model::OverriddenCheck>,
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
    /// An ack names a bundle this store did not publish (or published so
    /// long ago that it is no longer remembered).
    #[error(
        "bundle fingerprint \"{}\" was not published by this store (it remembers the last {kept} bundles it published; `pki status` shows the current one)",
        .fingerprint.escape_debug()
    )]
    UnknownBundle {
        /// The fingerprint given.
        fingerprint: String,
        /// How many published bundles the store remembers.
        kept: usize,
    },
    /// A consumer name that cannot be recorded.
    #[error(
        "invalid consumer name \"{}\": use 1-253 characters without control characters, invisible ones (bidi overrides, zero-width spaces) or surrounding spaces",
        .0.escape_debug()
    )]
    InvalidConsumerName(String),
}

fn describe_failed_checks(failed: &[crate::model::OverriddenCheck], forced: bool) -> String {
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
