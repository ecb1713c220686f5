//! [`CredentialInput`]: what the embedder reports, or asks.

use super::Secret;

#[cfg(doc)]
use super::{sanitize_message, validate_owner};

/// What the embedder reports, or asks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CredentialInput {
    /// Take the next bookkeeping step, if one is due (the periodic step),
    /// as an embedder that gives no owner: a mint attempt it starts has no
    /// owner, and it is asked to run only attempts without one.
    #[default]
    Step,
    /// The same as [`CredentialInput::Step`] for the embedder `owner` (a
    /// stable name of the place where it captures mint output, so that it
    /// survives a restart): a mint attempt it starts is recorded as its
    /// own, and it is never asked to run one another owner started.
    StepAs {
        /// Who steps ([`validate_owner`]).
        owner: String,
    },
    /// The mint of this attempt printed `value`.
    Minted {
        /// The rotation of the attempt.
        rotation: u64,
        /// The attempt.
        attempt: u32,
        /// The new credential.
        value: Secret,
    },
    /// The mint of this attempt failed.
    MintFailed {
        /// The rotation of the attempt.
        rotation: u64,
        /// The attempt.
        attempt: u32,
        /// What went wrong, for status (stored sanitized:
        /// [`sanitize_message`]).
        message: String,
        /// What the mint printed before it failed or was killed, if
        /// anything: it may be a live credential, so it is kept and
        /// revoked before the next attempt. None when nothing was printed
        /// (or the embedder knows nothing was minted).
        captured: Option<Secret>,
    },
    /// The old credential of this rotation is revoked (or was already).
    Revoked {
        /// Its rotation.
        rotation: u64,
    },
    /// Revoking the old credential of this rotation failed.
    RevokeFailed {
        /// Its rotation.
        rotation: u64,
        /// What went wrong, for status (stored sanitized).
        message: String,
    },
    /// What the mint attempt `rotation`/`attempt` printed, kept as a stray,
    /// is revoked (or was already gone).
    StrayRevoked {
        /// The rotation of the attempt.
        rotation: u64,
        /// The attempt.
        attempt: u32,
    },
    /// Revoking what the mint attempt `rotation`/`attempt` printed failed.
    StrayRevokeFailed {
        /// The rotation of the attempt.
        rotation: u64,
        /// The attempt.
        attempt: u32,
        /// What went wrong, for status (stored sanitized).
        message: String,
    },
}

impl CredentialInput {
    /// Who steps: the owner of [`CredentialInput::StepAs`], None otherwise.
    pub(super) fn owner(&self) -> Option<&str> {
        match self {
            CredentialInput::StepAs { owner } => Some(owner),
            _ => None,
        }
    }
}
