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
//! The two drivers differ only in how they wait for the store: what each
//! round decides is one function (`Rounds::decide`).

use crate::document::{Document, Files, KeyOf};
use crate::engine::Engine;
use crate::error::{Result, RotateError};
use crate::store::{AsyncStore, Revision, Store, Summary};
use rand_core::CryptoRng;
use std::borrow::Cow;
use time::OffsetDateTime;

mod idle;
mod part;
use part::PartRound;

/// How many times [`Driver::step`] tries before giving up on a document
/// that other writers keep changing.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 8;

/// How many rounds lost to commuting writes ([`Engine::commutes`]) a step
/// may retry per attempt of its budget, on top of that budget: each such
/// round means another writer's request landed, so this bounds how many
/// such requests at once a step waits out (128 with the default budget),
/// and so the time it takes.
const COMMUTING_ROUNDS_PER_ATTEMPT: u32 = 16;

/// Runs engines over documents in a store.
#[derive(Debug, Clone)]
pub struct Driver<S> {
    store: S,
    max_attempts: u32,
}

/// Runs engines over documents in an [`AsyncStore`], from async code: a
/// controller on tokio (kube-rs, an operator's reconcile loop) steps a
/// document without blocking a worker thread.
#[derive(Debug, Clone)]
pub struct AsyncDriver<S> {
    store: S,
    max_attempts: u32,
}

/// What one [`Driver::step`] did.
#[derive(Debug, Clone)]
pub struct Step<D, E> {
    /// The document now in the store (written by this step or not).
    pub document: D,
    /// Its revision in the store.
    pub revision: Revision,
    /// What happened; empty when nothing was due.
    pub events: Vec<E>,
    /// Whether this step wrote a new document.
    pub changed: bool,
    /// When to step again if nothing else happens, from the engine.
    pub next_wake: OffsetDateTime,
    /// How many load-decide-write rounds it took (1 without contention).
    pub attempts: u32,
}

/// What a round decided: done without a write, or a document to write
/// with compare-and-swap.
enum Round<D, E> {
    Done(Step<D, E>),
    Write {
        next: D,
        files: Files,
        summary: Option<Summary>,
        read: Revision,
        events: Vec<E>,
        next_wake: OffsetDateTime,
    },
}

/// The rounds of one step: the input as rebased so far, the document
/// first read, and the rounds made and counted against the budget. Shared
/// by both drivers.
struct Rounds<'i, E: Engine> {
    input: Cow<'i, E::Input>,
    first_read: Option<E::Document>,
    made: u32,
    counted: u32,
    max_attempts: u32,
    free_left: u32,
}

impl<'i, E: Engine> Rounds<'i, E> {
    fn new(input: &'i E::Input, max_attempts: u32) -> Self {
        Rounds {
            input: Cow::Borrowed(input),
            first_read: None,
            made: 0,
            counted: 0,
            max_attempts,
            free_left: max_attempts.saturating_mul(COMMUTING_ROUNDS_PER_ATTEMPT),
        }
    }

    /// The number of the next round, or None when the budget is spent.
    fn next_round(&mut self) -> Option<u32> {
        (self.counted < self.max_attempts).then(|| {
            self.counted += 1;
            self.made += 1;
            self.made
        })
    }

