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
//! next wake-up. [`apply`] only carries the change out. [`advance`] takes
//! every due bookkeeping step through the driver until the embedder must
//! act, with one bound ([`ADVANCE_MAX_STEPS`]): the CLI's reconcile loop and
//! the C ABI's `pki_cred_next` both call it.
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

use crate::engine::{Engine, Outcome};
use crate::error::{Result, RotateError};
use pki_core::datetime::rfc3339;
use pki_core::policy::human;
use rand_core::CryptoRng;
use std::borrow::Cow;
use time::{Duration, OffsetDateTime};
use zeroize::Zeroizing;

mod advance;
pub mod document;
pub mod status;

pub use advance::{ADVANCE_MAX_STEPS, Advance, AdvanceOptions, advance};

/// The first retry after a failed hook waits this long; each further
/// consecutive failure doubles it, up to [`BACKOFF_CAP`].
pub const BACKOFF_BASE: Duration = Duration::seconds(30);
/// The longest wait between two attempts of a failing hook.
pub const BACKOFF_CAP: Duration = Duration::hours(1);
/// How many rotations the history keeps (oldest dropped first).
pub const HISTORY_LIMIT: usize = 100;
/// How long an embedder waits before looking again at a mint another
/// embedder owns ([`WaitReason::MintElsewhere`]).
pub const MINT_ELSEWHERE_RECHECK: Duration = Duration::seconds(30);
/// The longest failure message kept, in bytes (longer ones are cut, with `…`).
pub const MESSAGE_LIMIT: usize = 500;

/// Credential `name`'s document key, tied to its kind.
pub fn key(name: &str) -> crate::DocumentKey<CredentialState> {
    crate::DocumentKey::owned(credential_key(name))
}

/// The store key of the credential `name`: `creds/NAME`.
pub fn credential_key(name: &str) -> String {
    format!("{}/{name}", document::CREDS_DIR)
}

/// Checks a credential name: 1-64 characters of `[a-z0-9._-]`, not
/// starting with `.` (it becomes a store key segment and a directory).
pub fn validate_credential_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
        });
    if ok {
        Ok(())
    } else {
        Err(RotateError::InvalidCredentialName(name.to_string()))
    }
}

/// Checks a mint owner (see [`MintAttempt::owner`]): 1-128 characters of
/// `[A-Za-z0-9._:@/-]`, so it prints as it is, on one line.
pub fn validate_owner(owner: &str) -> Result<()> {
    let ok = !owner.is_empty()
        && owner.len() <= 128
        && owner.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'@' | b'/' | b'-')
        });
    if ok {
        Ok(())
    } else {
        Err(RotateError::InvalidMintOwner(owner.to_string()))
    }
}

/// Text from outside (a hook's failure message) as it is stored and
/// printed: one line (runs of whitespace, newlines included, become one
/// space), every other control or invisible formatting character escaped
/// (`\u{1b}`), at most [`MESSAGE_LIMIT`] bytes. Nothing stored carries a
/// terminal escape or a fake line. Idempotent.
pub fn sanitize_message(message: &str) -> String {
    let mut line = String::with_capacity(message.len().min(MESSAGE_LIMIT + 8));
    for word in message.split_whitespace() {
        if !line.is_empty() {
            line.push(' ');
        }
        for c in word.chars() {
            // escape_debug leaves printable characters alone; quotes and
            // backslashes are printable and stay as they are (so that
            // sanitizing twice changes nothing).
            if matches!(c, '\\' | '"' | '\'') || c.escape_debug().len() == 1 {
                line.push(c);
            } else {
                line.extend(c.escape_unicode());
            }
        }
    }
    if line.is_empty() {
        line = "failed without a message".to_string();
    }
    if line.len() > MESSAGE_LIMIT {
        let mut cut = MESSAGE_LIMIT;
        while !line.is_char_boundary(cut) {
            cut -= 1;
        }
        line.truncate(cut);
        line.push('…');
    }
    line
}

/// A credential's bytes, as the mint hook printed them (trimmed). Zeroized
/// on drop and never printed by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Zeroizing<Vec<u8>>);

impl Secret {
    /// Wraps credential bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Secret(Zeroizing::new(bytes.into()))
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Hook output as a credential: surrounding ASCII whitespace removed
    /// (a trailing newline is not part of the credential).
    pub fn from_output(output: &[u8]) -> Self {
        Secret::new(output.trim_ascii())
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}

/// How long a credential lives and how long its predecessor stays usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CredentialPolicy {
    /// A credential is rotated once `mint_time + expire` has passed (CCO's
    /// `ExpireHours`).
    pub expire: Duration,
    /// The previous credential is revoked once `mint_time + grace` of its
    /// successor has passed (CCO hardcodes 10 minutes).
    pub grace: Duration,
}

