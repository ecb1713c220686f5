//! pki-rotate: CA rotation engines as pure decisions over documents, the
//! stores that keep the documents, and the driver that runs one over the other.
//!
//! - [`engine`]: the shape of every engine (`plan`, `apply` → [`Outcome`]).
//! - [`signer`]: the service-CA engine, [`SignerEngine`], whose document is
//!   [`SignerState`].
//! - [`document`]: the versioned envelope, the files form stores keep, and
//!   the Kubernetes Secret form.
//! - [`store`]: the [`Store`] trait (keyed documents, opaque revisions,
//!   compare-and-swap), [`MemoryStore`] and the directory store [`FsStore`].
//! - [`driver`]: [`Driver::step`], the one load → plan → apply → write loop.

pub mod document;
pub mod driver;
pub mod engine;
mod error;
pub mod leaf;
pub mod preflight;
pub mod signer;
pub mod status;
pub mod store;

pub use document::{File, Files};
pub use driver::{Driver, Step};
pub use engine::{Engine, Outcome};
pub use error::{Result, RotateError};
pub use leaf::{IssuedLeaf, Leaf, LeafDecision, LeafKind, LeafReason, LeafRequest};
pub use signer::{
    Event, ForcedRotation, LeafChange, Plan, RotationReason, SignerEngine, SignerInput,
    SignerPolicy, SignerState,
};
pub use store::{FsStore, MemoryStore, Revision, SecretBackend, SecretStore, Store};
