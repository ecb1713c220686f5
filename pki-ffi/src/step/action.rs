//! The action a credential advance hands the embedder, as C reads it:
//! `pki_cred_action` and its `PKI_CRED_*` constants.

use crate::buffer::{CText, pki_bytes};
use pki_rotate::request::NextAction;
use pki_rotate::request::step::{ActionKind, WaitReasonName};

/// `pki_cred_action.kind`: mint once for the action's rotation and attempt.
pub const PKI_CRED_ACTION_MINT: u32 = 1;
/// `pki_cred_action.kind`: revoke the action's credential (the old one).
pub const PKI_CRED_ACTION_REVOKE: u32 = 2;
/// `pki_cred_action.kind`: nothing to do before `pki_step_next_wake`.
pub const PKI_CRED_ACTION_WAIT: u32 = 3;
/// `pki_cred_action.kind`: revoke the action's credential, what the failed
/// (or late) mint attempt `rotation`/`attempt` returned; then report
/// `stray_revoked` or `stray_revoke_failed`.
pub const PKI_CRED_ACTION_REVOKE_STRAY: u32 = 4;

/// `pki_cred_action.wait_reason`: the current credential is not due yet.
pub const PKI_CRED_WAIT_EXPIRY: u32 = 1;
/// `pki_cred_action.wait_reason`: the old credential stays usable until the
/// grace period ends.
pub const PKI_CRED_WAIT_GRACE: u32 = 2;
/// `pki_cred_action.wait_reason`: a hook failed; its retry waits.
pub const PKI_CRED_WAIT_BACKOFF: u32 = 3;
/// `pki_cred_action.wait_reason`: the mint in progress belongs to another
/// owner (advance with `owner`): only it runs the mint; look again later.
pub const PKI_CRED_WAIT_MINT_ELSEWHERE: u32 = 4;

/// The most steps one advance commits before it fails with
/// `PKI_RESULT_UNEXPECTED` (a store that does not keep its writes): a
/// rotation has at most two bookkeeping steps in a row. The CLI's
/// reconcile has the same bound: both run `pki_rotate::credential::advance`.
pub const PKI_CRED_ADVANCE_MAX_STEPS: u32 = 8;
// cbindgen needs the literal; the bound is the engine's.
const _: () = assert!(PKI_CRED_ADVANCE_MAX_STEPS == pki_rotate::driver::ADVANCE_MAX_STEPS);

/// What the embedder does next for a credential, as `pki_step_action`
/// reads it after an advance.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pki_cred_action {
    /// `PKI_CRED_ACTION_MINT`, `_REVOKE`, `_WAIT` or `_REVOKE_STRAY`.
    pub kind: u32,
    /// The rotation to mint for, whose old credential to revoke, or of the
    /// failed mint whose stray credential to revoke; 0 for a wait.
    pub rotation: u64,
    /// The attempt of a mint (1, then one more after each failure), or of
    /// the failed mint whose stray credential to revoke; 0 otherwise.
    pub attempt: u32,
    /// Why a wait waits (`PKI_CRED_WAIT_*`); 0 for other actions. It ends
    /// at `pki_step_next_wake`.
    pub wait_reason: u32,
    /// The credential to revoke, old or stray (empty for other actions).
    /// Borrowed: valid until the step is freed, which zeroes it.
    pub credential: pki_bytes,
}

/// An action kept by a step.
pub(crate) struct ActionEntry {
    kind: u32,
    rotation: u64,
    attempt: u32,
    wait_reason: u32,
    credential: CText,
}

impl ActionEntry {
    pub(crate) fn view(&self) -> pki_cred_action {
        pki_cred_action {
            kind: self.kind,
            rotation: self.rotation,
            attempt: self.attempt,
            wait_reason: self.wait_reason,
            credential: self.credential.view(),
        }
    }

    /// The entry of a step result's action.
    pub(crate) fn of(action: &NextAction) -> Self {
        ActionEntry {
            kind: match action.kind {
                ActionKind::Mint => PKI_CRED_ACTION_MINT,
                ActionKind::Revoke => PKI_CRED_ACTION_REVOKE,
                ActionKind::Wait => PKI_CRED_ACTION_WAIT,
                ActionKind::RevokeStray => PKI_CRED_ACTION_REVOKE_STRAY,
            },
            rotation: action.rotation,
            attempt: action.attempt,
            wait_reason: match action.wait_reason {
                None => 0,
                Some(WaitReasonName::Expiry) => PKI_CRED_WAIT_EXPIRY,
                Some(WaitReasonName::Grace) => PKI_CRED_WAIT_GRACE,
                Some(WaitReasonName::Backoff) => PKI_CRED_WAIT_BACKOFF,
                Some(WaitReasonName::MintElsewhere) => PKI_CRED_WAIT_MINT_ELSEWHERE,
            },
            credential: CText::from_bytes(&action.credential()),
        }
    }
}
