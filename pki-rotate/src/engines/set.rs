//! The CA set engine: rotate a whole set of CAs in gated steps (GEP-18,
//! StarlingX `kube-rootca-update`).
//!
//! A set has named CAs with roles (serving, client, or both), leaves issued
//! by them, and **targets** (hosts or components) that each load some trust
//! bundles (`trust/CA.crt`, to verify servers), some client-CA bundles
//! (`client-ca/CA.crt`, to verify clients) and some leaves. A rotation moves
//! through steps:
//!
//! ```text
//! Idle → TrustBoth → UpdateCerts → TrustNew → Completed
//!          │             │            │
//!          └──── abort ──┴─→ Reverting → Idle   (abort in TrustNew: roll forward)
//! ```
//!
//! - **TrustBoth**: new CAs (a CA with both roles gets a separate new client
//!   CA); every bundle trusts old + new. The client certificates of a CA
//!   move to its new client CA only once every target that verifies them
//!   (has its `client-ca/` bundle) acknowledged its trust-both files: the
//!   two halves of the step.
//! - **UpdateCerts**: serving certificates move to the new CAs, all at once
//!   or one target at a time; bundles still trust both.
//! - **TrustNew**: bundles trust the new CAs only. **Completed**: the old CA
//!   keys are destroyed and the completion time recorded.
//!
//! **Imported CAs.** A new CA may be supplied at start instead of
//! generated ([`ImportedCa`], StarlingX's upload), also one that someone
//! else's root signed (the k3s custom-CA topology). Its chain goes with it
//! ([`CaPair::chain`]): the bundles standing for the CA (`trust/CA.crt`,
//! `client-ca/CA.crt`) hold the chain's root, the chain a leaf of it
//! presents (`tls.crt`) is the leaf, the CA and the intermediates above
//! it, and a leaf's NotAfter stays within the earliest NotAfter of that
//! chain. The start checks it as an import from a file is checked (key,
//! CA, chain in issuing order up to a root, path verifying at the start),
//! then the rules of every new CA, counted to that earliest NotAfter.
//!
//! A target acknowledges the [`fingerprint`] of the files it loaded; a step
//! advances only when every target acknowledged its current files (or with
//! an override reason, recorded). A failed target is retried back to
//! pending: it acknowledges again.
//!
//! **Plans decide.** [`plan`] validates the request and decides everything
//! that follows from it ([`SetPlan`]): what is recorded, the new CAs of a
//! start, the transition, which client certificates and serving targets
//! move (the gates), which leaves are issued onto which CA
//! generation, and the wake-up. [`apply`] makes the keys and certificates
//! and runs the guard.
//!
//! **The guard.** Every change of material is checked by the pre-flight
//! trust matrix ([`material::red_cells`]) against what each target may
//! really hold: what it acknowledged last (kept with the acknowledgement),
//! the files the document gave it since, and what the change gives it — in
//! both directions (mutual TLS). A red cell refuses the change, unless the
//! request carries an override reason: then the cells are recorded with
//! it. **Requests are safe to repeat**: an override is applied once, to the
//! step it was given in (or `from` names the step it leaves); the same
//! issue, target, start or acknowledgement again is nothing to do
//! ([`SetEvent::AlreadyDone`]).
//!
//! **Abort and the strand rule.** An abort goes to the safe target of the
//! step ([`SetState::abort_target`]) and *strands* a target when, once
//! done, that target could be left holding files that fail the trust
//! matrix against the others' and that the set can no longer re-issue. A
//! target that acknowledged its current files holds them; one that did not
//! (pending or failed) may still hold anything it was given since its last
//! acknowledgement.
//!
//! - Before trust-new the abort goes to reverting, which strands nobody:
//!   its bundles trust the old and the new CAs and every leaf goes back to
//!   the old CAs, so the files of idle, trust-both, update-certs and
//!   reverting verify one another in both directions. Its pre-flight
//!   checks the files before and after as for any step.
//! - In trust-new going back would hand old certificates to targets that
//!   trust only the new CAs, so the abort rolls forward to completed,
//!   which destroys the old CA keys. Every target that has not
//!   acknowledged its trust-new files (pending or failed) is stranded by
//!   it: whatever it still holds under the old CAs could never be
//!   re-issued or reverted. Such an abort is refused naming those targets
//!   ([`SetError::AbortStrands`](crate::SetError::AbortStrands)) unless an override reason is
//!   given, which is recorded like an advance override. (Its files are
//!   those of trust-new, so the matrix alone cannot see this: the gate is
//!   the one of the advance to completed, which the abort must not bypass.)

use crate::engines::{Engine, Outcome};
use crate::model::error::Result;
use rand_core::CryptoRng;
use time::{Duration, OffsetDateTime};

mod apply;
pub mod document;
mod gate;
pub mod material;
mod model;
mod plan;
pub mod status;
pub mod token_keys;

pub use apply::apply;
pub use material::{fingerprint, preflight};
pub use model::*;
pub use plan::{LeafIssue, NewCa, Record, SetPlan, StartPlan, Transition, plan};
pub use status::SetStatus;

/// The document kind.
pub const KIND: &str = "ca-set";
/// The store key of the set's document.
pub const STORE_KEY: &str = "set";

/// The set's document key, tied to its kind (`"ca-set"`).
pub const KEY: crate::DocumentKey<SetState> = crate::DocumentKey::new(STORE_KEY);
/// A new CA must be valid for more than this from the rotation's start.
pub const MIN_CA_VALIDITY: Duration = Duration::hours(24);
/// Default lifetime of the set's CAs.
pub const DEFAULT_CA_LIFETIME: Duration = Duration::days(1825);
/// Default lifetime of a leaf of the set (cut at its CA's NotAfter).
pub const DEFAULT_SET_LEAF_LIFETIME: Duration = Duration::days(365);

/// The CA engine over [`SetState`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SetEngine;

impl Engine for SetEngine {
    type Document = SetState;
    type Input = SetInput;
    type Plan = SetPlan;
    type Event = SetEvent;

    fn plan(doc: &SetState, input: &SetInput, now: OffsetDateTime) -> Result<SetPlan> {
        plan(doc, input, now)
    }

    fn apply<'d, R: CryptoRng + ?Sized>(
        doc: &'d SetState,
        plan: SetPlan,
        rng: &mut R,
    ) -> Result<Outcome<'d, SetState, SetEvent>> {
        apply(doc, plan, rng)
    }
}
