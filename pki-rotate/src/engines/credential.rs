//! The credential engine: a crash-safe step machine for credentials that an
//! outside system mints and revokes (OpenShift's cloud-credential-operator
//! rotation, a database role, a Redis ACL user…).
//!
//! pki never holds a secret of the outside system: it decides the next step
//! and the embedder (the CLI through its hooks, a controller through the C
//! ABI) performs it and reports the result as [`CredentialInput`]. One
//! rotation goes through these steps, each its own committed document:
//!
//! ```text
//! current ─(mint_time + expire passed)─▶ keep current as old
//!         ─▶ start mint (rotation id, attempt and owner recorded BEFORE the hook runs)
//!         ─▶ embedder mints, reports Minted ─▶ current = new, mint time recorded
//!         ─▶ wait until mint_time + grace
//!         ─▶ embedder revokes old (idempotent), reports Revoked ─▶ old forgotten
//! ```
//!
//! **The plan decides.** [`plan`] returns a [`Plan`] holding the one change
//! to commit (a bookkeeping step, or the record of a report), what comes
//! once it is committed ([`Next`]: another bookkeeping step, or the
//! [`Action`] the embedder must run: mint attempt R/A, revoke the old
//! credential, revoke a stray one, or wait until a time, with why) and the
//! next wake-up. [`apply`] only carries the change out. [`advance`](crate::driver::advance) takes
//! every due bookkeeping step through the driver until the embedder must
//! act, with one bound ([`ADVANCE_MAX_STEPS`](crate::driver::ADVANCE_MAX_STEPS)): the CLI's reconcile loop and
//! the C ABI's `pki_document_step` (with `PKI_KIND_CRED`) both call it.
//!
//! A mint hook may fail after it minted: it times out, prints more than the
//! embedder accepts, or prints a credential and then exits non-zero. What
//! it printed is reported with the failure ([`CredentialInput::MintFailed`]'s
//! `captured`) and kept as a [`StrayCredential`]: never used, but maybe live
//! in the outside system, so it is revoked ([`Action::RevokeStray`]) before
//! the next attempt may mint. A mint reported after the document moved on
//! (another embedder reported that attempt first, or it was superseded) is
//! kept the same way: a report is never dropped. That keeps DESIGN's promise
//! that none leaks.
//!
//! **One minter per attempt.** A mint attempt is recorded, by
//! compare-and-swap, before any hook runs, together with its owner (the
//! embedder that stepped with [`CredentialInput::StepAs`]). Two reconcilers
//! racing on one store both try to record it; one wins, and the other is
//! told to wait ([`WaitReason::MintElsewhere`]): it never runs the mint for
//! an attempt another embedder owns, so the attempt is minted once whatever
//! URL spelling or host each reconciler uses.
//!
//! So a crash between any two steps resumes at the right one: a recorded
//! mint attempt is never started again (its owner adopts what it captured,
//! or reports the attempt failed), the current credential is never revoked,
//! and an old credential is kept until its revocation is reported. At most
//! two credentials are live: a rotation never starts while an old one waits
//! for revocation. A failed hook is recorded with an exponential
//! retry-after (capped), never a half-written state. Text from hooks
//! (failure messages) is stored with control characters escaped.

use crate::engines::{Engine, Outcome};
use crate::model::error::Result;
use rand_core::CryptoRng;
use time::OffsetDateTime;

mod apply;
mod backoff;
mod change;
pub mod document;
mod event;
mod hooks;
mod input;
mod next;
mod plan;
mod policy;
mod secret;
mod state;
pub mod status;
mod text;

pub use apply::apply;
pub use backoff::{BACKOFF_BASE, BACKOFF_CAP, retry_after};
pub use change::Change;
pub use event::Event;
pub use hooks::{HookAction, HookFailure, Hooks};
pub use input::CredentialInput;
pub(crate) use next::due_for_status;
pub use next::{Action, MINT_ELSEWHERE_RECHECK, Next, StepKind, WaitReason};
pub use plan::{Plan, plan};
pub use policy::CredentialPolicy;
pub use secret::Secret;
pub use state::{
    Credential, CredentialState, HISTORY_LIMIT, MintAttempt, RotationRecord, StrayCredential,
};
pub use text::{MESSAGE_LIMIT, sanitize_message, validate_credential_name, validate_owner};

/// Credential `name`'s document key, tied to its kind.
pub fn key(name: &str) -> crate::DocumentKey<CredentialState> {
    crate::DocumentKey::owned(credential_key(name))
}

/// The store key of the credential `name`: `creds/NAME`.
pub fn credential_key(name: &str) -> String {
    format!("{}/{name}", document::CREDS_DIR)
}

/// The credential step machine as an [`Engine`].
#[derive(Debug, Clone, Copy)]
pub struct CredentialEngine;

impl Engine for CredentialEngine {
    type Document = CredentialState;
    type Input = CredentialInput;
    type Plan = Plan;
    type Event = Event;

    fn plan(doc: &CredentialState, input: &CredentialInput, now: OffsetDateTime) -> Result<Plan> {
        plan(doc, input, now)
    }

    fn apply<'d, R: CryptoRng + ?Sized>(
        doc: &'d CredentialState,
        plan: Plan,
        _rng: &mut R,
    ) -> Result<Outcome<'d, CredentialState, Event>> {
        apply(doc, plan)
    }
}

#[cfg(test)]
mod tests;
