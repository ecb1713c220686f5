//! The one load → plan → apply → compare-and-swap loop and the reads
//! around it, for both drivers: what each round decides
//! (`Rounds::decide`), and the store calls between rounds, made through
//! [`Access`] so that a blocking store and an async one share them.

use super::access::Access;
use super::cas::{Decided, Rewrite, Rounder, cas_loop};
use super::part::{self, PartRound};
use super::write::{describe, written};
use super::{COMMUTING_ROUNDS_PER_ATTEMPT, Read, Step, idle};
use crate::engines::Engine;
use crate::model::document::{Document, Files, FollowUp};
use crate::model::error::{Result, RotateError};
use crate::model::store::{Revision, Summary};
use rand_core::CryptoRng;
use std::borrow::Cow;
use time::OffsetDateTime;

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
        crate::model::document::refuse_problems(&doc, location)?;
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
                attempts: attempt,
                ..Step::unchanged(doc, revision, events, next_wake, Read::Whole)
            }),
            Some(next) => Round::Write {
                files: next.to_files()?,
                summary: summary_of(&next, now, next.idle_after_step(now, next_wake)),
                next,
                read: revision,
                events,
                next_wake,
            },
        })
    }
}

/// An engine's step as rounds of the compare-and-swap loop: each round
/// decodes the document read and decides over it ([`Rounds::decide`]).
struct EngineRounds<'r, 'i, E: Engine, R: ?Sized> {
    rounds: Rounds<'i, E>,
    location: String,
    tokens: &'r super::Tokens,
    now: OffsetDateTime,
    rng: &'r mut R,
}

impl<E: Engine, R: CryptoRng + ?Sized> Rounder for EngineRounds<'_, '_, E, R> {
    type Done = Step<E::Document, E::Event>;
    type Pending = (E::Document, Vec<E::Event>, OffsetDateTime);

    fn next_round(&mut self) -> Option<u32> {
        self.rounds.next_round()
    }

    fn decide(
        &mut self,
        read: Option<(Files, Revision)>,
        attempt: u32,
    ) -> Result<Decided<Self::Done, Self::Pending>> {
        let (files, revision) = read.ok_or_else(|| {
            RotateError::Store(crate::StoreError::NotInitialized(self.location.clone()))
        })?;
        let doc = self.tokens.attach(decode::<E>(&self.location, &files)?);
        let round =
            self.rounds
                .decide(&self.location, (doc, revision), attempt, self.now, self.rng)?;
        Ok(match round {
            Round::Done(step) => Decided::Done(step),
            Round::Write {
                next,
                files,
                summary,
                read,
                events,
                next_wake,
            } => Decided::Write {
                files,
                summary,
                read,
                pending: (next, events, next_wake),
            },
        })
    }

    fn finish(
        &mut self,
        put: Result<Revision>,
        (next, events, next_wake): Self::Pending,
        attempt: u32,
    ) -> Result<Option<Self::Done>> {
        written(put, next, events, next_wake, attempt, Read::Whole)
    }
}

/// The summary to store with `next`, written at `now`: `idle`, its promise
/// about the steps that ask nothing of it (from the outcome of the step
/// that wrote it, or for a document created outside a step, its own), when
/// it makes one. A document with problems makes none (a step over it must
/// read it, and refuse it).
fn summary_of<D: Document>(
    next: &D,
    now: OffsetDateTime,
    idle: Option<crate::Idle>,
) -> Option<Summary> {
    let idle = idle?;
    (idle.since == now && idle.until > now && next.problems().is_empty())
        .then(|| idle.to_summary())
        .flatten()
}

fn decode<E: Engine>(location: &str, files: &Files) -> Result<E::Document> {
    E::Document::from_files(files).map_err(|e| e.within(location))
}

fn created(location: String, written: Result<Revision>) -> Result<Revision> {
    written.map_err(|e| match e {
        RotateError::Store(crate::StoreError::Conflict { .. }) => {
            RotateError::Store(crate::StoreError::AlreadyInitialized(location))
        }
        other => other,
    })
}

/// The step loop and what surrounds it, written once over [`Access`]: the
/// blocking driver runs it over a [`Blocking`](super::access::Blocking)
/// store, the async one over an
/// [`Awaiting`](super::access::Awaiting) one.
pub(super) struct Steps<A> {
    pub(super) access: A,
    pub(super) max_attempts: u32,
    pub(super) tokens: super::Tokens,
}

impl<A: Access> Steps<A> {
    /// [`Driver::idle`](super::Driver::idle).
    pub(super) async fn idle<E: Engine>(
        &self,
        key: &str,
        now: OffsetDateTime,
    ) -> Result<Option<Step<E::Document, E::Event>>> {
        let Some(step) = self.confirmed_idle::<E>(key, now).await? else {
            return Ok(None);
        };
        Ok(match self.access.verify(key).await? {
            Some(revision) if revision == step.revision => Some(step),
            _ => None,
        })
    }

