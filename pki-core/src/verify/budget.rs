//! The work budget of path building.

use crate::error::{BudgetKind, VerifyError};

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
    /// Maximum number of comparisons of a name with a nameConstraints
    /// subtree, over the whole search.
    pub name_constraint_checks: usize,
}

impl Default for Budget {
    /// The defaults of rustls-webpki (`verify_cert.rs`, `Budget::default`):
    /// 100 signature checks, 200 000 path-building calls and 250 000 name
    /// constraint comparisons. 100 signatures cover every real chain by two
    /// orders of magnitude (a rotation path is leaf → bridge → anchor, three
    /// checks at most per branch); 200 000 steps cost a few milliseconds and
    /// stop the quadratic blow-ups of Go's `TestPathologicalChains`; 250 000
    /// comparisons cover a CA with 500 subtrees over a leaf with 500 names
    /// and cost well under a second.
    fn default() -> Self {
        Budget {
            signatures: 100,
            build_steps: 200_000,
            name_constraint_checks: 250_000,
        }
    }
}

/// What is left of a [`Budget`] during one verification.
#[derive(Debug)]
pub(crate) struct Remaining {
    signatures: usize,
    build_steps: usize,
    name_constraint_checks: usize,
}

impl Remaining {
    pub(crate) fn new(budget: Budget) -> Self {
        Remaining {
            signatures: budget.signatures,
            build_steps: budget.build_steps,
            name_constraint_checks: budget.name_constraint_checks,
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

    pub(crate) fn spend_name_constraint_check(&mut self) -> Result<(), VerifyError> {
        self.name_constraint_checks =
            self.name_constraint_checks
                .checked_sub(1)
                .ok_or(VerifyError::BudgetExceeded {
                    what: BudgetKind::NameConstraintChecks,
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
