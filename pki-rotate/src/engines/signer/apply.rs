//! Carrying out a plan: the new CA and its bridges, the leaves, and the
//! pre-flight check that every consumer still trusts every other.

use super::{
    Event, LeafChange, Plan, PreviousCa, RotationDecision, RotationReason, RotationRecord,
    SignerPolicy, SignerState, next_check,
};
use crate::engines::Outcome;
use crate::engines::guard::Findings;
use crate::engines::leaf::{Leaf, LeafDecision, LeafRequest};
use crate::model::error::Result;
use pki_core::{Bundle, CaKey, Certificate, CertificateAuthority, CertificateParams, cross_sign};
use rand_core::CryptoRng;
use std::borrow::Cow;
use std::sync::Arc;
use time::{Duration, OffsetDateTime};

/// Executes `plan`, made from `state`, with `rng`. When the plan is empty
/// the outcome borrows `state`: nothing is copied. A rotation's trust
/// checks are the outcome's findings, for the guard
/// ([`Outcome::guarded`]).
///
/// # Errors
///
/// Material that could not be built, and nothing is returned then: a
/// [`RotateError::Core`](crate::RotateError::Core) when a key cannot be made
/// (in this process or in the token) or a certificate cannot be issued,
/// [`RotateError::Expired`](crate::RotateError::Expired) when a new certificate
/// would already be expired, and
/// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when a rotation in
/// a token finds no recorded key to make. Trust breaks are not errors here:
/// they are findings, refused by the guard.
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
            findings: Findings::none(),
        });
    }
    let mut next = state.clone();
    // One event per leaf issued or removed, and a few others: allocated
    // once, not grown by doubling (a signer may issue thousands at once).
    let mut events = Vec::with_capacity(plan.leaves.len() + plan.leaf_changes.len() + 4);
    events.extend(already_done);
    let now = plan.now;
    super::token_moves::apply(&mut next, plan.key_moves, &mut events)?;
    // A rotation of a key in a token first commits the key it will make,
    // and rotates in the next round (see `token_moves::intend`).
    if plan.rotation.is_some() && super::token_moves::intend(&mut next, rng, &mut events)? {
        return Ok(Outcome {
            document: Cow::Owned(next),
            events,
            next_wake: now,
            findings: Findings::none(),
        });
    }
    next.policy = plan.policy;
    change_leaf_requests(&mut next, &plan.leaf_changes, &mut events);
    let mut findings = Findings::none();
    if let Some(decision) = &plan.rotation {
        findings = rotate(state, &mut next, &plan, decision, rng, &mut events)?;
    }
    if let Some(reason) = &plan.record_forced_reason {
        record_forced_reason(&mut next, reason, plan.relabel_latest_rotation, &mut events);
    }
    if !plan.prune.is_empty() {
        prune_bundle(&mut next, &plan.prune, &mut events);
    }
    if plan.drop_bridge
        && let Some(b) = next.bridge.take()
    {
        next.bridge_chain.clear();
        events.push(Event::BridgeRetired { id: b.id() });
    }
    reissue_leaves(
        &mut next,
        std::mem::take(&mut plan.leaves),
        now,
        rng,
        &mut events,
    )?;
    // The wake-up time must come from the document just produced: a leaf
    // issued now has its own refresh time, a new CA its own rotation time.
    next.note_published(now);
    let next_wake = next_check(&next, &plan.policy, now);
    Ok(Outcome {
        document: Cow::Owned(next),
        events,
        next_wake,
        findings,
    })
}

