//! [`CredentialState`]: the whole state of one credential in memory, with
//! the credentials it holds, the mint in progress, the strays to revoke and
//! the history, and the invariants every stored document keeps.

use super::{
    CredentialPolicy, HookFailure, Hooks, Secret, validate_credential_name, validate_owner,
};
use crate::model::error::{Result, RotateError};
use time::OffsetDateTime;

#[cfg(doc)]
use super::{CredentialInput, WaitReason};

/// How many rotations the history keeps (oldest dropped first).
pub const HISTORY_LIMIT: usize = 100;

/// A minted credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Credential {
    /// The rotation that minted it (1 for the first credential).
    pub rotation: u64,
    /// When its mint was recorded.
    pub minted_at: OffsetDateTime,
    /// The credential itself.
    pub value: Secret,
}

/// A mint recorded as started: the embedder runs the mint once for it and
/// reports the result. Recorded before the hook runs, so after a crash the
/// embedder knows a hook may have run for it and adopts what it captured
/// instead of minting again.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MintAttempt {
    /// The rotation it mints for.
    pub rotation: u64,
    /// 1 for the first try, then one more after each failure.
    pub attempt: u32,
    /// When it was recorded.
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    /// Who runs it: the embedder whose step recorded it
    /// ([`CredentialInput::StepAs`]). Only that embedder is asked to mint
    /// it; others wait ([`WaitReason::MintElsewhere`]). None: recorded by
    /// an embedder that gave no owner (or by an older build): any embedder
    /// may run it (two that do mint twice, and the report that comes second
    /// is kept as a stray and revoked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

impl MintAttempt {
    /// Whether the embedder `owner` (None: one that gave no owner) runs
    /// this attempt.
    pub fn run_by(&self, owner: Option<&str>) -> bool {
        self.owner.is_none() || self.owner.as_deref() == owner
    }
}

/// What a failed mint attempt printed before it failed or was killed: not
/// a credential pki uses, but one the outside system may have made, so it
/// is revoked before the next attempt (and never printed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StrayCredential {
    /// The rotation of the failed attempt.
    pub rotation: u64,
    /// The failed attempt.
    pub attempt: u32,
    /// When the failure was recorded.
    pub captured_at: OffsetDateTime,
    /// What the hook printed (trimmed).
    pub value: Secret,
    /// The last failure to revoke it, until a revocation succeeds.
    pub failure: Option<HookFailure>,
}

impl StrayCredential {
    /// Whether its revocation may be tried at `now` (not in a backoff).
    pub fn due(&self, now: OffsetDateTime) -> bool {
        self.failure.as_ref().is_none_or(|f| f.retry_after <= now)
    }
}

/// One rotation in the history.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RotationRecord {
    /// The rotation id.
    pub rotation: u64,
    /// When its credential's mint was recorded.
    #[serde(with = "time::serde::rfc3339")]
    pub minted_at: OffsetDateTime,
    /// Which attempt minted it.
    pub attempts: u32,
    /// When its credential's revocation was recorded (None: still live).
    #[serde(with = "time::serde::rfc3339::option")]
    pub revoked_at: Option<OffsetDateTime>,
}

/// The whole state of one credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialState {
    /// Its name: store key `creds/NAME`, files `creds/NAME/…`.
    pub name: String,
    /// Expiry and grace.
    pub policy: CredentialPolicy,
    /// The CLI's hook commands, if any.
    pub hooks: Option<Hooks>,
    /// The credential consumers use (None until the first mint).
    pub current: Option<Credential>,
    /// The previous credential, until its revocation is recorded. Equal to
    /// `current` between "keep current as old" and the new mint.
    pub old: Option<Credential>,
    /// A mint recorded as started and not yet reported.
    pub mint: Option<MintAttempt>,
    /// The last failure of the step in progress.
    pub failure: Option<HookFailure>,
    /// What failed mint attempts printed, to revoke before the next attempt.
    pub strays: Vec<StrayCredential>,
    /// The id the next rotation gets.
    pub next_rotation: u64,
    /// Minted credentials, oldest first (at most [`HISTORY_LIMIT`]).
    pub history: Vec<RotationRecord>,
}

