//! What a caller asks of the set, and the CAs it may supply at a start.

use super::{LeafSpec, SetStep};
use pki_core::{Certificate, CertificateAuthority, ValidatedCa};
use std::collections::BTreeSet;

/// A CA to import at start (StarlingX's upload): certificate, key and
/// the chain above it. The engine checks it again at start
/// ([`pki_core::CaImport::validate`] at the start's time): a caller that
/// built it by hand gets the same refusals as one that read a file with
/// [`pki_core::import_ca_file`].
#[derive(Debug, Clone)]
pub struct ImportedCa {
    /// The CA's name in the set.
    pub ca: String,
    /// Its certificate and key.
    pub authority: CertificateAuthority,
    /// The certificates above it, its issuer first, the root last; empty
    /// when it is self-signed.
    pub chain: Vec<Certificate>,
}

impl ImportedCa {
    /// The new CA for `ca`, as [`pki_core::import_ca_file`] or
    /// [`pki_core::CaImport::validate`] returned it.
    pub fn new(ca: impl Into<String>, validated: ValidatedCa) -> Self {
        ImportedCa {
            ca: ca.into(),
            authority: validated.authority,
            chain: validated.chain,
        }
    }
}

/// What a caller asks of the set. The default asks for nothing.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum SetInput {
    /// Nothing: report only.
    #[default]
    Nothing,
    /// Add or change a leaf; it is issued now. The same spec again is
    /// nothing to do.
    Issue {
        /// The leaf's name.
        name: String,
        /// What it should look like.
        spec: LeafSpec,
        /// Move the leaf although another target loads it (that target
        /// loses it); without it such a request is refused.
        replace: bool,
    },
    /// Create a target or change the bundles it loads (None keeps a list).
    Target {
        /// The target.
        name: String,
        /// CAs whose servers it verifies.
        trusts: Option<BTreeSet<String>>,
        /// CAs whose clients it verifies.
        client_ca: Option<BTreeSet<String>>,
    },
    /// Start a rotation: Idle (or Completed) → TrustBoth.
    Start {
        /// Why.
        reason: String,
        /// CAs supplied instead of generated.
        imports: Vec<ImportedCa>,
        /// Move serving certificates one target at a time.
        one_at_a_time: bool,
    },
    /// A target loaded the files with this fingerprint.
    Ack {
        /// The target.
        target: String,
        /// What it loaded.
        fingerprint: String,
    },
    /// A target failed to load its files.
    Fail {
        /// The target.
        target: String,
        /// Why.
        reason: String,
    },
    /// A failed target will try again.
    Retry {
        /// The target.
        target: String,
    },
    /// Go to the next step; an override reason passes a gate that still
    /// waits, and accepts the red cells of the pre-flight, recorded. An
    /// override applies to the step it was given in: the same reason again
    /// once it moved the set on is nothing to do.
    Advance {
        /// The operator's reason to pass without every acknowledgement.
        override_reason: Option<String>,
        /// The step the caller means to leave: once the set left it in this
        /// rotation the request is nothing to do, and from another step it
        /// is refused. None: the current step.
        from: Option<SetStep>,
    },
    /// Abort to the safe target of the current step
    /// ([`SetState::abort_target`](super::SetState::abort_target)); refused
    /// when it would strand a target
    /// ([`SetState::stranded_by_abort`](super::SetState::stranded_by_abort))
    /// unless an override reason is given.
    Abort {
        /// The operator's reason to abort although it strands targets.
        override_reason: Option<String>,
    },
}
