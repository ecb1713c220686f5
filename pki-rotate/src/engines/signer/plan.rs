//! Deciding: whether the CA rotates and why, which leaves are issued, what
//! leaves the bundle, and when to look again.

use super::{ForcedRotation, LeafChange, SignerInput, SignerPolicy, SignerState};
use crate::engines::leaf::{
    IssuedLeaf, LeafDecision, LeafReason, LeafRequest, RefreshTimes, validate_leaf_name,
};
use crate::engines::preflight::BreakAcceptance;
use crate::model::error::{Result, RotateError};
use pki_core::Certificate;
use std::collections::BTreeMap;
use time::{Duration, OffsetDateTime};

/// Why the CA is rotated.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum RotationReason {
    /// Less than the minimum trust M of validity remains.
    Expiring {
        /// Validity left at the time of the decision, in seconds.
        remaining_seconds: i64,
        /// M, in seconds.
        min_trust_seconds: i64,
    },
    /// An operator asked for it with a reason not seen before.
    Forced {
        /// The operator's reason.
        reason: String,
    },
    /// An operator supplied the new CA (`pki rotate --to`), and it passed
    /// every validation check.
    Supplied,
    /// The CA was renewed on its own key and Subject (`pki rotate
    /// --renew-same-key`): nothing it issued changes.
    RenewedSameKey,
}

impl std::fmt::Display for RotationReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RotationReason::Expiring {
                remaining_seconds,
                min_trust_seconds,
            } if *remaining_seconds <= 0 => write!(
                f,
                "CA expired {} ago (minimum trust {})",
                pki_core::policy::human(Duration::seconds(-*remaining_seconds)),
                pki_core::policy::human(Duration::seconds(*min_trust_seconds))
            ),
            RotationReason::Expiring {
                remaining_seconds,
                min_trust_seconds,
            } => write!(
                f,
                "CA has {} left, less than the minimum trust {}",
                pki_core::policy::human(Duration::seconds(*remaining_seconds)),
                pki_core::policy::human(Duration::seconds(*min_trust_seconds))
            ),
            RotationReason::Forced { reason } => write!(f, "forced: {reason}"),
            RotationReason::Supplied => f.write_str("replaced by a supplied CA"),
            RotationReason::RenewedSameKey => f.write_str("renewed on the same key"),
        }
    }
}

/// The decision to rotate the CA.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RotationDecision {
    /// Why.
    pub reason: RotationReason,
    /// Bridge A's NotAfter (None: no bridges).
    pub bridge_until: Option<OffsetDateTime>,
}

/// What `plan` decided; `apply` carries it out on the same document.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The time the plan was made for.
    pub now: OffsetDateTime,
    /// The policy in force after the plan (the input's or the document's).
    pub policy: SignerPolicy,
    /// Whether `policy` differs from the document's.
    pub policy_changed: bool,
    /// The CA rotation, if any.
    pub rotation: Option<RotationDecision>,
    /// The new forced-rotation reason to record (set whenever a forced rotation runs).
    pub record_forced_reason: Option<String>,
    /// The latest rotation, done concurrently by another writer, is
    /// recorded as forced with `record_forced_reason` instead of rotating again.
    pub relabel_latest_rotation: bool,
    /// Leaf requests that change (only those that differ from the document).
    pub leaf_changes: Vec<LeafChange>,
    /// One decision per leaf that must be (re-)issued.
    pub leaves: Vec<LeafDecision>,
    /// Bundle members that expired and are dropped.
    pub prune: Vec<Certificate>,
    /// Bridge B expired and is dropped from serving chains.
    pub drop_bridge: bool,
    /// The moves of CA key objects in a token besides a rotation's own.
    pub key_moves: super::KeyMoves,
    /// Which trust breaks of the rotation are accepted: by its nature (an
    /// emergency) or by the operator's reason, recorded in the history.
    pub trust_breaks: BreakAcceptance,
    /// Requests already carried out, each a note of what is so: the
    /// removal of a leaf the document does not have (a rerun of one that
    /// landed). They change nothing; `apply` reports them.
    pub already_done: Vec<String>,
    /// When the next decision about the *current* document could differ
    /// without any input changing. After a plan that changes something, the
    /// wake-up time is the outcome's, computed from the new document.
    pub next_check: OffsetDateTime,
}

