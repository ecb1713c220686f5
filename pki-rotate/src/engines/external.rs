//! CAs signed by someone else's root (the k3s custom-CA topology): import,
//! validation of a replacement against today's trust, rotation to a
//! supplied CA, and same-key renewal.
//!
//! An imported CA is kept in the signer's document ([`crate::SignerState`]) with
//! the chain above it ([`ExternalCa`]):
//!
//! - it signs leaves directly (it may carry pathLenConstraint 0), and a
//!   leaf's NotAfter never passes the CA's, nor that of any certificate of
//!   its chain;
//! - the bundle published to clients holds the chain's root, so a client
//!   that trusts only the organisation's root verifies our leaves;
//! - serving chains carry the CA and the external intermediates after the
//!   leaf.
//!
//! pki never generates the replacement of an imported CA: the automatic
//! service-CA rotation leaves it alone, a forced one is refused, and
//! [`ExternalInput::Replace`] (`pki rotate --to`) is the way to move on.
//!
//! A proposed replacement is checked first ([`validate_replacement`], k3s's
//! `validateCA`); each check is a named line of a [`ValidationReport`]:
//!
//! | name | passes when |
//! |---|---|
//! | `key-matches` | a private key was supplied and belongs to the certificate |
//! | `is-ca` | basicConstraints cA:TRUE, and keyCertSign when keyUsage is present |
//! | `chain-supplied` | a CA that is not self-signed comes with the chain above it (never completed from what the store holds) |
//! | `chains-to-current-trust` | the CA verifies up to today's bundle or previous root (cross-signed intermediates in the supplied chain allowed), or it is self-signed and the current CA's key can bridge it (see below) |
//! | `valid-for-24h` | valid now, and for more than 24 hours |
//! | `service-account-key-kept` | the proposed service-account key set keeps every current key |
//!
//! A failing check refuses the rotation; a forced rotation (`force`
//! reason) overrides every check but `key-matches` and `is-ca` (pki must
//! sign leaves with the key and the certificate), and records each
//! overridden check with the reason in the history.
//!
//! A self-signed replacement is bridged both ways with the current CA's
//! key, which pki always holds, as the service-CA scheme does: bridge A
//! (the current CA re-signed by the new key) goes into the bundle, bridge
//! B (the new CA signed by the current key) onto serving chains, followed,
//! when the current CA was imported, by the current CA and its external
//! intermediates, so clients that trust only the organisation's root
//! verify new leaves. That holds only while the current CA and its chain
//! are valid and their pathLenConstraints allow one more CA below the
//! current CA; the k3s custom-CA topology's pathLenConstraint 0 ("sign
//! leaves only") does not, and the organisation's constraint is kept.
//!
//! When the replacement does not chain to today's trust and cannot be
//! bridged, clients that still hold the old bundle reject servers that
//! present certificates of the new CA until they reload it (at the latest
//! the reload interval after the rotation, M when the policy sets none):
//! the report names those cells of the trust matrix and until when. The
//! new bundle keeps the old trust anchors until they expire, so the other
//! cells hold.

use crate::engines::signer::{Event, OverriddenCheck};
use crate::engines::{Engine, Outcome};
use crate::model::error::Result;
use pki_core::{CaImport, Certificate, CertificateAuthority};
use rand_core::CryptoRng;
use time::{Duration, OffsetDateTime};

mod apply;
mod import;
mod plan;
mod service_accounts;
mod validation;

pub use crate::engines::signer::{ExternalCa, ExternalRecord};
pub use apply::apply;
pub use plan::plan;
pub use service_accounts::{ServiceAccountKeys, check_service_account_keys};
pub(crate) use validation::check_issuance;
pub use validation::{Check, Topology, ValidationReport, import_checks, validate_replacement};

/// The least validity a replacement CA must have left.
pub const MIN_REPLACEMENT_VALIDITY: Duration = Duration::hours(24);

