//! What the signer's document remembers of uptake: the bundles it
//! published and what each consumer acknowledged, and when a consumer
//! lags. The uptake engine (`crate::engines::uptake`) records the acknowledgements.

use super::SignerState;
use pki_core::Bundle;
use time::{Duration, OffsetDateTime};

/// How many published bundles the document remembers, newest last. A
/// signer publishes a new bundle at a rotation, an import and when an
/// expired member is pruned: a handful per CA lifetime, so sixteen reach
/// back several CA lifetimes, far beyond any consumer that still counts as
/// reloading. An ack of an older bundle is refused like an unknown one.
pub const MAX_PUBLISHED: usize = 16;

/// The longest consumer name accepted (a DNS name's length: consumers are
/// often named after hosts or pods).
pub const MAX_CONSUMER_NAME_LEN: usize = 253;

/// A bundle the signer published.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PublishedBundle {
    /// Its fingerprint (lowercase hex).
    pub fingerprint: String,
    /// When it was published.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
}

/// What a consumer last acknowledged.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ConsumerRecord {
    /// The fingerprint of the bundle it loaded.
    pub fingerprint: String,
    /// When it acknowledged it.
    #[serde(with = "time::serde::rfc3339")]
    pub loaded_at: OffsetDateTime,
}

/// A bundle's fingerprint in the form acks and reports use (lowercase hex).
pub fn bundle_fingerprint(bundle: &Bundle) -> String {
    hex::encode(bundle.fingerprint())
}

impl SignerState {
    /// The fingerprint of the bundle the signer publishes now.
    pub fn bundle_fingerprint(&self) -> String {
        bundle_fingerprint(&self.bundle)
    }

    /// When the bundle `fingerprint` was published, if it is among the
    /// remembered ones.
    pub fn published_at(&self, fingerprint: &str) -> Option<OffsetDateTime> {
        self.published
            .iter()
            .rev()
            .find(|p| p.fingerprint == fingerprint)
            .map(|p| p.at)
    }

    /// When a consumer must have loaded the current bundle: its
    /// publication plus the reload interval (M when the policy sets none).
    pub fn reload_deadline(&self) -> Option<OffsetDateTime> {
        let published = self.published_at(&self.bundle_fingerprint())?;
        let interval = self
            .policy
            .rotation
            .reload_interval
            .unwrap_or(self.policy.rotation.min_trust);
        published.checked_add(interval)
    }

    /// Records the current bundle as published at `at` unless it is the
    /// latest one recorded; forgets the oldest beyond [`MAX_PUBLISHED`].
    pub(crate) fn note_published(&mut self, at: OffsetDateTime) {
        let fingerprint = self.bundle_fingerprint();
        if self
            .published
            .last()
            .is_some_and(|p| p.fingerprint == fingerprint)
        {
            return;
        }
        // A bundle published again (a member pruned back to an earlier
        // set) counts from its latest publication.
        self.published.retain(|p| p.fingerprint != fingerprint);
        self.published.push(PublishedBundle { fingerprint, at });
        let excess = self.published.len().saturating_sub(MAX_PUBLISHED);
        self.published.drain(..excess);
    }

    /// A document written before publications were recorded: its current
    /// bundle counts as published at its latest rotation, or at the CA's
    /// NotBefore when it never rotated.
    pub(crate) fn adopt_current_bundle(&mut self) {
        let at = self
            .history
            .last()
            .map(|r| r.at)
            .unwrap_or_else(|| self.ca.cert.not_before());
        if self.published_at(&self.bundle_fingerprint()).is_none() {
            self.note_published(at);
        }
    }
}

/// Whether a consumer that acknowledged `record` lags at `now`: it has not
/// loaded the current bundle of `state` and the reload interval since that
/// bundle's publication has passed.
pub fn lags(state: &SignerState, record: &ConsumerRecord, now: OffsetDateTime) -> bool {
    record.fingerprint != state.bundle_fingerprint()
        && state.reload_deadline().is_some_and(|d| now > d)
}

/// How long ago a lagging consumer should have reloaded (zero otherwise).
pub fn overdue_by(state: &SignerState, record: &ConsumerRecord, now: OffsetDateTime) -> Duration {
    match state.reload_deadline() {
        Some(d) if lags(state, record, now) => now - d,
        _ => Duration::ZERO,
    }
}