impl CredentialPolicy {
    /// Refuses an expiry that is not positive, a negative grace, and a
    /// grace not shorter than the expiry (the next rotation would be due
    /// while the old credential still waits: three would be live).
    pub fn validate(&self) -> Result<()> {
        if self.expire <= Duration::ZERO {
            return Err(RotateError::InvalidCredentialPolicy(format!(
                "expiry must be positive, got {}",
                human(self.expire)
            )));
        }
        if self.grace < Duration::ZERO {
            return Err(RotateError::InvalidCredentialPolicy(format!(
                "grace period must not be negative, got {}",
                human(self.grace)
            )));
        }
        if self.grace >= self.expire {
            return Err(RotateError::InvalidCredentialPolicy(format!(
                "grace period {} must be shorter than the expiry {}: the next rotation would be due before the old credential is revoked",
                human(self.grace),
                human(self.expire)
            )));
        }
        Ok(())
    }
}

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
    fn is_live(&self, value: &Secret) -> bool {
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

/// A bookkeeping step the engine takes by itself when stepped with
/// [`CredentialInput::Step`] or [`CredentialInput::StepAs`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// The current credential expired: keep it as old.
    KeepOld,
    /// Record a mint attempt as started.
    StartMint,
}

/// Why [`Action::Wait`] waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitReason {
    /// The current credential is not due for rotation yet.
    Expiry,
    /// The old credential stays usable until the grace period ends.
    Grace,
    /// The last attempt failed; the next waits for its retry time.
    Backoff,
    /// The mint in progress belongs to another embedder
    /// ([`MintAttempt::owner`]): only it runs the mint; look again later.
    MintElsewhere,
}

impl std::fmt::Display for WaitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            WaitReason::Expiry => "until the credential expires",
            WaitReason::Grace => "until the grace period ends",
            WaitReason::Backoff => "until the failed step may be retried",
            WaitReason::MintElsewhere => "for the mint another reconciler runs",
        })
    }
}

/// What the embedder must do: run a hook and report its result, or wait.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Action {
    /// Mint once for this recorded attempt (or adopt what an earlier run
    /// of it captured) and report [`CredentialInput::Minted`] or
    /// [`CredentialInput::MintFailed`].
    Mint {
        /// The rotation.
        rotation: u64,
        /// The attempt.
        attempt: u32,
    },
    /// Revoke `value` (already revoked is success) and report
    /// [`CredentialInput::Revoked`] or [`CredentialInput::RevokeFailed`].
    Revoke {
        /// The old credential's rotation.
        rotation: u64,
        /// The old credential.
        value: Secret,
    },
    /// Revoke what a failed or late mint attempt printed (already gone, or
    /// never a credential, is success) and report
    /// [`CredentialInput::StrayRevoked`] or
    /// [`CredentialInput::StrayRevokeFailed`].
    RevokeStray {
        /// The attempt's rotation.
        rotation: u64,
        /// The attempt.
        attempt: u32,
        /// What it printed.
        value: Secret,
    },
    /// Nothing to do before `until`.
    Wait {
        /// When to look again.
        until: OffsetDateTime,
        /// Why.
        reason: WaitReason,
    },
}

/// What comes once a plan's change is committed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Next {
    /// Another bookkeeping step is due at the same time: step again
    /// ([`advance`] does).
    Step(StepKind),
    /// The embedder acts, or waits.
    Act(Action),
}

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

/// The decision: the change to commit (if any), what comes after it, and
/// when to look again. Made by [`plan`]; [`apply`] only carries it out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The time of the plan (the time of the change).
    pub at: OffsetDateTime,
    /// The one change to commit; None: nothing changes (waiting, the
    /// action is the embedder's, or the report was already recorded).
    pub change: Option<Change>,
    /// What comes once the change is committed.
    pub next: Next,
    /// When to step again if nothing else happens: `at` when a step or an
    /// action is due, the end of the wait otherwise.
    pub next_wake: OffsetDateTime,
}

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
    fn owner(&self) -> Option<&str> {
        match self {
            CredentialInput::StepAs { owner } => Some(owner),
            _ => None,
        }
    }
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