    /// Decides round `attempt` from the document just read: refuses an
    /// inconsistent one, lets the engine see what a concurrent writer did
    /// (on a retry), plans and applies.
    fn decide<R: CryptoRng + ?Sized>(
        &mut self,
        location: &str,
        (doc, revision): (E::Document, Revision),
        attempt: u32,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Round<E::Document, E::Event>> {
        crate::document::refuse_problems(&doc, location)?;
        match &self.first_read {
            // A retry: the document changed under the caller; let the
            // engine see what the concurrent writer already did.
            Some(read) => {
                // Lost only to writes that commute with this one: the
                // round is not counted (within its own bound).
                if self.free_left > 0 && E::commutes(&self.input, read, &doc) {
                    self.free_left -= 1;
                    self.counted -= 1;
                }
                E::rebase(self.input.to_mut(), read, &doc);
            }
            None => self.first_read = Some(doc.clone()),
        }
        let outcome = E::step(&doc, &self.input, now, rng)?;
        let next_wake = outcome.next_wake;
        let events = outcome.events;
        let next = match outcome.document {
            Cow::Borrowed(_) => None,
            Cow::Owned(next) => Some(next),
        };
        Ok(match next {
            None => Round::Done(Step {
                document: doc,
                revision,
                events,
                changed: false,
                next_wake,
                attempts: attempt,
            }),
            Some(next) => Round::Write {
                files: next.to_files()?,
                summary: summary_of(&next, now),
                next,
                read: revision,
                events,
                next_wake,
            },
        })
    }
}

/// What a write ended in: the step done, or another round.
fn written<D, E>(
    written: Result<Revision>,
    next: D,
    events: Vec<E>,
    next_wake: OffsetDateTime,
    attempt: u32,
) -> Result<Option<Step<D, E>>> {
    match written {
        Ok(revision) => Ok(Some(Step {
            document: next,
            revision,
            events,
            changed: true,
            next_wake,
            attempts: attempt,
        })),
        Err(e) if e.is_conflict() => Ok(None),
        // A write that may have landed is reported, not retried. Retrying
        // would be safe (a request the document already records is "nothing
        // to do"), but it would hide what happened: a retry that finds the
        // write landed returns `changed: false` without this step's events,
        // so the caller would never learn that this call rotated a CA. A
        // lost answer also means the backend is slow or unreachable, where
        // a retry only waits again. The caller steps again (the CLI exits 5
        // saying rerunning is safe).
        Err(e) => Err(e),
    }
}

/// The summary to store with `next`, written at `now`: its promise about
/// the steps that ask nothing of it, when it makes one. A document with
/// problems makes none (a step over it must read it, and refuse it).
fn summary_of<D: Document>(next: &D, now: OffsetDateTime) -> Option<Summary> {
    let idle = next.idle(now)?;
    (idle.since == now && idle.until > now && next.problems().is_empty())
        .then(|| idle.to_summary())
        .flatten()
}

/// What [`Driver::step_unless_idle`] did.
#[derive(Debug, Clone)]
pub enum Stepped<D, E> {
    /// Nothing was due: decided from the document's summary alone.
    Idle(IdleStep),
    /// A step as [`Driver::step`] makes it.
    Step(Step<D, E>),
    /// A step over part of the document: the input changed a few members
    /// (the signer's leaves) while the document's summary promised that
    /// nothing else was due, so only the document's head and those members
    /// were read and only what changed was written. Its `document` is that
    /// part: the document as if it had only those members (the signer's
    /// other leaves are absent). Its `next_wake` may be earlier than a
    /// whole step's, never later.
    Part(Step<D, E>),
}

/// A step that found nothing due from the document's summary, without
/// reading the document: nothing was written.
#[derive(Debug, Clone)]
pub struct IdleStep {
    /// The document's revision in the store.
    pub revision: Revision,
    /// When to step again if nothing else happens: the first time
    /// something may be due.
    pub next_wake: OffsetDateTime,
    /// What the document's kind reports of such a step (the signer's:
    /// [`crate::signer::IdleReport`]).
    pub report: serde_json::Value,
}

impl IdleStep {
    /// The report as the kind's type.
    pub fn report<T: serde::de::DeserializeOwned>(&self) -> Result<T> {
        serde_json::from_value(self.report.clone())
            .map_err(|e| RotateError::json("the document's summary".to_string(), e))
    }
}

fn decode<E: Engine>(location: &str, files: &Files) -> Result<E::Document> {
    E::Document::from_files(files).map_err(|e| e.within(location))
}

fn too_many(key: &str, attempts: u32) -> RotateError {
    RotateError::Store(crate::StoreError::TooManyConflicts {
        key: key.to_string(),
        attempts,
    })
}

fn created(location: String, written: Result<Revision>) -> Result<Revision> {
    written.map_err(|e| match e {
        RotateError::Store(crate::StoreError::Conflict { .. }) => {
            RotateError::Store(crate::StoreError::AlreadyInitialized(location))
        }
        other => other,
    })
}

impl<S: Store> Driver<S> {
    /// A driver over `store`, retrying up to [`DEFAULT_MAX_ATTEMPTS`] times.
    pub fn new(store: S) -> Self {
        Driver {
            store,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }

    /// Sets how many rounds a step may take (at least 1).
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
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
    pub fn idle<E: Engine>(
        &self,
        key: impl KeyOf<E::Document>,
        now: OffsetDateTime,
    ) -> Result<Option<IdleStep>> {
        let key = key.key();
        let Some(step) = self.confirmed_idle::<E>(key, now)? else {
            return Ok(None);
        };
        Ok(match self.store.verify(key)? {
            Some(revision) if revision == step.revision => Some(step),
            _ => None,
        })
    }

    /// The summary's promise at `now`, confirmed by the document's head
    /// (see `idle`): a step with nothing to do, decided without reading
    /// the members.
    fn confirmed_idle<E: Engine>(
        &self,
        key: &str,
        now: OffsetDateTime,
    ) -> Result<Option<IdleStep>> {
        let Some(promise) = idle::promise::<E>(self.store.get_summary(key)?, now) else {
            return Ok(None);
        };
        let Some(paths) = idle::head_paths::<E>() else {
            return Ok(None);
        };
        let head = self.store.get_paths(key, &paths)?;
        promise.confirm::<E>(&self.store.location(), key, head)
    }

    /// Reads and decodes the document at `key`.
    pub fn load<E: Engine>(&self, key: impl KeyOf<E::Document>) -> Result<(E::Document, Revision)> {
        let key = key.key();
        let location = describe(&self.store.location(), key);
        let (files, revision) =
            self.store
                .get(key)?
                .ok_or(RotateError::Store(crate::StoreError::NotInitialized(
                    location.clone(),
                )))?;
        Ok((decode::<E>(&location, &files)?, revision))
    }

    /// Stores a new document at `key`; fails with
    /// [`StoreError::AlreadyInitialized`](crate::StoreError::AlreadyInitialized) when one exists.
    ///
    /// It stores no summary (there is no time to make one at): until the
    /// document's first change, a step with nothing to do reads the whole
    /// document ([`Driver::step_unless_idle`]). [`Driver::create_at`]
    /// stores one, as `pki init` does.
    pub fn create<E: Engine>(
        &self,
        key: impl KeyOf<E::Document>,
        doc: &E::Document,
    ) -> Result<Revision> {
        let key = key.key();
        let files = doc.to_files()?;
        created(
            describe(&self.store.location(), key),
            self.store.put(key, None, &files),
        )
    }

    /// [`Driver::create`] at `now`: also stores the document's summary
    /// (see [`Driver::step_unless_idle`]), so steps with nothing to do are
    /// idle from the start.
    pub fn create_at<E: Engine>(
        &self,
        key: impl KeyOf<E::Document>,
        doc: &E::Document,
        now: OffsetDateTime,
    ) -> Result<Revision> {
        let key = key.key();
        let files = doc.to_files()?;
        let summary = summary_of(doc, now);
        created(
            describe(&self.store.location(), key),
            self.store
                .put_with_summary(key, None, &files, summary.as_ref()),
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
    pub fn step<E: Engine, R: CryptoRng + ?Sized>(
        &self,
        key: impl KeyOf<E::Document>,
        input: &E::Input,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Step<E::Document, E::Event>> {
        let key = key.key();
        let location = describe(&self.store.location(), key);
        let mut rounds = Rounds::<E>::new(input, self.max_attempts);
        while let Some(attempt) = rounds.next_round() {
            let loaded = self.load::<E>(key)?;
            match rounds.decide(&location, loaded, attempt, now, rng)? {
                Round::Done(step) => return Ok(step),
                Round::Write {
                    next,
                    files,
                    summary,
                    read,
                    events,
                    next_wake,
                } => {
                    let put =
                        self.store
                            .put_with_summary(key, Some(&read), &files, summary.as_ref());
                    if let Some(step) = written(put, next, events, next_wake, attempt)? {
                        return Ok(step);
                    }
                }
            }
        }
        Err(too_many(key, self.max_attempts))
    }

    /// [`Driver::step`], unless the input asks nothing
    /// ([`Engine::asks_nothing`]) and the summary the store keeps with the
    /// document promises that nothing is due at `now`: then the step is
    /// decided from that summary alone, without reading the document, so
    /// its cost does not grow with the document (ten thousand leaves cost
    /// what ten do). The summary is written by every write of the driver;
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
    /// promise ([`Stepped::Part`]): the store reads the document's head and
    /// those members ([`Store::get_paths`]), and writes what changed
    /// ([`Store::put_changes`]). Nothing else can be due inside the
    /// promise, so the result is the one a whole step gives; the new
    /// summary's promise ends no later than the old one. A store that keeps
    /// no summary, a time outside the promise, or a document changed since
    /// its summary was read takes the whole step.
    pub fn step_unless_idle<E: Engine, R: CryptoRng + ?Sized>(
        &self,
        key: impl KeyOf<E::Document>,
        input: &E::Input,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Stepped<E::Document, E::Event>> {
        let key = key.key();
        if E::asks_nothing(input) {
            if let Some(idle) = self.confirmed_idle::<E>(key, now)? {
                return Ok(Stepped::Idle(idle));
            }
        } else if let Some(members) = part::members::<E>(input)
            && let Some(part) = part::part_at::<E>(members, self.store.get_summary(key)?, now)
        {
            let got = self.store.get_paths(key, &part.paths)?;
            let location = self.store.location();
            match part::decide::<E, R>(&location, key, &part, got, input, now, rng)? {
                PartRound::Done(step) => return Ok(Stepped::Part(step)),
                PartRound::Write(write) => {
                    let summary = write.summary.as_ref();
                    let put = self
                        .store
                        .put_changes(key, &write.read, &write.changes, summary);
                    if let Some(step) = write.finish(put)? {
                        return Ok(Stepped::Part(step));
                    }
                }
                PartRound::Whole => {}
            }
        }
        self.step::<E, R>(key, input, now, rng).map(Stepped::Step)
    }
}

impl<S: AsyncStore> AsyncDriver<S> {
    /// A driver over `store`, retrying up to [`DEFAULT_MAX_ATTEMPTS`] times.
    pub fn new(store: S) -> Self {
        AsyncDriver {
            store,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
        }
    }

    /// Sets how many rounds a step may take (at least 1).
    pub fn with_max_attempts(mut self, attempts: u32) -> Self {
        self.max_attempts = attempts.max(1);
        self
    }

    /// The store.
    pub fn store(&self) -> &S {
        &self.store
    }

    /// [`Driver::idle`]: the document's promise at `now`, from the store's
    /// summary once the head confirms it and every file is found intact.
    pub async fn idle<E: Engine>(
        &self,
        key: impl KeyOf<E::Document>,
        now: OffsetDateTime,
    ) -> Result<Option<IdleStep>> {
        let key = key.key();
        let Some(step) = self.confirmed_idle::<E>(key, now).await? else {
            return Ok(None);
        };
        Ok(match self.store.verify(key).await? {
            Some(revision) if revision == step.revision => Some(step),
            _ => None,
        })
    }

    /// [`Driver::confirmed_idle`], awaiting the store.
    async fn confirmed_idle<E: Engine>(
        &self,
        key: &str,
        now: OffsetDateTime,
    ) -> Result<Option<IdleStep>> {
        let Some(promise) = idle::promise::<E>(self.store.get_summary(key).await?, now) else {
            return Ok(None);
        };
        let Some(paths) = idle::head_paths::<E>() else {
            return Ok(None);
        };
        let head = self.store.get_paths(key, &paths).await?;
        promise.confirm::<E>(&self.store.location(), key, head)
    }

    /// Reads and decodes the document at `key`.
    pub async fn load<E: Engine>(
        &self,
        key: impl KeyOf<E::Document>,
    ) -> Result<(E::Document, Revision)> {
        let key = key.key();
        let location = describe(&self.store.location(), key);
        let (files, revision) = self.store.get(key).await?.ok_or(RotateError::Store(
            crate::StoreError::NotInitialized(location.clone()),
        ))?;
        Ok((decode::<E>(&location, &files)?, revision))
    }

    /// Stores a new document at `key`; fails with
    /// [`StoreError::AlreadyInitialized`](crate::StoreError::AlreadyInitialized) when one exists.
    /// No summary, as [`Driver::create`]; [`AsyncDriver::create_at`]
    /// stores one.
    pub async fn create<E: Engine>(
        &self,
        key: impl KeyOf<E::Document>,
        doc: &E::Document,
    ) -> Result<Revision> {
        let key = key.key();
        let files = doc.to_files()?;
        created(
            describe(&self.store.location(), key),
            self.store.put(key, None, &files).await,
        )
    }

    /// [`Driver::create_at`], awaiting the store.
    pub async fn create_at<E: Engine>(
        &self,
        key: impl KeyOf<E::Document>,
        doc: &E::Document,
        now: OffsetDateTime,
    ) -> Result<Revision> {
        let key = key.key();
        let files = doc.to_files()?;
        let summary = summary_of(doc, now);
        created(
            describe(&self.store.location(), key),
            self.store
                .put_with_summary(key, None, &files, summary.as_ref())
                .await,
        )
    }

    /// [`Driver::step`], awaiting the store instead of blocking on it. The
    /// engine runs between two awaits and holds no borrow of the RNG across
    /// them, so a controller passes its own RNG (the OS's in production).
    pub async fn step<E: Engine, R: CryptoRng + ?Sized>(
        &self,
        key: impl KeyOf<E::Document>,
        input: &E::Input,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Step<E::Document, E::Event>> {
        let key = key.key();
        let location = describe(&self.store.location(), key);
        let mut rounds = Rounds::<E>::new(input, self.max_attempts);
        while let Some(attempt) = rounds.next_round() {
            let loaded = self.load::<E>(key).await?;
            match rounds.decide(&location, loaded, attempt, now, rng)? {
                Round::Done(step) => return Ok(step),
                Round::Write {
                    next,
                    files,
                    summary,
                    read,
                    events,
                    next_wake,
                } => {
                    let put = self
                        .store
                        .put_with_summary(key, Some(&read), &files, summary.as_ref())
                        .await;
                    if let Some(step) = written(put, next, events, next_wake, attempt)? {
                        return Ok(step);
                    }
                }
            }
        }
        Err(too_many(key, self.max_attempts))
    }

    /// [`Driver::step_unless_idle`], awaiting the store.
    pub async fn step_unless_idle<E: Engine, R: CryptoRng + ?Sized>(
        &self,
        key: impl KeyOf<E::Document>,
        input: &E::Input,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Stepped<E::Document, E::Event>> {
        let key = key.key();
        if E::asks_nothing(input) {
            if let Some(idle) = self.confirmed_idle::<E>(key, now).await? {
                return Ok(Stepped::Idle(idle));
            }
        } else if let Some(members) = part::members::<E>(input)
            && let Some(part) = part::part_at::<E>(members, self.store.get_summary(key).await?, now)
        {
            let got = self.store.get_paths(key, &part.paths).await?;
            let location = self.store.location();
            match part::decide::<E, R>(&location, key, &part, got, input, now, rng)? {
                PartRound::Done(step) => return Ok(Stepped::Part(step)),
                PartRound::Write(write) => {
                    let summary = write.summary.as_ref();
                    let put = self
                        .store
                        .put_changes(key, &write.read, &write.changes, summary)
                        .await;
                    if let Some(step) = write.finish(put)? {
                        return Ok(Stepped::Part(step));
                    }
                }
                PartRound::Whole => {}
            }
        }
        self.step::<E, R>(key, input, now, rng)
            .await
            .map(Stepped::Step)
    }
}

fn describe(location: &str, key: &str) -> String {
    if key == crate::store::LEGACY_KEY {
        location.to_string()
    } else {
        format!("{location} (document \"{key}\")")
    }
}
