//! A read-only report of a signer at a given time: what exists, when it
//! expires, what the engine would do next, and whether anything is broken.
//!
//! [`SignerStatus`] serialises to the documented, versioned JSON of
//! `pki status --json` (schema `docs/status.schema.json`, version
//! [`SCHEMA_VERSION`]): results are tagged objects, pending actions are
//! structured, and no certificate or key material is included.

use crate::engines::leaf::{LeafKind, LeafReason};
use crate::engines::signer::{
    Plan, RotationReason, RotationRecord, SignerInput, SignerState, plan,
};
use crate::model::error::Result;
use pki_core::Certificate;
use time::OffsetDateTime;

mod health;

pub(crate) use health::ok_until;
use health::{previous_trusted_at, problems_at, replacement_due, trust_summaries};

/// The version of the JSON report. Raised when a field changes meaning or
/// disappears; adding a field does not raise it.
pub const SCHEMA_VERSION: u32 = 1;

/// One certificate in a report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct CertSummary {
    /// Human id (`<SKI prefix>-<serial>`).
    pub id: String,
    /// Subject DN.
    pub subject: String,
    /// Issuer DN.
    pub issuer: String,
    /// NotBefore.
    #[serde(with = "time::serde::rfc3339")]
    pub not_before: OffsetDateTime,
    /// NotAfter.
    #[serde(with = "time::serde::rfc3339")]
    pub not_after: OffsetDateTime,
    /// Seconds until NotAfter (negative when expired).
    pub expires_in_seconds: i64,
    /// Whether the report time lies within its validity.
    pub valid: bool,
}

impl CertSummary {
    /// Summarises `cert` at `now`.
    pub fn of(cert: &Certificate, now: OffsetDateTime) -> Self {
        CertSummary {
            id: cert.id(),
            subject: cert.subject().to_string(),
            issuer: cert.issuer().to_string(),
            not_before: cert.not_before(),
            not_after: cert.not_after(),
            expires_in_seconds: (cert.not_after() - now).whole_seconds(),
            valid: cert.is_valid_at(now),
        }
    }
}

/// What a bundle member is there for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum BundleRole {
    /// The current CA.
    CurrentCa,
    /// Bridge A: the previous CA's key, certified by the current CA.
    BridgeA,
    /// A self-signed CA other than the current one (the previous root, kept by policy).
    PreviousRoot,
    /// Anything else (an imported certificate).
    Other,
}

/// A bundle member in a report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BundleMember {
    /// What it is there for.
    pub role: BundleRole,
    /// The certificate.
    #[serde(flatten)]
    pub cert: CertSummary,
}

/// The CA rotated out last, without its certificate.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PreviousSummary {
    /// Its id.
    pub id: String,
    /// Its own NotAfter.
    #[serde(with = "time::serde::rfc3339")]
    pub not_after: OffsetDateTime,
    /// Until when it stays trusted through bridge A (null: distrusted).
    #[serde(with = "time::serde::rfc3339::option")]
    pub trusted_until: Option<OffsetDateTime>,
    /// Whether it is still trusted at the report time.
    pub trusted: bool,
}

/// Where a leaf stands at the report time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum LeafState {
    /// Issued and within its validity.
    Valid,
    /// Issued, and its NotAfter has passed: clients reject it.
    Expired,
    /// Issued with a NotBefore after the report time.
    NotYetValid,
    /// Requested, with no certificate.
    NotIssued,
}

impl LeafState {
    /// The word the human table shows.
    pub fn label(self) -> &'static str {
        match self {
            LeafState::Valid => "valid",
            LeafState::Expired => "EXPIRED",
            LeafState::NotYetValid => "NOT YET VALID",
            LeafState::NotIssued => "NOT ISSUED",
        }
    }
}

/// What a leaf looks like now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LeafStatus {
    /// The leaf's name.
    pub name: String,
    /// server, client or server-client.
    pub kind: LeafKind,
    /// Requested DNS names and IPs.
    pub names: Vec<String>,
    /// Where it stands.
    pub state: LeafState,
    /// The issued certificate, if any.
    pub cert: Option<CertSummary>,
    /// Id of the CA that issued it: the current or the previous CA's id,
    /// or null when none of those (or nothing issued).
    pub issuer_ca_id: Option<String>,
    /// Number of certificates in its serving chain.
    pub chain_len: usize,
    /// Why it would be re-issued now, if it would.
    pub reissue: Option<LeafReason>,
}

