//! Uptake: which consumers loaded which CA bundle the signer published.
//!
//! Rotation only keeps trust if consumers reload what the store publishes,
//! and many do not (a client that reads its CA file once at start). The
//! signer's document therefore remembers:
//!
//! - the fingerprints of the last [`MAX_PUBLISHED`] bundles it published,
//!   each with its publication time ([`PublishedBundle`]): the signer and
//!   external-CA engines record one whenever the bundle changes. A
//!   document written before this was kept counts its current bundle as
//!   published on read, at its latest rotation (or the CA's NotBefore when
//!   it never rotated): the best estimate the document holds;
//! - for each consumer that acknowledged a bundle, the fingerprint it
//!   loaded and when ([`ConsumerRecord`]).
//!
//! A consumer (or a reload helper on its behalf) acknowledges with
//! [`UptakeEngine`] through the driver, so acks race safely with each
//! other and with rotations. Acks of different consumers commute
//! ([`Engine::commutes`]): the rounds one loses to the others do not count
//! against the driver's attempts, so twenty consumers acking at once on
//! one etcd store all land. An ack names a bundle the store published;
//! any other fingerprint is refused. Acknowledging the fingerprint already
//! recorded for the consumer changes nothing (no write).
//!
//! The fingerprint is [`pki_core::Bundle::fingerprint`] in lowercase hex:
//! SHA-256 over the sorted SHA-256 digests of the certificates' DER, so the
//! same certificates in any order or PEM layout give the same token
//! (`pki fingerprint --bundle FILE`, `bundle_fingerprint` in `pki status
//! --json`).
//!
//! A consumer lags when it has not loaded the current bundle once the
//! reload interval I (the policy's `reload_interval`, or M when the policy
//! sets none) has passed since that bundle was published;
//! [`crate::engines::signer::status::SignerStatus`] reports it as an action due.

pub use crate::engines::signer::{
    ConsumerRecord, MAX_CONSUMER_NAME_LEN, MAX_PUBLISHED, PublishedBundle, bundle_fingerprint,
    lags, overdue_by,
};
use crate::engines::signer::{SignerState, SignerView};
use crate::engines::{Engine, Outcome};
use crate::model::error::{Result, RotateError};
use rand_core::CryptoRng;
use std::borrow::Cow;
use time::OffsetDateTime;

/// A consumer's acknowledgement: it loaded the bundle `fingerprint`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AckInput {
    /// Who loaded it: a host, a pod, a component.
    pub consumer: String,
    /// The fingerprint of the bundle it loaded (hex, any case).
    pub fingerprint: String,
}

impl AckInput {
    /// `consumer` loaded the bundle `fingerprint`.
    pub fn new(consumer: impl Into<String>, fingerprint: impl Into<String>) -> Self {
        AckInput {
            consumer: consumer.into(),
            fingerprint: fingerprint.into(),
        }
    }
}

/// What [`UptakeEngine`] decided.
#[derive(Debug, Clone)]
pub struct AckPlan {
    /// The plan's time.
    pub now: OffsetDateTime,
    /// The record to write for the consumer; None when it is already there.
    pub record: Option<(String, ConsumerRecord)>,
    /// Whether the acknowledged bundle is the current one.
    pub current: bool,
    /// When the signer should look again, as its own plan would say.
    pub next_check: OffsetDateTime,
}

/// What an ack did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum UptakeEvent {
    /// A consumer's acknowledgement was recorded.
    Acknowledged {
        /// The consumer.
        consumer: String,
        /// The bundle it loaded.
        fingerprint: String,
        /// Whether that is the bundle published now.
        current: bool,
    },
}

impl std::fmt::Display for UptakeEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            UptakeEvent::Acknowledged {
                consumer,
                fingerprint,
                current,
            } => write!(
                f,
                "{consumer} loaded bundle {fingerprint}{}",
                if *current {
                    " (current)"
                } else {
                    " (not the current bundle)"
                }
            ),
        }
    }
}

/// Records consumers' acknowledgements in the signer's document (same
/// store key and files as [`crate::SignerEngine`]). It changes nothing
/// else: an ack never rotates or re-issues anything, whatever is due.
#[derive(Debug, Clone, Copy, Default)]
pub struct UptakeEngine;

/// The uptake engine's document: the signer's stored document, seen by the
/// engine that records acks in it (see [`SignerView`] for why it is the
/// signer's own object).
pub type UptakeDocument = SignerView<UptakeEngine>;

