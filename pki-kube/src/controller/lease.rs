//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several
//! replicas one acts: kube-rs has none built in, and this is the rule
//! client-go's leader election follows.
//!
//! The Lease is `NAME.controller` in the store's namespace. A replica
//! holds it while it renews it (every third of the lease duration); a
//! replica that sees the same record unchanged for a whole lease duration,
//! by its own clock (never comparing its clock with the holder's), takes
//! it over. Every change is an update at the resourceVersion read, so two
//! replicas never both take it. Holding it is an optimisation, not what
//! keeps the document safe: a replica that lost it without knowing yet
//! still writes the document only by compare-and-swap.

use super::Writer;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};
use std::time::Duration;
use tokio::time::Instant;

/// A replica's view of the Lease.
pub(super) struct Leadership {
    api: Api<Lease>,
    name: String,
    identity: String,
    duration: Duration,
    /// The holder and renew time last read, and when this replica first
    /// saw them (by its monotonic clock).
    observed: Option<(Option<String>, Option<MicroTime>, Instant)>,
    /// Until when this replica counts as holding without asking again: a
    /// third of the duration after its last renewal.
    held_until: Option<Instant>,
}

/// The identity of a replica: `HOSTNAME` (a Pod's name) when set, and a
/// random suffix, so that two processes on one host differ.
pub(super) fn identity() -> String {
    let mut bytes = [0u8; 6];
    // Without randomness the process id still tells replicas apart.
    let suffix = match getrandom::fill(&mut bytes) {
        Ok(()) => hex::encode(bytes),
        Err(_) => std::process::id().to_string(),
    };
    match std::env::var("HOSTNAME") {
        Ok(host) if !host.is_empty() => format!("{host}_{suffix}"),
        _ => suffix,
    }
}

impl Leadership {
    /// The view of the replica `identity` (see [`identity`]).
    pub(super) fn new(
        client: &Client,
        namespace: &str,
        store: &str,
        identity: String,
        duration: Duration,
    ) -> Self {
        Leadership {
            api: Api::namespaced(client.clone(), namespace),
            name: format!("{store}.controller"),
            identity,
            duration: duration.max(Duration::from_secs(1)),
            observed: None,
            held_until: None,
        }
    }

    /// How often the holder renews: a third of the duration, so that two
    /// renewals can fail before the lease lapses.
    pub(super) fn renew_every(&self) -> Duration {
        self.duration / 3
    }

    /// Renews the Lease when this replica holds it, takes it when it is
    /// free or has lapsed; whether this replica holds it now. A failed
    /// request is "not holding": a replica cut off from the API server
    /// stops acting.
    pub(super) async fn hold(&mut self, writer: &Writer<'_>) -> bool {
        let start = Instant::now();
        if self.held_until.is_some_and(|until| start < until) {
            return true;
        }
        let held = self.hold_now(writer).await;
        self.held_until = held.then(|| start + self.renew_every());
        held
    }

    /// [`Leadership::hold`], asking the API server.
    async fn hold_now(&mut self, writer: &Writer<'_>) -> bool {
        let lease = match writer.call(self.api.get_opt(&self.name)).await {
            Ok(lease) => lease,
            Err(fail) => {
                writer.notice(&format!("Lease {}: {}", self.name, fail.describe()));
                return false;
            }
        };
        let Some(lease) = lease else {
            let created = self.record(None, 0);
            let held = writer
                .call(self.api.create(&PostParams::default(), &created))
                .await
                .is_ok();
            if held {
                writer.notice(&format!("Lease {}: held by {}", self.name, self.identity));
            }
            return held;
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let ours = spec.holder_identity.as_deref() == Some(self.identity.as_str());
        if !ours && !self.lapsed(&spec) {
            return false;
        }
        let transitions = spec.lease_transitions.unwrap_or(0) + i32::from(!ours);
        let mut updated = self.record(lease.metadata.resource_version.clone(), transitions);
        if ours && let Some(renewed) = updated.spec.as_mut() {
            renewed.acquire_time = spec.acquire_time.clone();
        }
        let replaced = writer
            .call(
                self.api
                    .replace(&self.name, &PostParams::default(), &updated),
            )
            .await;
        if !ours && replaced.is_ok() {
            writer.notice(&format!(
                "Lease {}: now held by {}",
                self.name, self.identity
            ));
        }
        replaced.is_ok()
    }

    /// Whether the record in `spec` has stayed the same for a whole lease
    /// duration since this replica first saw it (or holds nobody).
    fn lapsed(&mut self, spec: &LeaseSpec) -> bool {
        if spec.holder_identity.as_deref().unwrap_or("").is_empty() {
            return true;
        }
        let record = (spec.holder_identity.clone(), spec.renew_time.clone());
        let now = Instant::now();
        let since = match &self.observed {
            Some((holder, renewed, since)) if (holder, renewed) == (&record.0, &record.1) => *since,
            _ => {
                self.observed = Some((record.0, record.1, now));
                now
            }
        };
        now.duration_since(since) >= self.duration
    }

    /// The Lease held by this replica, renewed now.
    fn record(&self, resource_version: Option<String>, transitions: i32) -> Lease {
        let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
        Lease {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                resource_version,
                ..ObjectMeta::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.identity.clone()),
                lease_duration_seconds: Some(
                    i32::try_from(self.duration.as_secs()).unwrap_or(i32::MAX),
                ),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                lease_transitions: Some(transitions),
                ..LeaseSpec::default()
            }),
        }
    }

    /// Gives the Lease up (on shutdown), so that another replica takes
    /// over at once rather than after the lease duration: the holder
    /// cleared, at the resourceVersion read. Best effort.
    pub(super) async fn release(&self, writer: &Writer<'_>) {
        let Ok(Some(mut lease)) = writer.call(self.api.get_opt(&self.name)).await else {
            return;
        };
        let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
        if spec.holder_identity.as_deref() != Some(self.identity.as_str()) {
            return;
        }
        spec.holder_identity = None;
        let _ = writer
            .call(self.api.replace(&self.name, &PostParams::default(), &lease))
            .await;
    }
}