/// Something the engine would do at the report time (`pki rotate` does it).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "action", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum PendingAction {
    /// Rotate the CA.
    RotateCa {
        /// Why.
        reason: RotationReason,
        /// The CA that would be replaced.
        ca_id: String,
        /// The reason in words.
        detail: String,
    },
    /// Issue or re-issue a leaf.
    IssueLeaf {
        /// The leaf.
        leaf: String,
        /// Why.
        reason: LeafReason,
        /// The CA that would sign it: the current CA's id, or null when the
        /// CA is rotated first (the new CA signs it).
        issuer_ca_id: Option<String>,
        /// The reason in words.
        detail: String,
    },
    /// Drop expired certificates from the bundle.
    PruneBundle {
        /// Their ids.
        ids: Vec<String>,
    },
    /// Stop appending the expired bridge B to serving chains.
    RetireBridge {
        /// Its id.
        id: String,
    },
    /// An imported CA (or a certificate of its external chain) has less
    /// than the minimum trust M left: pki does not make the replacement of
    /// a CA someone else signed, so an operator must supply one (`pki
    /// rotate DIR --to FILE`). `pki rotate` alone does not take this action.
    SupplyReplacement {
        /// The imported CA.
        ca_id: String,
        /// When it, or the first certificate of its chain, expires.
        #[serde(with = "time::serde::rfc3339")]
        expires_at: OffsetDateTime,
        /// The reason in words.
        detail: String,
    },
}

impl std::fmt::Display for PendingAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PendingAction::RotateCa { detail, .. } => write!(f, "rotate the CA: {detail}"),
            PendingAction::IssueLeaf { leaf, detail, .. } => {
                write!(f, "re-issue {leaf}: {detail}")
            }
            PendingAction::PruneBundle { ids } => {
                write!(f, "prune {} expired bundle certificates", ids.len())
            }
            PendingAction::RetireBridge { id } => write!(f, "retire the expired bridge {id}"),
            PendingAction::SupplyReplacement { detail, .. } => {
                write!(f, "supply a replacement CA: {detail}")
            }
        }
    }
}

/// The outcome of one trust cell: the path found, or why none was.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum CellResult {
    /// The chain verified.
    Verified {
        /// Ids of the path, leaf first, anchor last.
        path: Vec<String>,
    },
    /// It did not.
    Failed {
        /// Path validation's error.
        error: String,
    },
}

/// One trust cell in a report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TrustCellSummary {
    /// Whose serving chain.
    pub chain: crate::engines::preflight::Side,
    /// Whose bundle.
    pub bundle: crate::engines::preflight::Side,
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// What happened.
    pub result: CellResult,
    /// The cell involves the previous CA's material (its serving chain or
    /// its bundle) after its trust window ended: distrusted at a
    /// compromise, or its grace period over. Consumers still holding that
    /// material were meant to be cut off, so a failure here is expected
    /// and does not make the health `broken`.
    pub retired: bool,
}

impl TrustCellSummary {
    /// Whether the chain verified.
    pub fn verified(&self) -> bool {
        matches!(self.result, CellResult::Verified { .. })
    }
}

/// The verdict `pki status --check` turns into its exit status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Health {
    /// Nothing is due (exit 0).
    Ok,
    /// An action is due: `pki rotate` would do something, or a consumer
    /// has not loaded the current bundle within the reload interval (exit 3).
    ActionDue,
    /// Trust is broken or something has expired (exit 4).
    Broken,
}

impl Health {
    /// The exit status of `pki status --check`.
    pub fn exit_code(self) -> u8 {
        match self {
            Health::Ok => 0,
            Health::ActionDue => 3,
            Health::Broken => 4,
        }
    }
}

/// The rotation policy a report's decisions follow, in seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct PolicySummary {
    /// D: the lifetime of a CA.
    pub lifetime_seconds: i64,
    /// M: the CA rotates when less than this remains.
    pub min_trust_seconds: i64,
    /// I as the guards use it: how long a consumer may go without
    /// reloading (M when the policy sets none).
    pub reload_interval_seconds: i64,
    /// Whether I is M by default rather than set by the policy.
    pub reload_interval_assumed: bool,
}

impl PolicySummary {
    /// The summary of `policy`.
    pub fn of(policy: &pki_core::RotationPolicy) -> Self {
        PolicySummary {
            lifetime_seconds: policy.lifetime.whole_seconds(),
            min_trust_seconds: policy.min_trust.whole_seconds(),
            reload_interval_seconds: policy.effective_reload_interval().whole_seconds(),
            reload_interval_assumed: policy.reload_interval.is_none(),
        }
    }
}

