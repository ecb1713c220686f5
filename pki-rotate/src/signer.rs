//! The signer engine: service-CA rotation with two cross-signed bridges.
//!
//! `plan` looks at a [`SignerState`] at a time `now` and decides; `apply`
//! executes the decision with an injected RNG and returns the new state and
//! the events. Neither reads a clock, a file or the environment.
//!
//! When the CA is rotated (less than M of validity left, or a forced rotation
//! with a new reason):
//!
//! - the new CA reuses the Subject, with a new key and lifetime D;
//! - **bridge A** is the old CA's certificate re-signed by the new key, valid
//!   until max(old NotAfter, now + M). It goes into the bundle, so clients
//!   that refreshed their bundle still trust servers that have not refreshed
//!   their certificate;
//! - **bridge B** is the new CA's certificate signed by the old key. It is
//!   appended to every serving chain issued afterwards, so clients that have
//!   not refreshed their bundle (they trust only the old CA) trust servers
//!   that already serve a certificate from the new CA;
//! - the bundle becomes [new CA, bridge A] (plus the old self-signed CA while
//!   it is valid, when the policy keeps it).

use crate::error::{Result, RotateError};
use crate::leaf::{LeafDecision, LeafReason, LeafRequest, decide_leaf};
use pki_core::{
    Bundle, Certificate, CertificateAuthority, CertificateParams, KeyAlgorithm, PrivateKey,
    RotationPolicy, cross_sign, datetime::rfc3339,
};
use rand_core::CryptoRng;
use std::collections::BTreeMap;
use time::{Duration, OffsetDateTime};

/// Default leaf lifetime: one year, cut at the CA's NotAfter.
pub const DEFAULT_LEAF_LIFETIME: Duration = Duration::days(365);
/// Default refresh fraction: a leaf is re-issued when less than 20% of its
/// lifetime remains (cert-manager renews at two thirds; 20% left is the same
/// idea with more slack for daily runs).
pub const DEFAULT_REFRESH_FRACTION: f64 = 0.2;

/// Everything that decides how the signer behaves, besides time.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct SignerPolicy {
    /// D and M (and optionally I) for the CA.
    pub rotation: RotationPolicy,
    /// Key type of new CAs.
    pub key_algorithm: KeyAlgorithm,
    /// Keep the previous self-signed CA in the bundle while it is valid,
    /// besides bridge A. Off by default, as in OpenShift's service CA: bridge
    /// A already carries the previous key.
    #[serde(default)]
    pub keep_previous_root: bool,
    /// Re-issue a leaf when less than this fraction of its lifetime remains.
    #[serde(default = "default_refresh")]
    pub leaf_refresh_fraction: f64,
}

fn default_refresh() -> f64 {
    DEFAULT_REFRESH_FRACTION
}

impl Default for SignerPolicy {
    fn default() -> Self {
        SignerPolicy {
            rotation: RotationPolicy::default(),
            key_algorithm: KeyAlgorithm::EcdsaP256,
            keep_previous_root: false,
            leaf_refresh_fraction: DEFAULT_REFRESH_FRACTION,
        }
    }
}

impl SignerPolicy {
    /// Validates the rotation math and the refresh fraction.
    pub fn validate(&self) -> Result<()> {
        self.rotation.validate()?;
        let f = self.leaf_refresh_fraction;
        if !(f > 0.0 && f < 1.0) {
            return Err(RotateError::InvalidRefreshFraction(f));
        }
        Ok(())
    }
}

/// What is remembered about the CA that was rotated out.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PreviousCa {
    /// Its human id (`<SKI prefix>-<serial>`).
    pub id: String,
    /// Its own NotAfter.
    #[serde(with = "time::serde::rfc3339")]
    pub not_after: OffsetDateTime,
    /// Until when it stays trusted through bridge A (None: no bridges were issued).
    #[serde(with = "time::serde::rfc3339::option")]
    pub trusted_until: Option<OffsetDateTime>,
    /// Its self-signed certificate (PEM): the bundle of clients that have
    /// not refreshed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
    /// A probe leaf it issued at the rotation (PEM): stands for the serving
    /// certificates of servers that have not refreshed, in trust checks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
}

