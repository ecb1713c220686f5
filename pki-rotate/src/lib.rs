//! pki-rotate: CA rotation engines as pure decisions over state.
mod error;
pub mod leaf;
pub mod preflight;
pub mod signer;
pub mod state;
pub mod status;
pub mod store;

pub use error::{Result, RotateError};
pub use leaf::{LeafDecision, LeafKind, LeafReason, LeafRequest};
pub use signer::{
    Event, ForcedRotation, Plan, RotationReason, SignerPolicy, SignerState, apply, plan, reconcile,
};
pub use store::{FsStore, MemoryStore, Store};
