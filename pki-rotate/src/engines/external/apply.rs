//! Carrying out an external-CA plan: rotating to the supplied CA (bridged
//! when it can be) or renewing the current one on its key.

use super::{ExternalCa, ExternalPlan, Topology};
use crate::engines::Outcome;
use crate::engines::guard::Findings;
use crate::engines::leaf::IssuedLeaf;
use crate::engines::leaf::LeafReason;
use crate::engines::preflight::{BreakAcceptance, MatrixInputs, Side, TrustCell};
use crate::engines::signer::{
    Event, OverriddenCheck, PreviousCa, RotationReason, RotationRecord, SignerState, probe_request,
    record_rotation,
};
use crate::engines::token_keys::TokenKeys;
use crate::model::error::Result;
use pki_core::{Bundle, Certificate, CertificateAuthority, cross_sign, is_self_signed};
use rand_core::CryptoRng;
use std::borrow::Cow;
use time::OffsetDateTime;

/// Carries out `plan` with `rng`; what its trust checks found is in the
/// outcome's findings, for the guard ([`Outcome::guarded`]).
///
/// # Errors
///
/// Material that could not be built, and nothing is returned then: a
/// [`RotateError::Core`](crate::RotateError::Core) when a certificate (a
/// bridge, a renewal, a leaf) cannot be issued or the renewed CA does not match
/// its key, or when a CA whose key is in a token would be replaced by one whose
/// key is not ([`pki_core::Error::Pkcs11`]);
/// [`RotateError::Expired`](crate::RotateError::Expired) for a leaf that would
/// already be expired.
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
            next_wake: crate::engines::signer::next_check(state, &state.policy, now),
            findings: Findings::none(),
        }),
        ExternalPlan::RenewSameKey { now } => renew(state, now, rng),
        ExternalPlan::Replace {
            now,
            ca,
            chain,
            topology,
            force,
            overridden,
        } => {
            let replacing = Replacing {
                new: *ca,
                chain,
                topology,
                force,
                overridden,
            };
            replace(state, now, replacing, rng)
        }
    }
}

/// A replacement CA as the plan validated it, with what the operator said.
struct Replacing {
    new: CertificateAuthority,
    chain: Vec<Certificate>,
    topology: Topology,
    force: Option<String>,
    overridden: Vec<OverriddenCheck>,
}

/// The token's record after the supplied CA `new` replaced the current
/// one. A supplied key in a token is the operator's: signed with, never
/// destroyed. The replaced key, when pki made it, is kept while its CA is
/// trusted and retired after, as a rotation's; the operator's is
/// forgotten. A CA whose key is in a token is replaced only by one whose
/// key is in a token too: the record would otherwise name no current key.
fn follow_token_keys(
    next: &mut SignerState,
    new: &CertificateAuthority,
    previous_trusted: bool,
    events: &mut Vec<Event>,
) -> Result<()> {
    match (&mut next.token_keys, new.key.token()) {
        (None, None) => Ok(()),
        (None, Some(key)) => {
            next.token_keys = Some(TokenKeys::imported(key.uri()));
            Ok(())
        }
        (Some(keys), Some(key)) => {
            let changes = keys.rotated(key, previous_trusted);
            keys.imported = true;
            events.extend(changes.into_iter().map(Event::from));
            Ok(())
        }
        (Some(keys), None) => Err(pki_core::Error::Pkcs11 {
            operation: format!("replacing the CA whose key is {}", keys.current),
            reason: "the supplied CA's key is not in a token: give it with --key-uri (a CA whose key is in a token is replaced by one whose key is in a token too)".into(),
        }
        .into()),
    }
}

/// Rotates to the replacement: its trust (bridged or kept beside the old
/// anchors), the record of the rotation, the pre-flight and the breaks
/// beyond it (allowed only when the operator forced the replacement), then
/// every leaf re-issued.
fn replace<'d, R: CryptoRng + ?Sized>(
    state: &'d SignerState,
    now: OffsetDateTime,
    replacing: Replacing,
    rng: &mut R,
) -> Result<Outcome<'d, SignerState, Event>> {
    let Replacing {
        new,
        chain,
        topology,
        force,
        overridden,
    } = replacing;
    let old = &state.ca;
    let mut next = state.clone();
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
    let trusted_until = move_trust(state, &mut next, &new, &external, topology, rng)?;
    let reason = match &force {
        Some(reason) => RotationReason::Forced {
            reason: reason.clone(),
        },
        None => RotationReason::Supplied,
    };
    let mut events = vec![record_rotation(
        &mut next,
        RotationRecord {
            at: now,
            reason,
            from: old.cert.id(),
            to: new.cert.id(),
            previous_trusted_until: trusted_until,
            overridden,
            forced_reasons: Vec::new(),
        },
    )];
    let keep_certificate = is_self_signed(&old.cert);
    next.previous = Some(PreviousCa::of(
        state,
        old_probe.as_ref(),
        trusted_until,
        keep_certificate,
    ));
    let previous_trusted = trusted_until.is_some_and(|until| now < until);
    follow_token_keys(&mut next, &new, previous_trusted, &mut events)?;
    next.ca = new;
    next.external = Some(external);
    let announced_break = topology == Topology::Break && force.is_some();
    let findings = check_trust(
        state,
        &mut next,
        old_probe.as_ref(),
        announced_break,
        force,
        now,
        rng,
    )?;
    reissue_every_leaf(&mut next, now, rng, &mut events)?;
    next.note_published(now);
    Ok(Outcome {
        document: Cow::Owned(next),
        events,
        next_wake: now,
        findings,
    })
}