/// One rotation, as recorded in the history.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RotationRecord {
    /// When it happened.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// Why.
    pub reason: RotationReason,
    /// Id of the CA rotated out.
    pub from: String,
    /// Id of the new CA.
    pub to: String,
    /// Until when the old CA stays trusted (None: no bridges).
    #[serde(with = "time::serde::rfc3339::option")]
    pub previous_trusted_until: Option<OffsetDateTime>,
}

/// A certificate issued for a leaf request, with its key.
#[derive(Debug, Clone)]
pub struct IssuedLeaf {
    /// The leaf certificate.
    pub cert: Certificate,
    /// Its private key.
    pub key: PrivateKey,
}

/// A named leaf: what was asked for, and what was issued.
#[derive(Debug, Clone)]
pub struct Leaf {
    /// The request: names, profile, lifetime.
    pub request: LeafRequest,
    /// The current certificate, once issued.
    pub issued: Option<IssuedLeaf>,
}

/// The whole state of a signer: its CA, bridges, bundle and leaves.
#[derive(Debug, Clone)]
pub struct SignerState {
    /// The policy this state was created or last applied with.
    pub policy: SignerPolicy,
    /// The current CA (certificate and key).
    pub ca: CertificateAuthority,
    /// Bridge B: the current CA signed by the previous CA's key, appended to
    /// serving chains. None before the first rotation or after it expired.
    pub bridge: Option<Certificate>,
    /// The CA bundle clients should trust.
    pub bundle: Bundle,
    /// The CA rotated out last, if any.
    pub previous: Option<PreviousCa>,
    /// The reason of the last forced rotation: a forced rotation runs once per reason.
    pub forced_rotation_reason: Option<String>,
    /// Leaves by name.
    pub leaves: BTreeMap<String, Leaf>,
    /// Every rotation so far, oldest first.
    pub history: Vec<RotationRecord>,
}

impl SignerState {
    /// Creates a signer with a new self-signed CA of subject `CN=<common_name>`.
    pub fn new<R: CryptoRng + ?Sized>(
        common_name: &str,
        policy: SignerPolicy,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Self> {
        policy.validate()?;
        let ca = CertificateAuthority::generate_root(
            common_name,
            policy.key_algorithm,
            now,
            policy.rotation.lifetime,
            rng,
        )?;
        let bundle = Bundle::from_certs([ca.cert.clone()]);
        Ok(SignerState {
            policy,
            ca,
            bridge: None,
            bundle,
            previous: None,
            forced_rotation_reason: None,
            leaves: BTreeMap::new(),
            history: Vec::new(),
        })
    }

    /// Adds or changes a leaf request. The next plan issues it (new name or
    /// changed names) without touching the other leaves.
    pub fn request_leaf(&mut self, name: &str, request: LeafRequest) -> Result<()> {
        validate_leaf_name(name)?;
        request.validate()?;
        match self.leaves.get_mut(name) {
            Some(leaf) => leaf.request = request,
            None => {
                self.leaves.insert(
                    name.to_string(),
                    Leaf {
                        request,
                        issued: None,
                    },
                );
            }
        }
        Ok(())
    }

    /// The chain a server presents for an issued leaf: the leaf, then
    /// bridge B when the leaf comes from the current CA and a bridge exists.
    pub fn serving_chain(&self, leaf: &Certificate) -> Vec<Certificate> {
        let mut chain = vec![leaf.clone()];
        if let Some(bridge) = &self.bridge
            && pki_core::issued_by(leaf, &self.ca.cert).issued_by
        {
            chain.push(bridge.clone());
        }
        chain
    }

    /// When the current CA becomes due for automatic rotation: NotAfter − M.
    pub fn rotation_due_at(&self, policy: &SignerPolicy) -> OffsetDateTime {
        self.ca.cert.not_after() - policy.rotation.min_trust
    }
}

/// Leaf names become directory names: keep them boring.
pub fn validate_leaf_name(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.'));
    if ok {
        Ok(())
    } else {
        Err(RotateError::InvalidLeafName(name.to_string()))
    }
}

/// A request to rotate now, whatever the validity left.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ForcedRotation {
    /// Why. A rotation runs once per distinct reason.
    pub reason: String,
    /// Emergency: how long the old CA stays trusted through bridge A,
    /// instead of max(old NotAfter, now + M).
    pub grace: Option<Duration>,
    /// Compromise: issue no bridges at all; the old CA is distrusted at once.
    pub no_bridges: bool,
}