/// Stable names of the validation checks, as printed in reports.
pub mod check {
    /// The supplied key belongs to the certificate.
    pub const KEY_MATCHES: &str = "key-matches";
    /// The certificate may sign certificates.
    pub const IS_CA: &str = "is-ca";
    /// A CA that is not self-signed comes with its chain.
    pub const CHAIN_SUPPLIED: &str = "chain-supplied";
    /// The CA verifies to today's trust, or can be bridged.
    pub const CHAINS_TO_CURRENT_TRUST: &str = "chains-to-current-trust";
    /// Valid now and for more than 24 hours.
    pub const VALID_FOR_24H: &str = "valid-for-24h";
    /// The service-account key set keeps every current key.
    pub const SERVICE_ACCOUNT_KEY_KEPT: &str = "service-account-key-kept";
    /// A leaf the CA issues (and every leaf the store keeps, when the
    /// chain constrains names) verifies against the root clients will
    /// trust: nothing above it forbids it (a path length, a name
    /// constraint, an expiry).
    pub const ISSUES_VERIFIABLE_LEAVES: &str = "issues-verifiable-leaves";
}

/// A replacement CA proposed by an operator.
#[derive(Debug, Clone)]
pub struct Replacement {
    /// The CA, its key and its chain.
    pub import: CaImport,
    /// Override the failing checks, with this reason (recorded).
    pub force: Option<String>,
    /// The service-account key sets to compare.
    pub service_accounts: ServiceAccountKeys,
}

/// What an operator asks of an external CA.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum ExternalInput {
    /// Nothing: the engine changes nothing.
    #[default]
    Nothing,
    /// Validate, then rotate to the supplied CA and re-issue every leaf.
    Replace(Box<Replacement>),
    /// A new certificate for the current CA, on its own key and Subject.
    RenewSameKey,
}

/// What [`ExternalEngine::plan`] decided.
#[derive(Debug, Clone)]
pub enum ExternalPlan {
    /// Nothing to do.
    Nothing {
        /// The plan's time.
        now: OffsetDateTime,
        /// The request was carried out before (the CA supplied is the one
        /// in use): what was done, and when.
        already_done: Option<String>,
    },
    /// Rotate to a validated (or forced) replacement.
    Replace {
        /// The plan's time.
        now: OffsetDateTime,
        /// The new CA.
        ca: Box<CertificateAuthority>,
        /// Its chain.
        chain: Vec<Certificate>,
        /// How trust moves.
        topology: Topology,
        /// The forced reason, when forced.
        force: Option<String>,
        /// Checks that failed and were overridden.
        overridden: Vec<OverriddenCheck>,
    },
    /// Renew the current CA on its key.
    RenewSameKey {
        /// The plan's time.
        now: OffsetDateTime,
    },
}

/// The external-CA operations over the signer's document (same store key
/// and files as [`crate::SignerEngine`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct ExternalEngine;

/// The external-CA engine's document: the signer's stored document, seen
/// by the engine that imports and replaces its CA (see
/// [`crate::engines::signer::SignerView`] for why it is the signer's own
/// object).
pub type ExternalCaDocument = crate::engines::signer::SignerView<ExternalEngine>;

impl Engine for ExternalEngine {
    type Document = ExternalCaDocument;
    type Input = ExternalInput;
    type Plan = ExternalPlan;
    type Event = Event;

    fn plan(
        doc: &ExternalCaDocument,
        input: &ExternalInput,
        now: OffsetDateTime,
    ) -> Result<ExternalPlan> {
        plan(doc.signer(), input, now)
    }

    fn apply<'d, R: CryptoRng + ?Sized>(
        doc: &'d ExternalCaDocument,
        plan: ExternalPlan,
        rng: &mut R,
    ) -> Result<Outcome<'d, ExternalCaDocument, Event>> {
        Ok(doc.outcome(apply(doc.signer(), plan, rng)?))
    }
}
