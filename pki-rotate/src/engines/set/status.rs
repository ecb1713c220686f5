//! What `pki set status` shows, as plain serializable data.

use super::{OverrideRecord, RotationSummary, SetCa, SetState, SetStep, TargetSpec, TimelineEntry};
use pki_core::Certificate;
use std::collections::BTreeMap;
use time::OffsetDateTime;

/// The schema version of [`SetStatus`]'s JSON.
pub const SCHEMA_VERSION: u32 = 1;

/// The whole status of a set at a time.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SetStatus {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The step: `idle`, `trust-both`, `update-certs`, `trust-new`,
    /// `completed`, `reverting`.
    pub step: SetStep,
    /// In trust-both, which half: `trust` (bundles out, client certificates
    /// wait for the servers that verify them) or `clients` (every client
    /// certificate moved to the new client CAs). Null in other steps.
    pub half: Option<&'static str>,
    /// Why the rotation was started.
    pub reason: Option<String>,
    /// When it started.
    #[serde(with = "time::serde::rfc3339::option")]
    pub started_at: Option<OffsetDateTime>,
    /// When it completed.
    #[serde(with = "time::serde::rfc3339::option")]
    pub completed_at: Option<OffsetDateTime>,
    /// When the last rotation completed.
    #[serde(with = "time::serde::rfc3339::option")]
    pub last_completion: Option<OffsetDateTime>,
    /// Serving certificates move one target at a time.
    pub one_at_a_time: bool,
    /// CAs by name.
    pub cas: BTreeMap<String, CaStatus>,
    /// Targets by name.
    pub targets: BTreeMap<String, TargetStatus>,
    /// What `advance` waits for (empty: it can advance).
    pub blocking: Vec<String>,
    /// Where `abort` would go now (`reverting` or `completed`); null when
    /// there is nothing to abort.
    pub abort_to: Option<SetStep>,
    /// The targets an abort now would strand (it is refused without an
    /// override reason); empty when an abort is safe.
    pub abort_strands: Vec<String>,
    /// What an override let happen and still matters: server targets that
    /// may reject client certificates moved before they loaded a bundle
    /// accepting them.
    pub warnings: Vec<String>,
    /// Gates passed by override, with their reasons.
    pub overrides: Vec<OverrideRecord>,
    /// The rotation's timeline.
    pub timeline: Vec<TimelineEntry>,
    /// Finished rotations.
    pub history: Vec<RotationSummary>,
}

/// One CA.
#[derive(Debug, Clone, serde::Serialize)]
pub struct CaStatus {
    /// `serving`, `client` or `serving+client`.
    pub roles: String,
    /// Id of the CA in use.
    pub current: String,
    /// Its NotAfter.
    #[serde(with = "time::serde::rfc3339")]
    pub not_after: OffsetDateTime,
    /// Id of its separate client CA, if split.
    pub current_client_ca: Option<String>,
    /// Id of the new CA during a rotation.
    pub next: Option<String>,
    /// Id of the new client CA during a rotation.
    pub next_client_ca: Option<String>,
    /// Id of the external root the CA in use was imported under (what its
    /// bundles hold); null when the CA is its own root.
    pub current_root: Option<String>,
    /// The same for the new CA during a rotation.
    pub next_root: Option<String>,
    /// Its client certificates moved to the new client CA.
    pub clients_moved: bool,
}

/// One target.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TargetStatus {
    /// The fingerprint it must acknowledge for the current step.
    pub fingerprint: String,
    /// `pending`, `loaded` or `failed`.
    pub progress: &'static str,
    /// The fingerprint it acknowledged last.
    pub acked_fingerprint: Option<String>,
    /// When.
    #[serde(with = "time::serde::rfc3339::option")]
    pub acked_at: Option<OffsetDateTime>,
    /// The reported failure.
    pub failure: Option<String>,
    /// CAs whose servers it verifies.
    pub trusts: Vec<String>,
    /// CAs whose clients it verifies.
    pub client_ca: Vec<String>,
    /// The leaves it loads.
    pub certs: Vec<String>,
    /// Its serving certificates are on the new CAs (update-certs).
    pub serving_updated: bool,
}