/// The report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SignerStatus {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The time the report is for.
    #[serde(with = "time::serde::rfc3339")]
    pub now: OffsetDateTime,
    /// Nothing due, an action due, or broken.
    pub health: Health,
    /// Why the health is `broken`, one sentence each (empty otherwise).
    pub problems: Vec<String>,
    /// The current CA.
    pub ca: CertSummary,
    /// When the CA becomes due for rotation (NotAfter − M).
    #[serde(with = "time::serde::rfc3339")]
    pub rotation_due_at: OffsetDateTime,
    /// The policy: D, M, and the reload interval the guards assume.
    pub policy: PolicySummary,
    /// Bridge B (appended to serving chains), if any.
    pub bridge: Option<CertSummary>,
    /// The bundle members, in order.
    pub bundle: Vec<BundleMember>,
    /// Order-independent SHA-256 of the bundle set (hex).
    pub bundle_fingerprint: String,
    /// The previous CA, if any.
    pub previous: Option<PreviousSummary>,
    /// The last forced-rotation reason.
    pub forced_rotation_reason: Option<String>,
    /// Leaves by name.
    pub leaves: Vec<LeafStatus>,
    /// What the engine would do now; empty when nothing.
    pub pending: Vec<PendingAction>,
    /// When something is next due.
    #[serde(with = "time::serde::rfc3339")]
    pub next_check: OffsetDateTime,
    /// Number of rotations so far.
    pub rotations: usize,
    /// Every rotation so far, oldest first.
    pub history: Vec<RotationRecord>,
    /// The trust matrix now: the previous CA's probe chain and the first
    /// current leaf's serving chain against the previous CA and the current
    /// bundle (cells whose inputs do not exist are left out). Cells of a
    /// previous CA whose trust window ended are marked `retired` and do not
    /// count toward the health.
    pub trust: Vec<TrustCellSummary>,
    /// Every consumer that acknowledged a bundle, by name: what it loaded
    /// and whether that is the current bundle. A consumer that is not
    /// current once the reload interval since the current bundle's
    /// publication has passed is `overdue`, which makes the health
    /// `action-due` (unless it is `broken`).
    pub consumers: Vec<ConsumerStatus>,
}

/// One consumer in a report.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ConsumerStatus {
    /// Its name.
    pub name: String,
    /// The fingerprint of the bundle it acknowledged last.
    pub fingerprint: String,
    /// When it acknowledged it.
    #[serde(with = "time::serde::rfc3339")]
    pub loaded_at: OffsetDateTime,
    /// Whether that is the bundle published now.
    pub current: bool,
    /// Not current, and the reload interval since the current bundle was
    /// published has passed.
    pub overdue: bool,
}

impl SignerStatus {
    /// Reports on `state` at `now` (fails only on a time the engine refuses
    /// to plan at).
    ///
    /// # Errors
    ///
    /// Those of [`plan`] with no input:
    /// [`SignerError::ClockBeforeCa`](crate::SignerError::ClockBeforeCa) when
    /// `now` is before the CA's NotBefore, and
    /// [`RotateError::Core`](crate::RotateError::Core) when `now` plus the
    /// policy's lifetime overflows.
    pub fn of(state: &SignerState, now: OffsetDateTime) -> Result<Self> {
        let p = plan(state, &SignerInput::default(), now)?;
        let ca = &state.ca.cert;
        let pending = pending_actions(state, &p, now);
        let leaves = leaf_statuses(state, &p, now);
        let trust = trust_summaries(state, now);
        let problems = problems_at(state, now, &trust);
        let current_bundle = state.bundle_fingerprint();
        let consumers: Vec<ConsumerStatus> = state
            .consumers
            .iter()
            .map(|(name, record)| ConsumerStatus {
                name: name.clone(),
                fingerprint: record.fingerprint.clone(),
                loaded_at: record.loaded_at,
                current: record.fingerprint == current_bundle,
                overdue: crate::engines::signer::lags(state, record, now),
            })
            .collect();
        let health = if !problems.is_empty() {
            Health::Broken
        } else if !pending.is_empty() || consumers.iter().any(|c| c.overdue) {
            Health::ActionDue
        } else {
            Health::Ok
        };

        Ok(SignerStatus {
            schema_version: SCHEMA_VERSION,
            now,
            health,
            problems,
            ca: CertSummary::of(ca, now),
            rotation_due_at: state.rotation_due_at(&state.policy),
            policy: PolicySummary::of(&state.policy.rotation),
            bridge: state.bridge.as_ref().map(|b| CertSummary::of(b, now)),
            bundle: state
                .bundle
                .certs()
                .iter()
                .map(|c| BundleMember {
                    role: role(state, c),
                    cert: CertSummary::of(c, now),
                })
                .collect(),
            bundle_fingerprint: current_bundle,
            previous: state.previous.as_ref().map(|p| PreviousSummary {
                id: p.id.clone(),
                not_after: p.not_after,
                trusted_until: p.trusted_until,
                trusted: previous_trusted_at(p, now),
            }),
            forced_rotation_reason: state.forced_rotation_reason.clone(),
            leaves,
            pending,
            next_check: p.next_check,
            rotations: state.history.len(),
            history: state.history.clone(),
            trust,
            consumers,
        })
    }
}

