//! The set's decisions. [`plan`] validates what the caller asks against
//! the document and decides everything that follows from it: what is
//! recorded, whether a rotation starts (and with which new CAs), the step
//! transition, the rotation's bookkeeping afterwards, which gate was passed
//! and by what override, which leaves are (re-)issued onto which CA
//! generation, and when to look again. [`super::apply`] only carries it
//! out: it makes the keys and certificates and checks them with the
//! pre-flight trust matrix.

use super::gate::Books;
use super::{ImportedCa, LeafSpec, Rotation, RotationSummary, SetInput, SetState, TargetSpec};
use crate::model::error::Result;
use time::OffsetDateTime;

mod check;
mod requests;
mod transition;

pub use transition::Transition;

/// What `plan` decided; `apply` carries it out on the same document.
#[derive(Debug, Clone)]
pub struct SetPlan {
    /// The time of the decision.
    pub now: OffsetDateTime,
    /// What is recorded as the caller asked it (validated).
    pub record: Record,
    /// A rotation starts: the new CA of each of the set's CAs.
    pub start: Option<StartPlan>,
    /// The step changes.
    pub transition: Option<Transition>,
    /// The rotation's bookkeeping after the plan (its step, which client
    /// certificates and serving targets are on the new CAs, overrides,
    /// timeline); None when the set is idle afterwards.
    pub rotation: Option<Rotation>,
    /// A rotation that ends with this plan, appended to the history.
    pub finished: Option<RotationSummary>,
    /// The leaves (re-)issued, each onto the generation of its CA it
    /// belongs on now.
    pub issue: Vec<LeafIssue>,
    /// The operator's reason that passed a gate or an abort's strand rule
    /// (recorded), and that accepts the red cells the pre-flight finds,
    /// which are recorded with it. None: a red cell refuses the plan.
    pub override_reason: Option<String>,
    /// The request was applied before (or the set is already as asked):
    /// nothing changes, and this says what was done and when.
    pub already_done: Option<String>,
    /// When to look again if nothing is asked: the first expiry among what
    /// the set publishes.
    pub next_wake: OffsetDateTime,
    /// The document lists CA key objects in a token as retiring: they are
    /// destroyed.
    pub destroy_retiring: bool,
}

impl SetPlan {
    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        matches!(self.record, Record::Nothing)
            && self.start.is_none()
            && self.transition.is_none()
            && self.issue.is_empty()
            && !self.destroy_retiring
    }
}

/// What a request records besides the rotation's bookkeeping.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum Record {
    /// Nothing.
    #[default]
    Nothing,
    /// A leaf's spec (its certificate is in [`SetPlan::issue`]).
    Leaf {
        /// The leaf.
        name: String,
        /// What it should look like.
        spec: LeafSpec,
    },
    /// A target's bundles.
    Target {
        /// The target.
        name: String,
        /// The bundles it loads from now on.
        spec: TargetSpec,
    },
    /// A target acknowledged its current files.
    Ack {
        /// The target.
        target: String,
        /// Their fingerprint.
        fingerprint: String,
    },
    /// A target failed.
    Fail {
        /// The target.
        target: String,
        /// Why.
        reason: String,
    },
    /// A failed target is pending again.
    Retry {
        /// The target.
        target: String,
    },
}

/// A rotation's start.
#[derive(Debug, Clone)]
pub struct StartPlan {
    /// The new CA of each of the set's CAs, in name order.
    pub cas: Vec<NewCa>,
}

/// The new generation of one CA.
#[derive(Debug, Clone)]
pub struct NewCa {
    /// The CA's name in the set.
    pub ca: String,
    /// Supplied instead of generated.
    pub import: Option<ImportedCa>,
    /// A CA that signed serving and client certificates gets a separate
    /// new client CA (GEP-18), so its client certificates move (and are
    /// distrusted) on their own.
    pub separate_client_ca: bool,
}

/// One leaf to (re-)issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafIssue {
    /// The leaf.
    pub name: String,
    /// Onto its CA's next generation (else the current one).
    pub on_next: bool,
}

