//! What a step did, whatever the engine: [`StepResult`], the one result
//! the C ABI and Go return for a create or a step.

use crate::credential::{Action, Event as CredentialEvent, WaitReason};
use crate::driver::Read;
use crate::{Revision, Step};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use time::OffsetDateTime;

/// What a create or a step did: whether it wrote, the events, when to step
/// again, the document's revision, the rounds it took, whether it was
/// decided from the store's summary (`idle`) or over part of the document
/// (`by_parts`), the status of the document now in the store, and after a
/// credential advance the embedder's next action.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct StepResult {
    /// The schema version ([`super::REQUEST_VERSION`]).
    pub version: u32,
    /// Whether the step wrote a new document (a create always does).
    pub changed: bool,
    /// When to step again if nothing else happens (Unix seconds).
    pub next_wake: i64,
    /// The document's revision in the store after the step (opaque).
    pub revision: String,
    /// How many read-decide-write rounds it took.
    pub attempts: u32,
    /// Decided from the store's summary: nothing was due, no document was
    /// read, and there is no status.
    #[serde(default)]
    pub idle: bool,
    /// Over the document's head and some of its members only: the status
    /// is the part's.
    #[serde(default)]
    pub by_parts: bool,
    /// What happened, in order.
    #[serde(default)]
    pub events: Vec<StepEvent>,
    /// The status of the document now in the store, as the CLI's `status
    /// --json` reports it; null when there is none (an idle step).
    #[serde(default)]
    pub status: Value,
    /// After a credential advance: what the embedder does next.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<NextAction>,
}

/// One event: a JSON object with `kind` (kebab-case), the event's fields
/// (times in RFC 3339) and `message` (one line for logs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct StepEvent(pub Value);

impl StepEvent {
    /// An event of an engine whose events serialise as `{"kind": …, …}`.
    pub fn of<E: Serialize + std::fmt::Display>(event: &E) -> Self {
        let value = serde_json::to_value(event).unwrap_or(Value::Null);
        Self::from_value(value, event.to_string())
    }

    /// An event from its JSON object (with a `kind`) and its message, added
    /// to the object as `message`.
    pub fn from_value(value: Value, message: String) -> Self {
        match value {
            Value::Object(mut map) => {
                if !map.get("kind").is_some_and(Value::is_string) {
                    map.insert("kind".into(), Value::String("other".into()));
                }
                map.insert("message".into(), Value::String(message));
                StepEvent(Value::Object(map))
            }
            _ => StepEvent(json!({ "kind": "other", "message": message })),
        }
    }

    /// A credential event (the credential engine's events are written
    /// here field by field).
    pub fn of_credential(e: &CredentialEvent) -> Self {
        let value = match e {
            CredentialEvent::KeptOld { name, rotation } => {
                json!({"kind": "kept-old", "name": name, "rotation": rotation})
            }
            CredentialEvent::MintStarted {
                name,
                rotation,
                attempt,
            } => mint_event("mint-started", name, *rotation, *attempt),
            CredentialEvent::Minted { name, rotation } => {
                json!({"kind": "minted", "name": name, "rotation": rotation})
            }
            CredentialEvent::Revoked { name, rotation } => {
                json!({"kind": "revoked", "name": name, "rotation": rotation})
            }
            CredentialEvent::Failed { name, failure } => {
                json!({"kind": "failed", "name": name, "failure": failure})
            }
            CredentialEvent::StrayKept {
                name,
                rotation,
                attempt,
            } => mint_event("stray-kept", name, *rotation, *attempt),
            CredentialEvent::LateMintKept {
                name,
                rotation,
                attempt,
            } => mint_event("late-mint-kept", name, *rotation, *attempt),
            CredentialEvent::StrayRevoked {
                name,
                rotation,
                attempt,
            } => mint_event("stray-revoked", name, *rotation, *attempt),
        };
        Self::from_value(value, e.to_string())
    }

    /// Its kind (`"rotated"`, `"step"`, `"minted"`…).
    pub fn kind(&self) -> &str {
        self.0
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("other")
    }

    /// Its one-line message.
    pub fn message(&self) -> &str {
        self.0.get("message").and_then(Value::as_str).unwrap_or("")
    }
}

fn mint_event(kind: &str, name: &str, rotation: u64, attempt: u32) -> Value {
    json!({"kind": kind, "name": name, "rotation": rotation, "attempt": attempt})
}

