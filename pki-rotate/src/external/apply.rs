//! Carrying out an external-CA plan: rotating to the supplied CA (bridged
//! when it can be) or renewing the current one on its key.

use super::{ExternalCa, ExternalPlan, Topology};
use crate::engine::Outcome;
use crate::error::{Result, RotateError};
use crate::leaf::LeafReason;
use crate::preflight::{MatrixInputs, Side, TrustCell};
use crate::signer::{
    Event, OverriddenCheck, PreviousCa, RotationReason, RotationRecord, SignerState, probe_request,
    refuse_untrusted,
};
use pki_core::{Bundle, Certificate, CertificateAuthority, cross_sign, is_self_signed};
use rand_core::CryptoRng;
use std::borrow::Cow;
use time::OffsetDateTime;

/// Carries out `plan` with `rng`.
pub fn apply<'d, R: CryptoRng + ?Sized>(
    state: &'d SignerState,
    plan: ExternalPlan,
    rng: &mut R,
) -> Result<Outcome<'d, SignerState, Event>> {
    match plan {
        ExternalPlan::Nothing { now, already_done } => Ok(Outcome {
            document: Cow::Borrowed(state),
            events: already_done
                .map(|note| Event::AlreadyDone { note })
                .into_iter()
                .collect(),
            next_wake: crate::signer::next_check(state, &state.policy, now),
        }),
        ExternalPlan::RenewSameKey { now } => renew(state, now, rng),
        ExternalPlan::Replace {
            now,
            ca,
            chain,
            topology,
            force,
            overridden,
        } => replace(state, now, *ca, chain, topology, force, overridden, rng),
    }
}

#[allow(clippy::too_many_arguments)]
fn replace<'d, R: CryptoRng + ?Sized>(
    state: &'d SignerState,
    now: OffsetDateTime,
    new: CertificateAuthority,
    chain: Vec<Certificate>,
    topology: Topology,
    force: Option<String>,
    overridden: Vec<OverriddenCheck>,
    rng: &mut R,
) -> Result<Outcome<'d, SignerState, Event>> {
    let old = &state.ca;
    let mut next = state.clone();
    let mut events = Vec::new();
    let old_probe = if old.cert.is_valid_at(now) {
        Some(state.issue_leaf(&probe_request(&state.policy), now, rng)?)
    } else {
        None
    };
    // A forced replacement that came without its chain: the chain the
    // store holds is the best guess at what clients need.
    let chain = match &state.external {
        Some(ext) if chain.is_empty() && !is_self_signed(&new.cert) => ext.chain.clone(),
        _ => chain,
    };
    let external = ExternalCa {
        imported_at: now,
        chain,
    };
    let new_root = if is_self_signed(&new.cert) {
        new.cert.clone()
    } else {
        // Validation made sure of a chain; without a root (a forced
        // import), the top of the chain is what clients must trust.
        external
            .root()
            .or(external.chain.last())
            .cloned()
            .unwrap_or_else(|| new.cert.clone())
    };
    let trusted_until;
    match topology {
        Topology::Bridged { until } => {
            let bridge_a = cross_sign(&old.cert, &new, until, rng)?;
            // Bridge B verifies only through the current CA and the chain
            // above it: it ends with the first of them to expire.
            let b_until = [Some(new.cert.not_after()), Some(old.cert.not_after())]
                .into_iter()
                .chain([state.leaf_not_after_limit()])
                .flatten()
                .min()
                .unwrap_or(old.cert.not_after());
            let bridge_b = cross_sign(&new.cert, old, b_until, rng)?;
            next.bundle = Bundle::from_certs([new.cert.clone(), bridge_a]);
            next.bridge = Some(bridge_b);
            next.bridge_chain = state
                .external
                .as_ref()
                .map(|e| e.serving_suffix(&old.cert))
                .unwrap_or_default();
            trusted_until = Some(until);
        }
        Topology::SameTrust | Topology::Break => {
            // The old anchors stay until they expire: servers that have
            // not refreshed keep verifying for clients that have.
            let mut bundle = Bundle::from_certs([new_root]);
            bundle.merge(&state.bundle);
            next.bundle = bundle;
            next.bridge = None;
            next.bridge_chain = Vec::new();
            trusted_until = Some(old.cert.not_after());
        }
    }
    let reason = match &force {
        Some(reason) => RotationReason::Forced {
            reason: reason.clone(),
        },
        None => RotationReason::Supplied,
    };
    events.push(Event::Rotated {
        reason: reason.clone(),
        previous: old.cert.id(),
        current: new.cert.id(),
        previous_trusted_until: trusted_until,
    });
    next.history.push(RotationRecord {
        at: now,
        reason,
        from: old.cert.id(),
        to: new.cert.id(),
        previous_trusted_until: trusted_until,
        overridden,
        forced_reasons: Vec::new(),
    });
    next.previous = Some(PreviousCa {
        id: old.cert.id(),
        not_after: old.cert.not_after(),
        trusted_until,
        certificate: is_self_signed(&old.cert).then(|| old.cert.to_pem()),
        probe: old_probe.as_ref().map(|p| {
            state
                .serving_chain(&p.cert)
                .iter()
                .map(Certificate::to_pem)
                .collect()
        }),
    });
    next.ca = new;
    next.external = Some(external);

    let new_probe = next.issue_leaf(&probe_request(&state.policy), now, rng)?;
    let old_chain = old_probe.as_ref().map(|p| state.serving_chain(&p.cert));
    let new_chain = next.serving_chain(&new_probe.cert);
    let inputs = MatrixInputs {
        old_chain: old_chain.as_deref(),
        new_chain: Some(&new_chain),
        old_bundle: Some(&state.bundle),
        new_bundle: &next.bundle,
    };
    // The one cell a forced, unbridgeable rotation announced.
    let announced = |cell: &TrustCell| {
        topology == Topology::Break
            && force.is_some()
            && cell.chain == Side::New
            && cell.bundle == Side::Old
    };
    refuse_untrusted(
        crate::preflight::matrix(&inputs, &[now])
            .into_iter()
            .filter(|cell| !announced(cell)),
    )?;

    // The guard every rotation runs: consumers that may still hold the
    // material of the previous rotation (within the reload interval), or a
    // bundle of an expired CA. Refused unless forced, then recorded.
    let breaks = crate::signer::rotation_trust_breaks(state, &next, &new_probe.cert, now);
    if !breaks.is_empty() {
        let Some(reason) = &force else {
            return Err(RotateError::Signer(crate::SignerError::TrustBreak {
                summary: crate::preflight::refusal_summary(&breaks, &next.policy.rotation),
                breaks: breaks.iter().map(ToString::to_string).collect(),
            }));
        };
        if let Some(record) = next.history.last_mut() {
            record
                .overridden
                .extend(breaks.iter().map(|b| b.overridden(reason)));
        }
    }

    let limit = next.leaf_not_after_limit();
    for (name, leaf) in next.leaves.iter_mut() {
        let issued = crate::leaf::issue_leaf_within(&next.ca, &leaf.request, now, limit, rng)?;
        events.push(Event::LeafReissued {
            name: name.clone(),
            reason: LeafReason::IssuerRotated,
            id: issued.cert.id(),
        });
        leaf.issued = Some(issued);
    }
    next.note_published(now);
    Ok(Outcome {
        document: Cow::Owned(next),
        events,
        next_wake: now,
    })
}