/// What the document asks for at `now` with nothing reported, for the
/// embedder `owner`: a bookkeeping step, or the embedder's action. Pure:
/// the same document, owner and time give the same answer.
fn due(doc: &CredentialState, owner: Option<&str>, now: OffsetDateTime) -> Next {
    if let Some(m) = &doc.mint {
        return Next::Act(if m.run_by(owner) {
            Action::Mint {
                rotation: m.rotation,
                attempt: m.attempt,
            }
        } else {
            Action::Wait {
                until: now + MINT_ELSEWHERE_RECHECK,
                reason: WaitReason::MintElsewhere,
            }
        });
    }
    // Before anything else may mint, what failed attempts printed is
    // revoked: otherwise a third credential could be live.
    if let Some(stray) = doc.strays.iter().find(|s| s.due(now)) {
        return Next::Act(Action::RevokeStray {
            rotation: stray.rotation,
            attempt: stray.attempt,
            value: stray.value.clone(),
        });
    }
    if let Some(until) = doc
        .strays
        .iter()
        .filter_map(|s| s.failure.as_ref().map(|f| f.retry_after))
        .min()
    {
        return Next::Act(Action::Wait {
            until,
            reason: WaitReason::Backoff,
        });
    }
    let backoff = doc
        .failure
        .as_ref()
        .map(|f| f.retry_after)
        .filter(|t| *t > now)
        .map(|until| {
            Next::Act(Action::Wait {
                until,
                reason: WaitReason::Backoff,
            })
        });
    match (&doc.old, &doc.current) {
        (Some(old), Some(current)) if old.rotation != current.rotation => {
            let grace_end = current.minted_at + doc.policy.grace;
            if now < grace_end {
                return Next::Act(Action::Wait {
                    until: grace_end,
                    reason: WaitReason::Grace,
                });
            }
            backoff.unwrap_or_else(|| {
                Next::Act(Action::Revoke {
                    rotation: old.rotation,
                    value: old.value.clone(),
                })
            })
        }
        // Kept as old, or nothing minted yet: mint.
        (Some(_), Some(_)) | (_, None) => backoff.unwrap_or(Next::Step(StepKind::StartMint)),
        (None, Some(current)) => {
            let due = current.minted_at + doc.policy.expire;
            if now >= due {
                Next::Step(StepKind::KeepOld)
            } else {
                Next::Act(Action::Wait {
                    until: due,
                    reason: WaitReason::Expiry,
                })
            }
        }
    }
}

/// The next retry time after `failures` consecutive failures at `now`.
pub fn retry_after(failures: u32, now: OffsetDateTime) -> OffsetDateTime {
    let exponent = failures.saturating_sub(1).min(20);
    let wait = BACKOFF_BASE
        .checked_mul(1i32 << exponent)
        .unwrap_or(BACKOFF_CAP)
        .min(BACKOFF_CAP);
    now + wait
}

fn unexpected(doc: &CredentialState, reason: String) -> RotateError {
    RotateError::UnexpectedCredentialReport {
        name: doc.name.clone(),
        reason,
    }
}

fn waiting_for(doc: &CredentialState) -> String {
    match (&doc.mint, &doc.old, &doc.current) {
        (Some(m), _, _) => format!(
            "the document waits for rotation {} attempt {}",
            m.rotation, m.attempt
        ),
        (None, _, _) if !doc.strays.is_empty() => {
            "the document waits for the revocation of stray credentials".to_string()
        }
        (None, Some(o), Some(c)) if o.rotation != c.rotation => {
            format!(
                "the document waits for the revocation of credential {}",
                o.rotation
            )
        }
        _ => "the document waits for no mint or revocation".to_string(),
    }
}

impl CredentialState {
    /// Whether mint attempt `attempt` of `rotation` was ever started, as far
    /// as the document can tell (a rotation older than the history: yes).
    fn attempted(&self, rotation: u64, attempt: u32) -> bool {
        if rotation == 0 || attempt == 0 || rotation >= self.next_rotation {
            return false;
        }
        if let Some(m) = self.mint.as_ref().filter(|m| m.rotation == rotation) {
            return attempt <= m.attempt;
        }
        if let Some(f) = self
            .failure
            .as_ref()
            .filter(|f| f.action == HookAction::Mint && f.rotation == rotation)
        {
            return attempt <= f.failures;
        }
        if let Some(r) = self.history.iter().find(|r| r.rotation == rotation) {
            return attempt <= r.attempts;
        }
        self.history.first().is_none_or(|r| rotation < r.rotation)
    }

