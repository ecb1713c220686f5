//! Carrying out a plan: the new CA and its bridges, the leaves, and the
//! pre-flight check that every consumer still trusts every other.

use super::{
    Event, LeafChange, Plan, PreviousCa, RotationReason, RotationRecord, SignerPolicy, SignerState,
    next_check,
};
use crate::engine::Outcome;
use crate::error::{Result, RotateError};
use crate::leaf::{Leaf, LeafRequest};
use crate::preflight::TrustCell;
use pki_core::{
    Bundle, Certificate, CertificateAuthority, CertificateParams, PrivateKey, cross_sign,
};
use rand_core::CryptoRng;
use std::borrow::Cow;
use std::sync::Arc;
use time::{Duration, OffsetDateTime};

/// Executes `plan`, made from `state`, with `rng`. When the plan is empty
/// the outcome borrows `state`: nothing is copied.
pub fn apply<'d, R: CryptoRng + ?Sized>(
    state: &'d SignerState,
    mut plan: Plan,
    rng: &mut R,
) -> Result<Outcome<'d, SignerState, Event>> {
    let already_done = std::mem::take(&mut plan.already_done)
        .into_iter()
        .map(|note| Event::AlreadyDone { note });
    if plan.is_empty() {
        return Ok(Outcome {
            document: Cow::Borrowed(state),
            events: already_done.collect(),
            next_wake: plan.next_check,
        });
    }
    let mut next = state.clone();
    // One event per leaf issued or removed, and a few others: allocated
    // once, not grown by doubling (a signer may issue thousands at once).
    let mut events = Vec::with_capacity(plan.leaves.len() + plan.leaf_changes.len() + 4);
    events.extend(already_done);
    let now = plan.now;
    next.policy = plan.policy;
    for change in &plan.leaf_changes {
        match change {
            LeafChange::Request { name, request } => match next.leaves.get_mut(name) {
                Some(leaf) => leaf.request = Arc::new(request.clone()),
                None => {
                    next.leaves.insert(
                        name.clone(),
                        Leaf {
                            request: Arc::new(request.clone()),
                            issued: None,
                        },
                    );
                }
            },
            LeafChange::Remove { name } => {
                if next.leaves.remove(name).is_some() {
                    events.push(Event::LeafRemoved { name: name.clone() });
                }
            }
            // `plan` turns a replacement into a request and a renewal into
            // a leaf decision; neither reaches here, and both would be no-ops.
            LeafChange::Renew { .. } | LeafChange::Replace { .. } => {}
        }
    }

    if let Some(decision) = &plan.rotation {
        let old = state.ca.clone();
        // A serving certificate of the old CA, to prove below that servers
        // which have not refreshed stay trusted.
        let old_probe = if old.cert.is_valid_at(now) && old.cert.not_after() > now {
            Some(state.issue_leaf(&probe_request(&plan.policy), now, rng)?)
        } else {
            None
        };
        let cn = old
            .cert
            .common_name()
            .unwrap_or_else(|| "pki-signer".to_string());
        // Same Subject as the old CA, so chains can link through either bridge.
        let new_key = PrivateKey::generate(plan.policy.key_algorithm, rng)?;
        let mut params = CertificateParams::new(
            pki_core::Profile::RootCa,
            &cn,
            now,
            plan.policy.rotation.lifetime,
        )?;
        params.subject = old.cert.subject().clone();
        let new_cert = params.self_signed(&new_key, rng)?;
        let new = CertificateAuthority::new(new_cert, new_key)?;

        let mut bundle = Bundle::from_certs([new.cert.clone()]);
        let (bridge_b, trusted_until) = match decision.bridge_until {
            Some(until) => {
                let bridge_a = cross_sign(&old.cert, &new, until, rng)?;
                bundle.push(bridge_a);
                // Bridge B is only useful while the old CA, its issuer, is valid.
                let b_until = new.cert.not_after().min(old.cert.not_after());
                let bridge_b = cross_sign(&new.cert, &old, b_until, rng)?;
                if plan.policy.keep_previous_root && old.cert.is_valid_at(now) {
                    bundle.push(old.cert.clone());
                }
                (Some(bridge_b), Some(until))
            }
            None => (None, None),
        };
        events.push(Event::Rotated {
            reason: decision.reason.clone(),
            previous: old.cert.id(),
            current: new.cert.id(),
            previous_trusted_until: trusted_until,
        });
        next.history.push(RotationRecord {
            at: now,
            reason: decision.reason.clone(),
            from: old.cert.id(),
            to: new.cert.id(),
            previous_trusted_until: trusted_until,
            overridden: Vec::new(),
            forced_reasons: Vec::new(),
        });
        let new_probe = crate::leaf::issue_leaf(&new, &probe_request(&plan.policy), now, rng)?;
        next.previous = Some(PreviousCa {
            id: old.cert.id(),
            not_after: old.cert.not_after(),
            trusted_until,
            certificate: Some(old.cert.to_pem()),
            probe: old_probe.as_ref().map(|p| {
                state
                    .serving_chain(&p.cert)
                    .iter()
                    .map(Certificate::to_pem)
                    .collect()
            }),
        });
        next.ca = new;
        next.bridge = bridge_b;
        next.bridge_chain = Vec::new();
        next.bundle = bundle;
        preflight_rotation(
            state,
            &next,
            old_probe
                .as_ref()
                .map(|p| &p.cert)
                .filter(|_| trusted_until.is_some()),
            &new_probe.cert,
            now,
            trusted_until,
        )?;
        let breaks = if plan.skip_trust_break_check {
            Vec::new()
        } else {
            crate::signer::rotation_trust_breaks(state, &next, &new_probe.cert, now)
        };
        // An emergency rotation passes the reload-interval guard. The guard
        // protects consumers that have not reloaded since the previous
        // rotation, on the promise that they reload within I. A forced
        // rotation with a grace period says the previous CA stays trusted
        // only that long: the operator has chosen, for this emergency, that
        // consumers not reloaded by then break anyway, so refusing would
        // only push them to an override that hides the emergency behind a
        // generic reason. A compromise rotation distrusts the previous CA
        // at once, breaking every consumer not yet reloaded by design, so
        // it passes every check. Each break an emergency causes is still
        // recorded in the history with it. A grace period does not make a
        // bridge from an expired CA, so that check still needs an override.
        let (accepted, refused): (Vec<_>, Vec<_>) = breaks.into_iter().partition(|b| {
            plan.emergency.is_some()
                && (plan.compromise || b.check == crate::preflight::BUNDLE_OF_TWO_ROTATIONS_AGO)
        });
        if !refused.is_empty() && plan.allow_trust_break.is_none() {
            return Err(RotateError::Signer(crate::SignerError::TrustBreak {
                summary: crate::preflight::refusal_summary(&refused, &next.policy.rotation),
                breaks: refused.iter().map(ToString::to_string).collect(),
            }));
        }
        if let Some(record) = next.history.last_mut() {
            if let Some(emergency) = &plan.emergency {
                record
                    .overridden
                    .extend(accepted.iter().map(|b| b.accepted_by(emergency)));
            }
            if let Some(allowed) = &plan.allow_trust_break {
                record
                    .overridden
                    .extend(refused.iter().map(|b| b.overridden(allowed)));
            }
        }
    }
    if let Some(reason) = &plan.record_forced_reason {
        next.forced_rotation_reason = Some(reason.clone());
        if plan.relabel_latest_rotation
            && let Some(latest) = next.history.last_mut()
        {
            // A due rotation that a forced request coincided with is
            // recorded as forced (its reason says so once); every further
            // forced request it satisfied is appended, never written over.
            match latest.reason {
                RotationReason::Expiring { .. } if latest.forced_reasons.is_empty() => {
                    latest.reason = RotationReason::Forced {
                        reason: reason.clone(),
                    };
                }
                _ => latest.forced_reasons.push(reason.clone()),
            }
            events.push(Event::ForcedRotationSatisfied {
                reason: reason.clone(),
                by: latest.to.clone(),
            });
        }
    }

    if !plan.prune.is_empty() {
        let mut bundle = Bundle::new();
        for c in next.bundle.certs() {
            if !plan.prune.contains(c) {
                bundle.push(c.clone());
            }
        }
        next.bundle = bundle;
        events.push(Event::BundlePruned {
            removed: plan.prune.iter().map(Certificate::id).collect(),
        });
    }
    if plan.drop_bridge
        && let Some(b) = next.bridge.take()
    {
        next.bridge_chain.clear();
        events.push(Event::BridgeRetired { id: b.id() });
    }

    let limit = next.leaf_not_after_limit();
    // Each decision's name and reason move into its event first, and the
    // decisions are freed before any leaf is issued: a signer issuing
    // thousands at once would otherwise hold both lists at its peak.
    let first_leaf_event = events.len();
    for decision in std::mem::take(&mut plan.leaves) {
        if next.leaves.contains_key(&decision.name) {
            events.push(Event::LeafReissued {
                name: decision.name,
                reason: decision.reason,
                id: String::new(),
            });
        }
    }
    for event in &mut events[first_leaf_event..] {
        let Event::LeafReissued { name, id, .. } = event else {
            continue;
        };
        let Some(leaf) = next.leaves.get_mut(name.as_str()) else {
            continue;
        };
        let issued = crate::leaf::issue_leaf_within(&next.ca, &leaf.request, now, limit, rng)?;
        *id = issued.cert.id();
        leaf.issued = Some(issued);
    }
    // The wake-up time must come from the document just produced: a leaf
    // issued now has its own refresh time, a new CA its own rotation time.
    next.note_published(now);
    let next_wake = next_check(&next, &plan.policy, now);
    Ok(Outcome {
        document: Cow::Owned(next),
        events,
        next_wake,
    })
}

