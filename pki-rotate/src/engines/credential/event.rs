//! [`Event`]: what a step did, for logs and the CLI.

use super::{HookFailure, sanitize_message};
use pki_core::datetime::rfc3339;

/// What a step did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// The current credential was kept as old.
    KeptOld {
        /// The credential.
        name: String,
        /// Its rotation.
        rotation: u64,
    },
    /// A mint attempt was recorded as started.
    MintStarted {
        /// The credential.
        name: String,
        /// The rotation.
        rotation: u64,
        /// The attempt.
        attempt: u32,
    },
    /// A new credential is current.
    Minted {
        /// The credential.
        name: String,
        /// The rotation.
        rotation: u64,
    },
    /// The old credential was revoked.
    Revoked {
        /// The credential.
        name: String,
        /// The old credential's rotation.
        rotation: u64,
    },
    /// A step failed and waits for its retry.
    Failed {
        /// The credential.
        name: String,
        /// The failure.
        failure: HookFailure,
    },
    /// A failed mint attempt printed something: kept to be revoked.
    StrayKept {
        /// The credential.
        name: String,
        /// The rotation of the failed attempt.
        rotation: u64,
        /// The failed attempt.
        attempt: u32,
    },
    /// A mint was reported after the document moved on: what it printed
    /// was kept to be revoked.
    LateMintKept {
        /// The credential.
        name: String,
        /// The rotation of the attempt.
        rotation: u64,
        /// The attempt.
        attempt: u32,
    },
    /// What a failed or late mint attempt printed was revoked.
    StrayRevoked {
        /// The credential.
        name: String,
        /// The rotation of the attempt.
        rotation: u64,
        /// The attempt.
        attempt: u32,
    },
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Event::KeptOld { name, rotation } => {
                write!(f, "cred {name}: kept credential {rotation} as old")
            }
            Event::MintStarted {
                name,
                rotation,
                attempt,
            } => write!(
                f,
                "cred {name}: minting rotation {rotation} (attempt {attempt})"
            ),
            Event::Minted { name, rotation } => {
                write!(f, "cred {name}: credential {rotation} is current")
            }
            Event::Revoked { name, rotation } => {
                write!(f, "cred {name}: revoked old credential {rotation}")
            }
            Event::Failed { name, failure } => write!(
                f,
                "cred {name}: {} of rotation {} failed ({} in a row): {}; retry after {}",
                failure.action,
                failure.rotation,
                failure.failures,
                sanitize_message(&failure.message),
                rfc3339(failure.retry_after)
            ),
            Event::StrayKept {
                name,
                rotation,
                attempt,
            } => write!(
                f,
                "cred {name}: the failed mint of rotation {rotation} (attempt {attempt}) printed something: kept as a stray credential, revoked before the next attempt"
            ),
            Event::LateMintKept {
                name,
                rotation,
                attempt,
            } => write!(
                f,
                "cred {name}: the mint of rotation {rotation} (attempt {attempt}) was reported after the document moved on: kept as a stray credential, revoked before the next attempt"
            ),
            Event::StrayRevoked {
                name,
                rotation,
                attempt,
            } => write!(
                f,
                "cred {name}: revoked the stray credential of rotation {rotation} (attempt {attempt})"
            ),
        }
    }
}
