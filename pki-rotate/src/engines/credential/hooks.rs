//! The outside actions: the hook commands the CLI runs, which action a
//! hook performs, and the last failure of one.

use time::OffsetDateTime;

#[cfg(doc)]
use super::StrayCredential;

/// The commands the CLI runs to mint and revoke (`sh -c CMD`). Kept in
/// the document so that `pki cred reconcile` needs only the store; an
/// embedder that performs the actions itself leaves them out.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Hooks {
    /// Prints the new credential on stdout (environment `PKI_CRED_NAME`).
    pub mint: String,
    /// Revokes the credential it reads on stdin; an already revoked one is success.
    pub revoke: String,
}

/// Which outside action a hook performs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
#[non_exhaustive]
pub enum HookAction {
    /// Minting a new credential.
    Mint,
    /// Revoking the old credential.
    Revoke,
    /// Revoking what a failed mint attempt printed ([`StrayCredential`]).
    RevokeStray,
}

impl std::fmt::Display for HookAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            HookAction::Mint => "mint",
            HookAction::Revoke => "revoke",
            HookAction::RevokeStray => "revoke of the stray credential",
        })
    }
}

/// The last failure of an outside action, until it succeeds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HookFailure {
    /// Mint or revoke.
    pub action: HookAction,
    /// The rotation it was for (for a revoke: the old credential's).
    pub rotation: u64,
    /// Consecutive failures so far.
    pub failures: u32,
    /// What the embedder said went wrong.
    pub message: String,
    /// When it failed.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// No new attempt before this time.
    #[serde(with = "time::serde::rfc3339")]
    pub retry_after: OffsetDateTime,
}