/// How trust moves from the current CA to `new` in `next`: bridged until
/// the topology's end, or the old anchors kept beside the new root until
/// the old CA expires. Returns until when the old CA stays trusted.
fn move_trust<R: CryptoRng + ?Sized>(
    state: &SignerState,
    next: &mut SignerState,
    new: &CertificateAuthority,
    external: &ExternalCa,
    topology: Topology,
    rng: &mut R,
) -> Result<Option<OffsetDateTime>> {
    let old = &state.ca;
    match topology {
        Topology::Bridged { until } => {
            let bridge_a = cross_sign(&old.cert, new, until, rng)?;
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
            Ok(Some(until))
        }
        Topology::SameTrust | Topology::Break => {
            // The old anchors stay until they expire: servers that have
            // not refreshed keep verifying for clients that have.
            let mut bundle = Bundle::from_certs([new_root(new, external)]);
            bundle.merge(&state.bundle);
            next.bundle = bundle;
            next.bridge = None;
            next.bridge_chain = Vec::new();
            Ok(Some(old.cert.not_after()))
        }
    }
}

/// What clients must trust for `new`: itself when self-signed, else the
/// root of its chain. Validation made sure of a chain; without a root (a
/// forced import), the top of the chain.
fn new_root(new: &CertificateAuthority, external: &ExternalCa) -> Certificate {
    if is_self_signed(&new.cert) {
        return new.cert.clone();
    }
    external
        .root()
        .or(external.chain.last())
        .cloned()
        .unwrap_or_else(|| new.cert.clone())
}

/// The pre-flight matrix at `now` (but for the one cell a forced,
/// unbridgeable replacement announced), then the breaks every rotation
/// looks for: consumers that may still hold the material of the previous
/// rotation (within the reload interval), or a bundle of an expired CA.
/// Breaks a forced replacement allows are recorded; the rest, and failed
/// cells, are the findings returned for the guard.
fn check_trust<R: CryptoRng + ?Sized>(
    state: &SignerState,
    next: &mut SignerState,
    old_probe: Option<&IssuedLeaf>,
    announced_break: bool,
    force: Option<String>,
    now: OffsetDateTime,
    rng: &mut R,
) -> Result<Findings> {
    let new_probe = next.issue_leaf(&probe_request(&state.policy), now, rng)?;
    let old_chain = old_probe.map(|p| state.serving_chain(&p.cert));
    let new_chain = next.serving_chain(&new_probe.cert);
    let inputs = MatrixInputs {
        old_chain: old_chain.as_deref(),
        new_chain: Some(&new_chain),
        old_bundle: Some(&state.bundle),
        new_bundle: &next.bundle,
    };
    let announced =
        |cell: &TrustCell| announced_break && cell.chain == Side::New && cell.bundle == Side::Old;
    let mut findings = Findings::none();
    findings.cells(
        crate::engines::preflight::matrix(&inputs, &[now])
            .into_iter()
            .filter(|cell| !announced(cell)),
    );
    let breaks = crate::engines::signer::rotation_trust_breaks(state, next, &new_probe.cert, now);
    let acceptance = BreakAcceptance {
        allowed: force,
        ..BreakAcceptance::default()
    };
    let (overridden, refused) = acceptance.sort(breaks);
    findings.breaks(refused, &next.policy.rotation);
    if let Some(record) = next.history.last_mut() {
        record.overridden.extend(overridden);
    }
    Ok(findings)
}

/// Re-issues every leaf from the new CA, within its chain's limit.
fn reissue_every_leaf<R: CryptoRng + ?Sized>(
    next: &mut SignerState,
    now: OffsetDateTime,
    rng: &mut R,
    events: &mut Vec<Event>,
) -> Result<()> {
    let limit = next.leaf_not_after_limit();
    for (name, leaf) in next.leaves.iter_mut() {
        let issued =
            crate::engines::leaf::issue_leaf_within(&next.ca, &leaf.request, now, limit, rng)?;
        events.push(Event::LeafReissued {
            name: name.clone(),
            reason: LeafReason::IssuerRotated,
            id: issued.cert.id(),
        });
        leaf.issued = Some(issued);
    }
    Ok(())
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
    let to = next.ca.cert.id();
    let rotated = record_rotation(
        &mut next,
        RotationRecord {
            at: now,
            reason: RotationReason::RenewedSameKey,
            from: old.cert.id(),
            to,
            previous_trusted_until: Some(old.cert.not_after()),
            overridden: Vec::new(),
            forced_reasons: Vec::new(),
        },
    );
    // Same key and SKI: a leaf of the old certificate is a leaf of the new.
    let probe = state.issue_leaf(&probe_request(&state.policy), now, rng)?;
    let chain = state.serving_chain(&probe.cert);
    let cells = crate::engines::preflight::matrix(
        &MatrixInputs {
            old_chain: Some(&chain),
            new_chain: None,
            old_bundle: Some(&state.bundle),
            new_bundle: &next.bundle,
        },
        &[now],
    );
    let mut findings = Findings::none();
    findings.cells(cells);
    next.note_published(now);
    Ok(Outcome {
        document: Cow::Owned(next),
        events: vec![rotated],
        next_wake: now,
        findings,
    })
}
