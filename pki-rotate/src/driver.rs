//! The driver: the one load → plan → apply → compare-and-swap loop.
//!
//! Every caller — the CLI, the C ABI, the Go package, a Rust controller —
//! runs an engine through [`Driver::step`] (or, from async code,
//! [`AsyncDriver::step`]): read the document and its revision, plan and
//! apply at the time given, and, only when something changed, write the new
//! document if the revision is still the one read. When another writer got
//! there first the store reports a conflict; the driver reads again and
//! decides again from the fresh document, up to a bound. So two controller
//! replicas stepping the same document at once both end on the same result,
//! and a rotation happens once. A round lost only to writes that commute
//! with the step's own ([`Engine::commutes`]: acks of other consumers) is
//! not counted against the bound, so that many such requests racing at
//! once all land; those rounds have a bound of their own.
//!
//! The two drivers differ only in how they wait for the store: the loop is
//! written once (`steps`), over the store calls of `access`, which a
//! blocking store answers at once.

use crate::engines::Engine;
use crate::model::document::{Document, Files, KeyOf};
use crate::model::error::Result;
use crate::model::store::{AsyncStore, Revision, Store};
use access::{Awaiting, Blocking};
pub use advance::{ADVANCE_MAX_STEPS, AdvanceOptions, advance};
use pki_core::TokenAccess;
use rand_core::CryptoRng;
use std::sync::Arc;
pub use step::{Advanced, Read, Step};
use steps::Steps;
use time::OffsetDateTime;

mod access;
mod advance;
mod cas;
mod idle;
mod part;
mod step;
mod steps;
mod write;

/// How many times [`Driver::step`] tries before giving up on a document
/// that other writers keep changing.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 8;

/// How many rounds lost to commuting writes ([`Engine::commutes`]) a step
/// may retry per attempt of its budget, on top of that budget: each such
/// round means another writer's request landed, so this bounds how many
/// such requests at once a step waits out (128 with the default budget),
/// and so the time it takes.
const COMMUTING_ROUNDS_PER_ATTEMPT: u32 = 16;

/// How many more rounds a step makes at once for a document that asks for
/// them ([`Document::follow_up`]): a rotation of a key in a token
/// records the key, makes it and rotates, then destroys a key it retired.
const FOLLOW_UP_ROUNDS: u32 = 3;

/// The caller's access to PKCS#11 tokens, given to every document read.
#[derive(Clone, Default)]
pub(crate) struct Tokens(Option<Arc<dyn TokenAccess>>);

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_some() {
            "Tokens(attached)"
        } else {
            "Tokens(none)"
        })
    }
}

impl Tokens {
    /// `doc`, read from the store, with the caller's access attached.
    pub(crate) fn attach<D: Document>(&self, mut doc: D) -> D {
        if let Some(access) = &self.0 {
            doc.attach_tokens(access);
        }
        doc
    }
}

/// Runs engines over documents in a store.
#[derive(Debug, Clone)]
pub struct Driver<S> {
    store: S,
    max_attempts: u32,
    tokens: Tokens,
}

/// Runs engines over documents in an [`AsyncStore`], from async code: a
/// controller on tokio (kube-rs, an operator's reconcile loop) steps a
/// document without blocking a worker thread.
#[derive(Debug, Clone)]
pub struct AsyncDriver<S> {
    store: S,
    max_attempts: u32,
    tokens: Tokens,
}

impl<S: Store> Driver<S> {
    /// A driver over `store`, retrying up to [`DEFAULT_MAX_ATTEMPTS`] times.
    pub fn new(store: S) -> Self {
        Driver {
            store,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            tokens: Tokens::default(),
        }
    }

