//! [`Change`]: the one change a plan commits to a credential's document.

use super::{HookFailure, Secret, StepKind};

/// One change to a credential's document: a bookkeeping step, or the
/// record of what the embedder reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Keep the current credential as old.
    KeepOld,
    /// Record a mint attempt as started.
    StartMint {
        /// The rotation.
        rotation: u64,
        /// The attempt.
        attempt: u32,
        /// Who runs it.
        owner: Option<String>,
    },
    /// Record the minted credential as current, with its mint time.
    RecordMint {
        /// The rotation.
        rotation: u64,
        /// The attempt that minted it.
        attempt: u32,
        /// The credential.
        value: Secret,
    },
    /// Record a failed step with its retry time.
    RecordFailure {
        /// The failure.
        failure: HookFailure,
        /// For a failed mint: what it printed, kept to be revoked.
        stray: Option<Secret>,
    },
    /// Keep what a mint reported after the document moved on (another
    /// embedder reported the attempt first, or it was superseded) as a
    /// stray credential, to revoke.
    KeepLateMint {
        /// The attempt's rotation.
        rotation: u64,
        /// The attempt.
        attempt: u32,
        /// What it printed.
        value: Secret,
    },
    /// Forget a stray credential: it is revoked.
    RecordStrayRevoke {
        /// The attempt's rotation.
        rotation: u64,
        /// The attempt.
        attempt: u32,
    },
    /// Record a failed revocation of a stray credential.
    RecordStrayFailure {
        /// The attempt's rotation.
        rotation: u64,
        /// The attempt.
        attempt: u32,
        /// The failure.
        failure: HookFailure,
    },
    /// Forget the old credential: it is revoked.
    RecordRevoke {
        /// Its rotation.
        rotation: u64,
    },
}

impl Change {
    /// The bookkeeping step this change is, if it is one.
    pub fn step_kind(&self) -> Option<StepKind> {
        match self {
            Change::KeepOld => Some(StepKind::KeepOld),
            Change::StartMint { .. } => Some(StepKind::StartMint),
            _ => None,
        }
    }
}