/// A serving certificate for the probe name, with the lifetime of the
/// policy's CAs: issued to prove trust across a rotation.
pub(crate) fn probe_request(policy: &SignerPolicy) -> LeafRequest {
    let mut request = LeafRequest::server(vec![crate::preflight::PROBE_NAME.to_string()]);
    request.lifetime = policy.rotation.lifetime;
    request
}

/// Refuses a rotation unless every serving chain (old or new) verifies
/// against every bundle (old or new), at the rotation and at the end of the
/// grace period. Without bridges (compromise) only new x new is required.
fn preflight_rotation(
    before: &SignerState,
    after: &SignerState,
    old_probe: Option<&Certificate>,
    new_probe: &Certificate,
    now: OffsetDateTime,
    trusted_until: Option<OffsetDateTime>,
) -> Result<()> {
    let old_chain = old_probe.map(|p| before.serving_chain(p));
    let new_chain = after.serving_chain(new_probe);
    let mut times = vec![now];
    if let (Some(until), Some(probe)) = (trusted_until, old_probe) {
        let end = until.min(probe.not_after()) - Duration::MINUTE;
        if end > now {
            times.push(end);
        }
    }
    let inputs = crate::preflight::MatrixInputs {
        old_chain: old_chain.as_deref(),
        new_chain: Some(&new_chain),
        old_bundle: old_chain.as_ref().map(|_| &before.bundle),
        new_bundle: &after.bundle,
    };
    refuse_untrusted(crate::preflight::matrix(&inputs, &times))
}

/// Refuses a change at the first cell of its pre-flight matrix whose
/// serving chain does not verify against the bundle.
pub(crate) fn refuse_untrusted(cells: impl IntoIterator<Item = TrustCell>) -> Result<()> {
    for cell in cells {
        if let Err(source) = cell.result {
            return Err(RotateError::TrustCheckFailed {
                chain: cell.chain,
                bundle: cell.bundle,
                at: cell.at,
                source: Box::new(source),
            });
        }
    }
    Ok(())
}