    /// The attempt the next [`Change::StartMint`] records: a retry
    /// continues the failed rotation; otherwise a new one.
    fn next_attempt(&self) -> (u64, u32) {
        match &self.failure {
            Some(f) if f.action == HookAction::Mint => (f.rotation, f.failures + 1),
            _ => (self.next_rotation, 1),
        }
    }
}

/// A mint reported for an attempt the document no longer waits for
/// (another embedder reported it first, or it was superseded): what it
/// printed is kept as a stray, unless the document already holds it.
fn late_mint(
    doc: &CredentialState,
    rotation: u64,
    attempt: u32,
    printed: Option<&Secret>,
    what: &str,
) -> Result<Option<Change>> {
    if !doc.attempted(rotation, attempt) {
        return Err(unexpected(
            doc,
            format!(
                "reported {what} of rotation {rotation} attempt {attempt}, which was never started, but {}",
                waiting_for(doc)
            ),
        ));
    }
    let Some(value) = printed.filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    // Already recorded (a repeated report): nothing to keep, and a live
    // credential must never be revoked as a stray.
    if doc.is_live(value) || doc.strays.iter().any(|s| s.value == *value) {
        return Ok(None);
    }
    if doc
        .strays
        .iter()
        .any(|s| (s.rotation, s.attempt) == (rotation, attempt))
    {
        return Err(unexpected(
            doc,
            format!(
                "reported {what} of rotation {rotation} attempt {attempt} after the document moved on, and a stray credential of that attempt is already kept: keep this credential and report it again once that one is revoked"
            ),
        ));
    }
    Ok(Some(Change::KeepLateMint {
        rotation,
        attempt,
        value: value.clone(),
    }))
}

fn mint_failure(
    rotation: u64,
    attempt: u32,
    message: &str,
    stray: Option<Secret>,
    now: OffsetDateTime,
) -> Change {
    Change::RecordFailure {
        failure: HookFailure {
            action: HookAction::Mint,
            rotation,
            failures: attempt,
            message: sanitize_message(message),
            at: now,
            retry_after: retry_after(attempt, now),
        },
        stray,
    }
}

/// Decides the one change `input` asks for at `now`, and what comes after
/// it: the whole decision. Pure: the same document, input and time give
/// the same plan.
pub fn plan(doc: &CredentialState, input: &CredentialInput, now: OffsetDateTime) -> Result<Plan> {
    doc.validate()?;
    let owner = input.owner();
    if let Some(owner) = owner {
        validate_owner(owner)?;
    }
    let change = decide(doc, input, now)?;
    let next = match &change {
        None => due(doc, owner, now),
        // Look ahead: what the document asks for once the change is in.
        Some(change) => due(&transition(doc, change, now)?.0, owner, now),
    };
    let next_wake = match &next {
        Next::Act(Action::Wait { until, .. }) => (*until).max(now),
        _ => now,
    };
    Ok(Plan {
        at: now,
        change,
        next,
        next_wake,
    })
}

