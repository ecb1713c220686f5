//! The one guard every engine's outcome passes before anything is written.
//!
//! A plan decides (what to build, which trust breaks an override accepts,
//! whether a CA set's red cells are overridden); `apply` builds what the
//! plan names and checks it with pki-core's trust matrix, but never refuses
//! on what the checks find: it hands its [`Findings`] to [`judge`], which
//! refuses the outcome when any finding stands. [`Engine::step`] runs plan,
//! apply and the guard in that order, so every engine's every step passes
//! the same guard, and a refused outcome is never written.
//!
//! [`Engine::step`]: crate::engines::Engine::step

use crate::engines::preflight::{BUNDLE_OF_TWO_ROTATIONS_AGO, TrustBreak, refusal_summary};
use crate::model::error::{Result, RotateError};
use pki_core::RotationPolicy;
use pki_core::trust_matrix::TrustCell;

/// One thing `apply` found that the plan did not accept.
#[derive(Debug, Clone)]
pub enum Finding {
    /// A cell of the pre-flight matrix that must verify did not: a
    /// consumer the rotation promised to keep would be cut off.
    Untrusted(TrustCell),
    /// Consumers outside the matrix that the rotation cuts off
    /// ([`crate::engines::signer::rotation_trust_breaks`]), which the plan
    /// neither accepts by the rotation's nature nor was told to allow.
    /// `policy` says what to do about them in the refusal.
    TrustBreaks {
        /// The breaks nothing accepted.
        refused: Vec<TrustBreak>,
        /// The rotation policy of the document they were found in.
        policy: RotationPolicy,
    },
    /// Cells of a CA set's trust matrix that fail, with no override reason
    /// in the plan: one sentence each.
    RedCells(Vec<String>),
}

/// What `apply` found, in the order it found it. Empty: nothing to refuse.
#[derive(Debug, Clone, Default)]
pub struct Findings(Vec<Finding>);

impl Findings {
    /// No findings.
    pub fn none() -> Self {
        Findings::default()
    }

    /// Whether apply found nothing.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The findings, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Finding> {
        self.0.iter()
    }

    /// Records `finding`.
    pub fn push(&mut self, finding: Finding) {
        self.0.push(finding);
    }

    /// Records every cell of `cells` that does not verify.
    pub fn cells(&mut self, cells: impl IntoIterator<Item = TrustCell>) {
        self.0.extend(
            cells
                .into_iter()
                .filter(|cell| cell.result.is_err())
                .map(Finding::Untrusted),
        );
    }

    /// Records `refused` breaks under `policy`, when there are any.
    pub fn breaks(&mut self, refused: Vec<TrustBreak>, policy: &RotationPolicy) {
        if !refused.is_empty() {
            self.0.push(Finding::TrustBreaks {
                refused,
                policy: *policy,
            });
        }
    }
}

/// The guard: refuses with the first finding that refuses (a failed
/// matrix cell is [`RotateError::TrustCheckFailed`]; breaks nothing
/// accepted are [`SignerError::TrustBreak`](crate::SignerError::TrustBreak),
/// with what to do under the document's policy; red cells are
/// [`SetError::TrustBroken`](crate::SetError::TrustBroken)); passes when
/// there is none.
///
/// # Errors
///
/// [`RotateError::TrustCheckFailed`] for a failed pre-flight matrix cell,
/// [`SignerError::TrustBreak`](crate::SignerError::TrustBreak) for a trust
/// break the plan did not accept,
/// [`SetError::TrustBroken`](crate::SetError::TrustBroken) for red cells of a
/// CA set transition.
pub fn judge(findings: Findings) -> Result<()> {
    match findings.0.into_iter().find_map(refusal) {
        Some(refused) => Err(refused),
        None => Ok(()),
    }
}

/// What `finding` refuses with; None for one that refuses nothing (a cell
/// that verified, an empty list).
fn refusal(finding: Finding) -> Option<RotateError> {
    match finding {
        Finding::Untrusted(cell) => cell
            .result
            .err()
            .map(|source| RotateError::TrustCheckFailed {
                chain: cell.chain,
                bundle: cell.bundle,
                at: cell.at,
                source: Box::new(source),
            }),
        Finding::TrustBreaks { refused, policy } => (!refused.is_empty()).then(|| {
            RotateError::Signer(crate::SignerError::TrustBreak {
                summary: refusal_summary(&refused, &policy),
                breaks: refused.iter().map(ToString::to_string).collect(),
                reload_interval_assumed: policy.reload_interval.is_none()
                    && refused
                        .iter()
                        .any(|b| b.check == BUNDLE_OF_TWO_ROTATIONS_AGO),
            })
        }),
        Finding::RedCells(red) => (!red.is_empty())
            .then(|| RotateError::Set(crate::SetError::TrustBroken(red.join("; ")))),
    }
}