/// What the engine would do now, read from the plan it would make (so the
/// report never disagrees with a step), plus a replacement of an imported
/// CA, which is the operator's to do. A leaf issued after a rotation is
/// issued by the new CA, whose id is not known yet.
fn pending_actions(state: &SignerState, p: &Plan, now: OffsetDateTime) -> Vec<PendingAction> {
    let ca = &state.ca.cert;
    let mut pending = Vec::new();
    if let Some(r) = &p.rotation {
        pending.push(PendingAction::RotateCa {
            reason: r.reason.clone(),
            ca_id: ca.id(),
            detail: r.reason.to_string(),
        });
    }
    let signer_after = p.rotation.is_none().then(|| ca.id());
    for l in &p.leaves {
        pending.push(PendingAction::IssueLeaf {
            leaf: l.name.clone(),
            reason: l.reason.clone(),
            issuer_ca_id: signer_after.clone(),
            detail: l.reason.to_string(),
        });
    }
    if !p.prune.is_empty() {
        pending.push(PendingAction::PruneBundle {
            ids: p.prune.iter().map(Certificate::id).collect(),
        });
    }
    if p.drop_bridge
        && let Some(b) = &state.bridge
    {
        pending.push(PendingAction::RetireBridge { id: b.id() });
    }
    if let Some(action) = replacement_due(state, now) {
        pending.push(action);
    }
    pending
}

/// Every leaf with its certificate, its issuer and whether the plan
/// re-issues it. The issuer is the current CA or, for a leaf not re-issued
/// since the last rotation, the previous one.
fn leaf_statuses(state: &SignerState, p: &Plan, now: OffsetDateTime) -> Vec<LeafStatus> {
    let ca = &state.ca.cert;
    let previous_cert = state
        .previous
        .as_ref()
        .and_then(|p| p.certificate.as_ref())
        .and_then(|pem| Certificate::from_pem(pem.as_bytes()).ok());
    let issuer_of = |cert: &Certificate| -> Option<String> {
        if pki_core::issued_by(cert, ca).issued_by {
            Some(ca.id())
        } else {
            previous_cert
                .as_ref()
                .filter(|prev| pki_core::issued_by(cert, prev).issued_by)
                .map(Certificate::id)
        }
    };
    state
        .leaves
        .iter()
        .map(|(name, leaf)| {
            let cert = leaf.issued.as_ref().map(|i| &i.cert);
            let leaf_state = match cert {
                None => LeafState::NotIssued,
                Some(c) if now > c.not_after() => LeafState::Expired,
                Some(c) if now < c.not_before() => LeafState::NotYetValid,
                Some(_) => LeafState::Valid,
            };
            LeafStatus {
                name: name.clone(),
                kind: leaf.request.kind,
                names: leaf.request.names(),
                state: leaf_state,
                cert: cert.map(|c| CertSummary::of(c, now)),
                issuer_ca_id: cert.and_then(issuer_of),
                chain_len: cert.map(|c| state.serving_chain(c).len()).unwrap_or(0),
                reissue: p
                    .leaves
                    .iter()
                    .find(|d| &d.name == name)
                    .map(|d| d.reason.clone()),
            }
        })
        .collect()
}

fn role(state: &SignerState, c: &Certificate) -> BundleRole {
    if c == &state.ca.cert {
        BundleRole::CurrentCa
    } else if c.looks_self_signed() {
        BundleRole::PreviousRoot
    } else if pki_core::issued_by(c, &state.ca.cert).issued_by && c.is_ca() {
        BundleRole::BridgeA
    } else {
        BundleRole::Other
    }
}
