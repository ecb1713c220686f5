//! The plain data every layer of the crate names, below the errors that
//! carry it: a store's revision of a document and the summary kept beside
//! it, the step a CA set's rotation is at, which side of a rotation a chain
//! or bundle comes from, a safety check an operator overrode, and how a
//! sealed value starts. Nothing here decides or fails; the engines give
//! these values meaning.
//!
//! The bottom layer of the crate: besides these values, the documents and
//! their codecs ([`document`]), the errors ([`error`]), what a store is
//! ([`store`]) and the checks of free text ([`text`]). Nothing here imports
//! an engine, the driver or a store.

pub mod document;
pub mod error;
pub mod store;
pub mod text;

/// A store's version of one document: opaque, assigned by the store, only
/// compared for equality (it has no meaningful order). The directory store
/// uses its generation number, etcd the key's `mod_revision`, a Kubernetes
/// Secret its `resourceVersion`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Revision(String);

impl Revision {
    /// A revision from the store's own token.
    pub fn new(token: impl Into<String>) -> Self {
        Revision(token.into())
    }

    /// The store's token.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Revision {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The step of the set's rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SetStep {
    /// No rotation runs.
    Idle,
    /// Bundles trust old and new; client certificates move.
    TrustBoth,
    /// Serving certificates move; bundles trust both.
    UpdateCerts,
    /// Bundles trust the new CAs only.
    TrustNew,
    /// The rotation completed; old CA keys are gone.
    Completed,
    /// An abort is moving every leaf back to the old CAs.
    Reverting,
}

pub use pki_core::trust_matrix::Side;

/// A safety check that failed and was overridden by an operator.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OverriddenCheck {
    /// The check's stable name, as printed in reports (`chains-to-current-trust`).
    pub name: String,
    /// What the check found.
    pub detail: String,
}

/// A few hundred bytes a store keeps beside a document and writes with it,
/// so a caller can decide a step that has nothing to do without reading the
/// document ([`crate::Driver::step_unless_idle`]). Opaque to stores; its
/// contents are [`crate::Idle`] as JSON.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary(String);

/// A summary larger than this is refused when read: stores keep small ones
/// only, and a reader must not load a large value it did not ask for.
pub const MAX_SUMMARY_LEN: usize = 16 * 1024;

impl Summary {
    /// A summary from what a store kept; None when it is too large to be one.
    pub fn new(text: impl Into<String>) -> Option<Self> {
        let text = text.into();
        (text.len() <= MAX_SUMMARY_LEN).then_some(Summary(text))
    }

    /// The summary as the store keeps it.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// Every sealed value starts with these bytes (see [`crate::sealing`]).
pub const MAGIC: &[u8; 7] = b"PKISEAL";

/// Whether `bytes` is a sealed value (starts with [`MAGIC`]). Clear private
/// material is PEM or a credential printed as text, neither of which
/// starts with it.
pub fn is_sealed(bytes: &[u8]) -> bool {
    bytes.starts_with(MAGIC)
}
