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
    ImportedCa, LeafSpec, MIN_CA_VALIDITY, OverrideRecord, Rotation, RotationSummary, SetInput,
    SetState, SetStep, TargetSpec, TimelineEntry, validate_name,
};
use crate::error::{Result, RotateError};
use std::collections::{BTreeMap, BTreeSet};
use time::{Duration, OffsetDateTime};

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

/// One leaf to (re-)issue.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafIssue {
    /// The leaf.
    pub name: String,
    /// Onto its CA's next generation (else the current one).
    pub on_next: bool,
}

/// A reason as the set's rules take it (see [`crate::text::check_reason`]).
fn reason_ok(what: &str, text: &str) -> Result<()> {
    crate::text::check_reason(what, text).map_err(|e| RotateError::SetInvalid(e.to_string()))
}

fn wrong_step(action: &'static str, step: SetStep, reason: impl Into<String>) -> RotateError {
    RotateError::SetWrongStep {
        action,
        step,
        reason: reason.into(),
    }
}

/// Refuses a new CA that is not valid yet, or whose leaves would not
/// verify for more than 24 hours and longer than the leaves it will sign.
/// `not_after` is when its leaves stop verifying: the earliest NotAfter of
/// the CA and of the chain above it.
fn check_new_ca(
    ca: &str,
    not_before: OffsetDateTime,
    not_after: OffsetDateTime,
    leaf_lifetime: Duration,
    now: OffsetDateTime,
) -> Result<()> {
    let refuse = |reason: String| RotateError::SetCaRefused {
        ca: ca.to_string(),
        reason,
    };
    if not_before > now {
        return Err(refuse(format!(
            "not valid before {}",
            pki_core::datetime::rfc3339(not_before)
        )));
    }
    let left = not_after - now;
    if left <= MIN_CA_VALIDITY {
        return Err(refuse(format!(
            "valid for {} only (until {}); a new CA must be valid for more than 24 hours",
            pki_core::policy::human(left.max(Duration::ZERO)),
            pki_core::datetime::rfc3339(not_after),
        )));
    }
    if left <= leaf_lifetime {
        return Err(refuse(format!(
            "valid for {} only, not longer than the {} leaves it will sign",
            pki_core::policy::human(left),
            pki_core::policy::human(leaf_lifetime)
        )));
    }
    Ok(())
}

/// Checks an imported CA as an import from files is checked, at `now`:
/// its chain in issuing order up to a root, the key its certificate's, a
/// certificate that may sign certificates, the path to the root verifying.
/// Returns when its leaves stop verifying: the earliest NotAfter of the CA
/// and its chain.
fn check_import(
    doc: &SetState,
    import: &ImportedCa,
    now: OffsetDateTime,
) -> Result<OffsetDateTime> {
    let refuse = |e: pki_core::Error| RotateError::SetCaRefused {
        ca: import.ca.clone(),
        reason: e.to_string(),
    };
    pki_core::check_issuing_order(&import.authority.cert, &import.chain).map_err(refuse)?;
    let validated = pki_core::CaImport {
        cert: import.authority.cert.clone(),
        key: Some(import.authority.key.clone()),
        chain: import.chain.clone(),
    }
    .validate(now)
    .map_err(refuse)?;
    // What can never verify is refused before it is written: a leaf of
    // this CA (each leaf of the set's CA, when the chain constrains names)
    // must verify for clients trusting the root its bundles will hold.
    let pair = super::CaPair {
        signer: import.authority.clone(),
        client_signer: None,
        chain: import.chain.clone(),
    };
    let requests: Vec<(&str, crate::LeafRequest)> = doc
        .leaves
        .iter()
        .filter(|(_, l)| l.spec.ca == import.ca && l.spec.serving)
        .map(|(name, l)| {
            let kind = if l.spec.client {
                crate::LeafKind::ServerClient
            } else {
                crate::LeafKind::Server
            };
            (
                name.as_str(),
                crate::LeafRequest {
                    kind,
                    dns_names: l.spec.dns_names.clone(),
                    ip_addresses: l.spec.ip_addresses.clone(),
                    lifetime: l.spec.lifetime,
                },
            )
        })
        .collect();
    let check = crate::external::check_issuance(
        &import.authority,
        &pair.chain_after_leaf(&import.authority),
        pair.root(),
        super::DEFAULT_SET_LEAF_LIFETIME,
        requests.iter().map(|(n, r)| (*n, r)),
        now,
    );
    if !check.ok {
        return Err(RotateError::SetCaRefused {
            ca: import.ca.clone(),
            reason: check.detail,
        });
    }
    Ok(validated.not_after())
}