    /// The summary's promise at `now`, confirmed by the document's head
    /// (see `idle`): a step with nothing to do, decided without reading
    /// the members.
    async fn confirmed_idle<E: Engine>(
        &self,
        key: &str,
        now: OffsetDateTime,
    ) -> Result<Option<Step<E::Document, E::Event>>> {
        let Some(promise) = idle::promise::<E>(self.access.get_summary(key).await?, now) else {
            return Ok(None);
        };
        let Some(paths) = idle::head_paths::<E>() else {
            return Ok(None);
        };
        let head = self.access.get_paths(key, &paths).await?;
        promise.confirm::<E>(&self.access.location(), key, head)
    }

    /// [`Driver::load`](super::Driver::load).
    pub(super) async fn load<E: Engine>(&self, key: &str) -> Result<(E::Document, Revision)> {
        let location = describe(&self.access.location(), key);
        let (files, revision) = self.access.get(key).await?.ok_or(RotateError::Store(
            crate::StoreError::NotInitialized(location.clone()),
        ))?;
        Ok((
            self.tokens.attach(decode::<E>(&location, &files)?),
            revision,
        ))
    }

    /// [`Driver::create`](super::Driver::create) (no summary) and
    /// [`Driver::create_at`](super::Driver::create_at) (the summary at
    /// `now`).
    pub(super) async fn create<E: Engine>(
        &self,
        key: &str,
        doc: &E::Document,
        now: Option<OffsetDateTime>,
    ) -> Result<Revision> {
        let files = doc.to_files()?;
        let summary = now.and_then(|now| summary_of(doc, now, doc.idle(now)));
        let put = self
            .access
            .put_with_summary(key, None, &files, summary.as_ref())
            .await;
        created(describe(&self.access.location(), key), put)
    }

    /// [`Driver::step`](super::Driver::step): the engine's rounds in the
    /// compare-and-swap loop.
    pub(super) async fn step<E: Engine, R: CryptoRng + ?Sized>(
        &self,
        key: &str,
        input: &E::Input,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Step<E::Document, E::Event>> {
        let mut step = self.step_once::<E, R>(key, input, now, rng).await?;
        // A document that asks for another round at once (a key recorded
        // in one commit and made in the next) gets it, in the same step.
        let upkeep = E::Input::default();
        for _ in 0..super::FOLLOW_UP_ROUNDS {
            let input = match step.document.follow_up() {
                _ if !step.changed => break,
                FollowUp::None => break,
                FollowUp::RepeatInput => input,
                FollowUp::Upkeep => &upkeep,
            };
            let more = self.step_once::<E, R>(key, input, now, rng).await?;
            step = step.followed_by(more);
        }
        Ok(step)
    }

    /// One step's rounds of the compare-and-swap loop, up to the first
    /// write or the decision that nothing is due.
    async fn step_once<E: Engine, R: CryptoRng + ?Sized>(
        &self,
        key: &str,
        input: &E::Input,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Step<E::Document, E::Event>> {
        let mut rounds = EngineRounds {
            rounds: Rounds::<E>::new(input, self.max_attempts),
            location: describe(&self.access.location(), key),
            tokens: &self.tokens,
            now,
            rng,
        };
        cas_loop(&self.access, self.max_attempts, key, &mut rounds).await
    }

    /// [`Driver::rewrite`](super::Driver::rewrite).
    pub(super) async fn rewrite(
        &self,
        key: &str,
        decide: impl FnMut(&Files) -> Result<Option<Files>>,
    ) -> Result<bool> {
        let mut rewrite = Rewrite {
            left: self.max_attempts,
            made: 0,
            decide,
        };
        cas_loop(&self.access, self.max_attempts, key, &mut rewrite).await
    }

    /// [`Driver::step_unless_idle`](super::Driver::step_unless_idle).
    pub(super) async fn step_unless_idle<E: Engine, R: CryptoRng + ?Sized>(
        &self,
        key: &str,
        input: &E::Input,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Step<E::Document, E::Event>> {
        if E::asks_nothing(input) {
            if let Some(idle) = self.confirmed_idle::<E>(key, now).await? {
                return Ok(idle);
            }
        } else if let Some(members) = part::members::<E>(input)
            && let Some(part) = part::part_at::<E>(
                members,
                self.access.get_summary(key).await?,
                now,
                &self.tokens,
            )
        {
            let got = self.access.get_paths(key, &part.paths).await?;
            let location = self.access.location();
            match part::decide::<E, R>(&location, key, &part, got, input, now, rng)? {
                PartRound::Done(step) => return Ok(step),
                PartRound::Write(write) => {
                    let summary = write.summary.as_ref();
                    let put = self
                        .access
                        .put_changes(key, &write.read, &write.changes, summary)
                        .await;
                    if let Some(step) = write.finish(put)? {
                        return Ok(step);
                    }
                }
                PartRound::Whole => {}
            }
        }
        self.step::<E, R>(key, input, now, rng).await
    }
}