/// Validates `input` against `doc` at `now` and decides what follows
/// (see the module documentation). Everything that can be refused is
/// refused here, before any key is made.
///
/// # Errors
///
/// A [`SetError`](crate::SetError) saying what is refused, and nothing is
/// decided:
/// - [`SetError::Invalid`](crate::SetError::Invalid) for a leaf, target or
///   reason that cannot be recorded as given (a bad name, a role its CA does
///   not have, a reason that cannot be printed, a leaf moved to another target
///   without `replace`);
/// - [`SetError::UnknownCa`](crate::SetError::UnknownCa) and
///   [`SetError::UnknownTarget`](crate::SetError::UnknownTarget) for names the
///   set does not have;
/// - [`SetError::WrongStep`](crate::SetError::WrongStep) for a request the
///   current step does not allow (a start while a rotation runs, an advance
///   with none running…);
/// - [`SetError::CaRefused`](crate::SetError::CaRefused) for an imported or new
///   CA that cannot be used;
/// - [`SetError::TargetFailed`](crate::SetError::TargetFailed) and
///   [`SetError::StaleFingerprint`](crate::SetError::StaleFingerprint) for an
///   acknowledgement of a failed target or of other files;
/// - [`SetError::StepBlocked`](crate::SetError::StepBlocked) and
///   [`SetError::AbortStrands`](crate::SetError::AbortStrands) for an advance
///   or an abort that would leave targets behind, without an override reason.
pub fn plan(doc: &SetState, input: &SetInput, now: OffsetDateTime) -> Result<SetPlan> {
    let mut plan = SetPlan {
        now,
        record: Record::Nothing,
        start: None,
        transition: None,
        rotation: doc.rotation.clone(),
        finished: None,
        issue: Vec::new(),
        override_reason: None,
        already_done: None,
        next_wake: next_wake(doc, now),
        destroy_retiring: doc
            .token_keys
            .as_ref()
            .is_some_and(|keys| !keys.retiring.is_empty()),
    };
    if matches!(input, SetInput::Nothing) {
        return Ok(plan);
    }
    let mut books = Books::of(doc);
    // A leaf issued whatever its generation: a new or changed spec.
    let mut requested_leaf: Option<String> = None;
    let already_done = match input {
        SetInput::Nothing => None,
        SetInput::Issue {
            name,
            spec,
            replace,
        } => {
            requested_leaf = Some(name.clone());
            requests::issue(doc, &mut books, &mut plan, name, spec, *replace)?
        }
        SetInput::Target {
            name,
            trusts,
            client_ca,
        } => requests::target(
            doc,
            &mut books,
            &mut plan,
            name,
            trusts.as_ref(),
            client_ca.as_ref(),
        )?,
        SetInput::Start {
            reason,
            imports,
            one_at_a_time,
        } => requests::start(doc, &mut books, &mut plan, reason, imports, *one_at_a_time)?,
        SetInput::Ack {
            target,
            fingerprint,
        } => requests::ack(doc, &mut books, &mut plan, target, fingerprint)?,
        SetInput::Fail { target, reason } => {
            requests::fail(doc, &mut books, &mut plan, target, reason)?
        }
        SetInput::Retry { target } => requests::retry(doc, &mut books, &mut plan, target)?,
        SetInput::Advance {
            override_reason,
            from,
        } => requests::advance(
            doc,
            &mut books,
            &mut plan,
            override_reason.as_deref(),
            *from,
        )?,
        SetInput::Abort { override_reason } => {
            requests::abort(doc, &mut books, &mut plan, override_reason.as_deref())?
        }
    };
    if let Some(note) = already_done {
        plan.already_done = Some(note);
        return Ok(plan);
    }
    settle(&mut books, requested_leaf.as_deref(), &mut plan);
    plan.rotation = books.rotation;
    Ok(plan)
}

/// What follows from the books once a request is recorded: the client
/// and serving moves they now allow by themselves, and every leaf not on
/// the generation it belongs on re-issued (a requested one issued where it
/// belongs).
fn settle(books: &mut Books, requested_leaf: Option<&str>, plan: &mut SetPlan) {
    // The moves the books now allow by themselves.
    let ready = books.client_moves_ready();
    if let Some(r) = books.rotation.as_mut() {
        r.clients_moved.extend(ready);
    }
    if let Some(t) = books.next_serving_target()
        && let Some(r) = books.rotation.as_mut()
    {
        r.updated_targets.insert(t);
    }
    for (name, (spec, on_next)) in &books.leaves {
        let want = books.wants_next(spec);
        if want != *on_next || requested_leaf == Some(name.as_str()) {
            plan.issue.push(LeafIssue {
                name: name.clone(),
                on_next: want,
            });
        }
    }
}

/// The set decides nothing on its own; the next thing that changes without
/// input is the first expiry among what it publishes.
pub(super) fn next_wake(doc: &SetState, now: OffsetDateTime) -> OffsetDateTime {
    let mut t = OffsetDateTime::new_utc(
        time::Date::from_calendar_date(9999, time::Month::December, 31).unwrap_or(time::Date::MAX),
        time::Time::MIDNIGHT,
    );
    for ca in doc.cas.values() {
        for pair in std::iter::once(&ca.current).chain(ca.next.as_ref()) {
            t = t.min(pair.signer.cert.not_after());
            if let Some(c) = &pair.client_signer {
                t = t.min(c.cert.not_after());
            }
        }
    }
    for leaf in doc.leaves.values() {
        t = t.min(leaf.issued.cert.not_after());
    }
    t.max(now)
}
