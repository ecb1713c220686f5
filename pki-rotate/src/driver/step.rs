//! [`Step`]: what every step of the driver did, however it was decided
//! (a whole read, a part, the store's summary) and whether it was one
//! step or a credential's advance over several.

use crate::engines::credential::{Action, Next};
use crate::model::error::{Result, RotateError};
use crate::model::store::Revision;
use time::OffsetDateTime;

/// What a step did: [`Driver::step`](super::Driver::step),
/// [`Driver::step_unless_idle`](super::Driver::step_unless_idle),
/// [`Driver::idle`](super::Driver::idle) and the credential's
/// [`advance`](super::advance) all return one.
#[derive(Debug, Clone)]
pub struct Step<D, E> {
    /// The document now in the store (written by this step or not), or
    /// the part of it that was read ([`Read::Part`],
    /// [`Read::Summary`]): the document as if it had only the members
    /// read (the signer's other leaves are absent; none after a summary).
    pub document: D,
    /// Its revision in the store.
    pub revision: Revision,
    /// What happened, in order; empty when nothing was due.
    pub events: Vec<E>,
    /// Whether this step wrote a new document (after an advance: whether
    /// any of its steps did).
    pub changed: bool,
    /// When to step again if nothing else happens, from the engine (a
    /// part's may be earlier than a whole step's, never later; a summary's
    /// is the first time something may be due).
    pub next_wake: OffsetDateTime,
    /// How many load-decide-write rounds it took (1 without contention;
    /// after an advance: the rounds of all its steps).
    pub attempts: u32,
    /// What the step was decided from.
    pub read: Read,
    /// After a credential [`advance`](super::advance) only: what the
    /// embedder does next and how many steps it committed.
    pub advance: Option<Advanced>,
}

/// What a [`Step`] was decided from.
#[derive(Debug, Clone, PartialEq)]
pub enum Read {
    /// The whole document.
    Whole,
    /// The document's head and the few members the input changes (the
    /// signer's leaves), under the summary's promise that nothing else is
    /// due: only what changed was written.
    Part,
    /// The store's summary, confirmed by the document's head: nothing was
    /// due and nothing was written.
    Summary {
        /// What the document's kind reports of such a step (the signer's:
        /// [`crate::engines::signer::IdleReport`]); see
        /// [`Step::summary_report`].
        report: serde_json::Value,
    },
}

impl<D, E> Step<D, E> {
    /// This step followed at once by `more`, one more round of it: the
    /// document, revision and wake-up of `more`, the events of both.
    pub(super) fn followed_by(mut self, more: Step<D, E>) -> Step<D, E> {
        self.events.extend(more.events);
        Step {
            events: self.events,
            changed: self.changed || more.changed,
            attempts: self.attempts + more.attempts,
            ..more
        }
    }

    /// The same step with its document turned by `f`: an engine's view of
    /// the signer's document ([`crate::SignerView`]) back into the signer's.
    pub fn map_document<T>(self, f: impl FnOnce(D) -> T) -> Step<T, E> {
        Step {
            document: f(self.document),
            revision: self.revision,
            events: self.events,
            changed: self.changed,
            next_wake: self.next_wake,
            attempts: self.attempts,
            read: self.read,
            advance: self.advance,
        }
    }

    /// A step decided from `read` that wrote nothing and took one round.
    pub(super) fn unchanged(
        document: D,
        revision: Revision,
        events: Vec<E>,
        next_wake: OffsetDateTime,
        read: Read,
    ) -> Self {
        Step {
            document,
            revision,
            events,
            changed: false,
            next_wake,
            attempts: 1,
            read,
            advance: None,
        }
    }

    /// Whether the step was decided from the store's summary
    /// ([`Read::Summary`]).
    pub fn is_idle(&self) -> bool {
        matches!(self.read, Read::Summary { .. })
    }

    /// The summary's report as the kind's type; None unless the step was
    /// decided from the summary ([`Read::Summary`]).
    pub fn summary_report<T: serde::de::DeserializeOwned>(&self) -> Option<Result<T>> {
        match &self.read {
            Read::Summary { report } => Some(
                serde_json::from_value(report.clone())
                    .map_err(|e| RotateError::json("the document's summary".to_string(), e)),
            ),
            Read::Whole | Read::Part => None,
        }
    }

    /// After a credential advance, the embedder's action; None for other
    /// steps and when [`AdvanceOptions::max_steps`](super::AdvanceOptions::max_steps)
    /// stopped the advance with a step still due.
    pub fn action(&self) -> Option<&Action> {
        self.advance.as_ref().and_then(Advanced::action)
    }
}

/// What an [`advance`](super::advance) ends on, in its [`Step::advance`].
#[derive(Debug, Clone)]
pub struct Advanced {
    /// What comes next: the embedder's action, or [`Next::Step`] only when
    /// [`AdvanceOptions::max_steps`](super::AdvanceOptions::max_steps) stopped it.
    pub next: Next,
    /// How many steps this call committed.
    pub steps: u32,
}

impl Advanced {
    /// The embedder's action; None when [`AdvanceOptions::max_steps`](super::AdvanceOptions::max_steps)
    /// stopped the advance with a step still due.
    pub fn action(&self) -> Option<&Action> {
        match &self.next {
            Next::Act(action) => Some(action),
            Next::Step(_) => None,
        }
    }
}