impl SetState {
    /// The status at `now`.
    pub fn status(&self, now: OffsetDateTime) -> SetStatus {
        let _ = now;
        let running = self.running();
        let rotation = self.rotation.as_ref();
        let cas = self
            .cas
            .iter()
            .map(|(name, ca)| (name.clone(), self.ca_status(name, ca)))
            .collect();
        let targets = self
            .targets
            .iter()
            .map(|(name, t)| (name.clone(), self.target_status(name, t)))
            .collect();
        SetStatus {
            schema_version: SCHEMA_VERSION,
            step: self.step(),
            half: self.trust_both_half(),
            reason: rotation.map(|r| r.reason.clone()),
            started_at: rotation.map(|r| r.started_at),
            completed_at: rotation.and_then(|r| r.completed_at),
            last_completion: self
                .history
                .iter()
                .rev()
                .find(|h| h.outcome == "completed")
                .map(|h| h.ended_at),
            one_at_a_time: running.is_some_and(|r| r.one_at_a_time),
            cas,
            targets,
            blocking: if running.is_some() {
                self.waiting()
            } else {
                Vec::new()
            },
            abort_to: self.abort_target(),
            abort_strands: self.stranded_by_abort(),
            warnings: self.client_move_warnings(),
            overrides: rotation.map(|r| r.overrides.clone()).unwrap_or_default(),
            timeline: rotation.map(|r| r.timeline.clone()).unwrap_or_default(),
            history: self.history.clone(),
        }
    }

    /// One CA by the ids an operator compares with what targets present:
    /// both generations, their client CAs and the roots they chain to.
    fn ca_status(&self, name: &str, ca: &SetCa) -> CaStatus {
        CaStatus {
            roles: ca.roles.to_string(),
            current: ca.current.signer.cert.id(),
            not_after: ca.current.signer.cert.not_after(),
            current_client_ca: ca.current.client_signer.as_ref().map(|c| c.cert.id()),
            next: ca.next.as_ref().map(|n| n.signer.cert.id()),
            next_client_ca: ca
                .next
                .as_ref()
                .and_then(|n| n.client_signer.as_ref())
                .map(|c| c.cert.id()),
            clients_moved: self
                .running()
                .is_some_and(|r| r.clients_moved.contains(name)),
            current_root: ca.current.chain.last().map(Certificate::id),
            next_root: ca
                .next
                .as_ref()
                .and_then(|n| n.chain.last())
                .map(Certificate::id),
        }
    }

    /// One target: what it must acknowledge, how far it got, and what it
    /// loads. A reported failure outranks an acknowledgement, so a target
    /// that failed after loading shows as failed.
    fn target_status(&self, name: &str, t: &TargetSpec) -> TargetStatus {
        let ack = self.acks.get(name);
        let failure = self.failures.get(name).map(|f| f.reason.clone());
        let progress = if failure.is_some() {
            "failed"
        } else if self.is_loaded(name) {
            "loaded"
        } else {
            "pending"
        };
        TargetStatus {
            fingerprint: super::material::target_fingerprint(self, name),
            progress,
            acked_fingerprint: ack.map(|a| a.fingerprint.clone()),
            acked_at: ack.map(|a| a.at),
            failure,
            trusts: t.trusts.iter().cloned().collect(),
            client_ca: t.client_ca.iter().cloned().collect(),
            certs: self
                .leaves
                .iter()
                .filter(|(_, l)| l.spec.target == name)
                .map(|(n, _)| n.clone())
                .collect(),
            serving_updated: self
                .running()
                .is_some_and(|r| r.updated_targets.contains(name)),
        }
    }

    /// Which half of trust-both the rotation is in: `clients` once every
    /// client CA's certificates moved, `trust` before. None outside
    /// trust-both.
    fn trust_both_half(&self) -> Option<&'static str> {
        self.running()
            .filter(|r| r.step == SetStep::TrustBoth)
            .map(|r| {
                let all = self
                    .cas
                    .iter()
                    .filter(|(_, c)| c.roles.client)
                    .all(|(n, _)| r.clients_moved.contains(n));
                if all { "clients" } else { "trust" }
            })
    }
}
