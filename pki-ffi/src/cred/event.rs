//! The credential engine's events as JSON, for the step's event list.

use crate::step::EventEntry;
use pki_rotate::credential::Event;
use serde_json::json;

/// A credential event as JSON, in the shape of the other engines' events
/// (`{"kind": kebab-case, fields…}`): the credential engine's events do not
/// implement `serde::Serialize`, so they are written here, field by field.
pub(super) fn event(e: &Event) -> EventEntry {
    let value = match e {
        Event::KeptOld { name, rotation } => {
            json!({"kind": "kept-old", "name": name, "rotation": rotation})
        }
        Event::MintStarted {
            name,
            rotation,
            attempt,
        } => {
            json!({"kind": "mint-started", "name": name, "rotation": rotation, "attempt": attempt})
        }
        Event::Minted { name, rotation } => {
            json!({"kind": "minted", "name": name, "rotation": rotation})
        }
        Event::Revoked { name, rotation } => {
            json!({"kind": "revoked", "name": name, "rotation": rotation})
        }
        Event::Failed { name, failure } => {
            json!({"kind": "failed", "name": name, "failure": failure})
        }
        Event::StrayKept {
            name,
            rotation,
            attempt,
        } => json!({"kind": "stray-kept", "name": name, "rotation": rotation, "attempt": attempt}),
        Event::LateMintKept {
            name,
            rotation,
            attempt,
        } => {
            json!({"kind": "late-mint-kept", "name": name, "rotation": rotation, "attempt": attempt})
        }
        Event::StrayRevoked {
            name,
            rotation,
            attempt,
        } => {
            json!({"kind": "stray-revoked", "name": name, "rotation": rotation, "attempt": attempt})
        }
        // An event this build has no fields for: its message still says it.
        _ => json!({"kind": "other", "message": e.to_string()}),
    };
    EventEntry::from_value(value, e.to_string())
}
