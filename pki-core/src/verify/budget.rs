//! The work budget of path building.

use super::error::VerifyError;
use std::fmt;

/// How much work one verification may do before it gives up.
///
/// Path building over cross-signed certificates can branch: every
/// certificate whose subject matches an issuer name is a candidate, and a
/// hostile or merely untidy pool of intermediates can make the number of
/// candidate paths grow exponentially. The budget bounds that work; running
/// out of it is a fatal [`VerifyError::BudgetExceeded`], never a silent
/// "untrusted".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Budget {
    /// Maximum number of signature checks (cache hits count too, so the
    /// result never depends on what a [`super::SignatureCache`] holds).
    pub signatures: usize,
    /// Maximum number of candidate issuers considered, over the whole search.
    pub build_steps: usize,
}

impl Default for Budget {
    /// The defaults of rustls-webpki (`verify_cert.rs`, `Budget::default`):
    /// 100 signature checks and 200 000 path-building calls. 100 signatures
    /// cover every real chain by two orders of magnitude (a rotation path is
    /// leaf → bridge → anchor, three checks at most per branch); 200 000
    /// steps cost a few milliseconds and stop the quadratic blow-ups of
    /// Go's `TestPathologicalChains`.
    fn default() -> Self {
        Budget {
            signatures: 100,
            build_steps: 200_000,
        }
    }
}

/// Which part of the [`Budget`] ran out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BudgetKind {
    /// [`Budget::signatures`].
    Signatures,
    /// [`Budget::build_steps`].
    BuildSteps,
}

impl fmt::Display for BudgetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BudgetKind::Signatures => "signature checks",
            BudgetKind::BuildSteps => "path-building steps",
        })
    }
}

/// What is left of a [`Budget`] during one verification.
#[derive(Debug)]
pub(crate) struct Remaining {
    signatures: usize,
    build_steps: usize,
}

impl Remaining {
    pub(crate) fn new(budget: Budget) -> Self {
        Remaining {
            signatures: budget.signatures,
            build_steps: budget.build_steps,
        }
    }

    pub(crate) fn spend_signature(&mut self) -> Result<(), VerifyError> {
        self.signatures = self
            .signatures
            .checked_sub(1)
            .ok_or(VerifyError::BudgetExceeded {
                what: BudgetKind::Signatures,
            })?;
        Ok(())
    }

    pub(crate) fn spend_build_step(&mut self) -> Result<(), VerifyError> {
        self.build_steps = self
            .build_steps
            .checked_sub(1)
            .ok_or(VerifyError::BudgetExceeded {
                what: BudgetKind::BuildSteps,
            })?;
        Ok(())
    }
}
