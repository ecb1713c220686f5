//! A read-only report of a signer at a given time: what exists, when it
//! expires, and what the engine would do next.

use crate::error::Result;
use crate::signer::{SignerInput, SignerState, plan};
use pki_core::Certificate;
use time::OffsetDateTime;

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

/// What a leaf looks like now.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct LeafStatus {
    /// The leaf's name.
    pub name: String,
    /// server, client or server-client.
    pub kind: crate::leaf::LeafKind,
    /// Requested DNS names and IPs.
    pub names: Vec<String>,
    /// The issued certificate, if any.
    pub cert: Option<CertSummary>,
    /// Number of certificates in its serving chain.
    pub chain_len: usize,
    /// Why it would be re-issued now, if it would.
    pub reissue: Option<String>,
}

/// The report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct SignerStatus {
    /// The time the report is for.
    #[serde(with = "time::serde::rfc3339")]
    pub now: OffsetDateTime,
    /// The current CA.
    pub ca: CertSummary,
    /// When the CA becomes due for rotation (NotAfter − M).
    #[serde(with = "time::serde::rfc3339")]
    pub rotation_due_at: OffsetDateTime,
    /// Bridge B (appended to serving chains), if any.
    pub bridge: Option<CertSummary>,
    /// The bundle members, in order.
    pub bundle: Vec<BundleMember>,
    /// Order-independent SHA-256 of the bundle set (hex).
    pub bundle_fingerprint: String,
    /// The previous CA, if any.
    pub previous: Option<crate::signer::PreviousCa>,
    /// The last forced-rotation reason.
    pub forced_rotation_reason: Option<String>,
    /// Leaves by name.
    pub leaves: Vec<LeafStatus>,
    /// What the engine would do now, in words; empty when nothing.
    pub pending: Vec<String>,
    /// When something is next due.
    #[serde(with = "time::serde::rfc3339")]
    pub next_check: OffsetDateTime,
    /// Number of rotations so far.
    pub rotations: usize,
    /// The trust matrix now: the previous CA's probe chain and the first
    /// current leaf's serving chain against the previous CA and the current
    /// bundle (cells whose inputs do not exist are left out).
    pub trust: Vec<crate::preflight::TrustCell>,
}

impl SignerStatus {
    /// Reports on `state` at `now` (fails only when `now` is before the CA).
    pub fn of(state: &SignerState, now: OffsetDateTime) -> Result<Self> {
        let p = plan(state, &SignerInput::default(), now)?;
        let mut pending = Vec::new();
        if let Some(r) = &p.rotation {
            pending.push(format!("rotate the CA: {}", r.reason));
        }
        for l in &p.leaves {
            pending.push(format!("re-issue {}: {}", l.name, l.reason));
        }
        if !p.prune.is_empty() {
            pending.push(format!(
                "prune {} expired bundle certificates",
                p.prune.len()
            ));
        }
        if p.drop_bridge {
            pending.push("retire the expired bridge".into());
        }
        let leaves = state
            .leaves
            .iter()
            .map(|(name, leaf)| {
                let mut names = leaf.request.dns_names.clone();
                names.extend(leaf.request.ip_addresses.iter().map(|ip| ip.to_string()));
                LeafStatus {
                    name: name.clone(),
                    kind: leaf.request.kind,
                    names,
                    cert: leaf.issued.as_ref().map(|i| CertSummary::of(&i.cert, now)),
                    chain_len: leaf
                        .issued
                        .as_ref()
                        .map(|i| state.serving_chain(&i.cert).len())
                        .unwrap_or(0),
                    reissue: p
                        .leaves
                        .iter()
                        .find(|d| &d.name == name)
                        .map(|d| d.reason.to_string()),
                }
            })
            .collect();
        let trust = trust_now(state, now);
        Ok(SignerStatus {
            now,
            ca: CertSummary::of(&state.ca.cert, now),
            rotation_due_at: state.rotation_due_at(&state.policy),
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
            bundle_fingerprint: hex::encode(state.bundle.fingerprint()),
            previous: state.previous.clone(),
            forced_rotation_reason: state.forced_rotation_reason.clone(),
            leaves,
            pending,
            next_check: p.next_check,
            rotations: state.history.len(),
            trust,
        })
    }
}

fn trust_now(state: &SignerState, now: OffsetDateTime) -> Vec<crate::preflight::TrustCell> {
    let previous = state.previous.as_ref();
    let parse = |pem: Option<&String>| pem.and_then(|p| Certificate::from_pem(p.as_bytes()).ok());
    let old_chain = parse(previous.and_then(|p| p.probe.as_ref())).map(|c| vec![c]);
    let old_bundle = parse(previous.and_then(|p| p.certificate.as_ref()))
        .map(|c| pki_core::Bundle::from_certs([c]));
    let new_chain = state
        .leaves
        .values()
        .filter_map(|l| l.issued.as_ref())
        .find(|i| {
            pki_core::issued_by(&i.cert, &state.ca.cert).issued_by
                && i.cert
                    .extended_key_usage()
                    .unwrap_or(&[])
                    .contains(&pki_core::EKU_SERVER_AUTH)
        })
        .map(|i| state.serving_chain(&i.cert));
    crate::preflight::matrix(
        &crate::preflight::MatrixInputs {
            old_chain: old_chain.as_deref(),
            new_chain: new_chain.as_deref(),
            old_bundle: old_bundle.as_ref(),
            new_bundle: &state.bundle,
        },
        &[now],
    )
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