impl Plan {
    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        self.rotation.is_none()
            && self.leaves.is_empty()
            && self.leaf_changes.is_empty()
            && self.prune.is_empty()
            && !self.drop_bridge
            && self.key_moves.is_empty()
            && self.record_forced_reason.is_none()
            && !self.policy_changed
    }
}

/// Decides what to do at `now`.
///
/// `input.forced` asks for a rotation; it runs only when its reason differs
/// from the recorded one. A forced rotation that coincides with an automatic
/// one is a single rotation, recorded with the forced reason.
///
/// # Errors
///
/// - The policy's errors (see [`SignerPolicy::validate`]).
/// - [`SignerError::ClockBeforeCa`](crate::SignerError::ClockBeforeCa) when
///   `now` is before the CA's NotBefore; [`RotateError::Core`] when `now` plus
///   the lifetime or the grace overflows.
/// - For a forced rotation:
///   [`SignerError::EmptyForcedReason`](crate::SignerError::EmptyForcedReason),
///   [`RotateError::InvalidText`] for a reason that cannot be recorded,
///   [`SignerError::InvalidGrace`](crate::SignerError::InvalidGrace), and
///   [`SignerError::ImportedCaRotation`](crate::SignerError::ImportedCaRotation)
///   when the CA was imported.
/// - For the leaf changes:
///   [`SignerError::InvalidLeafName`](crate::SignerError::InvalidLeafName),
///   those of [`LeafRequest::validate`],
///   [`SignerError::LeafRefused`](crate::SignerError::LeafRefused) for a leaf
///   an imported CA's constraints forbid,
///   [`SignerError::LeafChangeNeedsReplace`](crate::SignerError::LeafChangeNeedsReplace)
///   for a request that narrows a leaf, and
///   [`SignerError::UnknownLeaf`](crate::SignerError::UnknownLeaf) for a
///   renewal of a leaf the document does not keep.
pub fn plan(state: &SignerState, input: &SignerInput, now: OffsetDateTime) -> Result<Plan> {
    let policy = input.policy.unwrap_or(state.policy);
    policy.validate()?;
    let forced = input.forced.as_ref();
    check_time(state, &policy, forced, now)?;
    let rotating = decide_rotation(state, input, &policy, now)?;
    let requests = LeafRequests::of(state, input, now)?;
    let (leaves, earliest_refresh) =
        leaf_decisions(state, &requests, rotating.rotation.is_some(), &policy, now);
    // A rotation replaces the bundle and the bridges: nothing to prune.
    let (prune, drop_bridge) = match rotating.rotation {
        Some(_) => (Vec::new(), false),
        None => expired_members(state, now),
    };
    let trust_breaks = BreakAcceptance {
        unchecked: input.skip_trust_break_check,
        emergency: emergency(forced, rotating.rotation.as_ref()),
        compromise: forced.is_some_and(|f| f.no_bridges) && rotating.rotation.is_some(),
        allowed: input.allow_trust_break.clone(),
    };
    Ok(Plan {
        now,
        policy,
        policy_changed: policy != state.policy,
        rotation: rotating.rotation,
        record_forced_reason: rotating.record_forced_reason,
        relabel_latest_rotation: rotating.relabel_latest_rotation,
        leaf_changes: requests.changes,
        leaves,
        prune,
        drop_bridge,
        key_moves: super::token_moves::plan(state, now),
        trust_breaks,
        already_done: requests.already_done,
        next_check: next_check_from(state, &policy, now, earliest_refresh),
    })
}

/// Refuses a time before the CA began, and one where what the plan adds
/// to it (at most D, or the forced grace) leaves the encodable range,
/// instead of overflowing.
fn check_time(
    state: &SignerState,
    policy: &SignerPolicy,
    forced: Option<&ForcedRotation>,
    now: OffsetDateTime,
) -> Result<()> {
    let ca = &state.ca.cert;
    if now < ca.not_before() {
        return Err(RotateError::Signer(crate::SignerError::ClockBeforeCa {
            now,
            not_before: ca.not_before(),
        }));
    }
    pki_core::datetime::add(now, policy.rotation.lifetime)?;
    if let Some(g) = forced.and_then(|f| f.grace) {
        pki_core::datetime::add(now, g)?;
    }
    Ok(())
}

