//! What a caller asks of the signer besides time: a forced rotation, leaf
//! changes, a new policy.

use super::SignerPolicy;
use crate::engines::leaf::LeafRequest;
use time::Duration;

/// A request to rotate now, whatever the validity left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForcedRotation {
    /// Why. A rotation runs once per distinct reason.
    pub reason: String,
    /// Emergency: how long the old CA stays trusted through bridge A,
    /// instead of max(old NotAfter, now + M).
    pub grace: Option<Duration>,
    /// Compromise: issue no bridges at all; the old CA is distrusted at once.
    pub no_bridges: bool,
}

impl ForcedRotation {
    /// A forced rotation with the normal grace period.
    pub fn new(reason: impl Into<String>) -> Self {
        ForcedRotation {
            reason: reason.into(),
            grace: None,
            no_bridges: false,
        }
    }
}

/// A change to the leaves a signer keeps, carried by [`SignerInput`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeafChange {
    /// Add the leaf `name`, or change its request. It is issued (or
    /// re-issued, when its names or kind changed) in the same step.
    Request {
        /// The leaf's name.
        name: String,
        /// What it should look like.
        request: LeafRequest,
    },
    /// Stop keeping the leaf `name`: its certificate and key leave the
    /// document. A name the document does not have is nothing to do (an
    /// [`crate::Event::AlreadyDone`]), so that a rerun of a removal that
    /// landed succeeds like the first run.
    Remove {
        /// The leaf's name.
        name: String,
    },
    /// Issue a new key and certificate for the existing leaf `name` now,
    /// whether or not it is due.
    Renew {
        /// The leaf's name.
        name: String,
    },
    /// Like `Request`, but may also change the kind of an existing leaf or
    /// drop some of its names, which `Request` refuses: clients that rely on
    /// the old kind or names stop working, so it must be asked for on purpose.
    Replace {
        /// The leaf's name.
        name: String,
        /// What it should look like.
        request: LeafRequest,
    },
}

impl LeafChange {
    /// The leaf's name.
    pub fn name(&self) -> &str {
        match self {
            LeafChange::Request { name, .. }
            | LeafChange::Remove { name }
            | LeafChange::Renew { name }
            | LeafChange::Replace { name, .. } => name,
        }
    }
}

/// What a caller asks of the signer besides time. The default asks for
/// nothing: the periodic controller step that rotates when due and keeps
/// leaves fresh.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SignerInput {
    /// A new policy; None keeps the document's.
    pub policy: Option<SignerPolicy>,
    /// Rotate now, once per distinct reason.
    pub forced: Option<ForcedRotation>,
    /// Leaves to add, change or remove, applied in order.
    pub leaves: Vec<LeafChange>,
    /// A forced rotation that a concurrent rotation already satisfied (set
    /// by [`SignerEngine::rebase`](super::SignerEngine#method.rebase) when
    /// the driver lost a race): its reason is recorded on the latest
    /// rotation instead of rotating again.
    pub satisfied_forced_reason: Option<String>,
    /// Rotate even when the pre-flight finds consumers that would stop
    /// trusting each other (an expired CA, a rotation while clients may
    /// still hold the bundle of two rotations ago), for this reason. The
    /// reason and each break are recorded in the rotation's history entry.
    pub allow_trust_break: Option<String>,
    /// Skip the trust-break pre-flight altogether (no refusal, nothing
    /// recorded): only for callers that cannot pass `allow_trust_break`
    /// yet (the C ABI) and keep their earlier behaviour.
    pub skip_trust_break_check: bool,
}

impl SignerInput {
    /// An input that forces a rotation with `forced`.
    pub fn forced(forced: ForcedRotation) -> Self {
        SignerInput {
            forced: Some(forced),
            ..SignerInput::default()
        }
    }

    /// An input that adds or changes the leaf `name`.
    pub fn request(name: impl Into<String>, request: LeafRequest) -> Self {
        SignerInput {
            leaves: vec![LeafChange::Request {
                name: name.into(),
                request,
            }],
            ..SignerInput::default()
        }
    }
}
