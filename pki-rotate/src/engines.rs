//! The engines: one folder each (its input, plan, apply and document),
//! over the [`model`](crate::model), and the shape every engine has: a
//! document, a pure `plan`, an `apply` that returns an [`Outcome`].
//!
//! - [`signer`]: the service CA (its document also records an external CA
//!   it uses and its consumers' uptake);
//! - [`set`]: a set of CAs rotated in gated steps;
//! - [`keyring`]: signing keys; [`credential`]: credentials minted
//!   elsewhere; [`external`]: CAs signed by someone else's root;
//!   [`uptake`]: consumers' acknowledgements of a bundle;
//! - shared by them: [`leaf`] (leaf certificates), [`preflight`] (the
//!   trust checks) and [`guard`] (the one guard every outcome passes);
//!   above them, [`forecast`].
//!
//! An engine never reads a clock, a file or the environment: `now` and the
//! RNG are arguments, so the same document, input, time and RNG seed give
//! the same plan and the same outcome. Loading and storing documents, and
//! retrying when another writer got there first, is the
//! [`driver`](crate::driver)'s job.

pub mod credential;
pub mod external;
pub mod forecast;
pub mod guard;
pub mod keyring;
pub mod leaf;
pub mod preflight;
pub mod set;
pub mod signer;
pub mod token_keys;
pub mod uptake;

use crate::model::document::Document;
use crate::model::error::Result;
use rand_core::CryptoRng;
use std::borrow::Cow;
use time::OffsetDateTime;

/// A rotation engine: the decisions over one kind of [`Document`]. How the
/// document is stored is the document's business, not the engine's.
pub trait Engine {
    /// The engine's whole state, plain data.
    type Document: Document;
    /// What the caller asks for besides time (a forced rotation, changed
    /// requests…). `Default` asks for nothing: the controller's periodic step.
    type Input: Default + Clone;
    /// The decision `plan` makes.
    type Plan: std::fmt::Debug;
    /// What `apply` reports as having happened.
    type Event: std::fmt::Display + std::fmt::Debug;

    /// Decides what to do with `doc` at `now`.
    ///
    /// # Errors
    ///
    /// What the engine refuses for this document, input and time, with its own
    /// error ([`SignerError`](crate::SignerError),
    /// [`SetError`](crate::SetError), [`KeyRingError`](crate::KeyRingError),
    /// [`CredentialError`](crate::CredentialError)…); each engine's `plan` says
    /// which.
    fn plan(doc: &Self::Document, input: &Self::Input, now: OffsetDateTime) -> Result<Self::Plan>;

    /// Carries out `plan`, made from `doc`, with `rng`: builds what the
    /// plan names and checks it, but does not refuse on what the checks
    /// find. They are in the outcome's [`Outcome::findings`], for the
    /// [`guard`] that [`Engine::step`] runs before anything is written
    /// (a caller of `apply` alone runs it with [`Outcome::guarded`]). An
    /// error here is material that could not be built (a key that could
    /// not be generated, a certificate already expired).
    ///
    /// # Errors
    ///
    /// Material that could not be built: a
    /// [`RotateError::Core`](crate::RotateError::Core) from key generation,
    /// issuance or signing, a
    /// [`RotateError::Expired`](crate::RotateError::Expired) for a certificate
    /// already expired, and what each engine's `apply` names.
    fn apply<'d, R: CryptoRng + ?Sized>(
        doc: &'d Self::Document,
        plan: Self::Plan,
        rng: &mut R,
    ) -> Result<Outcome<'d, Self::Document, Self::Event>>;

    /// Adjusts `input` after the driver lost a write: the caller read
    /// `read`, but another writer stored `fresh` in between, so the two
    /// requests ran concurrently. The default keeps the input as it is; an
    /// engine overrides it where a concurrent change already did what the
    /// input asks (a rotation racing a forced rotation is one rotation).
    fn rebase(input: &mut Self::Input, read: &Self::Document, fresh: &Self::Document) {
        let _ = (input, read, fresh);
    }

    /// Whether every change from `read` (the document the driver first
    /// read) to `fresh` (what concurrent writers stored since) commutes
    /// with `input`: applied in either order, they and `input` leave the
    /// same document. A write lost only to such changes says nothing about
    /// a conflict over what `input` asks (acks of other consumers racing
    /// an ack), so the driver retries it without counting the round
    /// against its attempts, up to a bound of its own. False by default:
    /// every lost round counts.
    fn commutes(input: &Self::Input, read: &Self::Document, fresh: &Self::Document) -> bool {
        let _ = (input, read, fresh);
        false
    }

    /// Whether `input` asks nothing of the document, so that a step with it
    /// is covered by the document's [`Idle`](crate::Idle) promise (made for
    /// the engine's default input). False by default: such an engine's
    /// steps always read the document.
    fn asks_nothing(input: &Self::Input) -> bool {
        let _ = input;
        false
    }

    /// The members of the document (the signer's leaves, by name) that
    /// `input` changes, when it asks nothing else: a step with it inside
    /// the document's [`Idle`](crate::Idle) promise then changes only
    /// those members, and reads and writes only them and the document's
    /// head ([`crate::Document::part_paths`]). None (the default): the
    /// input needs the whole document.
    fn members(input: &Self::Input) -> Option<std::collections::BTreeSet<String>> {
        let _ = input;
        None
    }

    /// Plans, applies and guards in one call: the outcome is refused
    /// ([`guard::judge`]) when apply found what the plan did not accept.
    ///
    /// # Errors
    ///
    /// Those of [`Engine::plan`] and [`Engine::apply`], then the guard's
    /// refusal (see [`guard::judge`]).
    fn step<'d, R: CryptoRng + ?Sized>(
        doc: &'d Self::Document,
        input: &Self::Input,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Outcome<'d, Self::Document, Self::Event>> {
        let plan = Self::plan(doc, input, now)?;
        Self::apply(doc, plan, rng)?.guarded()
    }
}

/// What `apply` produced.
#[derive(Debug, Clone)]
pub struct Outcome<'d, D: Clone, E> {
    /// The next document: borrowed from the input when nothing changed
    /// (no copy is made), owned otherwise.
    pub document: Cow<'d, D>,
    /// What happened, in order.
    pub events: Vec<E>,
    /// When the engine should look again without any input changing,
    /// computed from the new document (a leaf issued now has its own
    /// refresh time). Never before the plan's time.
    pub next_wake: OffsetDateTime,
    /// What apply's trust checks found that the plan did not accept:
    /// the [`guard`] refuses the outcome unless it is empty.
    pub findings: guard::Findings,
}

impl<D: Clone, E> Outcome<'_, D, E> {
    /// Whether the document changed and must be written.
    pub fn changed(&self) -> bool {
        matches!(self.document, Cow::Owned(_))
    }

    /// The outcome, once the [`guard`] found nothing to refuse in it.
    ///
    /// # Errors
    ///
    /// The first refusal among the findings (see [`guard::judge`]).
    pub fn guarded(mut self) -> Result<Self> {
        guard::judge(std::mem::take(&mut self.findings))?;
        Ok(self)
    }

    /// The next document, owned.
    pub fn into_document(self) -> D {
        self.document.into_owned()
    }
}