/// Records the leaf requests the plan changes; a removal is an event.
fn change_leaf_requests(next: &mut SignerState, changes: &[LeafChange], events: &mut Vec<Event>) {
    for change in changes {
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
}

/// Rotates the CA of `next` (a copy of `state`) as the plan decided: a new
/// CA on the old Subject, its bridges, the record of the rotation, then
/// the pre-flight that every consumer still trusts every other and the
/// breaks beyond it, sorted by what the plan accepts. Returns what the
/// checks found that the plan did not accept.
fn rotate<R: CryptoRng + ?Sized>(
    state: &SignerState,
    next: &mut SignerState,
    plan: &Plan,
    decision: &RotationDecision,
    rng: &mut R,
    events: &mut Vec<Event>,
) -> Result<Findings> {
    let now = plan.now;
    let old = &state.ca;
    // A serving certificate of the old CA, to prove below that servers
    // which have not refreshed stay trusted.
    let old_probe = if old.cert.is_valid_at(now) && old.cert.not_after() > now {
        Some(state.issue_leaf(&probe_request(&plan.policy), now, rng)?)
    } else {
        None
    };
    let new_key =
        super::token_moves::new_key(next.token_keys.as_ref(), plan.policy.key_algorithm, rng)?;
    let new = successor(old, new_key, &plan.policy, now, rng)?;
    let bridged = bridge(old, &new, decision.bridge_until, &plan.policy, now, rng)?;
    let trusted_until = decision.bridge_until;
    events.push(record_rotation(
        next,
        RotationRecord {
            at: now,
            reason: decision.reason.clone(),
            from: old.cert.id(),
            to: new.cert.id(),
            previous_trusted_until: trusted_until,
            overridden: Vec::new(),
            forced_reasons: Vec::new(),
        },
    ));
    let new_probe = crate::engines::leaf::issue_leaf(&new, &probe_request(&plan.policy), now, rng)?;
    next.previous = Some(PreviousCa::of(
        state,
        old_probe.as_ref(),
        trusted_until,
        true,
    ));
    next.ca = new;
    super::token_moves::rotated(next, trusted_until.is_some(), events);
    next.bridge = bridged.bridge_b;
    next.bridge_chain = Vec::new();
    next.bundle = bridged.bundle;
    let mut findings = Findings::none();
    findings.cells(preflight_rotation(
        state,
        next,
        old_probe
            .as_ref()
            .map(|p| &p.cert)
            .filter(|_| trusted_until.is_some()),
        &new_probe.cert,
        now,
        trusted_until,
    ));
    let breaks = if plan.trust_breaks.checks() {
        crate::engines::signer::rotation_trust_breaks(state, next, &new_probe.cert, now)
    } else {
        Vec::new()
    };
    let (overridden, refused) = plan.trust_breaks.sort(breaks);
    findings.breaks(refused, &next.policy.rotation);
    if let Some(record) = next.history.last_mut() {
        record.overridden.extend(overridden);
    }
    Ok(findings)
}

/// Appends `record` to the history of `next`; the event that reports it.
pub(crate) fn record_rotation(next: &mut SignerState, record: RotationRecord) -> Event {
    let event = Event::Rotated {
        reason: record.reason.clone(),
        previous: record.from.clone(),
        current: record.to.clone(),
        previous_trusted_until: record.previous_trusted_until,
    };
    next.history.push(record);
    event
}

/// A new self-signed CA for `old`'s place: the same Subject, so chains can
/// link through either bridge, on a new key of the policy's type.
fn successor<R: CryptoRng + ?Sized>(
    old: &CertificateAuthority,
    new_key: CaKey,
    policy: &SignerPolicy,
    now: OffsetDateTime,
    rng: &mut R,
) -> Result<CertificateAuthority> {
    let cn = old
        .cert
        .common_name()
        .unwrap_or_else(|| "pki-signer".to_string());
    let mut params = CertificateParams::new(
        pki_core::Profile::RootCa,
        &cn,
        now,
        policy.rotation.lifetime,
    )?;
    params.subject = old.cert.subject().clone();
    let new_cert = params.self_signed_with(&new_key, rng)?;
    Ok(CertificateAuthority::new(new_cert, new_key)?)
}

/// The bundle and bridge B after a rotation from `old` to `new`.
struct Bridged {
    bundle: Bundle,
    bridge_b: Option<Certificate>,
}

/// Bridges `old` and `new` until `until` (no bridges without it: a
/// compromise): bridge A (the old CA's key vouched for by the new CA) joins
/// the bundle, bridge B serves the new CA's leaves to clients that trust
/// only the old CA.
fn bridge<R: CryptoRng + ?Sized>(
    old: &CertificateAuthority,
    new: &CertificateAuthority,
    until: Option<OffsetDateTime>,
    policy: &SignerPolicy,
    now: OffsetDateTime,
    rng: &mut R,
) -> Result<Bridged> {
    let mut bundle = Bundle::from_certs([new.cert.clone()]);
    let Some(until) = until else {
        return Ok(Bridged {
            bundle,
            bridge_b: None,
        });
    };
    bundle.push(cross_sign(&old.cert, new, until, rng)?);
    // Bridge B is only useful while the old CA, its issuer, is valid.
    let b_until = new.cert.not_after().min(old.cert.not_after());
    let bridge_b = cross_sign(&new.cert, old, b_until, rng)?;
    if policy.keep_previous_root && old.cert.is_valid_at(now) {
        bundle.push(old.cert.clone());
    }
    Ok(Bridged {
        bundle,
        bridge_b: Some(bridge_b),
    })
}

/// Records a forced rotation's reason. A due rotation that a forced request
/// coincided with (`relabel`) is recorded as forced (its reason says so
/// once); every further forced request it satisfied is appended, never
/// written over.
fn record_forced_reason(
    next: &mut SignerState,
    reason: &str,
    relabel: bool,
    events: &mut Vec<Event>,
) {
    next.forced_rotation_reason = Some(reason.to_string());
    if !relabel {
        return;
    }
    let Some(latest) = next.history.last_mut() else {
        return;
    };
    match latest.reason {
        RotationReason::Expiring { .. } if latest.forced_reasons.is_empty() => {
            latest.reason = RotationReason::Forced {
                reason: reason.to_string(),
            };
        }
        _ => latest.forced_reasons.push(reason.to_string()),
    }
    events.push(Event::ForcedRotationSatisfied {
        reason: reason.to_string(),
        by: latest.to.clone(),
    });
}

/// Drops the expired members `prune` names from the bundle.
fn prune_bundle(next: &mut SignerState, prune: &[Certificate], events: &mut Vec<Event>) {
    let mut bundle = Bundle::new();
    for c in next.bundle.certs() {
        if !prune.contains(c) {
            bundle.push(c.clone());
        }
    }
    next.bundle = bundle;
    events.push(Event::BundlePruned {
        removed: prune.iter().map(Certificate::id).collect(),
    });
}

/// Issues the leaves the plan decided, each within the CA's limit.
fn reissue_leaves<R: CryptoRng + ?Sized>(
    next: &mut SignerState,
    decisions: Vec<LeafDecision>,
    now: OffsetDateTime,
    rng: &mut R,
    events: &mut Vec<Event>,
) -> Result<()> {
    let limit = next.leaf_not_after_limit();
    // Each decision's name and reason move into its event first, and the
    // decisions are freed before any leaf is issued: a signer issuing
    // thousands at once would otherwise hold both lists at its peak.
    let first_leaf_event = events.len();
    for decision in decisions {
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
        let issued =
            crate::engines::leaf::issue_leaf_within(&next.ca, &leaf.request, now, limit, rng)?;
        *id = issued.cert.id();
        leaf.issued = Some(issued);
    }
    Ok(())
}

/// A serving certificate for the probe name, with the lifetime of the
/// policy's CAs: issued to prove trust across a rotation.
pub(crate) fn probe_request(policy: &SignerPolicy) -> LeafRequest {
    let mut request = LeafRequest::server(vec![crate::engines::preflight::PROBE_NAME.to_string()]);
    request.lifetime = policy.rotation.lifetime;
    request
}

/// The pre-flight matrix of a rotation: every serving chain (old or new)
/// against every bundle (old or new), at the rotation and at the end of
/// the grace period. Without bridges (compromise) only new x new.
fn preflight_rotation(
    before: &SignerState,
    after: &SignerState,
    old_probe: Option<&Certificate>,
    new_probe: &Certificate,
    now: OffsetDateTime,
    trusted_until: Option<OffsetDateTime>,
) -> Vec<crate::engines::preflight::TrustCell> {
    let old_chain = old_probe.map(|p| before.serving_chain(p));
    let new_chain = after.serving_chain(new_probe);
    let mut times = vec![now];
    if let (Some(until), Some(probe)) = (trusted_until, old_probe) {
        let end = until.min(probe.not_after()) - Duration::MINUTE;
        if end > now {
            times.push(end);
        }
    }
    let inputs = crate::engines::preflight::MatrixInputs {
        old_chain: old_chain.as_deref(),
        new_chain: Some(&new_chain),
        old_bundle: old_chain.as_ref().map(|_| &before.bundle),
        new_bundle: &after.bundle,
    };
    crate::engines::preflight::matrix(&inputs, &times)
}