/// Whether and why the CA rotates, and the forced reason to record.
#[derive(Default)]
struct Rotating {
    rotation: Option<RotationDecision>,
    record_forced_reason: Option<String>,
    relabel_latest_rotation: bool,
}

/// Decides the rotation: a forced one the document has not recorded yet, a
/// due one (less than the minimum trust left), none for an imported CA
/// (its replacement comes from its issuer), never bridges from an expired
/// CA (they would be expired or vouch for a dead key).
fn decide_rotation(
    state: &SignerState,
    input: &SignerInput,
    policy: &SignerPolicy,
    now: OffsetDateTime,
) -> Result<Rotating> {
    let ca = &state.ca.cert;
    let min_trust = policy.rotation.min_trust;
    let mut rotating = match &input.forced {
        Some(f) => decide_forced(state, f, min_trust, now)?,
        None => Rotating::default(),
    };
    if let Some(reason) = &input.satisfied_forced_reason
        && input.forced.is_none()
        && !already_forced(state, reason)
        && !state.history.is_empty()
    {
        rotating.record_forced_reason = Some(reason.clone());
        rotating.relabel_latest_rotation = true;
    }
    let remaining = ca.not_after() - now;
    if rotating.rotation.is_none() && remaining < min_trust {
        rotating.rotation = Some(RotationDecision {
            reason: RotationReason::Expiring {
                remaining_seconds: remaining.whole_seconds(),
                min_trust_seconds: min_trust.whole_seconds(),
            },
            bridge_until: Some(normal_bridge_until(ca, now, min_trust)),
        });
    }
    crate::engines::signer::hold_rotation(state, &mut rotating.rotation)?;
    if let Some(r) = rotating.rotation.as_mut()
        && now > ca.not_after()
    {
        r.bridge_until = None;
    }
    Ok(rotating)
}

/// A forced rotation, checked: it runs once per reason.
fn decide_forced(
    state: &SignerState,
    f: &ForcedRotation,
    min_trust: Duration,
    now: OffsetDateTime,
) -> Result<Rotating> {
    if f.reason.trim().is_empty() {
        return Err(RotateError::Signer(crate::SignerError::EmptyForcedReason));
    }
    crate::model::text::check_reason("the forced rotation's reason", &f.reason)?;
    if let Some(g) = f.grace
        && g <= Duration::ZERO
    {
        return Err(RotateError::Signer(crate::SignerError::InvalidGrace(g)));
    }
    if already_forced(state, &f.reason) {
        return Ok(Rotating::default());
    }
    // A rotation at this very instant that no forced reason asked for
    // (a due one, by another replica that read and wrote first) is the
    // one this request asks for: forced and due at once make a single
    // rotation, recorded as forced. An emergency still rotates.
    let coinciding = state.history.last().is_some_and(|latest| {
        latest.at == now && !matches!(latest.reason, RotationReason::Forced { .. })
    }) && f.grace.is_none()
        && !f.no_bridges;
    if coinciding {
        return Ok(Rotating {
            rotation: None,
            record_forced_reason: Some(f.reason.clone()),
            relabel_latest_rotation: true,
        });
    }
    let bridge_until = if f.no_bridges {
        None
    } else {
        Some(match f.grace {
            Some(g) => now + g,
            None => normal_bridge_until(&state.ca.cert, now, min_trust),
        })
    };
    Ok(Rotating {
        rotation: Some(RotationDecision {
            reason: RotationReason::Forced {
                reason: f.reason.clone(),
            },
            bridge_until,
        }),
        record_forced_reason: Some(f.reason.clone()),
        relabel_latest_rotation: false,
    })
}

/// The leaf requests after the input's changes.
struct LeafRequests<'a> {
    /// The leaves the input names (None: removed), over the document's.
    overrides: BTreeMap<&'a str, Option<LeafEntry<'a>>>,
    /// Only the real changes: a plan without any copies nothing per leaf.
    changes: Vec<LeafChange>,
    /// The leaves to renew.
    renew: Vec<&'a str>,
    /// Removals of leaves the document does not have.
    already_done: Vec<String>,
}

