//! What `pki cred status --json` and the C ABI report about a credential:
//! never a credential's value.

use crate::engines::credential::{
    Action, CredentialState, HookFailure, Next, RotationRecord, StepKind, WaitReason,
    due_for_status, sanitize_message,
};
use time::OffsetDateTime;

/// The report's format version.
pub const SCHEMA_VERSION: u32 = 1;

/// One credential's state at a time.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CredentialStatus {
    /// The credential's name.
    pub name: String,
    /// `minting` (a mint recorded as started), `revoking-stray` (what a
    /// failed mint printed is to be revoked before the next attempt),
    /// `rotating` (kept as old, mint next), `grace` (old and new both live),
    /// `revoking` (grace over, old to revoke), `failing` (waiting to retry a
    /// failed step), `idle`.
    pub state: &'static str,
    /// The expiry, in seconds.
    pub expire_seconds: i64,
    /// The grace period, in seconds.
    pub grace_seconds: i64,
    /// What a monitor makes of it (`pki cred status --check`).
    pub health: Health,
    /// The current credential.
    pub current: Option<CredentialInfo>,
    /// The old credential, until its revocation is recorded.
    pub old: Option<CredentialInfo>,
    /// The mint recorded as started, if any.
    pub mint: Option<crate::engines::credential::MintAttempt>,
    /// The last failure of the step in progress.
    pub failure: Option<HookFailure>,
    /// What failed mint attempts printed and is still to be revoked (never
    /// the value).
    pub strays: Vec<StrayInfo>,
    /// What happens next: `mint`, `revoke`, `revoke-stray`, `keep-old`,
    /// `start-mint`, `wait`.
    pub next_action: &'static str,
    /// Why it waits, for `wait`: `expiry`, `grace`, `backoff`,
    /// `mint-elsewhere` (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub wait_reason: Option<&'static str>,
    /// When it happens (now, or the end of the wait).
    #[serde(with = "time::serde::rfc3339")]
    pub next_at: OffsetDateTime,
    /// Past rotations, oldest first.
    pub history: Vec<RotationRecord>,
}

/// What a monitor makes of a credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Health {
    /// Nothing is due now (it waits for the expiry or the grace period).
    Ok,
    /// A step is due now: a reconcile would act.
    ActionDue,
    /// A hook's last run failed (mint, revoke, or revoke of a stray); it
    /// is retried with backoff until it succeeds.
    Failing,
}

impl Health {
    /// `pki cred status --check`'s exit status, as `pki status --check`'s:
    /// 0 ok, 3 an action is due, 4 a hook is failing.
    pub fn exit_code(self) -> u8 {
        match self {
            Health::Ok => 0,
            Health::ActionDue => 3,
            Health::Failing => 4,
        }
    }
}

/// A stray credential's metadata.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct StrayInfo {
    /// The rotation of the failed mint attempt.
    pub rotation: u64,
    /// The failed attempt.
    pub attempt: u32,
    /// When the failure was recorded.
    #[serde(with = "time::serde::rfc3339")]
    pub captured_at: OffsetDateTime,
    /// The last failure to revoke it.
    pub failure: Option<HookFailure>,
}

/// A credential's metadata.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CredentialInfo {
    /// The rotation that minted it.
    pub rotation: u64,
    /// When its mint was recorded.
    #[serde(with = "time::serde::rfc3339")]
    pub minted_at: OffsetDateTime,
    /// For the current one: when it is due for rotation. For the old one:
    /// when its grace period ends.
    #[serde(with = "time::serde::rfc3339")]
    pub until: OffsetDateTime,
}

impl CredentialStatus {
    /// The status of `doc` at `now`: the decision [`plan`](crate::engines::credential::plan)
    /// makes for a step of the owner of the mint in progress (if any). Text
    /// from hooks is shown sanitized, even from documents written before it
    /// was stored so.
    pub fn of(doc: &CredentialState, now: OffsetDateTime) -> Self {
        let next = due_for_status(doc, now);
        let (next_action_name, next_at, wait_reason) = match &next {
            Next::Step(StepKind::KeepOld) => ("keep-old", now, None),
            Next::Step(StepKind::StartMint) => ("start-mint", now, None),
            Next::Act(Action::Mint { .. }) => ("mint", now, None),
            Next::Act(Action::Revoke { .. }) => ("revoke", now, None),
            Next::Act(Action::RevokeStray { .. }) => ("revoke-stray", now, None),
            Next::Act(Action::Wait { until, reason }) => {
                ("wait", *until, Some(reason_name(*reason)))
            }
        };
        let action = match &next {
            Next::Act(action) => Some(action),
            Next::Step(_) => None,
        };
        let backoff = doc.failure.as_ref().is_some_and(|f| f.retry_after > now);
        let state = if doc.mint.is_some() {
            "minting"
        } else if matches!(action, Some(Action::RevokeStray { .. })) {
            "revoking-stray"
        } else if backoff || !doc.strays.is_empty() {
            "failing"
        } else if doc.in_grace() {
            match action {
                Some(Action::Revoke { .. }) => "revoking",
                _ => "grace",
            }
        } else if doc.old.is_some() || doc.current.is_none() {
            "rotating"
        } else {
            "idle"
        };
        let grace_end = doc.current.as_ref().map(|c| c.minted_at + doc.policy.grace);
        let health = if doc.failure.is_some() || doc.strays.iter().any(|s| s.failure.is_some()) {
            Health::Failing
        } else if matches!(action, Some(Action::Wait { .. })) {
            Health::Ok
        } else {
            Health::ActionDue
        };
        CredentialStatus {
            name: doc.name.clone(),
            state,
            expire_seconds: doc.policy.expire.whole_seconds(),
            grace_seconds: doc.policy.grace.whole_seconds(),
            health,
            current: doc.current.as_ref().map(|c| CredentialInfo {
                rotation: c.rotation,
                minted_at: c.minted_at,
                until: c.minted_at + doc.policy.expire,
            }),
            old: doc.old.as_ref().map(|o| CredentialInfo {
                rotation: o.rotation,
                minted_at: o.minted_at,
                until: grace_end.unwrap_or(o.minted_at),
            }),
            mint: doc.mint.clone(),
            failure: doc.failure.as_ref().map(sanitized),
            strays: doc
                .strays
                .iter()
                .map(|s| StrayInfo {
                    rotation: s.rotation,
                    attempt: s.attempt,
                    captured_at: s.captured_at,
                    failure: s.failure.as_ref().map(sanitized),
                })
                .collect(),
            next_action: next_action_name,
            wait_reason,
            next_at,
            history: doc.history.clone(),
        }
    }
}

/// A failure with its message as it may be printed.
fn sanitized(f: &HookFailure) -> HookFailure {
    HookFailure {
        message: sanitize_message(&f.message),
        ..f.clone()
    }
}

fn reason_name(reason: WaitReason) -> &'static str {
    match reason {
        WaitReason::Expiry => "expiry",
        WaitReason::Grace => "grace",
        WaitReason::Backoff => "backoff",
        WaitReason::MintElsewhere => "mint-elsewhere",
    }
}
