//! A read-only report of a ring at a time (`pki keys status --json`).

use super::{KeyOrigin, KeyRing, KeyRingInput, KeyRotationRecord, next_wake, plan};
use time::OffsetDateTime;

/// A read-only report of a ring at a time, for `pki keys status --json`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KeyRingStatus {
    /// Version of this report's shape.
    pub schema_version: u32,
    /// The report time.
    #[serde(with = "time::serde::rfc3339")]
    pub now: OffsetDateTime,
    /// The policy.
    pub policy: PolicyReport,
    /// The active key.
    pub active: KeyReport,
    /// The other published keys, most recently rotated out first.
    pub accepted: Vec<KeyReport>,
    /// When the active key is due for rotation.
    #[serde(with = "time::serde::rfc3339")]
    pub rotation_due_at: OffsetDateTime,
    /// Whether a step at `now` would change something.
    pub action_due: bool,
    /// When the next step is due.
    #[serde(with = "time::serde::rfc3339")]
    pub next_wake: OffsetDateTime,
    /// Forced reasons already acted on.
    pub forced_reasons: Vec<String>,
    /// Every rotation, oldest first.
    pub history: Vec<KeyRotationRecord>,
}

/// The policy in a report, durations in seconds and in words.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PolicyReport {
    /// `p256`, `rsa2048`…
    pub algorithm: String,
    /// Key lifetime, seconds.
    pub lifetime_seconds: i64,
    /// Grace period, seconds.
    pub grace_seconds: i64,
    /// Longest token lifetime, seconds (null: not stated).
    pub max_token_lifetime_seconds: Option<i64>,
}

/// One key in a report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KeyReport {
    /// RFC 7638 thumbprint.
    pub kid: String,
    /// `ES256` or `RS256`.
    pub alg: String,
    /// Generated or imported.
    pub origin: KeyOrigin,
    /// When it became active (the active key only).
    #[serde(
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub since: Option<OffsetDateTime>,
    /// When it was rotated out.
    #[serde(
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub rotated_out_at: Option<OffsetDateTime>,
    /// Until when it is accepted (null: the active key, or until retired).
    #[serde(with = "time::serde::rfc3339::option")]
    pub accepted_until: Option<OffsetDateTime>,
    /// Whether tokens it signed verify at the report time.
    pub accepted: bool,
    /// The PKCS#11 URI of the token object that holds the key, when the
    /// ring's keys are in a token (absent otherwise).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub uri: Option<String>,
}

impl KeyRing {
    /// The report at `now`.
    pub fn status(&self, now: OffsetDateTime) -> KeyRingStatus {
        let action_due = plan(self, &KeyRingInput::default(), now)
            .map(|p| !p.is_empty())
            .unwrap_or(false);
        KeyRingStatus {
            schema_version: 1,
            now,
            policy: PolicyReport {
                algorithm: self.policy.algorithm.as_str().to_string(),
                lifetime_seconds: self.policy.lifetime.whole_seconds(),
                grace_seconds: self.policy.grace.whole_seconds(),
                max_token_lifetime_seconds: self
                    .policy
                    .max_token_lifetime
                    .map(|d| d.whole_seconds()),
            },
            active: KeyReport {
                kid: self.active.kid.clone(),
                alg: self.active.public.algorithm().as_str().to_string(),
                origin: self.active.origin,
                since: Some(self.active.since),
                rotated_out_at: None,
                accepted_until: None,
                accepted: true,
                uri: self.key_uri(&self.active.kid).map(ToString::to_string),
            },
            accepted: self
                .accepted
                .iter()
                .map(|k| KeyReport {
                    kid: k.kid.clone(),
                    alg: k.public.algorithm().as_str().to_string(),
                    origin: k.origin,
                    since: None,
                    rotated_out_at: k.rotated_out_at,
                    accepted_until: k.accepted_until,
                    accepted: k.accepted_at(now),
                    uri: self.key_uri(&k.kid).map(ToString::to_string),
                })
                .collect(),
            rotation_due_at: self.rotation_due_at(),
            action_due,
            next_wake: next_wake(self, now),
            forced_reasons: self.forced_reasons.iter().cloned().collect(),
            history: self.history.clone(),
        }
    }
}
