//! What happens to the set, for logs and the CLI.

use super::SetStep;

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SetEvent {
    /// The step changed.
    Step {
        /// From.
        from: SetStep,
        /// To.
        to: SetStep,
        /// Why or how.
        note: String,
    },
    /// A leaf was issued.
    Issued {
        /// The leaf.
        name: String,
        /// The target that loads it.
        target: String,
        /// Its certificate's id.
        id: String,
        /// The CA certificate that signed it.
        issuer: String,
    },
    /// A new CA was made or imported.
    NewCa {
        /// The CA's name.
        ca: String,
        /// `ca` or `client-ca`.
        role: String,
        /// Its certificate's id.
        id: String,
        /// Imported rather than generated.
        imported: bool,
    },
    /// A target acknowledged its files.
    Acked {
        /// The target.
        target: String,
        /// The fingerprint.
        fingerprint: String,
    },
    /// A target failed.
    Failed {
        /// The target.
        target: String,
        /// Why.
        reason: String,
    },
    /// A failed target is pending again.
    Retrying {
        /// The target.
        target: String,
    },
    /// A target's bundles changed.
    TargetChanged {
        /// The target.
        target: String,
    },
    /// Old CA keys were destroyed.
    OldKeysDestroyed {
        /// Ids of the destroyed CA certificates.
        ids: Vec<String>,
    },
    /// A CA key object in the token changed (recorded before it is made,
    /// retired once nothing trusts its CA, destroyed).
    TokenKey {
        /// `intended`, `retired` or `destroyed`.
        change: String,
        /// The key object's URI.
        uri: String,
    },
    /// The request was applied before: nothing changes.
    AlreadyDone {
        /// What was done, and when.
        note: String,
    },
}

impl std::fmt::Display for SetEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetEvent::Step { from, to, note } => write!(f, "step {from} -> {to}: {note}"),
            SetEvent::Issued {
                name,
                target,
                id,
                issuer,
            } => write!(
                f,
                "issued {name} ({id}) for target {target}, signed by {issuer}"
            ),
            SetEvent::NewCa {
                ca,
                role,
                id,
                imported,
            } => write!(
                f,
                "{} new {role} for {ca}: {id}",
                if *imported { "imported" } else { "generated" }
            ),
            SetEvent::Acked {
                target,
                fingerprint,
            } => write!(f, "target {target} loaded {fingerprint}"),
            SetEvent::Failed { target, reason } => write!(f, "target {target} failed: {reason}"),
            SetEvent::Retrying { target } => write!(f, "target {target} pending again (retry)"),
            SetEvent::TargetChanged { target } => write!(f, "target {target} bundles changed"),
            SetEvent::OldKeysDestroyed { ids } => {
                write!(f, "destroyed old CA keys {}", ids.join(", "))
            }
            SetEvent::TokenKey { change, uri } => write!(f, "CA key {uri} {change}"),
            SetEvent::AlreadyDone { note } => write!(f, "nothing to do: {note}"),
        }
    }
}

impl From<crate::engines::token_keys::KeyChange> for SetEvent {
    fn from(change: crate::engines::token_keys::KeyChange) -> Self {
        use crate::engines::token_keys::KeyChange;
        let (change, uri) = match change {
            KeyChange::Intended(uri) => ("recorded, to make in the token", uri),
            KeyChange::Retired(uri) => ("retired: nothing trusts its CA", uri),
            KeyChange::Destroyed(uri) => ("destroyed", uri),
        };
        SetEvent::TokenKey {
            change: change.to_string(),
            uri: uri.to_string(),
        }
    }
}