fn check_leaf_spec(doc: &SetState, name: &str, spec: &LeafSpec) -> Result<()> {
    validate_name("certificate", name)?;
    validate_name("target", &spec.target)?;
    let ca = doc.ca(&spec.ca)?;
    if spec.serving && !ca.roles.serving {
        return Err(RotateError::SetInvalid(format!(
            "CA \"{}\" has role {}: it cannot sign serving certificates",
            spec.ca, ca.roles
        )));
    }
    if spec.client && !ca.roles.client {
        return Err(RotateError::SetInvalid(format!(
            "CA \"{}\" has role {}: it cannot sign client certificates",
            spec.ca, ca.roles
        )));
    }
    if !spec.serving && !spec.client {
        return Err(RotateError::SetInvalid(format!(
            "certificate \"{name}\" must be serving, client or both"
        )));
    }
    // The signer's rules for leaf names: no bare or top-level wildcards, no
    // IP literals as DNS names, no control characters.
    for dns in &spec.dns_names {
        crate::leaf::check_leaf_dns_name(dns)
            .map_err(|e| RotateError::SetInvalid(format!("certificate \"{name}\": {e}")))?;
    }
    if let Some(cn) = &spec.common_name
        && (cn.is_empty() || cn.chars().any(char::is_control))
    {
        return Err(RotateError::SetInvalid(format!(
            "certificate \"{name}\": the common name must be non-empty text without control characters"
        )));
    }
    if spec.serving && spec.dns_names.is_empty() && spec.ip_addresses.is_empty() {
        return Err(RotateError::SetInvalid(format!(
            "serving certificate \"{name}\" needs at least one DNS name or IP address"
        )));
    }
    if spec.lifetime <= Duration::ZERO {
        return Err(RotateError::SetInvalid(format!(
            "certificate \"{name}\": lifetime must be positive"
        )));
    }
    Ok(())
}

fn check_target(doc: &SetState, name: &str, spec: &TargetSpec) -> Result<()> {
    validate_name("target", name)?;
    for ca in &spec.trusts {
        if !doc.ca(ca)?.roles.serving {
            return Err(RotateError::SetInvalid(format!(
                "target \"{name}\" cannot trust \"{ca}\" for servers: that CA signs no serving certificates (role {})",
                doc.cas[ca].roles
            )));
        }
    }
    for ca in &spec.client_ca {
        if !doc.ca(ca)?.roles.client {
            return Err(RotateError::SetInvalid(format!(
                "target \"{name}\" cannot verify clients of \"{ca}\": that CA signs no client certificates (role {})",
                doc.cas[ca].roles
            )));
        }
    }
    Ok(())
}

