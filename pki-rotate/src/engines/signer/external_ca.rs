//! What the signer's document records of a CA imported from outside (the
//! chain above it, when it came), and the rule the signer's own rotation
//! follows for such a CA. The external-CA engine (`crate::engines::external`)
//! imports and replaces it.

use super::{RotationDecision, RotationReason, SignerState};
use crate::model::error::{Result, RotateError};
use pki_core::{Certificate, is_self_signed};
use time::OffsetDateTime;

/// What an imported CA brings besides itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalCa {
    /// When it was imported.
    pub imported_at: OffsetDateTime,
    /// The certificates above the CA, its issuer first, the root last;
    /// empty when the imported CA is self-signed.
    pub chain: Vec<Certificate>,
}

/// How `pki-state.json` records an imported CA (the chain itself is the
/// file `signer/ca-chain.crt`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExternalRecord {
    /// When the CA was imported.
    #[serde(with = "time::serde::rfc3339")]
    pub imported_at: OffsetDateTime,
}

impl ExternalCa {
    /// The chain's root, when the chain ends at one.
    pub fn root(&self) -> Option<&Certificate> {
        self.chain.last().filter(|c| is_self_signed(c))
    }

    /// The earliest NotAfter of the chain (None when it is empty): no leaf
    /// of the CA verifies past it.
    pub fn not_after(&self) -> Option<OffsetDateTime> {
        self.chain.iter().map(Certificate::not_after).min()
    }

    /// The chain without its root.
    pub fn intermediates(&self) -> &[Certificate] {
        match self.root() {
            Some(_) => &self.chain[..self.chain.len() - 1],
            None => &self.chain,
        }
    }

    /// What follows a leaf of `ca` in a serving chain: the CA itself when
    /// it is not self-signed, then the intermediates above it.
    pub(crate) fn serving_suffix(&self, ca: &Certificate) -> Vec<Certificate> {
        if is_self_signed(ca) {
            return Vec::new();
        }
        let mut suffix = vec![ca.clone()];
        suffix.extend(self.intermediates().iter().cloned());
        suffix
    }

    pub(crate) fn record(&self) -> ExternalRecord {
        ExternalRecord {
            imported_at: self.imported_at,
        }
    }
}

/// The signer's automatic rotation leaves an imported CA alone (its
/// replacement must come from its issuer), and a forced one is refused.
pub(crate) fn hold_rotation(
    state: &SignerState,
    rotation: &mut Option<RotationDecision>,
) -> Result<()> {
    if state.external.is_none() {
        return Ok(());
    }
    match rotation.as_ref().map(|r| &r.reason) {
        Some(RotationReason::Forced { reason }) => Err(RotateError::Signer(
            crate::SignerError::ImportedCaRotation {
                ca: state.ca.cert.id(),
                reason: reason.clone(),
            },
        )),
        _ => {
            *rotation = None;
            Ok(())
        }
    }
}
