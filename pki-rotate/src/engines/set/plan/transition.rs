//! Step transitions: which step follows which, and moving the rotation's
//! books into the step entered.

use crate::engines::set::gate::Books;
use crate::engines::set::{Rotation, RotationSummary, SetStep, TimelineEntry};
use std::collections::BTreeSet;
use time::OffsetDateTime;

/// A step transition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// The step left.
    pub from: SetStep,
    /// The step entered.
    pub to: SetStep,
    /// Why or how, as the timeline shows it.
    pub note: String,
}

/// Whether the rotation left `step` (a timeline entry in `step` followed by
/// a later one), and when.
pub(super) fn left_step(rotation: &Rotation, step: SetStep) -> Option<OffsetDateTime> {
    let at = rotation.timeline.iter().position(|e| e.step == step)?;
    rotation.timeline.get(at + 1).map(|e| e.at)
}

/// The step after `from` when advancing.
pub(super) fn advance_target(from: SetStep) -> Option<SetStep> {
    match from {
        SetStep::TrustBoth => Some(SetStep::UpdateCerts),
        SetStep::UpdateCerts => Some(SetStep::TrustNew),
        SetStep::TrustNew => Some(SetStep::Completed),
        SetStep::Reverting => Some(SetStep::Idle),
        SetStep::Idle | SetStep::Completed => None,
    }
}

/// Moves the books' rotation to `to`: the step, what moves with it, the
/// timeline; returns the finished rotation when it ends.
pub(super) fn enter(
    books: &mut Books,
    transition: &Transition,
    override_reason: Option<&str>,
    now: OffsetDateTime,
) -> Option<RotationSummary> {
    let serving_targets: BTreeSet<String> = books.serving_targets().into_iter().collect();
    let client_cas: BTreeSet<String> = books
        .roles
        .iter()
        .filter(|(_, r)| r.client)
        .map(|(n, _)| n.clone())
        .collect();
    let r = books.rotation.as_mut()?;
    r.step = transition.to;
    match transition.to {
        SetStep::UpdateCerts => {
            // Whatever did not move in trust-both (an override) moves now.
            r.clients_moved = client_cas;
            if !r.one_at_a_time {
                r.updated_targets = serving_targets;
            }
        }
        SetStep::TrustNew => r.updated_targets = serving_targets,
        SetStep::Reverting => {
            r.clients_moved.clear();
            r.updated_targets.clear();
        }
        _ => {}
    }
    r.timeline.push(TimelineEntry {
        at: now,
        step: transition.to,
        note: transition.note.clone(),
        override_reason: override_reason.map(str::to_string),
    });
    match transition.to {
        SetStep::Completed => {
            r.completed_at = Some(now);
            let summary = RotationSummary {
                reason: r.reason.clone(),
                started_at: r.started_at,
                ended_at: now,
                outcome: "completed".into(),
            };
            // The new generation is the current one now.
            for (_, on_next) in books.leaves.values_mut() {
                *on_next = false;
            }
            Some(summary)
        }
        SetStep::Idle => books.rotation.take().map(|r| RotationSummary {
            reason: r.reason,
            started_at: r.started_at,
            ended_at: now,
            outcome: "reverted".into(),
        }),
        _ => None,
    }
}