fn renew<'d, R: CryptoRng + ?Sized>(
    state: &'d SignerState,
    now: OffsetDateTime,
    rng: &mut R,
) -> Result<Outcome<'d, SignerState, Event>> {
    let old = &state.ca;
    let renewed = pki_core::renew_same_key(old, now, state.policy.rotation.lifetime, rng)?;
    let mut next = state.clone();
    let mut bundle = Bundle::from_certs([renewed.clone()]);
    for c in state.bundle.certs() {
        if c != &old.cert {
            bundle.push(c.clone());
        }
    }
    next.bundle = bundle;
    next.ca = CertificateAuthority::new(renewed, old.key.clone())?;
    let new_id = next.ca.cert.id();
    let reason = RotationReason::RenewedSameKey;
    next.history.push(RotationRecord {
        at: now,
        reason: reason.clone(),
        from: old.cert.id(),
        to: next.ca.cert.id(),
        previous_trusted_until: Some(old.cert.not_after()),
        overridden: Vec::new(),
        forced_reasons: Vec::new(),
    });
    // Same key and SKI: a leaf of the old certificate is a leaf of the new.
    let probe = state.issue_leaf(&probe_request(&state.policy), now, rng)?;
    let chain = state.serving_chain(&probe.cert);
    let cells = crate::preflight::matrix(
        &MatrixInputs {
            old_chain: Some(&chain),
            new_chain: None,
            old_bundle: Some(&state.bundle),
            new_bundle: &next.bundle,
        },
        &[now],
    );
    refuse_untrusted(cells)?;
    next.note_published(now);
    Ok(Outcome {
        document: Cow::Owned(next),
        events: vec![Event::Rotated {
            reason,
            previous: old.cert.id(),
            current: new_id,
            previous_trusted_until: Some(old.cert.not_after()),
        }],
        next_wake: now,
    })
}
