//! pki-rotate: CA rotation engines as pure decisions over documents, the
//! stores that keep the documents, and the driver that runs one over the other.
//!
//! - [`engine`]: the shape of every engine (`plan`, `apply` → [`Outcome`]).
//! - [`signer`]: the service-CA engine, [`SignerEngine`], whose document is
//!   [`SignerState`].
//! - [`document`]: the [`Document`] trait every state type implements (its
//!   kind and version in a versioned envelope, the files form stores keep,
//!   the Kubernetes Secret form); engines decide, documents are stored.
//! - [`store`]: the [`Store`] trait (keyed documents, opaque revisions,
//!   compare-and-swap), [`MemoryStore`] and the directory store [`FsStore`].
//! - [`driver`]: [`Driver::step`], the one load → plan → apply → write loop.
//!
//! ```
//! use pki_rotate::{Driver, FsStore, SignerEngine, SignerInput, SignerPolicy, SignerState};
//! use rand_chacha::ChaCha20Rng;
//! use rand_core::SeedableRng;
//! use time::{Duration, macros::datetime};
//!
//! # let dir = tempfile::tempdir()?;
//! let mut rng = ChaCha20Rng::seed_from_u64(1); // the OS RNG in production
//! let t0 = datetime!(2026-01-01 00:00 UTC);
//! let driver = Driver::new(FsStore::open_or_create(dir.path())?);
//! let signer = SignerState::new("service-ca", SignerPolicy::default(), t0, &mut rng)?;
//! driver.create::<SignerEngine>("signer", &signer)?;
//!
//! // A controller step a year and a month later: the CA rotates, and the
//! // engine says when to look again: when bridge B (the new CA signed by
//! // the old key) expires with the old CA and leaves the serving chains.
//! let later = t0 + Duration::days(396);
//! let step = driver.step::<SignerEngine, _>("signer", &SignerInput::default(), later, &mut rng)?;
//! assert!(step.changed);
//! let bridge_b = step.document.bridge.as_ref().expect("bridge B");
//! assert_eq!(step.next_wake, bridge_b.not_after() + Duration::SECOND);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub mod credential;
pub mod document;
pub mod driver;
pub mod engine;
mod error;
pub mod external;
pub mod keyring;
pub mod leaf;
pub mod preflight;
pub mod set;
pub mod signer;
pub mod status;
pub mod store;
pub mod text;

pub use credential::{
    CredentialEngine, CredentialInput, CredentialPolicy, CredentialState,
    Secret as CredentialSecret,
};
pub use document::{Document, File, Files};
pub use driver::{AsyncDriver, Driver, Step};
pub use engine::{Engine, Outcome};
pub use error::{Result, RotateError};
pub use external::{
    ExternalCa, ExternalEngine, ExternalInput, Replacement, ServiceAccountKeys, ValidationReport,
    validate_replacement,
};
pub use keyring::{
    ImportedKeys, KeyRing, KeyRingEngine, KeyRingError, KeyRingEvent, KeyRingInput, KeyRingPolicy,
};
pub use leaf::{IssuedLeaf, Leaf, LeafDecision, LeafKind, LeafReason, LeafRequest};
pub use set::{
    LeafSpec, Roles, SetEngine, SetEvent, SetInput, SetState, SetStatus, SetStep, TargetSpec,
};
pub use signer::{
    Event, ForcedRotation, LeafChange, OverriddenCheck, Plan, RotationReason, RotationRecord,
    SignerEngine, SignerInput, SignerPolicy, SignerState,
};
pub use store::DEFAULT_LOCK_TIMEOUT;
pub use store::{
    AsyncStore, FsStore, MemoryStore, ReadyStore, Revision, SecretBackend, SecretStore, Store,
};
