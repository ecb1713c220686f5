//! The driver: the one load → plan → apply → compare-and-swap loop.
//!
//! Every caller — the CLI, the C ABI, the Go package, a Rust controller —
//! runs an engine through [`Driver::step`]: read the document and its
//! revision, plan and apply at the time given, and, only when something
//! changed, write the new document if the revision is still the one read.
//! When another writer got there first the store reports a conflict; the
//! driver reads again and decides again from the fresh document, up to a
//! bound. So two controller replicas stepping the same document at once
//! both end on the same result, and a rotation happens once.

use crate::document::Document;
use crate::engine::Engine;
use crate::error::{Result, RotateError};
use crate::store::{Revision, Store};
use rand_core::CryptoRng;
use std::borrow::Cow;
use time::OffsetDateTime;

/// How many times [`Driver::step`] tries before giving up on a document
/// that other writers keep changing.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 8;

/// Runs engines over documents in a store.
#[derive(Debug, Clone)]
pub struct Driver<S> {
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

    fn not_found(&self, key: &str) -> RotateError {
        RotateError::NotInitialized(describe(&self.store, key))
    }

    /// Reads and decodes the document at `key`.
    pub fn load<E: Engine>(&self, key: &str) -> Result<(E::Document, Revision)> {
        let (files, revision) = self.store.get(key)?.ok_or_else(|| self.not_found(key))?;
        let doc =
            E::Document::from_files(&files).map_err(|e| e.within(&describe(&self.store, key)))?;
        Ok((doc, revision))
    }

    /// Stores a new document at `key`; fails with
    /// [`RotateError::AlreadyInitialized`] when one exists.
    pub fn create<E: Engine>(&self, key: &str, doc: &E::Document) -> Result<Revision> {
        let files = doc.to_files()?;
        self.store.put(key, None, &files).map_err(|e| match e {
            RotateError::Conflict { .. } => {
                RotateError::AlreadyInitialized(describe(&self.store, key))
            }
            other => other,
        })
    }

    /// One controller step on the document at `key`: plan and apply at
    /// `now` with `input`, and write the result when it changed. Retries
    /// from a fresh read when another writer changed the document in
    /// between; every other error ends the step with the store unchanged,
    /// except [`RotateError::UnknownOutcome`] (the write's answer was lost:
    /// it may have landed), which ends the step too and says so.
    pub fn step<E: Engine, R: CryptoRng + ?Sized + 'static>(
        &self,
        key: &str,
        input: &E::Input,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Step<E::Document, E::Event>> {
        let mut input = Cow::Borrowed(input);
        let mut first_read: Option<E::Document> = None;
        for attempt in 1..=self.max_attempts {
            let (doc, revision) = self.load::<E>(key)?;
            let problems = doc.problems();
            if !problems.is_empty() {
                return Err(RotateError::InconsistentDocument {
                    location: describe(&self.store, key),
                    problems,
                });
            }
            match &first_read {
                // A retry: the document changed under the caller; let the
                // engine see what the concurrent writer already did.
                Some(read) => E::rebase(input.to_mut(), read, &doc),
                None => first_read = Some(doc.clone()),
            }
            let outcome = E::step(&doc, &input, now, rng)?;
            let next_wake = outcome.next_wake;
            let events = outcome.events;
            let next = match outcome.document {
                Cow::Borrowed(_) => None,
                Cow::Owned(next) => Some(next),
            };
            let Some(next) = next else {
                return Ok(Step {
                    document: doc,
                    revision,
                    events,
                    changed: false,
                    next_wake,
                    attempts: attempt,
                });
            };
            let files = next.to_files()?;
            match self.store.put(key, Some(&revision), &files) {
                Ok(revision) => {
                    return Ok(Step {
                        document: next,
                        revision,
                        events,
                        changed: true,
                        next_wake,
                        attempts: attempt,
                    });
                }
                Err(e) if e.is_conflict() => continue,
                // A write that may have landed is reported, not retried.
                // Retrying would be safe (a request the document already
                // records is "nothing to do"), but it would hide what
                // happened: a retry that finds the write landed returns
                // `changed: false` without this step's events, so the
                // caller would never learn that this call rotated a CA. A
                // lost answer also means the backend is slow or
                // unreachable, where a retry only waits again. The caller
                // steps again (the CLI exits 5 saying rerunning is safe).
                Err(e) => return Err(e),
            }
        }
        Err(RotateError::TooManyConflicts {
            key: key.to_string(),
            attempts: self.max_attempts,
        })
    }
}

fn describe<S: Store + ?Sized>(store: &S, key: &str) -> String {
    let location = store.location();
    if key == crate::store::LEGACY_KEY {
        location
    } else {
        format!("{location} (document \"{key}\")")
    }
}
