//! The set's decisions. [`plan`] validates what the caller asks against
//! the document and decides everything that follows from it: what is
//! recorded, whether a rotation starts (and with which new CAs), the step
//! transition, the rotation's bookkeeping afterwards, which gate was passed
//! and by what override, which leaves are (re-)issued onto which CA
//! generation, and when to look again. [`super::apply`] only carries it
//! out: it makes the keys and certificates and checks them with the
//! pre-flight trust matrix.

use super::gate::{Books, STRAND_TRUST_NEW};
use super::{
    ImportedCa, LeafSpec, OverrideRecord, Rotation, RotationSummary, SetInput, SetState, SetStep,
    TargetSpec, TimelineEntry,
};
use crate::error::{Result, RotateError};
use std::collections::BTreeSet;
use time::OffsetDateTime;

mod check;
mod transition;

use check::{check_leaf_spec, check_start, check_target, reason_ok, wrong_step};
pub use transition::Transition;
use transition::{advance_target, enter, left_step};

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
}

impl SetPlan {
    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        matches!(self.record, Record::Nothing)
            && self.start.is_none()
            && self.transition.is_none()
            && self.issue.is_empty()
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
pub fn plan(doc: &SetState, input: &SetInput, now: OffsetDateTime) -> Result<SetPlan> {
    let step = doc.step();
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
    };
    let done = |mut plan: SetPlan, note: String| {
        plan.already_done = Some(note);
        Ok(plan)
    };
    if matches!(input, SetInput::Nothing) {
        return Ok(plan);
    }
    let mut books = Books::of(doc);
    // A leaf issued whatever its generation: a new or changed spec.
    let mut requested_leaf: Option<String> = None;
    match input {
        SetInput::Nothing => {}
        SetInput::Issue {
            name,
            spec,
            replace,
        } => {
            check_leaf_spec(doc, name, spec)?;
            if let Some(existing) = doc.leaves.get(name) {
                if existing.spec == *spec {
                    return done(
                        plan,
                        format!(
                            "certificate {name} is already issued as asked, for target {}",
                            spec.target
                        ),
                    );
                }
                if existing.spec.target != spec.target && !replace {
                    return Err(RotateError::Set(crate::SetError::Invalid(format!(
                        "certificate \"{name}\" is loaded by target \"{}\": moving it to \"{}\" takes it from that target; ask again with replace (--replace) to move it",
                        existing.spec.target, spec.target
                    ))));
                }
                books.loaded.remove(&existing.spec.target);
            }
            books.loaded.remove(&spec.target);
            books.targets.entry(spec.target.clone()).or_default();
            let on_next = doc.leaves.get(name).is_some_and(|l| l.on_next);
            books.leaves.insert(name.clone(), (spec.clone(), on_next));
            requested_leaf = Some(name.clone());
            plan.record = Record::Leaf {
                name: name.clone(),
                spec: spec.clone(),
            };
        }
        SetInput::Target {
            name,
            trusts,
            client_ca,
        } => {
            let mut spec = doc.targets.get(name).cloned().unwrap_or_default();
            if let Some(trusts) = trusts {
                spec.trusts = trusts.clone();
            }
            if let Some(client_ca) = client_ca {
                spec.client_ca = client_ca.clone();
            }
            check_target(doc, name, &spec)?;
            if doc.targets.get(name) == Some(&spec) {
                return done(plan, format!("target {name} already loads these bundles"));
            }
            books.targets.insert(name.clone(), spec.clone());
            books.loaded.remove(name);
            plan.record = Record::Target {
                name: name.clone(),
                spec,
            };
        }
        SetInput::Start {
            reason,
            imports,
            one_at_a_time,
        } => {
            reason_ok("the rotation's reason", reason)?;
            // DESIGN: a start is refused while a rotation runs, even the
            // same one again (its operator sees the rotation running).
            if doc.running().is_some() {
                return Err(wrong_step(
                    "start",
                    step,
                    "a rotation is already running (finish it with advance, or abort it)",
                ));
            }
            let cas = check_start(doc, imports, now)?;
            plan.start = Some(StartPlan { cas });
            books.rotation = Some(Rotation {
                reason: reason.clone(),
                started_at: now,
                one_at_a_time: *one_at_a_time,
                step: SetStep::TrustBoth,
                trust_both_loaded: BTreeSet::new(),
                clients_moved: BTreeSet::new(),
                updated_targets: BTreeSet::new(),
                overrides: Vec::new(),
                timeline: vec![TimelineEntry {
                    at: now,
                    step: SetStep::TrustBoth,
                    note: format!("started: {reason}"),
                    override_reason: None,
                }],
                completed_at: None,
            });
            // Every bundle changes: nobody holds the new files yet, and a
            // new rotation retries every failure.
            books.failures.clear();
            books.loaded.clear();
        }
        SetInput::Ack {
            target,
            fingerprint,
        } => {
            let expected = doc.expected_fingerprint(target)?;
            if let Some(f) = doc.failures.get(target) {
                return Err(RotateError::Set(crate::SetError::TargetFailed {
                    target: target.clone(),
                    reason: f.reason.clone(),
                }));
            }
            if *fingerprint != expected {
                return Err(RotateError::Set(crate::SetError::StaleFingerprint {
                    target: target.clone(),
                    given: fingerprint.clone(),
                    expected,
                    step,
                }));
            }
            let acked = doc.acks.get(target).filter(|a| a.fingerprint == expected);
            let counted = match doc.running() {
                Some(r) if matches!(r.step, SetStep::TrustBoth | SetStep::UpdateCerts) => {
                    r.trust_both_loaded.contains(target)
                }
                _ => true,
            };
            if let (Some(a), true) = (acked, counted) {
                return done(
                    plan,
                    format!(
                        "target {target} acknowledged {fingerprint} at {}",
                        pki_core::datetime::rfc3339(a.at)
                    ),
                );
            }
            books.loaded.insert(target.clone());
            // Update-certs' bundles trust both as well: loading them counts
            // as having loaded a bundle that accepts the new client CAs.
            if let Some(r) = books.rotation.as_mut()
                && matches!(r.step, SetStep::TrustBoth | SetStep::UpdateCerts)
            {
                r.trust_both_loaded.insert(target.clone());
            }
            plan.record = Record::Ack {
                target: target.clone(),
                fingerprint: fingerprint.clone(),
            };
        }
        SetInput::Fail { target, reason } => {
            doc.target(target)?;
            if doc.running().is_none() {
                return Err(wrong_step("fail a target", step, "no rotation is running"));
            }
            reason_ok("a failure's reason", reason)?;
            if doc
                .failures
                .get(target)
                .is_some_and(|f| f.reason == *reason)
            {
                return done(plan, format!("target {target} is failed: {reason}"));
            }
            books.failures.insert(target.clone(), reason.clone());
            books.loaded.remove(target);
            plan.record = Record::Fail {
                target: target.clone(),
                reason: reason.clone(),
            };
        }
        SetInput::Retry { target } => {
            doc.target(target)?;
            if !doc.failures.contains_key(target) {
                return Err(RotateError::Set(crate::SetError::Invalid(format!(
                    "target \"{target}\" has not failed: nothing to retry"
                ))));
            }
            books.failures.remove(target);
            // A failed target may hold anything between what it last
            // acknowledged and its current files: its old ack proves
            // nothing, so it is pending until it acknowledges again.
            books.loaded.remove(target);
            plan.record = Record::Retry {
                target: target.clone(),
            };
        }
        SetInput::Advance {
            override_reason,
            from,
        } => {
            if let Some(reason) = override_reason {
                reason_ok("the override reason", reason)?;
            }
            // The request's identity: the step it leaves when given, else
            // its override reason.
            if let (Some(reason), None) = (override_reason, from)
                && let Some(entry) = doc.rotation.as_ref().and_then(|r| {
                    r.timeline
                        .iter()
                        .find(|e| e.override_reason.as_deref() == Some(reason.as_str()))
                })
            {
                return done(
                    plan,
                    format!(
                        "the override \"{reason}\" moved the set to {} at {}; to pass the next gate with it, name the step it leaves (from), or give another reason",
                        entry.step,
                        pki_core::datetime::rfc3339(entry.at)
                    ),
                );
            }
            if let Some(from) = *from
                && from != step
            {
                if let Some(at) = doc.rotation.as_ref().and_then(|r| left_step(r, from)) {
                    return done(
                        plan,
                        format!(
                            "the set left {from} at {} and is in {step}",
                            pki_core::datetime::rfc3339(at)
                        ),
                    );
                }
                return Err(wrong_step(
                    "advance",
                    step,
                    format!("asked to advance from {from}"),
                ));
            }
            if doc.running().is_none() {
                return Err(wrong_step(
                    "advance",
                    step,
                    "no rotation is running (start one first)",
                ));
            }
            let Some(to) = advance_target(step) else {
                return Err(wrong_step("advance", step, "no rotation is running"));
            };
            let waiting = books.waiting();
            if !waiting.is_empty() && override_reason.is_none() {
                return Err(RotateError::Set(crate::SetError::StepBlocked {
                    step,
                    waiting: waiting.join(", "),
                }));
            }
            // Leaving trust-both moves every client certificate: name the
            // servers an override leaves behind, before the move hides them.
            let early_client_moves = if step == SetStep::TrustBoth {
                books.unready_client_moves()
            } else {
                Vec::new()
            };
            let note = match (override_reason, waiting.is_empty()) {
                (Some(r), false) => format!("override: {r}"),
                _ => "every target loaded the previous step".to_string(),
            };
            if let (Some(reason), false) = (override_reason, waiting.is_empty())
                && let Some(r) = books.rotation.as_mut()
            {
                r.overrides.push(OverrideRecord {
                    at: now,
                    from: step,
                    to,
                    reason: reason.clone(),
                    waiting,
                    warnings: early_client_moves,
                    red_cells: Vec::new(),
                });
            }
            let transition = Transition {
                from: step,
                to,
                note,
            };
            plan.finished = enter(&mut books, &transition, override_reason.as_deref(), now);
            plan.transition = Some(transition);
            plan.override_reason = override_reason.clone();
        }
        SetInput::Abort { override_reason } => {
            if let Some(reason) = override_reason {
                reason_ok("the override reason", reason)?;
            }
            let Some(to) = books.abort_target() else {
                return Err(wrong_step(
                    "abort",
                    step,
                    if step == SetStep::Reverting {
                        "already reverting to idle: ack the targets, then advance"
                    } else {
                        "no rotation is running"
                    },
                ));
            };
            let stranded = books.stranded_by_abort();
            if !stranded.is_empty() && override_reason.is_none() {
                return Err(RotateError::Set(crate::SetError::AbortStrands {
                    step,
                    to,
                    stranded: stranded.join(", "),
                    why: STRAND_TRUST_NEW.into(),
                }));
            }
            let mut note = match to {
                SetStep::Completed => {
                    "abort in trust-new rolls forward: the files are those of completed".to_string()
                }
                _ => "abort: every leaf goes back to the old CAs; bundles trust both until every target acks"
                    .to_string(),
            };
            if let (Some(reason), false) = (override_reason, stranded.is_empty()) {
                note = format!("{note} (override: {reason})");
                if let Some(r) = books.rotation.as_mut() {
                    r.overrides.push(OverrideRecord {
                        at: now,
                        from: step,
                        to,
                        reason: reason.clone(),
                        waiting: stranded,
                        warnings: Vec::new(),
                        red_cells: Vec::new(),
                    });
                }
            }
            let transition = Transition {
                from: step,
                to,
                note,
            };
            plan.finished = enter(&mut books, &transition, override_reason.as_deref(), now);
            plan.transition = Some(transition);
            plan.override_reason = override_reason.clone();
        }
    }
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
    // Every leaf not on the generation it belongs on is re-issued, and a
    // requested one is issued where it belongs.
    for (name, (spec, on_next)) in &books.leaves {
        let want = books.wants_next(spec);
        if want != *on_next || requested_leaf.as_deref() == Some(name.as_str()) {
            plan.issue.push(LeafIssue {
                name: name.clone(),
                on_next: want,
            });
        }
    }
    plan.rotation = books.rotation;
    Ok(plan)
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