impl ForcedRotation {
    /// A forced rotation with the normal grace period.
    pub fn new(reason: impl Into<String>) -> Self {
        ForcedRotation {
            reason: reason.into(),
            grace: None,
            no_bridges: false,
        }
    }
}

/// Why the CA is rotated.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
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
}

impl std::fmt::Display for RotationReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
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

/// What `plan` decided. Borrow of the state it was made from; `apply` turns
/// it into the next state.
#[derive(Debug, Clone)]
pub struct Plan<'a> {
    state: &'a SignerState,
    policy: SignerPolicy,
    now: OffsetDateTime,
    /// The CA rotation, if any.
    pub rotation: Option<RotationDecision>,
    /// The new forced-rotation reason to record (set whenever a forced rotation runs).
    pub record_forced_reason: Option<String>,
    /// One decision per leaf that must be (re-)issued.
    pub leaves: Vec<LeafDecision>,
    /// Bundle members that expired and are dropped.
    pub prune: Vec<Certificate>,
    /// Bridge B expired and is dropped from serving chains.
    pub drop_bridge: bool,
    /// When the next decision about the *current* state could differ
    /// without any input changing. For a plan that changes something, the
    /// wake-up time after applying it is the one [`reconcile`] returns.
    pub next_check: OffsetDateTime,
}

impl Plan<'_> {
    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        self.rotation.is_none()
            && self.leaves.is_empty()
            && self.prune.is_empty()
            && !self.drop_bridge
            && self.record_forced_reason.is_none()
            && self.policy == self.state.policy
    }

    /// The time the plan was made for.
    pub fn now(&self) -> OffsetDateTime {
        self.now
    }

    /// The state the plan was made from.
    pub fn state(&self) -> &SignerState {
        self.state
    }
}

/// What happened, for logs, Kubernetes events and the CLI.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum Event {
    /// The CA was rotated.
    Rotated {
        /// Why.
        reason: RotationReason,
        /// Id of the CA rotated out.
        previous: String,
        /// Id of the new CA.
        current: String,
        /// Until when the previous CA stays trusted (None: distrusted at once).
        #[serde(with = "time::serde::rfc3339::option")]
        previous_trusted_until: Option<OffsetDateTime>,
    },
    /// A leaf was issued or re-issued.
    LeafReissued {
        /// The leaf's name.
        name: String,
        /// Why.
        reason: LeafReason,
        /// The new certificate's id.
        id: String,
    },
    /// Expired certificates left the bundle.
    BundlePruned {
        /// Ids of the certificates removed.
        removed: Vec<String>,
    },
    /// Bridge B expired and is no longer appended to serving chains.
    BridgeRetired {
        /// Its id.
        id: String,
    },
}

impl std::fmt::Display for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Event::Rotated {
                reason,
                previous,
                current,
                previous_trusted_until,
            } => {
                write!(f, "rotated CA {previous} -> {current} ({reason}); ")?;
                match previous_trusted_until {
                    Some(t) => write!(f, "previous CA trusted until {}", rfc3339(*t)),
                    None => write!(f, "previous CA no longer trusted"),
                }
            }
            Event::LeafReissued { name, reason, id } => {
                write!(f, "issued {name} ({id}): {reason}")
            }
            Event::BundlePruned { removed } => {
                write!(
                    f,
                    "removed expired bundle certificates {}",
                    removed.join(", ")
                )
            }
            Event::BridgeRetired { id } => write!(f, "retired expired bridge {id}"),
        }
    }
}

