//! Carrying out a [`SetPlan`]: record what it records, make the new CAs,
//! move the step, issue the leaves it lists, then prove the new material
//! with the pre-flight trust matrix against what every target may hold.

use super::material::{self, LoadedMaterial};
use super::plan::{LeafIssue, Record, SetPlan, Transition};
use super::token_keys::slot;
use super::{Ack, CaPair, Failure, LeafSpec, OverrideRecord, SetEvent, SetLeaf, SetState, SetStep};
use crate::engines::Outcome;
use crate::engines::guard::{Finding, Findings};
use crate::engines::leaf::IssuedLeaf;
use crate::model::error::{Result, RotateError};
use pki_core::{CertificateAuthority, CertificateParams, PrivateKey, Profile};
use rand_core::CryptoRng;
use std::borrow::Cow;
use time::OffsetDateTime;

/// Issues leaf `name` of `spec` from `pair`'s CA for it, within the
/// NotAfter of that CA and of its chain.
fn issue_leaf<R: CryptoRng + ?Sized>(
    pair: &CaPair,
    name: &str,
    spec: &LeafSpec,
    now: OffsetDateTime,
    rng: &mut R,
) -> Result<IssuedLeaf> {
    let profile = match (spec.serving, spec.client) {
        (true, true) => Profile::ServerClient,
        (true, false) => Profile::Server,
        (false, true) => Profile::Client,
        (false, false) => {
            return Err(RotateError::Set(crate::SetError::Invalid(format!(
                "leaf \"{name}\" must be serving, client or both"
            ))));
        }
    };
    let cn = spec
        .common_name
        .clone()
        .or_else(|| spec.dns_names.first().cloned())
        .or_else(|| spec.ip_addresses.first().map(ToString::to_string))
        .unwrap_or_else(|| name.to_string());
    let ca = pair.issuer_for(spec);
    let key = PrivateKey::generate(ca.key.algorithm(), rng)?;
    let mut params = CertificateParams::new(profile, &cn, now, spec.lifetime)?;
    params.dns_names = spec.dns_names.clone();
    params.ip_addresses = spec.ip_addresses.clone();
    params.not_after_limit = pair.not_after_limit(ca);
    let cert = ca.issue(&params, &key.public_key()?, rng)?;
    if cert.not_after() <= now {
        return Err(RotateError::Expired {
            what: format!("certificate for {name}"),
            at: cert.not_after(),
        });
    }
    Ok(IssuedLeaf { cert, key })
}

/// Makes the new generation of every CA the plan's start lists.
fn start_cas<R: CryptoRng + ?Sized>(
    next: &mut SetState,
    start: super::plan::StartPlan,
    now: OffsetDateTime,
    rng: &mut R,
    events: &mut Vec<SetEvent>,
) -> Result<()> {
    for new in start.cas {
        // The time alone repeats for two rotations in one second (start,
        // abort, start): the random part keeps every generation's subject
        // apart, so no verifier building paths by name confuses an old CA
        // with a new one.
        let stamp = format!("{}-{:08x}", now.unix_timestamp(), rng.next_u32());
        let name = &new.ca;
        let (signer, chain, imported) = match new.import {
            Some(i) => (i.authority, i.chain, true),
            None => (
                new_root(
                    next,
                    &slot(name, "next-ca"),
                    &format!("{name}-{stamp}"),
                    now,
                    rng,
                )?,
                Vec::new(),
                false,
            ),
        };
        events.push(SetEvent::NewCa {
            ca: name.clone(),
            role: "ca".into(),
            id: signer.cert.id(),
            imported,
        });
        let client_signer = if new.separate_client_ca {
            let c = new_root(
                next,
                &slot(name, "next-client-ca"),
                &format!("{name}-client-{stamp}"),
                now,
                rng,
            )?;
            events.push(SetEvent::NewCa {
                ca: name.clone(),
                role: "client-ca".into(),
                id: c.cert.id(),
                imported: false,
            });
            Some(c)
        } else {
            None
        };
        if let Some(ca) = next.cas.get_mut(name) {
            ca.next = Some(CaPair {
                signer,
                client_signer,
                chain,
            });
        }
    }
    next.failures.clear();
    Ok(())
}

/// Records the token keys of the new CAs `start` makes, unless they are
/// recorded already: true when it recorded any (the start then waits for
/// the next round, after they are committed). Nothing for a set whose
/// keys are in this process, or for imported CAs (their keys come with
/// them).
fn intend_keys<R: CryptoRng + ?Sized>(
    next: &mut SetState,
    start: &super::plan::StartPlan,
    rng: &mut R,
    events: &mut Vec<SetEvent>,
) -> Result<bool> {
    let generation = next.history.len() + 2;
    let Some(keys) = &mut next.token_keys else {
        return Ok(false);
    };
    let mut slots = Vec::new();
    for new in start.cas.iter().filter(|new| new.import.is_none()) {
        let label = crate::engines::token_keys::key_label(&new.ca, generation);
        slots.push((slot(&new.ca, "next-ca"), label.clone()));
        if new.separate_client_ca {
            slots.push((slot(&new.ca, "next-client-ca"), format!("{label} client")));
        }
    }
    let changes = keys.intend(&slots, rng)?;
    let intended = !changes.is_empty();
    events.extend(changes.into_iter().map(SetEvent::from));
    Ok(intended)
}