    /// Sets how many rounds a step may take (at least 1).
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Gives every document this driver reads the caller's access to the
    /// PKCS#11 tokens that hold its CA keys
    /// ([`Document::attach_tokens`]).
    /// Without it, a step that must sign with, make or destroy a key in a
    /// token fails before anything is written, naming the token.
    pub fn with_token_access(mut self, access: Arc<dyn TokenAccess>) -> Self {
        self.tokens = Tokens(Some(access));
        self
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// The document's promise at `now`, from the store's summary, once the
    /// document's head confirms it and every file is found intact: what a
    /// step of `E` asking nothing would report there. `pki status --check`
    /// answers from it.
    ///
    /// The head is read and checked as a step with nothing to do reads it
    /// ([`Driver::step_unless_idle`]); then the store checks every file of
    /// the document ([`Store::verify`]), as cheaply as it can tell that a
    /// file is unchanged. None when the store keeps no summary, its promise
    /// does not cover `now`, the head does not confirm it, or the document
    /// changed meanwhile: read the document then. A damaged file, a head
    /// that does not decode or is inconsistent, or a sealed file the store
    /// cannot open is an error, as it is for a whole read.
    ///
    /// The step is [`Read::Summary`]: its `document` is the head read (the
    /// document as if it had no members), it wrote nothing and took one
    /// round.
    ///
    /// # Errors
    ///
    /// What the store reports when it cannot read the summary, the head or the
    /// files ([`Store::get`]:
    /// [`StoreError::DamagedStore`](crate::StoreError::DamagedStore) for a
    /// damaged file, [`StoreError::Sealing`](crate::StoreError::Sealing) for a
    /// sealed file it cannot open, …), and a
    /// [`DocumentError`](crate::DocumentError) when the head does not decode or
    /// is inconsistent
    /// ([`DocumentError::Inconsistent`](crate::DocumentError::Inconsistent)). A
    /// missing document or summary is not an error: it is `None`.
    pub fn idle<E: Engine>(
        &self,
        key: impl KeyOf<E::Document>,
        now: OffsetDateTime,
    ) -> Result<Option<Step<E::Document, E::Event>>> {
        access::finish(&self.store, self.steps().idle::<E>(key.key(), now))
    }

    /// Reads and decodes the document at `key`.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotInitialized`](crate::StoreError::NotInitialized) when
    /// no document is at `key`; what the store reports when it cannot read it
    /// (see [`Store::get`]); a [`DocumentError`](crate::DocumentError) naming
    /// the store and key when the files do not decode as `E`'s document (see
    /// [`Document::from_files`]).
    pub fn load<E: Engine>(&self, key: impl KeyOf<E::Document>) -> Result<(E::Document, Revision)> {
        access::finish(&self.store, self.steps().load::<E>(key.key()))
    }

    /// Stores a new document at `key`; fails with
    /// [`StoreError::AlreadyInitialized`](crate::StoreError::AlreadyInitialized) when one exists.
    ///
    /// It stores no summary (there is no time to make one at): until the
    /// document's first change, a step with nothing to do reads the whole
    /// document ([`Driver::step_unless_idle`]). [`Driver::create_at`]
    /// stores one, as `pki init` does.
    ///
    /// # Errors
    ///
    /// [`StoreError::AlreadyInitialized`](crate::StoreError::AlreadyInitialized)
    /// when a document exists at `key`; a
    /// [`DocumentError`](crate::DocumentError) or
    /// [`RotateError::Core`](crate::RotateError::Core) when `doc` cannot be
    /// written out ([`Document::to_files`]); otherwise what the store reports
    /// on writing ([`Store::put`]), including
    /// [`StoreError::UnknownOutcome`](crate::StoreError::UnknownOutcome).
    pub fn create<E: Engine>(
        &self,
        key: impl KeyOf<E::Document>,
        doc: &E::Document,
    ) -> Result<Revision> {
        access::finish(&self.store, self.steps().create::<E>(key.key(), doc, None))
    }

    /// [`Driver::create`] at `now`: also stores the document's summary
    /// (see [`Driver::step_unless_idle`]), so steps with nothing to do are
    /// idle from the start.
    ///
    /// # Errors
    ///
    /// Those of [`Driver::create`].
    pub fn create_at<E: Engine>(
        &self,
        key: impl KeyOf<E::Document>,
        doc: &E::Document,
        now: OffsetDateTime,
    ) -> Result<Revision> {
        access::finish(
            &self.store,
            self.steps().create::<E>(key.key(), doc, Some(now)),
        )
    }

    /// One controller step on the document at `key`: plan and apply at
    /// `now` with `input`, and write the result when it changed. Retries
    /// from a fresh read when another writer changed the document in
    /// between (rounds lost only to writes that commute with `input`,
    /// [`Engine::commutes`], are not counted against the attempts, within
    /// a bound of their own); every other error ends the step with the store unchanged,
    /// except [`StoreError::UnknownOutcome`](crate::StoreError::UnknownOutcome) (the write's answer was lost:
    /// it may have landed), which ends the step too and says so.
    ///
    /// # Errors
    ///
    /// - [`StoreError::NotInitialized`](crate::StoreError::NotInitialized) when
    ///   no document is at `key`, and what the store reports on reading or
    ///   writing (see [`Store::get`], [`Store::put`]).
    /// - A [`DocumentError`](crate::DocumentError) when the document does not
    ///   decode as `E`'s, or is inconsistent
    ///   ([`DocumentError::Inconsistent`](crate::DocumentError::Inconsistent)).
    /// - What the engine refuses to plan or apply (its own error, such as a
    ///   [`SignerError`](crate::SignerError) or [`SetError`](crate::SetError),
    ///   a [`RotateError::Core`](crate::RotateError::Core) from issuing, or a
    ///   [`RotateError::TrustCheckFailed`](crate::RotateError::TrustCheckFailed)
    ///   from the guard); nothing is written.
    /// - [`StoreError::TooManyConflicts`](crate::StoreError::TooManyConflicts)
    ///   when every attempt lost to another writer.
    /// - [`StoreError::UnknownOutcome`](crate::StoreError::UnknownOutcome) when
    ///   a write's answer was lost.
    pub fn step<E: Engine, R: CryptoRng + ?Sized>(
        &self,
        key: impl KeyOf<E::Document>,
        input: &E::Input,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Step<E::Document, E::Event>> {
        let steps = self.steps();
        access::finish(&self.store, steps.step::<E, R>(key.key(), input, now, rng))
    }

    /// [`Driver::step`], unless the input asks nothing
    /// ([`Engine::asks_nothing`]) and the summary the store keeps with the
    /// document promises that nothing is due at `now`: then the step is
    /// decided from that summary alone ([`Read::Summary`]), once the
    /// document's head confirms it, without reading the document's
    /// members, so its cost does not grow with the document (ten thousand
    /// leaves cost what ten do). The summary is written by every write of the driver;
    /// a store that keeps none, a document written without one, or a time
    /// outside the promise takes the full step.
    ///
    /// What the idle step skips is checked by the next full read: the
    /// document's files against their digests and its consistency
    /// ([`Document::problems`]).
    ///
    /// An input that changes a few members of the document and nothing else
    /// ([`Engine::members`]: the signer's leaf requests, renewals and
    /// removals) is stepped over part of the document under the same
    /// promise ([`Read::Part`]): the store reads the document's head and
    /// those members ([`Store::get_paths`]), and writes what changed
    /// ([`Store::put_changes`]). Nothing else can be due inside the
    /// promise, so the result is the one a whole step gives; the new
    /// summary's promise ends no later than the old one. A store that keeps
    /// no summary, a time outside the promise, or a document changed since
    /// its summary was read takes the whole step.
    ///
    /// # Errors
    ///
    /// Those of [`Driver::step`]; the idle path also fails as [`Driver::idle`]
    /// does on the head it reads, and the part path as the store's
    /// [`Store::get_paths`] and [`Store::put_changes`] do.
    pub fn step_unless_idle<E: Engine, R: CryptoRng + ?Sized>(
        &self,
        key: impl KeyOf<E::Document>,
        input: &E::Input,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Step<E::Document, E::Event>> {
        let steps = self.steps();
        let step = steps.step_unless_idle::<E, R>(key.key(), input, now, rng);
        access::finish(&self.store, step)
    }

    /// Rewrites the files of the document at `key` as `decide` makes them
    /// from what is stored (None: leave it), with the same
    /// compare-and-swap loop as a step: a write lost to another writer
    /// reads again and decides again, up to the driver's attempts. Returns
    /// whether it wrote. For a store's own upkeep (resealing its private
    /// files under a new key), below the engines: the files are written as
    /// they are, with no summary.
    ///
    /// # Errors
    ///
    /// Those of `decide`, what the store reports on reading or writing (see
    /// [`Store::get`], [`Store::put`], including
    /// [`StoreError::UnknownOutcome`](crate::StoreError::UnknownOutcome)), and
    /// [`StoreError::TooManyConflicts`](crate::StoreError::TooManyConflicts)
    /// when every attempt lost to another writer. No document at `key` is not
    /// an error: nothing is written.
    pub fn rewrite(
        &self,
        key: &str,
        decide: impl FnMut(&Files) -> Result<Option<Files>>,
    ) -> Result<bool> {
        let steps = self.steps();
        access::finish(&self.store, steps.rewrite(key, decide))
    }

    /// The step loop over this driver's store.
    fn steps(&self) -> Steps<Blocking<'_, S>> {
        Steps {
            access: Blocking(&self.store),
            max_attempts: self.max_attempts,
            tokens: self.tokens.clone(),
        }
    }
}

impl<S: AsyncStore> AsyncDriver<S> {
    /// A driver over `store`, retrying up to [`DEFAULT_MAX_ATTEMPTS`] times.
    pub fn new(store: S) -> Self {
        AsyncDriver {
            store,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            tokens: Tokens::default(),
        }
    }

    /// Sets how many rounds a step may take (at least 1).
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// Gives every document this driver reads the caller's access to the
    /// PKCS#11 tokens that hold its CA keys
    /// ([`Document::attach_tokens`]).
    /// Without it, a step that must sign with, make or destroy a key in a
    /// token fails before anything is written, naming the token.
    pub fn with_token_access(mut self, access: Arc<dyn TokenAccess>) -> Self {
        self.tokens = Tokens(Some(access));
        self
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// [`Driver::idle`]: the document's promise at `now`, from the store's
    /// summary once the head confirms it and every file is found intact.
    ///
    /// # Errors
    ///
    /// Those of [`Driver::idle`].
    pub async fn idle<E: Engine>(
        &self,
        key: impl KeyOf<E::Document>,
        now: OffsetDateTime,
    ) -> Result<Option<Step<E::Document, E::Event>>> {
        self.steps().idle::<E>(key.key(), now).await
    }

    /// Reads and decodes the document at `key`.
    ///
    /// # Errors
    ///
    /// Those of [`Driver::load`].
    pub async fn load<E: Engine>(
        &self,
        key: impl KeyOf<E::Document>,
    ) -> Result<(E::Document, Revision)> {
        self.steps().load::<E>(key.key()).await
    }

    /// Stores a new document at `key`; fails with
    /// [`StoreError::AlreadyInitialized`](crate::StoreError::AlreadyInitialized) when one exists.
    /// No summary, as [`Driver::create`]; [`AsyncDriver::create_at`]
    /// stores one.
    ///
    /// # Errors
    ///
    /// Those of [`Driver::create`].
    pub async fn create<E: Engine>(
        &self,
        key: impl KeyOf<E::Document>,
        doc: &E::Document,
    ) -> Result<Revision> {
        self.steps().create::<E>(key.key(), doc, None).await
    }

    /// [`Driver::create_at`], awaiting the store.
    ///
    /// # Errors
    ///
    /// Those of [`Driver::create`].
    pub async fn create_at<E: Engine>(
        &self,
        key: impl KeyOf<E::Document>,
        doc: &E::Document,
        now: OffsetDateTime,
    ) -> Result<Revision> {
        self.steps().create::<E>(key.key(), doc, Some(now)).await
    }

    /// [`Driver::step`], awaiting the store instead of blocking on it. The
    /// engine runs between two awaits and holds no borrow of the RNG across
    /// them, so a controller passes its own RNG (the OS's in production).
    ///
    /// # Errors
    ///
    /// Those of [`Driver::step`].
    pub async fn step<E: Engine, R: CryptoRng + ?Sized>(
        &self,
        key: impl KeyOf<E::Document>,
        input: &E::Input,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Step<E::Document, E::Event>> {
        self.steps().step::<E, R>(key.key(), input, now, rng).await
    }

    /// [`Driver::step_unless_idle`], awaiting the store.
    ///
    /// # Errors
    ///
    /// Those of [`Driver::step_unless_idle`].
    pub async fn step_unless_idle<E: Engine, R: CryptoRng + ?Sized>(
        &self,
        key: impl KeyOf<E::Document>,
        input: &E::Input,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Step<E::Document, E::Event>> {
        self.steps()
            .step_unless_idle::<E, R>(key.key(), input, now, rng)
            .await
    }

    /// The step loop over this driver's store.
    fn steps(&self) -> Steps<Awaiting<'_, S>> {
        Steps {
            access: Awaiting(&self.store),
            max_attempts: self.max_attempts,
            tokens: self.tokens.clone(),
        }
    }
}