impl<'a> LeafRequests<'a> {
    /// Checks and merges the input's leaf changes, in order.
    fn of(state: &'a SignerState, input: &'a SignerInput, now: OffsetDateTime) -> Result<Self> {
        let mut requests = LeafRequests {
            overrides: BTreeMap::new(),
            changes: Vec::new(),
            renew: Vec::new(),
            already_done: Vec::new(),
        };
        for change in &input.leaves {
            validate_leaf_name(change.name())?;
            requests.add(state, change, now)?;
        }
        Ok(requests)
    }

    fn known(&self, state: &'a SignerState, name: &str) -> bool {
        lookup_leaf(state, &self.overrides, name).is_some()
    }

    fn add(
        &mut self,
        state: &'a SignerState,
        change: &'a LeafChange,
        now: OffsetDateTime,
    ) -> Result<()> {
        match change {
            LeafChange::Request { name, request } | LeafChange::Replace { name, request } => {
                request.validate()?;
                check_issuable(state, name, request, now)?;
                let before = lookup_leaf(state, &self.overrides, name).map(|(r, _)| r);
                if let (Some(before), LeafChange::Request { .. }) = (before, change) {
                    refuse_narrowing(name, before, request)?;
                }
                // A leaf this input removed first has no certificate left.
                let issued =
                    lookup_leaf(state, &self.overrides, name).and_then(|(_, issued)| issued);
                if before != Some(request) {
                    self.changes.push(LeafChange::Request {
                        name: name.clone(),
                        request: request.clone(),
                    });
                }
                self.overrides.insert(name, Some((request, issued)));
            }
            LeafChange::Remove { name } => {
                // What a removal asks for already holds: a rerun of one
                // that landed (its answer lost, or the caller killed) must
                // not fail where the first run succeeded.
                if !self.known(state, name) {
                    self.already_done
                        .push(format!("no certificate named \"{}\"", name.escape_debug()));
                    return Ok(());
                }
                self.overrides.insert(name, None);
                self.changes.push(change.clone());
            }
            LeafChange::Renew { name } => {
                if !self.known(state, name) {
                    return Err(RotateError::Signer(crate::SignerError::UnknownLeaf(
                        name.clone(),
                    )));
                }
                self.renew.push(name.as_str());
            }
        }
        Ok(())
    }
}

/// One decision per leaf to (re-)issue, in name order, and the current
/// leaves' earliest refresh after `now` (for the next check), found in the
/// same pass: one read of every certificate.
fn leaf_decisions(
    state: &SignerState,
    requests: &LeafRequests<'_>,
    rotating: bool,
    policy: &SignerPolicy,
    now: OffsetDateTime,
) -> (Vec<LeafDecision>, Option<i128>) {
    let mut leaves = Vec::new();
    let check =
        crate::engines::leaf::LeafCheck::new(&state.ca.cert, now, policy.leaf_refresh_fraction);
    let mut consider = |name: &str, request: &LeafRequest, issued: Option<&IssuedLeaf>| {
        let (reason, refresh_at) = if rotating {
            (
                Some(LeafReason::IssuerRotated),
                issued.map(|i| check.refresh_at(&i.cert)),
            )
        } else {
            let (reason, refresh_at) = check.decide(request, issued);
            let renewed = requests.renew.contains(&name);
            (
                reason.or_else(|| renewed.then_some(LeafReason::Renewed)),
                refresh_at,
            )
        };
        leaves.extend(reason.map(|reason| LeafDecision {
            name: name.to_string(),
            reason,
        }));
        refresh_at
    };
    let now_nanos = now.unix_timestamp_nanos();
    let mut earliest_refresh: Option<i128> = None;
    for (name, leaf) in &state.leaves {
        let refresh_at = if requests.overrides.contains_key(name.as_str()) {
            leaf.issued.as_ref().map(|i| check.refresh_at(&i.cert))
        } else {
            consider(name, &leaf.request, leaf.issued.as_ref())
        };
        if let Some(at) = refresh_at.filter(|&at| at > now_nanos) {
            earliest_refresh = Some(earliest_refresh.map_or(at, |e| e.min(at)));
        }
    }
    for (name, entry) in &requests.overrides {
        if let Some((request, issued)) = entry {
            consider(name, request, *issued);
        }
    }
    // In name order, as one pass over the merged requests would give.
    if !requests.overrides.is_empty() {
        leaves.sort_by(|a, b| a.name.cmp(&b.name));
    }
    // Held while every leaf is issued: without the spare room of growth.
    leaves.shrink_to_fit();
    (leaves, earliest_refresh)
}