/// A new self-signed root CA named `cn` for CA slot `slot_name`: on the
/// key recorded for it in the token, else on a new key in this process.
fn new_root<R: CryptoRng + ?Sized>(
    next: &mut SetState,
    slot_name: &str,
    cn: &str,
    now: OffsetDateTime,
    rng: &mut R,
) -> Result<CertificateAuthority> {
    let (algorithm, lifetime) = (next.key_algorithm, next.ca_lifetime);
    let recorded = match &mut next.token_keys {
        Some(keys) => keys.make(slot_name, algorithm)?,
        None => None,
    };
    match recorded {
        Some(key) => super::model::root_on(key.into(), cn, now, lifetime, rng),
        None => Ok(CertificateAuthority::generate_root(
            cn, algorithm, now, lifetime, rng,
        )?),
    }
}

/// The CA key changes a transition into `to` brings: completion makes the
/// new generation current and destroys the old keys (a token's key objects
/// retire, and the next round destroys them); the end of a revert drops
/// the new generation (and retires its token keys).
fn retire_cas(next: &mut SetState, to: SetStep, events: &mut Vec<SetEvent>) {
    let names: Vec<String> = next.cas.keys().cloned().collect();
    if let Some(keys) = &mut next.token_keys {
        for name in &names {
            let changes = match to {
                SetStep::Completed => keys.complete(name),
                SetStep::Idle => keys.revert(name),
                _ => Vec::new(),
            };
            events.extend(changes.into_iter().map(SetEvent::from));
        }
    }
    match to {
        SetStep::Completed => {
            let mut destroyed = Vec::new();
            for ca in next.cas.values_mut() {
                if let Some(new) = ca.next.take() {
                    let old = std::mem::replace(&mut ca.current, new);
                    destroyed.push(old.signer.cert.id());
                    destroyed.extend(old.client_signer.map(|c| c.cert.id()));
                    // `old` drops here: its keys are zeroized with it.
                }
            }
            for leaf in next.leaves.values_mut() {
                leaf.on_next = false;
            }
            events.push(SetEvent::OldKeysDestroyed { ids: destroyed });
        }
        SetStep::Idle => {
            for ca in next.cas.values_mut() {
                ca.next = None;
            }
        }
        _ => {}
    }
}

/// Records what the request brought (a target's bundles, an ack, a
/// failure, a retry); a new leaf's spec is returned, to be issued.
fn record(
    doc: &SetState,
    next: &mut SetState,
    record: Record,
    now: OffsetDateTime,
    events: &mut Vec<SetEvent>,
) -> Option<(String, LeafSpec)> {
    match record {
        Record::Nothing => {}
        Record::Leaf { name, spec } => {
            next.targets.entry(spec.target.clone()).or_default();
            return Some((name, spec));
        }
        Record::Target { name, spec } => {
            next.targets.insert(name.clone(), spec);
            events.push(SetEvent::TargetChanged { target: name });
        }
        Record::Ack {
            target,
            fingerprint,
        } => {
            let loaded = LoadedMaterial::of(doc, &target);
            next.acks.insert(
                target.clone(),
                Ack {
                    fingerprint: fingerprint.clone(),
                    at: now,
                    loaded: Some(loaded),
                },
            );
            events.push(SetEvent::Acked {
                target,
                fingerprint,
            });
        }
        Record::Fail { target, reason } => {
            next.failures.insert(
                target.clone(),
                Failure {
                    reason: reason.clone(),
                    at: now,
                },
            );
            events.push(SetEvent::Failed { target, reason });
        }
        Record::Retry { target } => {
            next.failures.remove(&target);
            next.acks.remove(&target);
            events.push(SetEvent::Retrying { target });
        }
    }
    None
}

