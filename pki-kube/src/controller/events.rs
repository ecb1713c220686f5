//! Events that each say what happened, never merged into a series: the
//! Event on the store's own object (its head Secret, the commit point of
//! the signer's document) that says the CA rotated, recorded by the
//! replica that sees the new CA first, whoever rotated it (this replica,
//! another one, or `pki rotate` by hand); and a Service's serving
//! certificate issued or re-issued, with the reason.
//!
//! kube-rs' `Recorder` turns an Event of the same reason on the same
//! object into a series of the first one, keeping the first one's note:
//! right for a refusal repeated on every pass, wrong for two rotations
//! whose notes name different CAs.

use super::Writer;
use crate::layout::DocumentNames;
use crate::url::KubeUrl;
use k8s_openapi::api::core::v1::{ObjectReference, Secret};
use k8s_openapi::api::events::v1::Event as KubeEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Resource;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::events::EventType;
use pki_rotate::SignerState;
use pki_rotate::signer::RotationRecord;

/// The reason of the Event.
pub(super) const ROTATED: &str = "Rotated";

/// The note of the Event for `record`.
fn note(record: &RotationRecord) -> String {
    format!(
        "rotated CA {} -> {} at {} ({}); the injected bundles keep the previous CA while it is trusted",
        record.from,
        record.to,
        pki_core::datetime::rfc3339(record.at),
        record.reason
    )
}

impl Writer<'_> {
    /// Records the rotation that brought `state`'s CA, when it differs from
    /// `seen` (the CA of this replica's previous pass; None on its first
    /// pass), unless an Event on the head already names it: a leader
    /// killed between its rotation and its Event leaves it to the replica
    /// that takes over, and a replica that leads again after another did
    /// does not repeat the other's Event.
    pub(super) async fn rotation_event(
        &self,
        url: &KubeUrl,
        state: &SignerState,
        seen: Option<&str>,
    ) {
        let current = state.ca.cert.id();
        if seen == Some(current.as_str()) {
            return;
        }
        let Some(record) = state.history.iter().rev().find(|r| r.to == current) else {
            return;
        };
        let head = DocumentNames::new(url.name(), pki_rotate::signer::STORE_KEY).head;
        let secrets: Api<Secret> = Api::namespaced(self.client.clone(), url.namespace());
        let regarding = match self.call(secrets.get(&head)).await {
            Ok(secret) => secret.object_ref(&()),
            Err(fail) => {
                return self.notice(&format!("Secret {head}: {}", fail.describe()));
            }
        };
        if self.recorded(url, &head, &record.to).await {
            return;
        }
        let message = format!("{url}: {}", note(record));
        self.notice(&message);
        self.own_event(&regarding, EventType::Normal, ROTATED, message)
            .await;
    }

    /// An Event on `regarding` of its own, not merged into a series of
    /// earlier ones; failing to record it is a notice, never a failed pass.
    pub(super) async fn own_event(
        &self,
        regarding: &ObjectReference,
        type_: EventType,
        reason: &str,
        note: String,
    ) {
        let now = k8s_openapi::jiff::Timestamp::now();
        let namespace = regarding
            .namespace
            .clone()
            .unwrap_or_else(|| "default".into());
        let object = regarding.name.as_deref().unwrap_or(super::FIELD_MANAGER);
        let event = KubeEvent {
            metadata: ObjectMeta {
                name: Some(format!("{object}.{:x}", now.as_nanosecond())),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            action: Some("Reconcile".into()),
            reason: Some(reason.into()),
            note: Some(note),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            reporting_controller: Some(super::FIELD_MANAGER.into()),
            reporting_instance: Some(self.instance.to_string()),
            type_: Some(match type_ {
                EventType::Normal => "Normal".into(),
                EventType::Warning => "Warning".into(),
            }),
            ..KubeEvent::default()
        };
        let events: Api<KubeEvent> = Api::namespaced(self.client.clone(), &namespace);
        if let Err(fail) = self
            .call(events.create(&PostParams::default(), &event))
            .await
        {
            self.notice(&format!("event {reason}: {}", fail.describe()));
        }
    }

    /// Whether an Event on the head `head` already says the CA `to` came
    /// by rotation. When the Events cannot be read, yes: one missing
    /// Event is better than one Event repeated by every restart.
    async fn recorded(&self, url: &KubeUrl, head: &str, to: &str) -> bool {
        let events: Api<KubeEvent> = Api::namespaced(self.client.clone(), url.namespace());
        let Ok(list) = self.call(events.list(&ListParams::default())).await else {
            return true;
        };
        list.items.iter().any(|event| {
            event.reason.as_deref() == Some(ROTATED)
                && event.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(head)
                && event.note.as_deref().is_some_and(|n| n.contains(to))
        })
    }
}
