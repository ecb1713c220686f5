//! pki-rotate: CA rotation engines as pure decisions over documents, the
//! stores that keep the documents, and the driver that runs one over the other.
//!
//! - [`Engine`]: the shape of every engine: `plan` decides, `apply` builds
//!   what the plan names ([`Outcome`]), and one guard
//!   ([`engines::guard`]) refuses an outcome whose trust checks found what
//!   the plan did not accept, before anything is written;
//!   the engines are [`signer`] (service-CA, [`SignerEngine`] over
//!   [`SignerState`]), [`set`] (a CA set in gated steps), [`keyring`]
//!   (signing keys), [`credential`] (credentials minted elsewhere),
//!   [`external`] (CAs signed by someone else's root, over
//!   [`ExternalCaDocument`]) and [`uptake`] (which consumers loaded which
//!   bundle, over [`UptakeDocument`]); each engine has its own document
//!   type, the last two views of the signer's ([`SignerView`]).
//! - [`Document`]: the trait every state type implements (its kind and
//!   version in a versioned envelope, the files form stores keep, the
//!   Kubernetes Secret form); engines decide, documents are stored.
//! - [`store`]: the [`Store`] trait (keyed documents, opaque revisions,
//!   compare-and-swap) and [`AsyncStore`], [`MemoryStore`] and the
//!   directory store [`FsStore`].
//! - [`Driver::step`] (and [`AsyncDriver::step`]): the one load → plan →
//!   apply → guard → write loop.
//! - [`input`]: files a caller names (a CA to import, an etcd client key),
//!   read whole and bounded, never waiting on a FIFO.
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

// The layers, bottom to top; each imports only the ones below it
// (tests/layers.rs checks it, and the folders inside each).
pub mod driver;
pub mod engines;
pub mod model;
pub mod request;
pub mod stores;

// The paths the crate has always offered.
pub use engines::{credential, external, forecast, keyring, preflight, set, signer, uptake};
pub use stores as store;
pub use stores::{input, sealing};

pub use credential::{
    CredentialEngine, CredentialInput, CredentialPolicy, CredentialState,
    Secret as CredentialSecret,
};
pub use driver::{
    ADVANCE_MAX_STEPS, AdvanceOptions, Advanced, AsyncDriver, DEFAULT_MAX_ATTEMPTS, Driver, Read,
    Step,
};
pub use engines::leaf::{
    DEFAULT_LEAF_LIFETIME, IssuedLeaf, Leaf, LeafDecision, LeafKind, LeafReason, LeafRequest,
    check_leaf_dns_name, decide_leaf, issue_leaf, issue_leaf_within, refresh_at,
    validate_leaf_name,
};
pub use engines::{Engine, Outcome};
pub use external::{
    ExternalCa, ExternalCaDocument, ExternalEngine, ExternalInput, Replacement, ServiceAccountKeys,
    ValidationReport, validate_replacement,
};
pub use keyring::{
    ImportedKeys, KeyRing, KeyRingEngine, KeyRingError, KeyRingEvent, KeyRingInput, KeyRingPolicy,
};
pub use model::document::{
    Document, DocumentKey, Envelope, File, Files, FollowUp, Idle, KeyOf, PUBLISHED_BUNDLE,
    Publication, PublishedLeaf, SecretData, files_from_secret_data, files_to_secret_data,
    is_published_leaf_key, is_secret_data_key, published_leaf_file, read_checked, secret_data_key,
    validate_path,
};
pub use model::error::{
    CredentialError, DocumentError, Result, RotateError, SetError, SignerError, StoreError,
};
pub use model::store::{AsyncStore, ReadyStore, Revision, Store, Summary};
pub use model::text::{MAX_REASON_LEN, check_reason};
pub use sealing::{SealedStore, SealingKeys, StoreKey};
pub use set::{
    LeafSpec, Roles, SetEngine, SetEvent, SetInput, SetState, SetStatus, SetStep, TargetSpec,
};
pub use signer::status;
pub use signer::{
    Event, ForcedRotation, LeafChange, OverriddenCheck, Plan, RotationReason, RotationRecord,
    SignerEngine, SignerInput, SignerPolicy, SignerState, SignerView,
};
pub use stores::{DEFAULT_LOCK_TIMEOUT, FsStore, MemoryStore, SecretBackend, SecretStore};
pub use uptake::{AckInput, UptakeDocument, UptakeEngine, UptakeEvent};