/// The change `input` asks for.
fn decide(
    doc: &CredentialState,
    input: &CredentialInput,
    now: OffsetDateTime,
) -> Result<Option<Change>> {
    let awaited = |rotation: u64, attempt: u32| {
        doc.mint
            .as_ref()
            .is_some_and(|m| m.rotation == rotation && m.attempt == attempt)
    };
    match input {
        CredentialInput::Step | CredentialInput::StepAs { .. } => {
            Ok(match due(doc, input.owner(), now) {
                Next::Step(StepKind::KeepOld) => Some(Change::KeepOld),
                Next::Step(StepKind::StartMint) => {
                    let (rotation, attempt) = doc.next_attempt();
                    Some(Change::StartMint {
                        rotation,
                        attempt,
                        owner: input.owner().map(str::to_string),
                    })
                }
                Next::Act(_) => None,
            })
        }
        CredentialInput::Minted {
            rotation,
            attempt,
            value,
        } => {
            if !awaited(*rotation, *attempt) {
                return late_mint(doc, *rotation, *attempt, Some(value), "a mint");
            }
            // A mint that printed nothing, or a credential already in use
            // (revoking the old one would then revoke the new one), is a
            // failed attempt: recorded, retried with backoff.
            let reused = doc.is_live(value) || doc.strays.iter().any(|s| s.value == *value);
            let refused = if value.is_empty() {
                Some("the mint reported an empty credential")
            } else if reused {
                Some("the mint reported the credential already in use, not a new one")
            } else {
                None
            };
            Ok(Some(match refused {
                Some(message) => mint_failure(*rotation, *attempt, message, None, now),
                None => Change::RecordMint {
                    rotation: *rotation,
                    attempt: *attempt,
                    value: value.clone(),
                },
            }))
        }
        CredentialInput::MintFailed {
            rotation,
            attempt,
            message,
            captured,
        } => {
            if !awaited(*rotation, *attempt) {
                return late_mint(doc, *rotation, *attempt, captured.as_ref(), "a failed mint");
            }
            // A live credential printed again is not a new one: taking it
            // for a stray would revoke it.
            let stray = captured
                .as_ref()
                .filter(|v| !v.is_empty() && !doc.is_live(v))
                .filter(|v| !doc.strays.iter().any(|s| s.value == **v))
                .cloned();
            Ok(Some(mint_failure(*rotation, *attempt, message, stray, now)))
        }
        CredentialInput::Revoked { rotation } => {
            if doc
                .current
                .as_ref()
                .is_some_and(|c| c.rotation == *rotation)
            {
                return Err(unexpected(
                    doc,
                    format!(
                        "refusing to record the revocation of credential {rotation}: it is the current credential"
                    ),
                ));
            }
            match &doc.old {
                Some(o) if o.rotation == *rotation => Ok(Some(Change::RecordRevoke {
                    rotation: *rotation,
                })),
                // Already forgotten (a concurrent embedder reported it), or
                // never known: nothing to keep, nothing to change.
                _ if *rotation < doc.next_rotation => Ok(None),
                _ => Err(unexpected(
                    doc,
                    format!(
                        "reported the revocation of credential {rotation}, which was never minted"
                    ),
                )),
            }
        }
        CredentialInput::RevokeFailed { rotation, message } => match &doc.old {
            Some(o) if o.rotation == *rotation && doc.in_grace() => {
                let failures = match &doc.failure {
                    Some(f) if f.action == HookAction::Revoke && f.rotation == *rotation => {
                        f.failures + 1
                    }
                    _ => 1,
                };
                Ok(Some(Change::RecordFailure {
                    failure: HookFailure {
                        action: HookAction::Revoke,
                        rotation: *rotation,
                        failures,
                        message: sanitize_message(message),
                        at: now,
                        retry_after: retry_after(failures, now),
                    },
                    stray: None,
                }))
            }
            _ => Err(unexpected(
                doc,
                format!(
                    "reported a failed revocation of credential {rotation}, but {}",
                    waiting_for(doc)
                ),
            )),
        },
        CredentialInput::StrayRevoked { rotation, attempt } => {
            if doc
                .strays
                .iter()
                .any(|s| s.rotation == *rotation && s.attempt == *attempt)
            {
                return Ok(Some(Change::RecordStrayRevoke {
                    rotation: *rotation,
                    attempt: *attempt,
                }));
            }
            if *rotation < doc.next_rotation {
                // Already forgotten: a concurrent embedder reported it.
                Ok(None)
            } else {
                Err(unexpected(
                    doc,
                    format!(
                        "reported the revocation of a stray credential of rotation {rotation}, which was never attempted"
                    ),
                ))
            }
        }
        CredentialInput::StrayRevokeFailed {
            rotation,
            attempt,
            message,
        } => match doc
            .strays
            .iter()
            .find(|s| s.rotation == *rotation && s.attempt == *attempt)
        {
            Some(stray) => {
                let failures = stray.failure.as_ref().map_or(1, |f| f.failures + 1);
                Ok(Some(Change::RecordStrayFailure {
                    rotation: *rotation,
                    attempt: *attempt,
                    failure: HookFailure {
                        action: HookAction::RevokeStray,
                        rotation: *rotation,
                        failures,
                        message: sanitize_message(message),
                        at: now,
                        retry_after: retry_after(failures, now),
                    },
                }))
            }
            None => Err(unexpected(
                doc,
                format!(
                    "reported a failed revocation of the stray credential of rotation {rotation} attempt {attempt}, but {}",
                    waiting_for(doc)
                ),
            )),
        },
    }
}

/// Carries out `plan`: its change, if any, as one new document. Decides
/// nothing: what comes next and the wake-up are the plan's.
pub fn apply(doc: &CredentialState, plan: Plan) -> Result<Outcome<'_, CredentialState, Event>> {
    let Some(change) = plan.change else {
        return Ok(Outcome {
            document: Cow::Borrowed(doc),
            events: Vec::new(),
            next_wake: plan.next_wake,
        });
    };
    let (next, events) = transition(doc, &change, plan.at)?;
    Ok(Outcome {
        document: Cow::Owned(next),
        events,
        next_wake: plan.next_wake,
    })
}

