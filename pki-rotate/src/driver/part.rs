//! Steps over part of a document: a step that changes a few members (the
//! signer's leaves) while the document promises that nothing else is due
//! reads the document's head and those members, and writes what changed.
//! Its cost follows the work, not the number of members.

use super::write::{describe, written};
use super::{Read, Step};
use crate::engines::Engine;
use crate::model::document::{Document, Files, Idle};
use crate::model::error::Result;
use crate::model::store::{Changes, Revision, Summary};
use rand_core::CryptoRng;
use std::borrow::Cow;
use std::collections::BTreeSet;
use time::OffsetDateTime;

/// A part to read: the members the input changes, the paths that hold
/// them and the head, and the promise that says nothing else is due.
pub(super) struct Part {
    names: BTreeSet<String>,
    pub(super) paths: BTreeSet<String>,
    promise: Idle,
    /// The revision the promise was read at.
    revision: Revision,
    /// The caller's access to the tokens of the document's keys.
    pub(super) tokens: super::Tokens,
}

/// The part of the document a step of `E` with `input` may read instead
/// of the whole document, when the input changes members only.
pub(super) fn members<E: Engine>(input: &E::Input) -> Option<(BTreeSet<String>, BTreeSet<String>)> {
    let names = E::members(input)?;
    let paths = E::Document::part_paths(&names)?;
    Some((names, paths))
}

/// The part to read at `now`, when the store's summary promises that
/// nothing besides the input is due.
pub(super) fn part_at<E: Engine>(
    (names, paths): (BTreeSet<String>, BTreeSet<String>),
    summary: Option<(Summary, Revision)>,
    now: OffsetDateTime,
    tokens: &super::Tokens,
) -> Option<Part> {
    let (summary, revision) = summary?;
    let promise = Idle::from_summary(&summary, E::Document::KIND)?;
    promise.covers(now).then_some(Part {
        names,
        paths,
        promise,
        revision,
        tokens: tokens.clone(),
    })
}

/// What a step over a part decided.
pub(super) enum PartRound<D, E> {
    /// Nothing to write.
    Done(Step<D, E>),
    /// Changes to write with compare-and-swap.
    Write(PartWrite<D, E>),
    /// The part cannot decide the step (the document changed since its
    /// summary was read): take the whole step.
    Whole,
}

/// What a step over a part writes, and the step it makes once written.
pub(super) struct PartWrite<D, E> {
    next: D,
    pub(super) changes: Changes,
    pub(super) summary: Option<Summary>,
    /// The revision the part was read at.
    pub(super) read: Revision,
    events: Vec<E>,
    next_wake: OffsetDateTime,
}

impl<D, E> PartWrite<D, E> {
    /// The step once the store answered `put`: None after a conflict (the
    /// whole step decides then), as [`written`] says.
    pub(super) fn finish(self, put: Result<Revision>) -> Result<Option<Step<D, E>>> {
        written(put, self.next, self.events, self.next_wake, 1, Read::Part)
    }
}

/// Decides a step of `E` over the part `got`, read for `part`.
pub(super) fn decide<E: Engine, R: CryptoRng + ?Sized>(
    store_location: &str,
    key: &str,
    part: &Part,
    got: Option<(Files, Revision)>,
    input: &E::Input,
    now: OffsetDateTime,
    rng: &mut R,
) -> Result<PartRound<E::Document, E::Event>> {
    let Some((files, revision)) = got else {
        return Ok(PartRound::Whole);
    };
    if revision != part.revision {
        return Ok(PartRound::Whole);
    }
    let location = describe(store_location, key);
    let doc = E::Document::from_part(&files, &part.names).map_err(|e| e.within(&location))?;
    let doc = part.tokens.attach(doc);
    crate::model::document::refuse_problems(&doc, &location)?;
    let outcome = E::step(&doc, input, now, rng)?;
    // The members outside the part are due no earlier than the promise's
    // end: waking then is early at worst, and a step then is a whole one.
    let part_wake = outcome.next_wake;
    let next_wake = part_wake.min(part.promise.until);
    let events = outcome.events;
    let next = match outcome.document {
        Cow::Borrowed(_) => {
            return Ok(PartRound::Done(Step::unchanged(
                doc,
                revision,
                events,
                next_wake,
                Read::Part,
            )));
        }
        Cow::Owned(next) => next,
    };
    let after = next.to_files()?;
    if !after.dirs().eq(files.dirs()) {
        // Declared directories are the whole document's business. A store
        // of an older layout (the signer's version 2, without
        // `leaf-requests/`) differs here too: the whole step migrates it.
        return Ok(PartRound::Whole);
    }
    Ok(PartRound::Write(PartWrite {
        changes: Changes::between(&files, &after),
        summary: summary_of_part(&next, &part.promise, now, part_wake),
        next,
        read: revision,
        events,
        next_wake,
    }))
}

/// The summary after a step over a part whose outcome wakes at
/// `part_wake`: the part's own promise, ending no later than the one the
/// step was decided under (the other members' earliest due time is in
/// that one).
fn summary_of_part<D: Document>(
    next: &D,
    before: &Idle,
    now: OffsetDateTime,
    part_wake: OffsetDateTime,
) -> Option<Summary> {
    let mut idle = next.idle_after_step(now, part_wake)?;
    idle.until = idle.until.min(before.until);
    (idle.since == now && idle.until > now && next.problems().is_empty())
        .then(|| idle.to_summary())
        .flatten()
}