/// Checks a consumer name: non-empty, at most [`MAX_CONSUMER_NAME_LEN`]
/// bytes, no control or invisible characters (a bidi override, a
/// zero-width space: [`pki_core::text::is_control_or_invisible`]), no
/// spaces at either end.
///
/// # Errors
///
/// [`SignerError::InvalidConsumerName`](crate::SignerError::InvalidConsumerName)
/// when any of these does not hold.
pub fn validate_consumer_name(name: &str) -> Result<()> {
    let bad = name.is_empty()
        || name.len() > MAX_CONSUMER_NAME_LEN
        || pki_core::text::find_control_or_invisible(name).is_some()
        || name.trim() != name;
    if bad {
        return Err(RotateError::Signer(
            crate::SignerError::InvalidConsumerName(name.to_string()),
        ));
    }
    Ok(())
}

/// A fingerprint as given (hex, any case) in the stored form, or None when
/// it is not 64 hex digits.
fn normalise_fingerprint(fingerprint: &str) -> Option<String> {
    (fingerprint.len() == 64 && fingerprint.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| fingerprint.to_ascii_lowercase())
}

impl Engine for UptakeEngine {
    type Document = UptakeDocument;
    type Input = AckInput;
    type Plan = AckPlan;
    type Event = UptakeEvent;

    fn plan(doc: &UptakeDocument, input: &AckInput, now: OffsetDateTime) -> Result<AckPlan> {
        let doc = doc.signer();
        validate_consumer_name(&input.consumer)?;
        let unknown = || {
            RotateError::Signer(crate::SignerError::UnknownBundle {
                fingerprint: input.fingerprint.clone(),
                kept: MAX_PUBLISHED,
            })
        };
        let fingerprint = normalise_fingerprint(&input.fingerprint).ok_or_else(unknown)?;
        doc.published_at(&fingerprint).ok_or_else(unknown)?;
        let current = fingerprint == doc.bundle_fingerprint();
        let recorded = doc
            .consumers
            .get(&input.consumer)
            .is_some_and(|r| r.fingerprint == fingerprint);
        Ok(AckPlan {
            now,
            record: (!recorded).then(|| {
                (
                    input.consumer.clone(),
                    ConsumerRecord {
                        fingerprint,
                        loaded_at: now,
                    },
                )
            }),
            current,
            next_check: crate::engines::signer::next_check(doc, &doc.policy, now).max(now),
        })
    }

    /// An ack reads only the published bundles and its own consumer's
    /// record, and writes only that record: every change that leaves those
    /// alone (another consumer's ack, above all) commutes with it. So acks
    /// of many consumers racing on one store all land, however many lose
    /// a round to each other.
    fn commutes(input: &AckInput, read: &UptakeDocument, fresh: &UptakeDocument) -> bool {
        let (read, fresh) = (read.signer(), fresh.signer());
        read.published == fresh.published
            && read.consumers.get(&input.consumer) == fresh.consumers.get(&input.consumer)
    }

    /// An ack changes no member of the signer's document (no leaf), only
    /// its head (the consumer records): inside the document's idle promise
    /// it is a step over the head alone, whatever the number of leaves.
    fn members(input: &AckInput) -> Option<std::collections::BTreeSet<String>> {
        let _ = input;
        Some(std::collections::BTreeSet::new())
    }

    fn apply<'d, R: CryptoRng + ?Sized>(
        view: &'d UptakeDocument,
        plan: AckPlan,
        _rng: &mut R,
    ) -> Result<Outcome<'d, UptakeDocument, UptakeEvent>> {
        let doc: &SignerState = view.signer();
        let Some((consumer, record)) = plan.record else {
            return Ok(Outcome {
                document: Cow::Borrowed(view),
                events: Vec::new(),
                next_wake: plan.next_check,
                findings: crate::engines::guard::Findings::none(),
            });
        };
        let mut next = doc.clone();
        let event = UptakeEvent::Acknowledged {
            consumer: consumer.clone(),
            fingerprint: record.fingerprint.clone(),
            current: plan.current,
        };
        next.consumers.insert(consumer, record);
        Ok(Outcome {
            document: Cow::Owned(SignerView::new(next)),
            events: vec![event],
            next_wake: plan.next_check,
            findings: crate::engines::guard::Findings::none(),
        })
    }
}