/// What the embedder does next for a credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActionKind {
    /// Mint once for the action's rotation and attempt.
    Mint,
    /// Revoke the action's credential (the old one).
    Revoke,
    /// Nothing to do before the step's `next_wake`.
    Wait,
    /// Revoke what a failed (or late) mint attempt returned.
    RevokeStray,
}

/// Why a wait waits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitReasonName {
    /// The current credential is not due yet.
    Expiry,
    /// The old credential stays usable until the grace period ends.
    Grace,
    /// A hook failed; its retry waits.
    Backoff,
    /// The mint in progress belongs to another owner.
    MintElsewhere,
}

/// The embedder's next action after a credential advance.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextAction {
    /// What to do.
    pub kind: ActionKind,
    /// The rotation to mint for, whose old credential to revoke, or of the
    /// failed mint whose stray credential to revoke; 0 for a wait.
    pub rotation: u64,
    /// The attempt of a mint or of a stray; 0 otherwise.
    pub attempt: u32,
    /// Why a wait waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_reason: Option<WaitReasonName>,
    /// The credential to revoke (old or stray), base64; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_base64: Option<String>,
}

impl NextAction {
    /// The action of an advance.
    pub fn of(action: &Action) -> Self {
        use base64::Engine as _;
        let b64 = |v: &crate::credential::Secret| {
            Some(base64::engine::general_purpose::STANDARD.encode(v.as_bytes()))
        };
        let act = |kind, rotation, attempt, credential_base64| NextAction {
            kind,
            rotation,
            attempt,
            wait_reason: None,
            credential_base64,
        };
        match action {
            Action::Mint { rotation, attempt } => act(ActionKind::Mint, *rotation, *attempt, None),
            Action::Revoke { rotation, value } => act(ActionKind::Revoke, *rotation, 0, b64(value)),
            Action::RevokeStray {
                rotation,
                attempt,
                value,
            } => act(ActionKind::RevokeStray, *rotation, *attempt, b64(value)),
            Action::Wait { reason, .. } => NextAction {
                wait_reason: Some(match reason {
                    WaitReason::Expiry => WaitReasonName::Expiry,
                    WaitReason::Grace => WaitReasonName::Grace,
                    WaitReason::Backoff => WaitReasonName::Backoff,
                    WaitReason::MintElsewhere => WaitReasonName::MintElsewhere,
                }),
                ..act(ActionKind::Wait, 0, 0, None)
            },
        }
    }

    /// The credential to revoke, decoded; empty for other actions.
    pub fn credential(&self) -> zeroize::Zeroizing<Vec<u8>> {
        use base64::Engine as _;
        zeroize::Zeroizing::new(
            self.credential_base64
                .as_deref()
                .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
                .unwrap_or_default(),
        )
    }
}

/// The status JSON text as a value (null when empty or unreadable).
fn status_value(status: &str) -> Value {
    serde_json::from_str(status).unwrap_or(Value::Null)
}

impl StepResult {
    /// A result from its parts; `status` is the status JSON of the
    /// document now in the store.
    pub fn new(
        changed: bool,
        next_wake: OffsetDateTime,
        attempts: u32,
        revision: &Revision,
        events: Vec<StepEvent>,
        status: &str,
    ) -> Self {
        StepResult {
            version: super::REQUEST_VERSION,
            changed,
            next_wake: next_wake.unix_timestamp(),
            revision: revision.as_str().to_string(),
            attempts,
            idle: false,
            by_parts: false,
            events,
            status: status_value(status),
            action: None,
        }
    }

    /// What a step of the driver did, however it was decided: with the
    /// status of its document (the part's after a step over part of it),
    /// none after a step decided from the store's summary (`idle`), and
    /// after a credential advance the embedder's next action.
    pub fn of_step<D, E>(
        step: &Step<D, E>,
        event: impl Fn(&E) -> StepEvent,
        status: impl FnOnce(&D) -> String,
    ) -> Self {
        let status = match step.read {
            Read::Whole | Read::Part => status(&step.document),
            Read::Summary { .. } => String::new(),
        };
        StepResult {
            idle: step.is_idle(),
            by_parts: step.read == Read::Part,
            action: step.action().map(NextAction::of),
            ..StepResult::new(
                step.changed,
                step.next_wake,
                step.attempts,
                &step.revision,
                step.events.iter().map(event).collect(),
                &status,
            )
        }
    }

    /// The status as JSON text; empty when there is none.
    pub fn status_json(&self) -> String {
        if self.status.is_null() {
            String::new()
        } else {
            self.status.to_string()
        }
    }
}
