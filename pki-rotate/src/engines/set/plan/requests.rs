//! What each request asks of the set, checked against the document and
//! the books: one function per request. Each records what it changes in
//! the books and the plan, or returns the note of a request already
//! carried out (nothing to do).

use super::super::gate::{Books, STRAND_TRUST_NEW};
use super::super::{
    ImportedCa, LeafSpec, OverrideRecord, Rotation, SetState, SetStep, TimelineEntry,
};
use super::check::{check_leaf_spec, check_start, check_target, reason_ok, wrong_step};
use super::transition::{Transition, advance_target, enter, left_step};
use super::{Record, SetPlan, StartPlan};
use crate::model::error::{Result, RotateError};
use std::collections::BTreeSet;

/// A request already carried out: nothing to do, and why.
type AlreadyDone = Option<String>;

fn done(note: String) -> Result<AlreadyDone> {
    Ok(Some(note))
}

/// A certificate issued (or its spec changed) for a target.
pub(super) fn issue(
    doc: &SetState,
    books: &mut Books,
    plan: &mut SetPlan,
    name: &str,
    spec: &LeafSpec,
    replace: bool,
) -> Result<AlreadyDone> {
    check_leaf_spec(doc, name, spec)?;
    if let Some(existing) = doc.leaves.get(name) {
        if existing.spec == *spec {
            return done(format!(
                "certificate {name} is already issued as asked, for target {}",
                spec.target
            ));
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
    books.targets.entry(spec.target.to_string()).or_default();
    let on_next = doc.leaves.get(name).is_some_and(|l| l.on_next);
    books
        .leaves
        .insert(name.to_string(), (spec.clone(), on_next));
    plan.record = Record::Leaf {
        name: name.to_string(),
        spec: spec.clone(),
    };
    Ok(None)
}

/// A target's bundles set or changed.
pub(super) fn target(
    doc: &SetState,
    books: &mut Books,
    plan: &mut SetPlan,
    name: &str,
    trusts: Option<&BTreeSet<String>>,
    client_ca: Option<&BTreeSet<String>>,
) -> Result<AlreadyDone> {
    let mut spec = doc.targets.get(name).cloned().unwrap_or_default();
    if let Some(trusts) = trusts {
        spec.trusts = trusts.clone();
    }
    if let Some(client_ca) = client_ca {
        spec.client_ca = client_ca.clone();
    }
    check_target(doc, name, &spec)?;
    if doc.targets.get(name) == Some(&spec) {
        return done(format!("target {name} already loads these bundles"));
    }
    books.targets.insert(name.to_string(), spec.clone());
    books.loaded.remove(name);
    plan.record = Record::Target {
        name: name.to_string(),
        spec,
    };
    Ok(None)
}

/// A rotation started: its new CAs checked, every bundle to load again.
pub(super) fn start(
    doc: &SetState,
    books: &mut Books,
    plan: &mut SetPlan,
    reason: &str,
    imports: &[ImportedCa],
    one_at_a_time: bool,
) -> Result<AlreadyDone> {
    let step = doc.step();
    let now = plan.now;
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
        reason: reason.to_string(),
        started_at: now,
        one_at_a_time,
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
    Ok(None)
}

/// A target acknowledged the files it loaded.
pub(super) fn ack(
    doc: &SetState,
    books: &mut Books,
    plan: &mut SetPlan,
    target: &str,
    fingerprint: &str,
) -> Result<AlreadyDone> {
    let step = doc.step();
    let expected = doc.expected_fingerprint(target)?;
    if let Some(f) = doc.failures.get(target) {
        return Err(RotateError::Set(crate::SetError::TargetFailed {
            target: target.to_string(),
            reason: f.reason.to_string(),
        }));
    }
    if fingerprint != expected {
        return Err(RotateError::Set(crate::SetError::StaleFingerprint {
            target: target.to_string(),
            given: fingerprint.to_string(),
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
        return done(format!(
            "target {target} acknowledged {fingerprint} at {}",
            pki_core::datetime::rfc3339(a.at)
        ));
    }
    books.loaded.insert(target.to_string());
    // Update-certs' bundles trust both as well: loading them counts
    // as having loaded a bundle that accepts the new client CAs.
    if let Some(r) = books.rotation.as_mut()
        && matches!(r.step, SetStep::TrustBoth | SetStep::UpdateCerts)
    {
        r.trust_both_loaded.insert(target.to_string());
    }
    plan.record = Record::Ack {
        target: target.to_string(),
        fingerprint: fingerprint.to_string(),
    };
    Ok(None)
}

/// A target reported that it cannot load its files.
pub(super) fn fail(
    doc: &SetState,
    books: &mut Books,
    plan: &mut SetPlan,
    target: &str,
    reason: &str,
) -> Result<AlreadyDone> {
    let step = doc.step();
    doc.target(target)?;
    if doc.running().is_none() {
        return Err(wrong_step("fail a target", step, "no rotation is running"));
    }
    reason_ok("a failure's reason", reason)?;
    if doc.failures.get(target).is_some_and(|f| f.reason == reason) {
        return done(format!("target {target} is failed: {reason}"));
    }
    books
        .failures
        .insert(target.to_string(), reason.to_string());
    books.loaded.remove(target);
    plan.record = Record::Fail {
        target: target.to_string(),
        reason: reason.to_string(),
    };
    Ok(None)
}

/// A failed target is retried: pending until it acknowledges again.
pub(super) fn retry(
    doc: &SetState,
    books: &mut Books,
    plan: &mut SetPlan,
    target: &str,
) -> Result<AlreadyDone> {
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
        target: target.to_string(),
    };
    Ok(None)
}

/// The rotation advanced a step: its gate passed, or overridden (recorded).
pub(super) fn advance(
    doc: &SetState,
    books: &mut Books,
    plan: &mut SetPlan,
    override_reason: Option<&str>,
    from: Option<SetStep>,
) -> Result<AlreadyDone> {
    let step = doc.step();
    let now = plan.now;
    if let Some(reason) = override_reason {
        reason_ok("the override reason", reason)?;
    }
    if let Some(note) = advanced_before(doc, override_reason, from)? {
        return done(note);
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
    if let (Some(reason), false) = (override_reason, waiting.is_empty()) {
        record_override(books, now, step, to, reason, waiting, early_client_moves);
    }
    enter_step(books, plan, (step, to), note, override_reason)
}

/// Whether this advance was carried out before. The request's identity:
/// the step it leaves when given, else its override reason. An advance
/// from a step the set is not in, and never left, is refused.
fn advanced_before(
    doc: &SetState,
    override_reason: Option<&str>,
    from: Option<SetStep>,
) -> Result<AlreadyDone> {
    let step = doc.step();
    if let (Some(reason), None) = (override_reason, from)
        && let Some(entry) = doc.rotation.as_ref().and_then(|r| {
            r.timeline
                .iter()
                .find(|e| e.override_reason.as_deref() == Some(reason))
        })
    {
        return done(format!(
            "the override \"{reason}\" moved the set to {} at {}; to pass the next gate with it, name the step it leaves (from), or give another reason",
            entry.step,
            pki_core::datetime::rfc3339(entry.at)
        ));
    }
    if let Some(from) = from
        && from != step
    {
        if let Some(at) = doc.rotation.as_ref().and_then(|r| left_step(r, from)) {
            return done(format!(
                "the set left {from} at {} and is in {step}",
                pki_core::datetime::rfc3339(at)
            ));
        }
        return Err(wrong_step(
            "advance",
            step,
            format!("asked to advance from {from}"),
        ));
    }
    Ok(None)
}

/// The rotation aborted: back to the old CAs, or forward from trust-new.
pub(super) fn abort(
    doc: &SetState,
    books: &mut Books,
    plan: &mut SetPlan,
    override_reason: Option<&str>,
) -> Result<AlreadyDone> {
    let step = doc.step();
    let now = plan.now;
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
        _ => {
            "abort: every leaf goes back to the old CAs; bundles trust both until every target acks"
                .to_string()
        }
    };
    if let (Some(reason), false) = (override_reason, stranded.is_empty()) {
        note = format!("{note} (override: {reason})");
        record_override(books, now, step, to, reason, stranded, Vec::new());
    }
    enter_step(books, plan, (step, to), note, override_reason)
}

/// Records that `reason` moved the rotation from `from` to `to` although
/// `waiting` had not loaded (or would be stranded), with `warnings`.
fn record_override(
    books: &mut Books,
    at: time::OffsetDateTime,
    from: SetStep,
    to: SetStep,
    reason: &str,
    waiting: Vec<String>,
    warnings: Vec<String>,
) {
    if let Some(r) = books.rotation.as_mut() {
        r.overrides.push(OverrideRecord {
            at,
            from,
            to,
            reason: reason.to_string(),
            waiting,
            warnings,
            red_cells: Vec::new(),
        });
    }
}

/// The plan moves the rotation from `from` to `to` with `note`, with the
/// override reason it was given (which may accept red cells of the move);
/// nothing was done before.
fn enter_step(
    books: &mut Books,
    plan: &mut SetPlan,
    (from, to): (SetStep, SetStep),
    note: String,
    override_reason: Option<&str>,
) -> Result<AlreadyDone> {
    let transition = Transition { from, to, note };
    plan.finished = enter(books, &transition, override_reason, plan.now);
    plan.transition = Some(transition);
    plan.override_reason = override_reason.map(str::to_string);
    Ok(None)
}
