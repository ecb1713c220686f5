//! The signer engine: service-CA rotation with two cross-signed bridges.
//!
//! [`SignerEngine`] is the [`Engine`]: `plan` looks at a [`SignerState`]
//! (the signer's document) and a [`SignerInput`] at a time `now` and
//! decides; `apply` executes the decision with an injected RNG and returns
//! the new document, the events and the next wake-up time. Neither reads a
//! clock, a file or the environment.
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

use crate::engine::{Engine, Outcome};
use crate::error::{Result, RotateError};
use crate::leaf::{IssuedLeaf, Leaf, LeafDecision, LeafReason, LeafRequest, validate_leaf_name};
use pki_core::{
    Bundle, Certificate, CertificateAuthority, CertificateParams, KeyAlgorithm, PrivateKey,
    RotationPolicy, cross_sign, datetime::rfc3339,
};
use rand_core::CryptoRng;
use std::borrow::Cow;
use std::collections::BTreeMap;
use time::{Duration, OffsetDateTime};

pub mod document;

/// The store key of the signer's document (the CLI's, and the default of
/// every embedder that keeps one signer per store).
pub const STORE_KEY: &str = "signer";

pub use crate::leaf::DEFAULT_LEAF_LIFETIME;
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
    /// A probe leaf it issued at the rotation, followed by the chain it was
    /// served with (PEM): stands for the serving chains of servers that
    /// have not refreshed, in trust checks. Documents written before the
    /// chain was kept hold the probe alone.
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
    /// Safety checks an operator overrode to make this rotation happen
    /// (a failed validation of a supplied CA, a trust break allowed on
    /// purpose), each with what it found; the reason is in `reason`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overridden: Vec<OverriddenCheck>,
    /// Forced rotations this rotation satisfied besides its own reason, in
    /// the order they were recorded: a forced request that coincided with
    /// it or lost a race to it. Appended to, never rewritten, so every
    /// forced request that reported success is in the history.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forced_reasons: Vec<String>,
}

impl RotationRecord {
    /// Whether this rotation satisfied a forced rotation for `reason`.
    pub fn satisfied(&self, reason: &str) -> bool {
        matches!(&self.reason, RotationReason::Forced { reason: r } if r == reason)
            || self.forced_reasons.iter().any(|r| r == reason)
    }
}

/// A safety check that failed and was overridden by an operator.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OverriddenCheck {
    /// The check's stable name, as printed in reports (`chains-to-current-trust`).
    pub name: String,
    /// What the check found.
    pub detail: String,
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
    /// What follows bridge B in serving chains: empty when the previous CA
    /// was self-signed; the previous CA and its external intermediates when
    /// it was imported under someone else's root, so clients that trust
    /// only that root still find a path through bridge B. Kept with bridge
    /// B in `signer/intermediate-ca.crt`, after it.
    pub bridge_chain: Vec<Certificate>,
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
    /// The chain above an imported CA (None: pki generated the CA).
    pub external: Option<crate::external::ExternalCa>,
}

impl SignerState {
    /// Creates a signer with a new self-signed CA of subject `CN=<common_name>`.
    pub fn new<R: CryptoRng + ?Sized + 'static>(
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
            bridge_chain: Vec::new(),
            bundle,
            previous: None,
            forced_rotation_reason: None,
            leaves: BTreeMap::new(),
            history: Vec::new(),
            external: None,
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
            chain.extend(self.bridge_chain.iter().cloned());
        }
        if let Some(external) = &self.external
            && pki_core::issued_by(leaf, &self.ca.cert).issued_by
        {
            chain.extend(external.serving_suffix(&self.ca.cert));
        }
        chain
    }

    /// The latest NotAfter a leaf of the current CA may have besides the
    /// CA's own: the earliest NotAfter of an imported CA's external
    /// intermediates and root (None for a CA pki generated).
    pub fn leaf_not_after_limit(&self) -> Option<OffsetDateTime> {
        self.external
            .as_ref()
            .and_then(crate::external::ExternalCa::not_after)
    }

    /// Issues a leaf of the current CA, its NotAfter within the CA's and
    /// the chain's ([`SignerState::leaf_not_after_limit`]).
    pub(crate) fn issue_leaf<R: CryptoRng + ?Sized + 'static>(
        &self,
        request: &LeafRequest,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<IssuedLeaf> {
        crate::leaf::issue_leaf_within(&self.ca, request, now, self.leaf_not_after_limit(), rng)
    }

    /// When the current CA becomes due for automatic rotation: NotAfter − M.
    pub fn rotation_due_at(&self, policy: &SignerPolicy) -> OffsetDateTime {
        self.ca.cert.not_after() - policy.rotation.min_trust
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
    /// A leaf was removed on request; its certificate and key are gone.
    LeafRemoved {
        /// The leaf's name.
        name: String,
    },
    /// A forced rotation found the CA already rotated by a concurrent
    /// writer; that rotation is recorded as forced and none other is made.
    ForcedRotationSatisfied {
        /// The forced reason, now recorded.
        reason: String,
        /// Id of the CA the concurrent rotation made.
        by: String,
    },
    /// The request was carried out before: nothing changes.
    AlreadyDone {
        /// What was done, and when.
        note: String,
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
            Event::LeafRemoved { name } => write!(f, "removed {name}"),
            Event::ForcedRotationSatisfied { reason, by } => write!(
                f,
                "forced rotation ({reason}) already done by a concurrent rotation to {by}; recorded as forced"
            ),
            Event::AlreadyDone { note } => write!(f, "nothing to do: {note}"),
        }
    }
}