/// The bundle members that expired and go, and whether bridge B expired.
/// The current CA's own anchor stays even when expired: an imported CA's
/// external root is the only certificate clients trust it by, and a
/// bundle without it would leave the store unreadable instead of
/// reporting the expiry.
fn expired_members(state: &SignerState, now: OffsetDateTime) -> (Vec<Certificate>, bool) {
    let ca = &state.ca.cert;
    let external_root = state.external.as_ref().and_then(|e| e.root());
    let prune = state
        .bundle
        .certs()
        .iter()
        .filter(|c| c.not_after() < now && *c != ca && external_root.is_none_or(|root| *c != root))
        .cloned()
        .collect();
    let drop_bridge = state.bridge.as_ref().is_some_and(|b| b.not_after() < now);
    (prune, drop_bridge)
}

/// The emergency a forced rotation is, in words for the history, when it
/// is one: a compromise (no bridges) or a grace period.
///
/// An emergency passes the reload-interval guard. The guard protects
/// consumers that have not reloaded since the previous rotation, on the
/// promise that they reload within I. A forced rotation with a grace
/// period says the previous CA stays trusted only that long: the operator
/// has chosen, for this emergency, that consumers not reloaded by then
/// break anyway, so refusing would only push them to an override that
/// hides the emergency behind a generic reason. A compromise rotation
/// distrusts the previous CA at once, breaking every consumer not yet
/// reloaded by design, so it passes every check. Each break an emergency
/// causes is still recorded in the history with it.
fn emergency(
    forced: Option<&ForcedRotation>,
    rotation: Option<&RotationDecision>,
) -> Option<String> {
    let forced_rotation =
        rotation.is_some_and(|r| matches!(r.reason, RotationReason::Forced { .. }));
    let f = forced.filter(|_| forced_rotation)?;
    if f.no_bridges {
        return Some(format!(
            "the compromise rotation \"{}\", which distrusts the previous CA at once",
            f.reason
        ));
    }
    f.grace.map(|g| {
        format!(
            "the emergency rotation \"{}\", which trusts the previous CA for {} only",
            f.reason,
            pki_core::policy::human(g)
        )
    })
}

/// Refuses a leaf an imported CA cannot issue so that clients accept it:
/// when the external chain constrains names, a probe with the leaf's names
/// verifies against the bundle first (a CA pki generated constrains
/// nothing, and a probe per request would cost a signature).
fn check_issuable(
    state: &SignerState,
    name: &str,
    request: &LeafRequest,
    now: OffsetDateTime,
) -> Result<()> {
    let Some(external) = &state.external else {
        return Ok(());
    };
    let constrained = std::iter::once(&state.ca.cert)
        .chain(&external.chain)
        .any(Certificate::has_name_constraints);
    if !constrained {
        return Ok(());
    }
    let suffix = external.serving_suffix(&state.ca.cert);
    crate::engines::preflight::probe_issuance(
        &state.ca,
        &suffix,
        &state.bundle,
        request,
        state.leaf_not_after_limit(),
        now,
    )
    .map_err(|e| {
        RotateError::Signer(crate::SignerError::LeafRefused {
            name: name.to_string(),
            reason: format!(
                "{} issued by {} would not verify for the clients of this store: {e}",
                request.names().join(", "),
                state.ca.cert.id()
            ),
        })
    })
}

/// Whether a forced rotation for `reason` is recorded as done: by any
/// rotation of the history (its own reason or one it satisfied), or as the
/// reason the document keeps (written by releases before the list existed).
///
/// The whole history, not only the latest rotation: a rotation that is due
/// can run after a forced one, and the same reason given again then (by a
/// replica whose write lost to that rotation, or by a rerun) must still be
/// "nothing to do", never recorded on the newer rotation or run again.
fn already_forced(state: &SignerState, reason: &str) -> bool {
    state.forced_rotation_reason.as_deref() == Some(reason)
        || state.history.iter().rev().any(|r| r.satisfied(reason))
}

