//! The signer engine: service-CA rotation with two cross-signed bridges.
//!
//! [`SignerEngine`] is the [`Engine`]: `plan` looks at a [`SignerState`]
//! (the signer's document) and a [`SignerInput`] at a time `now` and
//! decides; `apply` executes the decision with an injected RNG and returns
//! the new document, the events and the next wake-up time. Neither reads a
//! clock, a file or the environment.
//!
//! When the CA is rotated (less than M of validity left, or a forced rotation
//! with a new reason):
//!
//! - the new CA reuses the Subject, with a new key and lifetime D;
//! - **bridge A** is the old CA's certificate re-signed by the new key, valid
//!   until max(old NotAfter, now + M). It goes into the bundle, so clients
//!   that refreshed their bundle still trust servers that have not refreshed
//!   their certificate;
//! - **bridge B** is the new CA's certificate signed by the old key. It is
//!   appended to every serving chain issued afterwards, so clients that have
//!   not refreshed their bundle (they trust only the old CA) trust servers
//!   that already serve a certificate from the new CA;
//! - the bundle becomes [new CA, bridge A] (plus the old self-signed CA while
//!   it is valid, when the policy keeps it).

use crate::engines::{Engine, Outcome};
use crate::model::error::{Result, RotateError};
use pki_core::{KeyAlgorithm, RotationPolicy};
use rand_core::CryptoRng;
use time::OffsetDateTime;

mod apply;
pub mod document;
mod event;
mod external_ca;
mod external_leaf;
mod input;
mod plan;
mod state;
pub mod status;
mod token_moves;
mod trust_breaks;
mod uptake_records;
mod view;

pub use apply::apply;
pub(crate) use apply::{probe_request, record_rotation};
pub use document::IdleReport;
pub use event::Event;
pub(crate) use external_ca::hold_rotation;
pub use external_ca::{ExternalCa, ExternalRecord};
pub use external_leaf::{ExternalLeaf, reconcile_external};
pub use input::{ForcedRotation, LeafChange, SignerInput};
pub(crate) use plan::next_check;
pub use plan::{Plan, RotationDecision, RotationReason, plan};
pub use state::{OverriddenCheck, PreviousCa, RotationRecord, SignerState};
pub use token_moves::KeyMoves;
pub use trust_breaks::rotation_trust_breaks;
pub use uptake_records::{
    ConsumerRecord, MAX_CONSUMER_NAME_LEN, MAX_PUBLISHED, PublishedBundle, bundle_fingerprint,
    lags, overdue_by,
};
pub use view::SignerView;

/// The store key of the signer's document (the CLI's, and the default of
/// every embedder that keeps one signer per store).
pub const STORE_KEY: &str = "signer";

/// The signer's document key, tied to its kind.
pub const KEY: crate::DocumentKey<SignerState> = crate::DocumentKey::new(STORE_KEY);

pub use crate::engines::leaf::DEFAULT_LEAF_LIFETIME;
/// Default refresh fraction: a leaf is re-issued when less than 20% of its
/// lifetime remains (cert-manager renews at two thirds; 20% left is the same
/// idea with more slack for daily runs).
pub const DEFAULT_REFRESH_FRACTION: f64 = 0.2;

/// Everything that decides how the signer behaves, besides time.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SignerPolicy {
    /// D and M (and optionally I) for the CA.
    pub rotation: RotationPolicy,
    /// Key type of new CAs.
    pub key_algorithm: KeyAlgorithm,
    /// Keep the previous self-signed CA in the bundle while it is valid,
    /// besides bridge A. Off by default, as in OpenShift's service CA: bridge
    /// A already carries the previous key.
    #[serde(default)]
    pub keep_previous_root: bool,
    /// Re-issue a leaf when less than this fraction of its lifetime remains.
    #[serde(default = "default_refresh")]
    pub leaf_refresh_fraction: f64,
}

fn default_refresh() -> f64 {
    DEFAULT_REFRESH_FRACTION
}

impl Default for SignerPolicy {
    fn default() -> Self {
        SignerPolicy {
            rotation: RotationPolicy::default(),
            key_algorithm: KeyAlgorithm::EcdsaP256,
            keep_previous_root: false,
            leaf_refresh_fraction: DEFAULT_REFRESH_FRACTION,
        }
    }
}

impl SignerPolicy {
    /// Validates the rotation math and the refresh fraction.
    ///
    /// # Errors
    ///
    /// [`RotateError::Core`] with [`pki_core::Error::InvalidPolicy`] when the
    /// rotation math does not hold (see
    /// [`pki_core::RotationPolicy::validate`]);
    /// [`SignerError::InvalidRefreshFraction`](crate::SignerError::InvalidRefreshFraction)
    /// when the refresh fraction is not strictly between 0 and 1.
    pub fn validate(&self) -> Result<()> {
        self.rotation.validate()?;
        let f = self.leaf_refresh_fraction;
        if !(f > 0.0 && f < 1.0) {
            return Err(RotateError::Signer(
                crate::SignerError::InvalidRefreshFraction(f),
            ));
        }
        Ok(())
    }
}

/// The service-CA signer as an [`Engine`]: its document is [`SignerState`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SignerEngine;

impl Engine for SignerEngine {
    type Document = SignerState;
    type Input = SignerInput;
    type Plan = Plan;
    type Event = Event;

    fn plan(doc: &SignerState, input: &SignerInput, now: OffsetDateTime) -> Result<Plan> {
        plan(doc, input, now)
    }

    fn apply<'d, R: CryptoRng + ?Sized>(
        doc: &'d SignerState,
        plan: Plan,
        rng: &mut R,
    ) -> Result<Outcome<'d, SignerState, Event>> {
        apply(doc, plan, rng)
    }

    /// A forced rotation whose write lost to a concurrent rotation is
    /// satisfied by it: the CA it asked to replace is already replaced. It
    /// is then recorded as the reason of that rotation, and not run again
    /// (two rotations in a row would drop the CA that clients holding the
    /// oldest bundle trust). An emergency rotation (a short grace, or no
    /// bridges after a compromise) is not satisfied by a normal one and
    /// still runs.
    /// No policy, forced rotation or leaf change: what `pki rotate` and a
    /// controller's periodic step ask (an allowed trust break changes
    /// nothing unless something is due).
    fn asks_nothing(input: &SignerInput) -> bool {
        input.policy.is_none()
            && input.forced.is_none()
            && input.leaves.is_empty()
            && input.satisfied_forced_reason.is_none()
    }

    /// Leaf changes alone (requests, renewals, removals) change those
    /// leaves, the leaf requests and nothing else while nothing is due: a
    /// rotation, a policy change or a forced reason needs the whole
    /// document. Allowing a trust break changes nothing without a rotation.
    fn members(input: &SignerInput) -> Option<std::collections::BTreeSet<String>> {
        let only_leaves = input.policy.is_none()
            && input.forced.is_none()
            && input.satisfied_forced_reason.is_none()
            && !input.leaves.is_empty()
            // A bad name is refused by the whole step, with its error.
            && input
                .leaves
                .iter()
                .all(|c| crate::engines::leaf::validate_leaf_name(c.name()).is_ok());
        only_leaves.then(|| input.leaves.iter().map(|c| c.name().to_string()).collect())
    }

    fn rebase(input: &mut SignerInput, read: &SignerState, fresh: &SignerState) {
        if fresh.ca.cert == read.ca.cert {
            return;
        }
        if let Some(f) = &input.forced
            && f.grace.is_none()
            && !f.no_bridges
        {
            input.satisfied_forced_reason = Some(f.reason.clone());
            input.forced = None;
        }
    }
}