/// The document once `change` is made at `at`, and what happened.
fn transition(
    doc: &CredentialState,
    change: &Change,
    at: OffsetDateTime,
) -> Result<(CredentialState, Vec<Event>)> {
    let mut next = doc.clone();
    let name = doc.name.clone();
    let events = match change {
        Change::KeepOld => {
            let current = next.current.clone().ok_or_else(|| {
                RotateError::corrupt(
                    format!("credential \"{}\"", doc.name),
                    "has no current credential to keep",
                )
            })?;
            let rotation = current.rotation;
            next.old = Some(current);
            vec![Event::KeptOld { name, rotation }]
        }
        Change::StartMint {
            rotation,
            attempt,
            owner,
        } => {
            next.mint = Some(MintAttempt {
                rotation: *rotation,
                attempt: *attempt,
                started_at: at,
                owner: owner.clone(),
            });
            next.next_rotation = next.next_rotation.max(rotation + 1);
            vec![Event::MintStarted {
                name,
                rotation: *rotation,
                attempt: *attempt,
            }]
        }
        Change::RecordMint {
            rotation,
            attempt,
            value,
        } => {
            next.current = Some(Credential {
                rotation: *rotation,
                minted_at: at,
                value: value.clone(),
            });
            next.mint = None;
            next.failure = None;
            next.history.push(RotationRecord {
                rotation: *rotation,
                minted_at: at,
                attempts: *attempt,
                revoked_at: None,
            });
            if next.history.len() > HISTORY_LIMIT {
                let excess = next.history.len() - HISTORY_LIMIT;
                next.history.drain(..excess);
            }
            vec![Event::Minted {
                name,
                rotation: *rotation,
            }]
        }
        Change::RecordFailure { failure, stray } => {
            if failure.action == HookAction::Mint {
                next.mint = None;
            }
            let mut events = vec![Event::Failed {
                name: name.clone(),
                failure: failure.clone(),
            }];
            // One commit with the failure: a crash cannot forget it.
            if let Some(value) = stray {
                next.strays.push(StrayCredential {
                    rotation: failure.rotation,
                    attempt: failure.failures,
                    captured_at: failure.at,
                    value: value.clone(),
                    failure: None,
                });
                events.push(Event::StrayKept {
                    name,
                    rotation: failure.rotation,
                    attempt: failure.failures,
                });
            }
            next.failure = Some(failure.clone());
            events
        }
        Change::KeepLateMint {
            rotation,
            attempt,
            value,
        } => {
            next.strays.push(StrayCredential {
                rotation: *rotation,
                attempt: *attempt,
                captured_at: at,
                value: value.clone(),
                failure: None,
            });
            vec![Event::LateMintKept {
                name,
                rotation: *rotation,
                attempt: *attempt,
            }]
        }
        Change::RecordStrayRevoke { rotation, attempt } => {
            next.strays
                .retain(|s| (s.rotation, s.attempt) != (*rotation, *attempt));
            vec![Event::StrayRevoked {
                name,
                rotation: *rotation,
                attempt: *attempt,
            }]
        }
        Change::RecordStrayFailure {
            rotation,
            attempt,
            failure,
        } => {
            for s in &mut next.strays {
                if (s.rotation, s.attempt) == (*rotation, *attempt) {
                    s.failure = Some(failure.clone());
                }
            }
            vec![Event::Failed {
                name,
                failure: failure.clone(),
            }]
        }
        Change::RecordRevoke { rotation } => {
            next.old = None;
            next.failure = None;
            if let Some(r) = next.history.iter_mut().find(|r| r.rotation == *rotation) {
                r.revoked_at = Some(at);
            }
            vec![Event::Revoked {
                name,
                rotation: *rotation,
            }]
        }
    };
    next.validate()?;
    Ok((next, events))
}

/// What the document asks for at `now`, as [`status`] reports it: the
/// bookkeeping step due, or what the owner of the mint in progress (if
/// any) must do. The same decision [`plan`] makes for a step.
pub(crate) fn due_for_status(doc: &CredentialState, now: OffsetDateTime) -> Next {
    let owner = doc.mint.as_ref().and_then(|m| m.owner.as_deref());
    due(doc, owner, now)
}

#[cfg(test)]
mod tests;