/// A change to the leaves a signer keeps, carried by [`SignerInput`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeafChange {
    /// Add the leaf `name`, or change its request. It is issued (or
    /// re-issued, when its names or kind changed) in the same step.
    Request {
        /// The leaf's name.
        name: String,
        /// What it should look like.
        request: LeafRequest,
    },
    /// Stop keeping the leaf `name`: its certificate and key leave the document.
    Remove {
        /// The leaf's name.
        name: String,
    },
    /// Issue a new key and certificate for the existing leaf `name` now,
    /// whether or not it is due.
    Renew {
        /// The leaf's name.
        name: String,
    },
    /// Like `Request`, but may also change the kind of an existing leaf or
    /// drop some of its names, which `Request` refuses: clients that rely on
    /// the old kind or names stop working, so it must be asked for on purpose.
    Replace {
        /// The leaf's name.
        name: String,
        /// What it should look like.
        request: LeafRequest,
    },
}

impl LeafChange {
    /// The leaf's name.
    pub fn name(&self) -> &str {
        match self {
            LeafChange::Request { name, .. }
            | LeafChange::Remove { name }
            | LeafChange::Renew { name }
            | LeafChange::Replace { name, .. } => name,
        }
    }
}

/// What a caller asks of the signer besides time. The default asks for
/// nothing: the periodic controller step that rotates when due and keeps
/// leaves fresh.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SignerInput {
    /// A new policy; None keeps the document's.
    pub policy: Option<SignerPolicy>,
    /// Rotate now, once per distinct reason.
    pub forced: Option<ForcedRotation>,
    /// Leaves to add, change or remove, applied in order.
    pub leaves: Vec<LeafChange>,
    /// A forced rotation that a concurrent rotation already satisfied (set
    /// by [`SignerEngine::rebase`] when the driver lost a race): its reason
    /// is recorded on the latest rotation instead of rotating again.
    pub satisfied_forced_reason: Option<String>,
    /// Rotate even when the pre-flight finds consumers that would stop
    /// trusting each other (an expired CA, a rotation while clients may
    /// still hold the bundle of two rotations ago), for this reason. The
    /// reason and each break are recorded in the rotation's history entry.
    pub allow_trust_break: Option<String>,
    /// Skip the trust-break pre-flight altogether (no refusal, nothing
    /// recorded): only for callers that cannot pass `allow_trust_break`
    /// yet (the C ABI) and keep their earlier behaviour.
    pub skip_trust_break_check: bool,
}

impl SignerInput {
    /// An input that forces a rotation with `forced`.
    pub fn forced(forced: ForcedRotation) -> Self {
        SignerInput {
            forced: Some(forced),
            ..SignerInput::default()
        }
    }

    /// An input that adds or changes the leaf `name`.
    pub fn request(name: impl Into<String>, request: LeafRequest) -> Self {
        SignerInput {
            leaves: vec![LeafChange::Request {
                name: name.into(),
                request,
            }],
            ..SignerInput::default()
        }
    }
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
    /// The operator's reason to rotate although trust breaks (from the input).
    pub allow_trust_break: Option<String>,
    /// The rotation is a forced one for a compromised key (no bridges).
    pub compromise: bool,
    /// Skip the trust-break pre-flight (from the input).
    pub skip_trust_break_check: bool,
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
            && self.record_forced_reason.is_none()
            && !self.policy_changed
    }
}

/// The service-CA signer as an [`Engine`]: its document is [`SignerState`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SignerEngine;

impl Engine for SignerEngine {
    type Document = SignerState;
    type Input = SignerInput;
    type Plan = Plan;
    type Event = Event;

