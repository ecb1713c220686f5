//! The one compare-and-swap loop: read, decide, write if the revision is
//! still the one read, and read again when another writer got there
//! first, up to a bound. An engine's step decides each round by planning
//! and applying; a rewrite of a
//! document's files (resealing them under a new key) decides it from the
//! files alone. Both run this loop, over a blocking store or an async one.

use super::access::Access;
use crate::model::document::Files;
use crate::model::error::{Result, RotateError};
use crate::model::store::{Revision, Summary};

/// What one round decided.
pub(super) enum Decided<T, W> {
    /// Nothing to write: the loop's result.
    Done(T),
    /// `files` (and `summary`) to write over revision `read`; `pending` is
    /// what [`Rounder::finish`] makes the result from once it is written.
    Write {
        files: Files,
        summary: Option<Summary>,
        read: Revision,
        pending: W,
    },
}

/// How a caller of the loop decides its rounds.
pub(super) trait Rounder {
    /// The loop's result.
    type Done;
    /// What a round that writes keeps for [`Rounder::finish`].
    type Pending;

    /// The number of the next round, or None when the budget is spent.
    fn next_round(&mut self) -> Option<u32>;

    /// Decides round `attempt` from what the store holds at the key (None:
    /// nothing).
    fn decide(
        &mut self,
        read: Option<(Files, Revision)>,
        attempt: u32,
    ) -> Result<Decided<Self::Done, Self::Pending>>;

    /// The result of a round's write: the loop's result, or None when
    /// another writer got there first (the loop reads again).
    fn finish(
        &mut self,
        put: Result<Revision>,
        pending: Self::Pending,
        attempt: u32,
    ) -> Result<Option<Self::Done>>;
}

/// Runs `rounder`'s rounds over the document at `key` in the store behind
/// `access` until one is done or written;
/// [`StoreError::TooManyConflicts`](crate::StoreError::TooManyConflicts)
/// (after `max_attempts`) when its budget is spent first.
pub(super) async fn cas_loop<A: Access, T: Rounder>(
    access: &A,
    max_attempts: u32,
    key: &str,
    rounder: &mut T,
) -> Result<T::Done> {
    while let Some(attempt) = rounder.next_round() {
        let read = access.get(key).await?;
        match rounder.decide(read, attempt)? {
            Decided::Done(done) => return Ok(done),
            Decided::Write {
                files,
                summary,
                read,
                pending,
            } => {
                let put = access
                    .put_with_summary(key, Some(&read), &files, summary.as_ref())
                    .await;
                if let Some(done) = rounder.finish(put, pending, attempt)? {
                    return Ok(done);
                }
            }
        }
    }
    Err(RotateError::Store(crate::StoreError::TooManyConflicts {
        key: key.to_string(),
        attempts: max_attempts,
    }))
}

/// The rounds of a rewrite: the files `decide` makes of what is stored,
/// written in place of it (no summary: the document's own is the next
/// step's to write).
pub(super) struct Rewrite<F> {
    /// Rounds left.
    pub(super) left: u32,
    /// Rounds made so far.
    pub(super) made: u32,
    /// What to write instead of the stored files (None: nothing).
    pub(super) decide: F,
}

impl<F: FnMut(&Files) -> Result<Option<Files>>> Rounder for Rewrite<F> {
    type Done = bool;
    type Pending = ();

    fn next_round(&mut self) -> Option<u32> {
        self.left = self.left.checked_sub(1)?;
        self.made += 1;
        Some(self.made)
    }

    fn decide(&mut self, read: Option<(Files, Revision)>, _: u32) -> Result<Decided<bool, ()>> {
        let Some((stored, revision)) = read else {
            return Ok(Decided::Done(false));
        };
        Ok(match (self.decide)(&stored)? {
            None => Decided::Done(false),
            Some(files) => Decided::Write {
                files,
                summary: None,
                read: revision,
                pending: (),
            },
        })
    }

    fn finish(&mut self, put: Result<Revision>, (): (), _: u32) -> Result<Option<bool>> {
        match put {
            Ok(_) => Ok(Some(true)),
            Err(e) if e.is_conflict() => Ok(None),
            Err(e) => Err(e),
        }
    }
}