/// Decides what to do at `now`.
///
/// `forced` asks for a rotation; it runs only when its reason differs from
/// the recorded one. A forced rotation that coincides with an automatic one
/// is a single rotation, recorded with the forced reason.
pub fn plan<'a>(
    state: &'a SignerState,
    policy: &SignerPolicy,
    now: OffsetDateTime,
    forced: Option<&ForcedRotation>,
) -> Result<Plan<'a>> {
    policy.validate()?;
    let ca = &state.ca.cert;
    if now < ca.not_before() {
        return Err(RotateError::clock(now, ca.not_before()));
    }
    // Everything below adds at most D (or the forced grace) to `now`; refuse
    // a time where that leaves the encodable range instead of overflowing.
    pki_core::datetime::add(now, policy.rotation.lifetime)?;
    if let Some(g) = forced.and_then(|f| f.grace) {
        pki_core::datetime::add(now, g)?;
    }
    let min_trust = policy.rotation.min_trust;
    let remaining = ca.not_after() - now;

    let mut record_forced_reason = None;
    let mut rotation = None;
    if let Some(f) = forced {
        if f.reason.trim().is_empty() {
            return Err(RotateError::EmptyForcedReason);
        }
        if let Some(g) = f.grace
            && g <= Duration::ZERO
        {
            return Err(RotateError::InvalidGrace(pki_core::policy::human(g)));
        }
        if state.forced_rotation_reason.as_deref() != Some(f.reason.as_str()) {
            record_forced_reason = Some(f.reason.clone());
            let bridge_until = if f.no_bridges {
                None
            } else {
                Some(match f.grace {
                    Some(g) => now + g,
                    None => normal_bridge_until(ca, now, min_trust),
                })
            };
            rotation = Some(RotationDecision {
                reason: RotationReason::Forced {
                    reason: f.reason.clone(),
                },
                bridge_until,
            });
        }
    }
    if rotation.is_none() && remaining < min_trust {
        rotation = Some(RotationDecision {
            reason: RotationReason::Expiring {
                remaining_seconds: remaining.whole_seconds(),
                min_trust_seconds: min_trust.whole_seconds(),
            },
            bridge_until: Some(normal_bridge_until(ca, now, min_trust)),
        });
    }
    // Bridges from an expired CA would themselves be expired or vouch for a dead key.
    if let Some(r) = rotation.as_mut()
        && now > ca.not_after()
    {
        r.bridge_until = None;
    }

    let mut leaves = Vec::new();
    for (name, leaf) in &state.leaves {
        let decision = if rotation.is_some() {
            Some(LeafDecision {
                name: name.clone(),
                reason: LeafReason::IssuerRotated,
            })
        } else {
            decide_leaf(name, leaf, ca, now, policy.leaf_refresh_fraction)
        };
        leaves.extend(decision);
    }

    let mut prune = Vec::new();
    let mut drop_bridge = false;
    if rotation.is_none() {
        prune = state
            .bundle
            .certs()
            .iter()
            .filter(|c| c.not_after() < now && *c != ca)
            .cloned()
            .collect();
        drop_bridge = state.bridge.as_ref().is_some_and(|b| b.not_after() < now);
    }

    let next_check = next_check(state, policy, now);
    Ok(Plan {
        state,
        policy: *policy,
        now,
        rotation,
        record_forced_reason,
        leaves,
        prune,
        drop_bridge,
        next_check,
    })
}

fn normal_bridge_until(
    old: &Certificate,
    now: OffsetDateTime,
    min_trust: Duration,
) -> OffsetDateTime {
    old.not_after()
        .max(pki_core::datetime::truncate(now + min_trust))
}