    fn plan(doc: &SignerState, input: &SignerInput, now: OffsetDateTime) -> Result<Plan> {
        plan(doc, input, now)
    }

    fn apply<'d, R: CryptoRng + ?Sized + 'static>(
        doc: &'d SignerState,
        plan: Plan,
        rng: &mut R,
    ) -> Result<Outcome<'d, SignerState, Event>> {
        apply(doc, plan, rng)
    }

    /// A forced rotation whose write lost to a concurrent rotation is
    /// satisfied by it: the CA it asked to replace is already replaced. It
    /// is then recorded as the reason of that rotation, and not run again
    /// (two rotations in a row would drop the CA that clients holding the
    /// oldest bundle trust). An emergency rotation (a short grace, or no
    /// bridges after a compromise) is not satisfied by a normal one and
    /// still runs.
    fn rebase(input: &mut SignerInput, read: &SignerState, fresh: &SignerState) {
        if fresh.ca.cert == read.ca.cert {
            return;
        }
        if let Some(f) = &input.forced
            && f.grace.is_none()
            && !f.no_bridges
        {
            input.satisfied_forced_reason = Some(f.reason.clone());
            input.forced = None;
        }
    }
}

/// Decides what to do at `now`.
///
/// `input.forced` asks for a rotation; it runs only when its reason differs
/// from the recorded one. A forced rotation that coincides with an automatic
/// one is a single rotation, recorded with the forced reason.
pub fn plan(state: &SignerState, input: &SignerInput, now: OffsetDateTime) -> Result<Plan> {
    let policy = input.policy.unwrap_or(state.policy);
    policy.validate()?;
    let forced = input.forced.as_ref();
    let ca = &state.ca.cert;
    if now < ca.not_before() {
        return Err(RotateError::ClockBeforeCa {
            now,
            not_before: ca.not_before(),
        });
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
    let mut relabel_latest_rotation = false;
    if let Some(f) = forced {
        if f.reason.trim().is_empty() {
            return Err(RotateError::EmptyForcedReason);
        }
        crate::text::check_reason("the forced rotation's reason", &f.reason)?;
        if let Some(g) = f.grace
            && g <= Duration::ZERO
        {
            return Err(RotateError::InvalidGrace(g));
        }
        // A rotation at this very instant that no forced reason asked for
        // (a due one, by another replica that read and wrote first) is the
        // one this request asks for: forced and due at once make a single
        // rotation, recorded as forced. An emergency still rotates.
        let coinciding = state.history.last().is_some_and(|latest| {
            latest.at == now && !matches!(latest.reason, RotationReason::Forced { .. })
        }) && f.grace.is_none()
            && !f.no_bridges;
        let recorded = already_forced(state, &f.reason);
        if !recorded && coinciding {
            record_forced_reason = Some(f.reason.clone());
            relabel_latest_rotation = true;
        } else if !recorded {
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
    if let Some(reason) = &input.satisfied_forced_reason
        && forced.is_none()
        && !already_forced(state, reason)
        && !state.history.is_empty()
    {
        record_forced_reason = Some(reason.clone());
        relabel_latest_rotation = true;
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
    crate::external::hold_rotation(state, &mut rotation)?;
    // Bridges from an expired CA would themselves be expired or vouch for a dead key.
    if let Some(r) = rotation.as_mut()
        && now > ca.not_after()
    {
        r.bridge_until = None;
    }

    // The requests after the input's changes, as the leaves the input
    // names (None: removed) over the document's: only real changes are
    // kept, and a plan without leaf changes copies nothing per leaf.
    let mut overrides: BTreeMap<&str, Option<LeafEntry<'_>>> = BTreeMap::new();
    let known = |overrides: &BTreeMap<&str, Option<LeafEntry<'_>>>, name: &str| {
        lookup_leaf(state, overrides, name).is_some()
    };
    let mut leaf_changes = Vec::new();
    let mut renew = Vec::new();
    for change in &input.leaves {
        validate_leaf_name(change.name())?;
        match change {
            LeafChange::Request { name, request } | LeafChange::Replace { name, request } => {
                request.validate()?;
                check_issuable(state, name, request, now)?;
                let before = lookup_leaf(state, &overrides, name).map(|(r, _)| r);
                if let (Some(before), LeafChange::Request { .. }) = (before, change) {
                    refuse_narrowing(name, before, request)?;
                }
                let issued = state.leaves.get(name).and_then(|l| l.issued.as_ref());
                if before != Some(request) {
                    leaf_changes.push(LeafChange::Request {
                        name: name.clone(),
                        request: request.clone(),
                    });
                }
                overrides.insert(name, Some((request, issued)));
            }
            LeafChange::Remove { name } => {
                if !known(&overrides, name) {
                    return Err(RotateError::UnknownLeaf(name.clone()));
                }
                overrides.insert(name, None);
                leaf_changes.push(change.clone());
            }
            LeafChange::Renew { name } => {
                if !known(&overrides, name) {
                    return Err(RotateError::UnknownLeaf(name.clone()));
                }
                renew.push(name.as_str());
            }
        }
    }

    let mut leaves = Vec::new();
    let mut consider = |name: &str, request: &LeafRequest, issued: Option<&IssuedLeaf>| {
        let reason = if rotation.is_some() {
            Some(LeafReason::IssuerRotated)
        } else {
            crate::leaf::decide(request, issued, ca, now, policy.leaf_refresh_fraction)
                .or_else(|| renew.contains(&name).then_some(LeafReason::Renewed))
        };
        leaves.extend(reason.map(|reason| LeafDecision {
            name: name.to_string(),
            reason,
        }));
    };
    for (name, leaf) in &state.leaves {
        if !overrides.contains_key(name.as_str()) {
            consider(name, &leaf.request, leaf.issued.as_ref());
        }
    }
    for (name, entry) in &overrides {
        if let Some((request, issued)) = entry {
            consider(name, request, *issued);
        }
    }
    // In name order, as one pass over the merged requests would give.
    if !overrides.is_empty() {
        leaves.sort_by(|a, b| a.name.cmp(&b.name));
    }

    let mut prune = Vec::new();
    let mut drop_bridge = false;
    if rotation.is_none() {
        prune = state
            .bundle
            .certs()
            .iter()
            // The current CA's own anchor stays even when expired: an
            // imported CA's external root is the only certificate clients
            // trust it by, and a bundle without it would leave the store
            // unreadable instead of reporting the expiry.
            .filter(|c| {
                c.not_after() < now
                    && *c != ca
                    && state
                        .external
                        .as_ref()
                        .and_then(|e| e.root())
                        .is_none_or(|root| *c != root)
            })
            .cloned()
            .collect();
        drop_bridge = state.bridge.as_ref().is_some_and(|b| b.not_after() < now);
    }

    let compromise = forced.is_some_and(|f| f.no_bridges) && rotation.is_some();
    Ok(Plan {
        now,
        policy,
        policy_changed: policy != state.policy,
        rotation,
        record_forced_reason,
        relabel_latest_rotation,
        leaf_changes,
        leaves,
        prune,
        drop_bridge,
        allow_trust_break: input.allow_trust_break.clone(),
        compromise,
        skip_trust_break_check: input.skip_trust_break_check,
        next_check: next_check(state, &policy, now),
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
    crate::preflight::probe_issuance(
        &state.ca,
        &suffix,
        &state.bundle,
        request,
        state.leaf_not_after_limit(),
        now,
    )
    .map_err(|e| RotateError::LeafRefused {
        name: name.to_string(),
        reason: format!(
            "{} issued by {} would not verify for the clients of this store: {e}",
            request.names().join(", "),
            state.ca.cert.id()
        ),
    })
}

/// Whether a forced rotation for `reason` is recorded as done: by the
/// latest rotation (its own reason or one it satisfied), or as the reason
/// the document keeps (written by releases before the list existed).
fn already_forced(state: &SignerState, reason: &str) -> bool {
    state.forced_rotation_reason.as_deref() == Some(reason)
        || state.history.last().is_some_and(|r| r.satisfied(reason))
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
            .map(|l| (&l.request, l.issued.as_ref())),
    }
}

/// Executes `plan`, made from `state`, with `rng`. When the plan is empty
/// the outcome borrows `state`: nothing is copied.
pub fn apply<'d, R: CryptoRng + ?Sized + 'static>(
    state: &'d SignerState,
    plan: Plan,
    rng: &mut R,
) -> Result<Outcome<'d, SignerState, Event>> {
    if plan.is_empty() {
        return Ok(Outcome {
            document: Cow::Borrowed(state),
            events: Vec::new(),
            next_wake: plan.next_check,
        });
    }
    let mut next = state.clone();
    let mut events = Vec::new();
    let now = plan.now;
    next.policy = plan.policy;
    for change in &plan.leaf_changes {
        match change {
            LeafChange::Request { name, request } => match next.leaves.get_mut(name) {
                Some(leaf) => leaf.request = request.clone(),
                None => {
                    next.leaves.insert(
                        name.clone(),
                        Leaf {
                            request: request.clone(),
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
        let declared_compromise =
            matches!(&decision.reason, RotationReason::Forced { .. }) && plan.compromise;
        let breaks = if declared_compromise || plan.skip_trust_break_check {
            // A compromise rotation distrusts the previous CA on purpose.
            Vec::new()
        } else {
            crate::preflight::rotation_trust_breaks(state, &next, &new_probe.cert, now)
        };
        if !breaks.is_empty() {
            let Some(allowed) = &plan.allow_trust_break else {
                return Err(RotateError::TrustBreak {
                    breaks: breaks.iter().map(ToString::to_string).collect(),
                });
            };
            if let Some(record) = next.history.last_mut() {
                record
                    .overridden
                    .extend(breaks.iter().map(|b| b.overridden(allowed)));
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
    for decision in &plan.leaves {
        let Some(leaf) = next.leaves.get_mut(&decision.name) else {
            continue;
        };
        let issued = crate::leaf::issue_leaf_within(&next.ca, &leaf.request, now, limit, rng)?;
        events.push(Event::LeafReissued {
            name: decision.name.clone(),
            reason: decision.reason.clone(),
            id: issued.cert.id(),
        });
        leaf.issued = Some(issued);
    }
    // The wake-up time must come from the document just produced: a leaf
    // issued now has its own refresh time, a new CA its own rotation time.
    let next_wake = next_check(&next, &plan.policy, now);
    Ok(Outcome {
        document: Cow::Owned(next),
        events,
        next_wake,
    })
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
    Err(RotateError::LeafChangeNeedsReplace {
        name: name.to_string(),
        changes: changes.join(" and "),
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

pub(crate) fn next_check(
    state: &SignerState,
    policy: &SignerPolicy,
    now: OffsetDateTime,
) -> OffsetDateTime {
    // Rotation needs less than M left: at NotAfter - M exactly, M is left,
    // so the first second the decision changes is one later.
    let due = state.rotation_due_at(policy);
    let mut t = due.checked_add(Duration::SECOND).unwrap_or(due);
    let mut consider = |x: OffsetDateTime| {
        if x > now && x < t {
            t = x;
        }
    };
    // The leaves' earliest refresh after `now`, in Unix nanoseconds: one
    // comparison of integers per leaf.
    let now_nanos = now.unix_timestamp_nanos();
    let earliest = state
        .leaves
        .values()
        .filter_map(|leaf| leaf.issued.as_ref())
        .map(|issued| crate::leaf::refresh_at_nanos(&issued.cert, policy.leaf_refresh_fraction))
        .filter(|&at| at > now_nanos)
        .min();
    if let Some(at) = earliest.and_then(|at| OffsetDateTime::from_unix_timestamp_nanos(at).ok()) {
        consider(at);
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

/// The outcome of [`reconcile_external`].
#[derive(Debug, Clone)]
pub struct ExternalLeaf {
    /// The certificate and key to serve: the previous ones when up to date.
    pub issued: IssuedLeaf,
    /// The serving chain (leaf, then bridge B when present).
    pub chain: Vec<Certificate>,
    /// Why it was (re-)issued; None when the previous leaf is kept.
    pub reason: Option<LeafReason>,
    /// When it becomes due for refresh.
    pub refresh_at: OffsetDateTime,
}

/// Reconciles a leaf kept outside the signer state (in Kubernetes, each
/// serving certificate lives in its own Secret): keeps `previous` when it is
/// up to date, else issues a fresh key and certificate from the current CA.
pub fn reconcile_external<R: CryptoRng + ?Sized + 'static>(
    state: &SignerState,
    request: &LeafRequest,
    previous: Option<IssuedLeaf>,
    now: OffsetDateTime,
    rng: &mut R,
) -> Result<ExternalLeaf> {
    request.validate()?;
    let fraction = state.policy.leaf_refresh_fraction;
    let leaf = Leaf {
        request: request.clone(),
        issued: previous,
    };
    let (issued, reason) = match (
        crate::leaf::decide_leaf("leaf", &leaf, &state.ca.cert, now, fraction),
        leaf.issued,
    ) {
        (None, Some(kept)) => (kept, None),
        (decision, _) => {
            let reason = decision
                .map(|d| d.reason)
                .unwrap_or(LeafReason::NotYetIssued);
            (state.issue_leaf(request, now, rng)?, Some(reason))
        }
    };
    Ok(ExternalLeaf {
        chain: state.serving_chain(&issued.cert),
        refresh_at: crate::leaf::refresh_at(&issued.cert, fraction),
        issued,
        reason,
    })
}