/// Issues each leaf the plan names on the CA generation it names (the
/// current one when the CA has no next), `new_leaf` with its new spec.
fn issue_leaves<R: CryptoRng + ?Sized>(
    next: &mut SetState,
    issues: Vec<LeafIssue>,
    new_leaf: Option<(String, LeafSpec)>,
    now: OffsetDateTime,
    rng: &mut R,
    events: &mut Vec<SetEvent>,
) -> Result<()> {
    for issue in issues {
        let spec = match &new_leaf {
            Some((name, spec)) if *name == issue.name => spec.clone(),
            _ => match next.leaves.get(&issue.name) {
                Some(leaf) => leaf.spec.clone(),
                None => continue,
            },
        };
        let ca = next.ca(&spec.ca)?;
        let pair = match (issue.on_next, &ca.next) {
            (true, Some(n)) => n,
            _ => &ca.current,
        };
        let on_next = issue.on_next && ca.next.is_some();
        let signer = pair.issuer_for(&spec).cert.id();
        let issued = issue_leaf(pair, &issue.name, &spec, now, rng)?;
        events.push(SetEvent::Issued {
            name: issue.name.clone(),
            target: spec.target.clone(),
            id: issued.cert.id(),
            issuer: signer,
        });
        next.leaves.insert(
            issue.name,
            SetLeaf {
                spec,
                issued,
                on_next,
            },
        );
    }
    Ok(())
}

/// The plan's verdict over the set's red cells: with the transition's
/// override reason they are accepted on the record (the override this
/// transition recorded when its gate waited, or a new one); without one
/// they are the finding the guard refuses.
fn accept_red_cells(
    next: &mut SetState,
    red: Vec<String>,
    override_reason: Option<String>,
    transition: Option<&Transition>,
    now: OffsetDateTime,
) -> Findings {
    let mut findings = Findings::none();
    let (Some(reason), Some(t), Some(r)) = (override_reason, transition, next.rotation.as_mut())
    else {
        findings.push(Finding::RedCells(red));
        return findings;
    };
    match r
        .overrides
        .last_mut()
        .filter(|o| o.at == now && o.from == t.from && o.to == t.to)
    {
        Some(record) => record.red_cells = red,
        None => r.overrides.push(OverrideRecord {
            at: now,
            from: t.from,
            to: t.to,
            reason,
            waiting: Vec::new(),
            warnings: Vec::new(),
            red_cells: red,
        }),
    }
    findings
}

/// Carries out `plan` with `rng`, then checks the new material with the
/// pre-flight trust matrix against what every target may hold: red cells
/// are recorded when the plan carries an override reason, and are the
/// outcome's findings (which the guard refuses) when it does not.
///
/// # Errors
///
/// Material that could not be built: a [`RotateError::Core`] when a key cannot
/// be made (in this process or in the token), a key in the token cannot be
/// destroyed, or a certificate cannot be issued;
/// [`SetError::Invalid`](crate::SetError::Invalid) for a leaf that is neither
/// serving nor client; [`RotateError::Expired`] for a leaf that would already
/// be expired. Red cells are not errors here: without an override reason they
/// are findings, refused by the guard.
pub fn apply<'d, R: CryptoRng + ?Sized>(
    doc: &'d SetState,
    plan: SetPlan,
    rng: &mut R,
) -> Result<Outcome<'d, SetState, SetEvent>> {
    let now = plan.now;
    if plan.is_empty() {
        return Ok(Outcome {
            document: Cow::Borrowed(doc),
            events: plan
                .already_done
                .map(|note| SetEvent::AlreadyDone { note })
                .into_iter()
                .collect(),
            next_wake: plan.next_wake,
            findings: Findings::none(),
        });
    }
    let mut next = doc.clone();
    let mut events = Vec::new();
    if plan.destroy_retiring
        && let Some(keys) = &mut next.token_keys
    {
        events.extend(keys.destroy_retiring()?.into_iter().map(SetEvent::from));
    }
    // A start whose new keys are made in a token first commits the keys
    // it will make, and starts in the next round.
    if let Some(start) = &plan.start
        && intend_keys(&mut next, start, rng, &mut events)?
    {
        return Ok(Outcome {
            document: Cow::Owned(next),
            events,
            next_wake: now,
            findings: Findings::none(),
        });
    }
    let new_leaf = record(doc, &mut next, plan.record, now, &mut events);
    if let Some(start) = plan.start {
        start_cas(&mut next, start, now, rng, &mut events)?;
    }
    next.rotation = plan.rotation;
    let transition = plan.transition;
    if let Some(t) = &transition {
        events.push(SetEvent::Step {
            from: t.from,
            to: t.to,
            note: t.note.clone(),
        });
        retire_cas(&mut next, t.to, &mut events);
    }
    if let Some(finished) = plan.finished {
        next.history.push(finished);
    }
    issue_leaves(&mut next, plan.issue, new_leaf, now, rng, &mut events)?;
    let red = material::red_cells(doc, &next, now);
    let findings = if red.is_empty() {
        Findings::none()
    } else {
        accept_red_cells(
            &mut next,
            red,
            plan.override_reason,
            transition.as_ref(),
            now,
        )
    };
    let wake = super::plan::next_wake(&next, now);
    Ok(Outcome {
        document: Cow::Owned(next),
        events,
        next_wake: wake,
        findings,
    })
}