/// A leaf request with its issued certificate, if any.
type LeafEntry<'a> = (&'a LeafRequest, Option<&'a IssuedLeaf>);

/// The leaf `name` after the input's changes so far (`overrides`, where
/// None means removed) over `state`'s.
fn lookup_leaf<'a>(
    state: &'a SignerState,
    overrides: &BTreeMap<&str, Option<LeafEntry<'a>>>,
    name: &str,
) -> Option<LeafEntry<'a>> {
    match overrides.get(name) {
        Some(entry) => *entry,
        None => state
            .leaves
            .get(name)
            .map(|l| (&*l.request, l.issued.as_ref())),
    }
}

/// A plain request may add names and change the lifetime of an existing
/// leaf; changing its kind or dropping names breaks whoever relies on them,
/// so that needs [`LeafChange::Replace`].
fn refuse_narrowing(name: &str, before: &LeafRequest, after: &LeafRequest) -> Result<()> {
    let mut changes = Vec::new();
    if before.kind != after.kind {
        changes.push(format!(
            "its kind would change from {} to {}",
            before.kind, after.kind
        ));
    }
    let dropped = before.names_missing_from(after);
    if !dropped.is_empty() {
        changes.push(format!("it would lose {}", dropped.join(", ")));
    }
    if changes.is_empty() {
        return Ok(());
    }
    Err(RotateError::Signer(
        crate::SignerError::LeafChangeNeedsReplace {
            name: name.to_string(),
            changes: changes.join(" and "),
        },
    ))
}

fn normal_bridge_until(
    old: &Certificate,
    now: OffsetDateTime,
    min_trust: Duration,
) -> OffsetDateTime {
    old.not_after()
        .max(pki_core::datetime::truncate(now + min_trust))
}

pub(crate) fn next_check(
    state: &SignerState,
    policy: &SignerPolicy,
    now: OffsetDateTime,
) -> OffsetDateTime {
    // The leaves' earliest refresh after `now`, in Unix nanoseconds: one
    // comparison of integers per leaf.
    let now_nanos = now.unix_timestamp_nanos();
    let refresh = RefreshTimes::new(policy.leaf_refresh_fraction);
    let earliest = state
        .leaves
        .values()
        .filter_map(|leaf| leaf.issued.as_ref())
        .map(|issued| refresh.of(&issued.cert))
        .filter(|&at| at > now_nanos)
        .min();
    next_check_from(state, policy, now, earliest)
}

/// [`next_check`] with the leaves' earliest refresh after `now` (in Unix
/// nanoseconds) already found.
fn next_check_from(
    state: &SignerState,
    policy: &SignerPolicy,
    now: OffsetDateTime,
    earliest: Option<i128>,
) -> OffsetDateTime {
    // Rotation needs less than M left: at NotAfter - M exactly, M is left,
    // so the first second the decision changes is one later.
    let due = state.rotation_due_at(policy);
    let mut t = due.checked_add(Duration::SECOND).unwrap_or(due);
    // An imported CA is never rotated here (only its issuer can replace
    // it): once its rotation time has passed it is no reason to wake, or a
    // controller would wake at once, every time, until the CA's end.
    let end = state.ca.cert.not_after();
    if state.external.is_some()
        && t <= now
        && let Some(after_end) = end.checked_add(Duration::SECOND)
        && after_end > now
    {
        t = after_end;
    }
    let mut consider = |x: OffsetDateTime| {
        if x > now && x < t {
            t = x;
        }
    };
    if let Some(at) = earliest.and_then(|at| OffsetDateTime::from_unix_timestamp_nanos(at).ok()) {
        consider(at);
    }
    for c in state.bundle.certs() {
        // Certificates may end at 9999-12-31T23:59:59, the last encodable second.
        if let Some(t) = c.not_after().checked_add(Duration::SECOND) {
            consider(t);
        }
    }
    if let Some(retires) = super::token_moves::wake(state) {
        consider(retires);
    }
    if let Some(b) = &state.bridge
        && let Some(t) = b.not_after().checked_add(Duration::SECOND)
    {
        consider(t);
    }
    t.max(now)
}