impl CredentialState {
    /// A credential with nothing minted yet: the first step mints.
    ///
    /// # Errors
    ///
    /// [`CredentialError::InvalidName`](crate::CredentialError::InvalidName)
    /// for `name` (see [`validate_credential_name`]) and
    /// [`CredentialError::InvalidPolicy`](crate::CredentialError::InvalidPolicy)
    /// for `policy` (see [`CredentialPolicy::validate`]).
    pub fn new(name: &str, policy: CredentialPolicy, hooks: Option<Hooks>) -> Result<Self> {
        validate_credential_name(name)?;
        policy.validate()?;
        Ok(CredentialState {
            name: name.to_string(),
            policy,
            hooks,
            current: None,
            old: None,
            mint: None,
            failure: None,
            strays: Vec::new(),
            next_rotation: 1,
            history: Vec::new(),
        })
    }

    /// Checks the invariants every stored document keeps.
    ///
    /// # Errors
    ///
    /// [`CredentialError::InvalidName`](crate::CredentialError::InvalidName)
    /// and
    /// [`CredentialError::InvalidPolicy`](crate::CredentialError::InvalidPolicy)
    /// as [`CredentialState::new`] refuses them, and
    /// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) naming the
    /// credential for a broken invariant (an old credential without a current
    /// one, an impossible mint attempt, …).
    pub fn validate(&self) -> Result<()> {
        validate_credential_name(&self.name)?;
        self.policy.validate()?;
        let bad = |reason: &str| {
            Err(RotateError::corrupt(
                format!("credential \"{}\"", self.name),
                reason,
            ))
        };
        if self.old.is_some() && self.current.is_none() {
            return bad("has an old credential but no current one");
        }
        if let (Some(old), Some(cur)) = (&self.old, &self.current) {
            if old.rotation > cur.rotation {
                return bad("its old credential is newer than the current one");
            }
            if old.rotation == cur.rotation && old.value != cur.value {
                return bad("its old and current credentials share a rotation but differ");
            }
            if old.rotation != cur.rotation && old.value == cur.value {
                return bad("its old and current credentials are the same credential");
            }
        }
        if let Some(m) = &self.mint {
            if m.attempt == 0 || m.rotation >= self.next_rotation {
                return bad("its mint in progress has an impossible rotation or attempt");
            }
            if let Some(owner) = &m.owner
                && validate_owner(owner).is_err()
            {
                return bad("its mint in progress has an unusable owner");
            }
            let kept = match (&self.old, &self.current) {
                (Some(o), Some(c)) => o.rotation == c.rotation,
                (None, None) => true,
                _ => false,
            };
            if !kept {
                return bad(
                    "a mint is in progress while the current credential is not kept as old",
                );
            }
        }
        if let Some(c) = &self.current
            && (c.rotation >= self.next_rotation || c.value.is_empty())
        {
            return bad("its current credential has an impossible rotation or is empty");
        }
        for (i, stray) in self.strays.iter().enumerate() {
            if stray.attempt == 0 || stray.rotation >= self.next_rotation || stray.value.is_empty()
            {
                return bad(
                    "a stray credential has an impossible rotation or attempt, or is empty",
                );
            }
            if self.strays[..i]
                .iter()
                .any(|s| (s.rotation, s.attempt) == (stray.rotation, stray.attempt))
            {
                return bad("two stray credentials come from the same mint attempt");
            }
            // Revoking a stray equal to a live credential would revoke it.
            if self.is_live(&stray.value) {
                return bad("a stray credential is also its current or old credential");
            }
        }
        Ok(())
    }

    /// Whether `value` is the current or the old credential.
    pub(super) fn is_live(&self, value: &Secret) -> bool {
        self.current
            .iter()
            .chain(self.old.iter())
            .any(|c| c.value == *value)
    }

    /// Whether a credential is live only as the old one, waiting for its
    /// revocation (the grace period or a failing revoke).
    pub fn in_grace(&self) -> bool {
        matches!((&self.old, &self.current), (Some(o), Some(c)) if o.rotation != c.rotation)
    }
}