/// Checks a rotation's start: the reason, and every import against the
/// CA it replaces and the rules of new CAs. Returns the new CAs.
fn check_start(doc: &SetState, imports: &[ImportedCa], now: OffsetDateTime) -> Result<Vec<NewCa>> {
    let mut seen = BTreeSet::new();
    let mut import_not_after = BTreeMap::new();
    let mut imported_keys: BTreeMap<[u8; 32], &str> = BTreeMap::new();
    for import in imports {
        let current = &doc.ca(&import.ca)?.current;
        let spki = import.authority.cert.spki_sha256();
        if std::iter::once(&current.signer)
            .chain(&current.client_signer)
            .any(|c| c.cert.spki_sha256() == spki)
        {
            return Err(RotateError::SetCaRefused {
                ca: import.ca.clone(),
                reason: format!(
                    "{} has the key of the CA in use: a rotation must replace that key, so import a CA with a new one",
                    import.authority.cert.id()
                ),
            });
        }
        if !seen.insert(&import.ca) {
            return Err(RotateError::SetInvalid(format!(
                "CA \"{}\" is imported twice",
                import.ca
            )));
        }
        // Two CAs of the set on one key would be one CA: a client of one
        // would trust the other's servers, and distrusting one distrusts both.
        if let Some(other) = imported_keys.insert(spki, &import.ca) {
            return Err(RotateError::SetCaRefused {
                ca: import.ca.clone(),
                reason: format!(
                    "{} has the same key as the CA imported for \"{other}\": each CA of the set needs its own",
                    import.authority.cert.id()
                ),
            });
        }
        import_not_after.insert(&import.ca, check_import(doc, import, now)?);
    }
    let mut cas = Vec::new();
    for (name, ca) in &doc.cas {
        let leaf_lifetime = doc
            .leaves
            .values()
            .filter(|l| &l.spec.ca == name)
            .map(|l| l.spec.lifetime)
            .max()
            .unwrap_or(Duration::ZERO);
        let import = imports.iter().find(|i| &i.ca == name);
        match import {
            Some(i) => check_new_ca(
                name,
                i.authority.cert.not_before(),
                import_not_after
                    .get(name)
                    .copied()
                    .unwrap_or(i.authority.cert.not_after()),
                leaf_lifetime,
                now,
            )?,
            None => {
                if doc.ca_lifetime <= MIN_CA_VALIDITY || doc.ca_lifetime <= leaf_lifetime {
                    return Err(RotateError::SetCaRefused {
                        ca: name.clone(),
                        reason: format!(
                            "the set's CA lifetime {} is not longer than 24 hours and the {} leaves it signs",
                            pki_core::policy::human(doc.ca_lifetime),
                            pki_core::policy::human(leaf_lifetime)
                        ),
                    });
                }
            }
        }
        cas.push(NewCa {
            ca: name.clone(),
            import: import.cloned(),
            separate_client_ca: ca.roles.serving && ca.roles.client,
        });
    }
    Ok(cas)
}

/// Whether the rotation left `step` (a timeline entry in `step` followed by
/// a later one), and when.
fn left_step(rotation: &Rotation, step: SetStep) -> Option<OffsetDateTime> {
    let at = rotation.timeline.iter().position(|e| e.step == step)?;
    rotation.timeline.get(at + 1).map(|e| e.at)
}

/// The step after `from` when advancing.
fn advance_target(from: SetStep) -> Option<SetStep> {
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
fn enter(
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
                    return Err(RotateError::SetInvalid(format!(
                        "certificate \"{name}\" is loaded by target \"{}\": moving it to \"{}\" takes it from that target; ask again with replace (--replace) to move it",
                        existing.spec.target, spec.target
                    )));
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
                return Err(RotateError::SetTargetFailed {
                    target: target.clone(),
                    reason: f.reason.clone(),
                });
            }
            if *fingerprint != expected {
                return Err(RotateError::SetStaleFingerprint {
                    target: target.clone(),
                    given: fingerprint.clone(),
                    expected,
                    step,
                });
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
                return Err(RotateError::SetInvalid(format!(
                    "target \"{target}\" has not failed: nothing to retry"
                )));
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
                return Err(RotateError::SetStepBlocked {
                    step,
                    waiting: waiting.join(", "),
                });
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
                return Err(RotateError::SetAbortStrands {
                    step,
                    to,
                    stranded: stranded.join(", "),
                    why: STRAND_TRUST_NEW.into(),
                });
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
