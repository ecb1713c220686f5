//! Leaves kept outside the signer's document (in Kubernetes, each serving
//! certificate in its own Secret).

use super::SignerState;
use crate::engines::leaf::{IssuedLeaf, Leaf, LeafReason, LeafRequest};
use crate::model::error::Result;
use pki_core::Certificate;
use rand_core::CryptoRng;
use time::OffsetDateTime;

/// The outcome of [`reconcile_external`].
#[derive(Debug, Clone)]
pub struct ExternalLeaf {
    /// The certificate and key to serve: the previous ones when up to date.
    pub issued: IssuedLeaf,
    /// The serving chain (leaf, then bridge B when present).
    pub chain: Vec<Certificate>,
    /// Why it was (re-)issued; None when the previous leaf is kept.
    pub reason: Option<LeafReason>,
    /// When it becomes due for refresh.
    pub refresh_at: OffsetDateTime,
}

/// Reconciles a leaf kept outside the signer state (in Kubernetes, each
/// serving certificate lives in its own Secret): keeps `previous` when it is
/// up to date, else issues a fresh key and certificate from the current CA.
///
/// # Errors
///
/// Those of [`LeafRequest::validate`] for `request`, and those of issuing from
/// the current CA (see [`issue_leaf`](crate::issue_leaf)) when a new leaf is
/// due. Keeping `previous` never fails.
pub fn reconcile_external<R: CryptoRng + ?Sized>(
    state: &SignerState,
    request: &LeafRequest,
    previous: Option<IssuedLeaf>,
    now: OffsetDateTime,
    rng: &mut R,
) -> Result<ExternalLeaf> {
    request.validate()?;
    let fraction = state.policy.leaf_refresh_fraction;
    let leaf = Leaf {
        request: std::sync::Arc::new(request.clone()),
        issued: previous,
    };
    let (issued, reason) = match (
        crate::engines::leaf::decide_leaf("leaf", &leaf, &state.ca.cert, now, fraction),
        leaf.issued,
    ) {
        (None, Some(kept)) => (kept, None),
        (decision, _) => {
            let reason = decision
                .map(|d| d.reason)
                .unwrap_or(LeafReason::NotYetIssued);
            (state.issue_leaf(request, now, rng)?, Some(reason))
        }
    };
    Ok(ExternalLeaf {
        chain: state.serving_chain(&issued.cert),
        refresh_at: crate::engines::leaf::refresh_at(&issued.cert, fraction),
        issued,
        reason,
    })
}