fn next_check(state: &SignerState, policy: &SignerPolicy, now: OffsetDateTime) -> OffsetDateTime {
    let mut t = state.rotation_due_at(policy);
    let mut consider = |x: OffsetDateTime| {
        if x > now && x < t {
            t = x;
        }
    };
    for leaf in state.leaves.values() {
        if let Some(issued) = &leaf.issued {
            consider(crate::leaf::refresh_at(
                &issued.cert,
                policy.leaf_refresh_fraction,
            ));
        }
    }
    for c in state.bundle.certs() {
        // Certificates may end at 9999-12-31T23:59:59, the last encodable second.
        if let Some(t) = c.not_after().checked_add(Duration::SECOND) {
            consider(t);
        }
    }
    if let Some(b) = &state.bridge
        && let Some(t) = b.not_after().checked_add(Duration::SECOND)
    {
        consider(t);
    }
    t.max(now)
}

/// Executes a plan with `rng`, returning the next state and what happened.
pub fn apply<R: CryptoRng + ?Sized>(
    plan: Plan<'_>,
    rng: &mut R,
) -> Result<(SignerState, Vec<Event>)> {
    let mut next = plan.state.clone();
    let mut events = Vec::new();
    let now = plan.now;
    next.policy = plan.policy;

    if let Some(decision) = &plan.rotation {
        let old = plan.state.ca.clone();
        // A serving certificate of the old CA, to prove below that servers
        // which have not refreshed stay trusted.
        let old_probe = if old.cert.is_valid_at(now) && old.cert.not_after() > now {
            Some(crate::leaf::issue_leaf(
                &old,
                &probe_request(&plan.policy),
                now,
                rng,
            )?)
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
        });
        let new_probe = crate::leaf::issue_leaf(&new, &probe_request(&plan.policy), now, rng)?;
        next.previous = Some(PreviousCa {
            id: old.cert.id(),
            not_after: old.cert.not_after(),
            trusted_until,
            certificate: Some(old.cert.to_pem()),
            probe: old_probe.as_ref().map(|p| p.cert.to_pem()),
        });
        next.ca = new;
        next.bridge = bridge_b;
        next.bundle = bundle;
        preflight_rotation(
            plan.state,
            &next,
            old_probe
                .as_ref()
                .map(|p| &p.cert)
                .filter(|_| trusted_until.is_some()),
            &new_probe.cert,
            now,
            trusted_until,
        )?;
    }
    if let Some(reason) = &plan.record_forced_reason {
        next.forced_rotation_reason = Some(reason.clone());
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
        events.push(Event::BridgeRetired { id: b.id() });
    }

    for decision in &plan.leaves {
        let Some(leaf) = next.leaves.get_mut(&decision.name) else {
            continue;
        };
        let issued = crate::leaf::issue_leaf(&next.ca, &leaf.request, now, rng)?;
        events.push(Event::LeafReissued {
            name: decision.name.clone(),
            reason: decision.reason.clone(),
            id: issued.cert.id(),
        });
        leaf.issued = Some(issued);
    }
    Ok((next, events))
}

fn probe_request(policy: &SignerPolicy) -> LeafRequest {
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
    for cell in crate::preflight::matrix(&inputs, &times) {
        if let Err(reason) = &cell.result {
            return Err(RotateError::TrustCheckFailed {
                cell: cell.label(),
                reason: reason.clone(),
            });
        }
    }
    Ok(())
}

/// Plans and applies in one call: the usual controller step.
pub fn reconcile<R: CryptoRng + ?Sized>(
    state: &SignerState,
    policy: &SignerPolicy,
    now: OffsetDateTime,
    forced: Option<&ForcedRotation>,
    rng: &mut R,
) -> Result<(SignerState, Vec<Event>, OffsetDateTime)> {
    let p = plan(state, policy, now, forced)?;
    let (s, e) = apply(p, rng)?;
    // The wake-up time must come from the state just produced: a leaf issued
    // now has its own refresh time.
    let next_check = next_check(&s, policy, now);
    Ok((s, e, next_check))
}
