//! The CA set engine: rotate a whole set of CAs in gated steps (GEP-18,
//! StarlingX `kube-rootca-update`).
//!
//! A set has named CAs with roles (serving, client, or both), leaves issued
//! by them, and **targets** (hosts or components) that each load some trust
//! bundles (`trust/CA.crt`, to verify servers), some client-CA bundles
//! (`client-ca/CA.crt`, to verify clients) and some leaves. A rotation moves
//! through steps:
//!
//! ```text
//! Idle → TrustBoth → UpdateCerts → TrustNew → Completed
//!          │             │            │
//!          └──── abort ──┴─→ Reverting → Idle   (abort in TrustNew: roll forward)
//! ```
//!
//! - **TrustBoth**: new CAs (a CA with both roles gets a separate new client
//!   CA); every bundle trusts old + new. The client certificates of a CA
//!   move to its new client CA only once every target that verifies them
//!   (has its `client-ca/` bundle) acknowledged its trust-both files: the
//!   two halves of the step.
//! - **UpdateCerts**: serving certificates move to the new CAs, all at once
//!   or one target at a time; bundles still trust both.
//! - **TrustNew**: bundles trust the new CAs only. **Completed**: the old CA
//!   keys are destroyed and the completion time recorded.
//!
//! **Imported CAs.** A new CA may be supplied at start instead of
//! generated ([`ImportedCa`], StarlingX's upload), also one that someone
//! else's root signed (the k3s custom-CA topology). Its chain goes with it
//! ([`CaPair::chain`]): the bundles standing for the CA (`trust/CA.crt`,
//! `client-ca/CA.crt`) hold the chain's root, the chain a leaf of it
//! presents (`tls.crt`) is the leaf, the CA and the intermediates above
//! it, and a leaf's NotAfter stays within the earliest NotAfter of that
//! chain. The start checks it as an import from a file is checked (key,
//! CA, chain in issuing order up to a root, path verifying at the start),
//! then the rules of every new CA, counted to that earliest NotAfter.
//!
//! A target acknowledges the [`fingerprint`] of the files it loaded; a step
//! advances only when every target acknowledged its current files (or with
//! an override reason, recorded). A failed target is retried back to
//! pending: it acknowledges again. Every change of material is checked
//! first by the pre-flight trust matrix ([`material::preflight`]): every
//! target's files before and after, as clients, against every target's
//! files before and after, as servers, in both directions (mutual TLS).
//!
//! **Abort and the strand rule.** An abort goes to the safe target of the
//! step ([`SetState::abort_target`]) and *strands* a target when, once
//! done, that target could be left holding files that fail the trust
//! matrix against the others' and that the set can no longer re-issue. A
//! target that acknowledged its current files holds them; one that did not
//! (pending or failed) may still hold anything it was given since its last
//! acknowledgement.
//!
//! - Before trust-new the abort goes to reverting, which strands nobody:
//!   its bundles trust the old and the new CAs and every leaf goes back to
//!   the old CAs, so the files of idle, trust-both, update-certs and
//!   reverting verify one another in both directions. Its pre-flight
//!   checks the files before and after as for any step.
//! - In trust-new going back would hand old certificates to targets that
//!   trust only the new CAs, so the abort rolls forward to completed,
//!   which destroys the old CA keys. Every target that has not
//!   acknowledged its trust-new files (pending or failed) is stranded by
//!   it: whatever it still holds under the old CAs could never be
//!   re-issued or reverted. Such an abort is refused naming those targets
//!   ([`RotateError::SetAbortStrands`]) unless an override reason is
//!   given, which is recorded like an advance override. (Its files are
//!   those of trust-new, so the matrix alone cannot see this: the gate is
//!   the one of the advance to completed, which the abort must not bypass.)

use crate::document::Files;
use crate::engine::{Engine, Outcome};
use crate::error::{Result, RotateError};
use crate::leaf::IssuedLeaf;
use pki_core::{
    Certificate, CertificateAuthority, CertificateParams, KeyAlgorithm, PrivateKey, Profile,
    ValidatedCa,
};
use rand_core::CryptoRng;
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use time::{Duration, OffsetDateTime};

pub mod document;
pub mod material;
pub mod status;

pub use material::{fingerprint, preflight};
pub use status::SetStatus;

/// The document kind.
pub const KIND: &str = "ca-set";
/// The store key of the set's document.
pub const STORE_KEY: &str = "set";
/// A new CA must be valid for more than this from the rotation's start.
pub const MIN_CA_VALIDITY: Duration = Duration::hours(24);
/// Default lifetime of the set's CAs.
pub const DEFAULT_CA_LIFETIME: Duration = Duration::days(1825);
/// Default lifetime of a leaf of the set (cut at its CA's NotAfter).
pub const DEFAULT_SET_LEAF_LIFETIME: Duration = Duration::days(365);

/// What a CA signs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Roles {
    /// Serving certificates (verified by clients through `trust/`).
    pub serving: bool,
    /// Client certificates (verified by servers through `client-ca/`).
    pub client: bool,
}

impl std::str::FromStr for Roles {
    type Err = RotateError;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "serving" => Ok(Roles {
                serving: true,
                client: false,
            }),
            "client" => Ok(Roles {
                serving: false,
                client: true,
            }),
            "serving+client" | "client+serving" => Ok(Roles {
                serving: true,
                client: true,
            }),
            other => Err(RotateError::SetInvalid(format!(
                "unknown CA roles \"{}\": use serving, client or serving+client",
                other.escape_debug()
            ))),
        }
    }
}

impl std::fmt::Display for Roles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match (self.serving, self.client) {
            (true, true) => "serving+client",
            (true, false) => "serving",
            _ => "client",
        })
    }
}

/// The step of the set's rotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SetStep {
    /// No rotation runs.
    Idle,
    /// Bundles trust old and new; client certificates move.
    TrustBoth,
    /// Serving certificates move; bundles trust both.
    UpdateCerts,
    /// Bundles trust the new CAs only.
    TrustNew,
    /// The rotation completed; old CA keys are gone.
    Completed,
    /// An abort is moving every leaf back to the old CAs.
    Reverting,
}

impl std::fmt::Display for SetStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SetStep::Idle => "idle",
            SetStep::TrustBoth => "trust-both",
            SetStep::UpdateCerts => "update-certs",
            SetStep::TrustNew => "trust-new",
            SetStep::Completed => "completed",
            SetStep::Reverting => "reverting",
        })
    }
}

/// One generation of a CA: the signer and, once split, a separate client CA.
#[derive(Debug, Clone)]
pub struct CaPair {
    /// Signs serving certificates (and client ones while there is no
    /// separate client CA).
    pub signer: CertificateAuthority,
    /// A separate client CA (GEP-18's "new client CA"), for a CA with both roles.
    pub client_signer: Option<CertificateAuthority>,
    /// The certificates above `signer` when it was imported under someone
    /// else's root: its issuer first, the root last. Empty when `signer` is
    /// its own root (generated, or an imported self-signed CA). The client
    /// CA pki splits off is always generated, so it has no chain.
    pub chain: Vec<Certificate>,
}

impl CaPair {
    /// The CA that signs client-only certificates.
    pub fn client_issuer(&self) -> &CertificateAuthority {
        self.client_signer.as_ref().unwrap_or(&self.signer)
    }

    /// What a bundle holds for `signer`: the root of its chain, so a
    /// target trusting only the organisation's root verifies the leaves.
    pub fn root(&self) -> &Certificate {
        self.chain.last().unwrap_or(&self.signer.cert)
    }

    /// What a bundle holds for the client issuer ([`CaPair::client_issuer`]).
    pub fn client_root(&self) -> &Certificate {
        match &self.client_signer {
            Some(c) => &c.cert,
            None => self.root(),
        }
    }

    /// What follows a leaf of `issuer` (one of this pair's CAs) in the
    /// chain it presents: `signer` and the intermediates above it when the
    /// leaf is `signer`'s and the bundles hold an external root, since the
    /// verifier finds only that root; nothing otherwise.
    pub fn chain_after_leaf(&self, issuer: &CertificateAuthority) -> Vec<Certificate> {
        let Some((_root, intermediates)) = self.chain.split_last() else {
            return Vec::new();
        };
        if issuer.cert != self.signer.cert {
            return Vec::new();
        }
        std::iter::once(&self.signer.cert)
            .chain(intermediates)
            .cloned()
            .collect()
    }

    /// The latest NotAfter a leaf of `issuer` may have besides the
    /// issuer's own: the earliest NotAfter of `signer`'s chain, since a
    /// leaf stops verifying when any certificate of its path expires.
    pub fn not_after_limit(&self, issuer: &CertificateAuthority) -> Option<OffsetDateTime> {
        if issuer.cert != self.signer.cert {
            return None;
        }
        self.chain.iter().map(Certificate::not_after).min()
    }

    /// The CA that signs a leaf of `spec`: serving (and serving+client)
    /// certificates by `signer`, client-only ones by the client issuer.
    pub fn issuer_for(&self, spec: &LeafSpec) -> &CertificateAuthority {
        if spec.serving {
            &self.signer
        } else {
            self.client_issuer()
        }
    }
}

/// A CA of the set.
#[derive(Debug, Clone)]
pub struct SetCa {
    /// What it signs.
    pub roles: Roles,
    /// The CA in use (the old one during a rotation).
    pub current: CaPair,
    /// The new CA, from start until completion or revert.
    pub next: Option<CaPair>,
}

/// What a leaf of the set should look like.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LeafSpec {
    /// The CA that signs it.
    pub ca: String,
    /// A serving certificate (serverAuth).
    pub serving: bool,
    /// A client certificate (clientAuth).
    pub client: bool,
    /// DNS names.
    #[serde(default)]
    pub dns_names: Vec<String>,
    /// IP addresses.
    #[serde(default)]
    pub ip_addresses: Vec<IpAddr>,
    /// Common name (default: the first DNS name or IP, else the leaf's name).
    #[serde(default)]
    pub common_name: Option<String>,
    /// The target that loads it.
    pub target: String,
    /// Requested lifetime, cut at the CA's NotAfter.
    #[serde(with = "duration_serde")]
    pub lifetime: Duration,
}

/// A leaf of the set with its certificate and key.
#[derive(Debug, Clone)]
pub struct SetLeaf {
    /// What was asked.
    pub spec: LeafSpec,
    /// The certificate and key.
    pub issued: IssuedLeaf,
    /// Issued by the CA's next generation (during a rotation).
    pub on_next: bool,
}

/// The bundles a target loads.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TargetSpec {
    /// CAs whose servers it verifies: `trust/CA.crt`.
    pub trusts: BTreeSet<String>,
    /// CAs whose clients it verifies: `client-ca/CA.crt`.
    pub client_ca: BTreeSet<String>,
}

/// A target's last acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Ack {
    /// The fingerprint of the files it loaded.
    pub fingerprint: String,
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
}

/// A target reported as failed; retryable.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Failure {
    /// Why, as reported.
    pub reason: String,
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
}

/// A gate passed with an operator's reason instead of every acknowledgement.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct OverrideRecord {
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// The step left.
    pub from: SetStep,
    /// The step entered.
    pub to: SetStep,
    /// The operator's reason.
    pub reason: String,
    /// What the gate was still waiting for.
    pub waiting: Vec<String>,
    /// What the override let happen that the gate exists to prevent (client
    /// certificates moved before the servers that verify them loaded a
    /// bundle accepting them).
    #[serde(default)]
    pub warnings: Vec<String>,
}

/// One line of the rotation's timeline.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct TimelineEntry {
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// The step after the event.
    pub step: SetStep,
    /// What happened.
    pub note: String,
}

/// The rotation in progress (or the last one, once completed).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rotation {
    /// Why it was started.
    pub reason: String,
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    /// Move serving certificates one target at a time (StarlingX).
    pub one_at_a_time: bool,
    /// The current step.
    pub step: SetStep,
    /// Targets that acknowledged trust-both files (first half of TrustBoth).
    pub trust_both_loaded: BTreeSet<String>,
    /// CAs whose client certificates moved to the new client CA.
    pub clients_moved: BTreeSet<String>,
    /// Targets whose serving certificates moved to the new CAs.
    pub updated_targets: BTreeSet<String>,
    /// Gates passed by override.
    pub overrides: Vec<OverrideRecord>,
    /// What happened, in order.
    pub timeline: Vec<TimelineEntry>,
    /// When it completed.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub completed_at: Option<OffsetDateTime>,
}

/// A finished rotation.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RotationSummary {
    /// Why it was started.
    pub reason: String,
    /// When it started.
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    /// When it ended.
    #[serde(with = "time::serde::rfc3339")]
    pub ended_at: OffsetDateTime,
    /// `completed` or `reverted`.
    pub outcome: String,
}

/// The whole state of a CA set.
#[derive(Debug, Clone)]
pub struct SetState {
    /// Key type of new CAs.
    pub key_algorithm: KeyAlgorithm,
    /// Lifetime of generated CAs.
    pub ca_lifetime: Duration,
    /// CAs by name.
    pub cas: BTreeMap<String, SetCa>,
    /// Leaves by name.
    pub leaves: BTreeMap<String, SetLeaf>,
    /// Targets by name.
    pub targets: BTreeMap<String, TargetSpec>,
    /// Last acknowledgement per target.
    pub acks: BTreeMap<String, Ack>,
    /// Targets reported as failed.
    pub failures: BTreeMap<String, Failure>,
    /// The rotation in progress, or the last completed one.
    pub rotation: Option<Rotation>,
    /// Finished rotations, oldest first.
    pub history: Vec<RotationSummary>,
}

/// A CA to import at start (StarlingX's upload): certificate, key and
/// the chain above it. The engine checks it again at start
/// ([`pki_core::CaImport::validate`] at the start's time): a caller that
/// built it by hand gets the same refusals as one that read a file with
/// [`pki_core::import_ca_file`].
#[derive(Debug, Clone)]
pub struct ImportedCa {
    /// The CA's name in the set.
    pub ca: String,
    /// Its certificate and key.
    pub authority: CertificateAuthority,
    /// The certificates above it, its issuer first, the root last; empty
    /// when it is self-signed.
    pub chain: Vec<Certificate>,
}

impl ImportedCa {
    /// The new CA for `ca`, as [`pki_core::import_ca_file`] or
    /// [`pki_core::CaImport::validate`] returned it.
    pub fn new(ca: impl Into<String>, validated: ValidatedCa) -> Self {
        ImportedCa {
            ca: ca.into(),
            authority: validated.authority,
            chain: validated.chain,
        }
    }
}

/// What a caller asks of the set. The default asks for nothing.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub enum SetInput {
    /// Nothing: report only.
    #[default]
    Nothing,
    /// Add or change a leaf; it is issued now.
    Issue {
        /// The leaf's name.
        name: String,
        /// What it should look like.
        spec: LeafSpec,
    },
    /// Create a target or change the bundles it loads (None keeps a list).
    Target {
        /// The target.
        name: String,
        /// CAs whose servers it verifies.
        trusts: Option<BTreeSet<String>>,
        /// CAs whose clients it verifies.
        client_ca: Option<BTreeSet<String>>,
    },
    /// Start a rotation: Idle (or Completed) → TrustBoth.
    Start {
        /// Why.
        reason: String,
        /// CAs supplied instead of generated.
        imports: Vec<ImportedCa>,
        /// Move serving certificates one target at a time.
        one_at_a_time: bool,
    },
    /// A target loaded the files with this fingerprint.
    Ack {
        /// The target.
        target: String,
        /// What it loaded.
        fingerprint: String,
    },
    /// A target failed to load its files.
    Fail {
        /// The target.
        target: String,
        /// Why.
        reason: String,
    },
    /// A failed target will try again.
    Retry {
        /// The target.
        target: String,
    },
    /// Go to the next step; an override reason passes a gate that still waits.
    Advance {
        /// The operator's reason to pass without every acknowledgement.
        override_reason: Option<String>,
    },
    /// Abort to the safe target of the current step
    /// ([`SetState::abort_target`]); refused when it would strand a target
    /// ([`SetState::stranded_by_abort`]) unless an override reason is given.
    Abort {
        /// The operator's reason to abort although it strands targets.
        override_reason: Option<String>,
    },
}

/// What `plan` decided: the validated input and, for an advance, the gate.
#[derive(Debug, Clone)]
pub struct SetPlan {
    /// The time of the decision.
    pub now: OffsetDateTime,
    /// The input, validated against the document.
    pub input: SetInput,
    /// Nothing to change (an ack repeated, nothing asked).
    pub no_op: bool,
    /// For an advance: what the gate still waits for (overridden).
    pub waiting: Vec<String>,
}

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum SetEvent {
    /// The step changed.
    Step {
        /// From.
        from: SetStep,
        /// To.
        to: SetStep,
        /// Why or how.
        note: String,
    },
    /// A leaf was issued.
    Issued {
        /// The leaf.
        name: String,
        /// The target that loads it.
        target: String,
        /// Its certificate's id.
        id: String,
        /// The CA certificate that signed it.
        issuer: String,
    },
    /// A new CA was made or imported.
    NewCa {
        /// The CA's name.
        ca: String,
        /// `ca` or `client-ca`.
        role: String,
        /// Its certificate's id.
        id: String,
        /// Imported rather than generated.
        imported: bool,
    },
    /// A target acknowledged its files.
    Acked {
        /// The target.
        target: String,
        /// The fingerprint.
        fingerprint: String,
    },
    /// A target failed.
    Failed {
        /// The target.
        target: String,
        /// Why.
        reason: String,
    },
    /// A failed target is pending again.
    Retrying {
        /// The target.
        target: String,
    },
    /// A target's bundles changed.
    TargetChanged {
        /// The target.
        target: String,
    },
    /// Old CA keys were destroyed.
    OldKeysDestroyed {
        /// Ids of the destroyed CA certificates.
        ids: Vec<String>,
    },
}

impl std::fmt::Display for SetEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SetEvent::Step { from, to, note } => write!(f, "step {from} -> {to}: {note}"),
            SetEvent::Issued {
                name,
                target,
                id,
                issuer,
            } => write!(
                f,
                "issued {name} ({id}) for target {target}, signed by {issuer}"
            ),
            SetEvent::NewCa {
                ca,
                role,
                id,
                imported,
            } => write!(
                f,
                "{} new {role} for {ca}: {id}",
                if *imported { "imported" } else { "generated" }
            ),
            SetEvent::Acked {
                target,
                fingerprint,
            } => write!(f, "target {target} loaded {fingerprint}"),
            SetEvent::Failed { target, reason } => write!(f, "target {target} failed: {reason}"),
            SetEvent::Retrying { target } => write!(f, "target {target} pending again (retry)"),
            SetEvent::TargetChanged { target } => write!(f, "target {target} bundles changed"),
            SetEvent::OldKeysDestroyed { ids } => {
                write!(f, "destroyed old CA keys {}", ids.join(", "))
            }
        }
    }
}

/// Names of CAs, targets and leaves become file and directory names.
pub fn validate_name(what: &str, name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && !name.starts_with('.')
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_'));
    if ok {
        Ok(())
    } else {
        Err(RotateError::SetInvalid(format!(
            "invalid {what} name \"{}\": use 1-64 characters of a-z, 0-9, '-' and '_'",
            name.escape_debug()
        )))
    }
}

impl SetState {
    /// A new set: one self-signed CA per `(name, roles)`, subject `CN=name`.
    pub fn new<R: CryptoRng + ?Sized + 'static>(
        cas: &[(String, Roles)],
        key_algorithm: KeyAlgorithm,
        ca_lifetime: Duration,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Self> {
        if cas.is_empty() {
            return Err(RotateError::SetInvalid(
                "a CA set needs at least one CA (--ca NAME:ROLES)".into(),
            ));
        }
        if ca_lifetime <= MIN_CA_VALIDITY {
            return Err(RotateError::SetInvalid(format!(
                "CA lifetime {} must be longer than 24 hours",
                pki_core::policy::human(ca_lifetime),
            )));
        }
        let mut map = BTreeMap::new();
        for (name, roles) in cas {
            validate_name("CA", name)?;
            let signer =
                CertificateAuthority::generate_root(name, key_algorithm, now, ca_lifetime, rng)?;
            let ca = SetCa {
                roles: *roles,
                current: CaPair {
                    signer,
                    client_signer: None,
                    chain: Vec::new(),
                },
                next: None,
            };
            if map.insert(name.clone(), ca).is_some() {
                return Err(RotateError::SetInvalid(format!(
                    "CA \"{name}\" is named twice"
                )));
            }
        }
        Ok(SetState {
            key_algorithm,
            ca_lifetime,
            cas: map,
            leaves: BTreeMap::new(),
            targets: BTreeMap::new(),
            acks: BTreeMap::new(),
            failures: BTreeMap::new(),
            rotation: None,
            history: Vec::new(),
        })
    }

    /// The current step.
    pub fn step(&self) -> SetStep {
        self.rotation.as_ref().map_or(SetStep::Idle, |r| r.step)
    }

    /// The rotation in progress (None when idle or completed).
    pub fn running(&self) -> Option<&Rotation> {
        self.rotation
            .as_ref()
            .filter(|r| !matches!(r.step, SetStep::Idle | SetStep::Completed))
    }

    fn ca(&self, name: &str) -> Result<&SetCa> {
        self.cas
            .get(name)
            .ok_or_else(|| RotateError::SetUnknownCa(name.to_string()))
    }

    fn target(&self, name: &str) -> Result<&TargetSpec> {
        self.targets
            .get(name)
            .ok_or_else(|| RotateError::SetUnknownTarget(name.to_string()))
    }

    /// The fingerprint target `name` must acknowledge now.
    pub fn expected_fingerprint(&self, name: &str) -> Result<String> {
        self.target(name)?;
        Ok(material::target_fingerprint(self, name))
    }

    /// Whether target `name` acknowledged its current files.
    pub fn is_loaded(&self, name: &str) -> bool {
        !self.failures.contains_key(name)
            && self
                .acks
                .get(name)
                .is_some_and(|a| material::target_fingerprint(self, name) == a.fingerprint)
    }

    /// The files each target should have now, by target (paths relative to
    /// the target's directory).
    pub fn target_files(&self) -> Result<BTreeMap<String, Files>> {
        material::all_target_files(self)
    }

    /// Targets holding serving leaves, in the order one-at-a-time updates them.
    fn serving_targets(&self) -> Vec<String> {
        let set: BTreeSet<&String> = self
            .leaves
            .values()
            .filter(|l| l.spec.serving)
            .map(|l| &l.spec.target)
            .collect();
        set.into_iter().cloned().collect()
    }

    /// Whether a leaf should be signed by its CA's next generation now.
    fn wants_next(&self, leaf: &LeafSpec) -> bool {
        let Some(r) = self.running() else {
            return false;
        };
        match r.step {
            SetStep::TrustBoth => !leaf.serving && r.clients_moved.contains(&leaf.ca),
            SetStep::UpdateCerts => !leaf.serving || r.updated_targets.contains(&leaf.target),
            SetStep::TrustNew => true,
            _ => false,
        }
    }

    /// What the gate of `advance` waits for.
    fn waiting(&self) -> Vec<String> {
        let mut waiting = Vec::new();
        for name in self.targets.keys() {
            if let Some(f) = self.failures.get(name) {
                waiting.push(format!("{name} (failed: {})", f.reason));
            } else if !self.is_loaded(name) {
                waiting.push(name.clone());
            }
        }
        if let Some(r) = self.running()
            && r.step == SetStep::UpdateCerts
        {
            for t in self.serving_targets() {
                if !r.updated_targets.contains(&t) {
                    waiting.push(format!("{t} (serving certificates not yet updated)"));
                }
            }
        }
        waiting
    }

    /// Where an abort goes from the current step: reverting before
    /// trust-new, completed from trust-new (going back would hand old
    /// certificates to targets that trust only the new CAs). None when
    /// there is nothing to abort (idle, completed, or already reverting).
    pub fn abort_target(&self) -> Option<SetStep> {
        match self.step() {
            SetStep::TrustBoth | SetStep::UpdateCerts => Some(SetStep::Reverting),
            SetStep::TrustNew => Some(SetStep::Completed),
            SetStep::Idle | SetStep::Completed | SetStep::Reverting => None,
        }
    }

    /// The targets an abort now would strand, with why they wait (see the
    /// strand rule in the module documentation); empty when it is safe.
    pub fn stranded_by_abort(&self) -> Vec<String> {
        match self.abort_target() {
            // Completing destroys the old CA keys: wait for what the
            // advance to completed waits for.
            Some(SetStep::Completed) => self.waiting(),
            // Reverting's bundles trust old and new and its leaves are all
            // on the old CAs: whatever a target holds from idle,
            // trust-both or update-certs verifies against them both ways.
            _ => Vec::new(),
        }
    }

    /// In trust-both, the client certificates that would move to their new
    /// client CA although a server target verifying them has not loaded a
    /// `client-ca/` bundle that accepts it: one line per CA.
    fn unready_client_moves(&self) -> Vec<String> {
        let Some(r) = self.running() else {
            return Vec::new();
        };
        self.cas
            .iter()
            .filter(|(name, ca)| ca.roles.client && !r.clients_moved.contains(*name))
            .filter_map(|(name, _)| {
                let servers: Vec<&str> = self
                    .targets
                    .iter()
                    .filter(|(t, spec)| spec.client_ca.contains(name) && !r.trust_both_loaded.contains(*t))
                    .map(|(t, _)| t.as_str())
                    .collect();
                (!servers.is_empty()).then(|| {
                    format!(
                        "client certificates of CA {name} moved to its new client CA before server target(s) {} loaded a client-ca/{name}.crt that accepts them: they reject those clients until they load their files",
                        servers.join(", ")
                    )
                })
            })
            .collect()
    }

    /// Server targets that may still reject moved client certificates: a
    /// CA's client certificates moved (by an override) while the target,
    /// which verifies them, has loaded no bundle accepting the new client
    /// CA since. One line per target and CA.
    pub fn client_move_warnings(&self) -> Vec<String> {
        let Some(r) = self.running() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (t, spec) in &self.targets {
            if r.trust_both_loaded.contains(t) || self.is_loaded(t) {
                continue;
            }
            for ca in spec
                .client_ca
                .iter()
                .filter(|ca| r.clients_moved.contains(*ca))
            {
                out.push(format!(
                    "server target {t} has not loaded a client-ca/{ca}.crt that accepts the moved {ca} client certificates: it rejects them until it does"
                ));
            }
        }
        out
    }
}

/// Why an abort in trust-new strands the targets that have not loaded it.
const STRAND_TRUST_NEW: &str = "rolling forward to completed destroys the old CA keys, so a target that has not loaded its trust-new files could be left holding material of the old CAs that nothing can re-issue or revert any more";

/// Issues leaf `name` of `spec` from `pair`'s CA for it, within the
/// NotAfter of that CA and of its chain.
fn issue_leaf<R: CryptoRng + ?Sized + 'static>(
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
            return Err(RotateError::SetInvalid(format!(
                "leaf \"{name}\" must be --serving, --client or both"
            )));
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

/// The CA engine over [`SetState`].
#[derive(Debug, Clone, Copy, Default)]
pub struct SetEngine;

impl Engine for SetEngine {
    type Document = SetState;
    type Input = SetInput;
    type Plan = SetPlan;
    type Event = SetEvent;

    fn plan(doc: &SetState, input: &SetInput, now: OffsetDateTime) -> Result<SetPlan> {
        plan(doc, input, now)
    }

    fn apply<'d, R: CryptoRng + ?Sized + 'static>(
        doc: &'d SetState,
        plan: SetPlan,
        rng: &mut R,
    ) -> Result<Outcome<'d, SetState, SetEvent>> {
        apply(doc, plan, rng)
    }
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
fn check_import(import: &ImportedCa, now: OffsetDateTime) -> Result<OffsetDateTime> {
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
    Ok(validated.not_after())
}

/// Validates `input` against `doc` at `now`: everything that can be refused
/// is refused here, before any key is made.
pub fn plan(doc: &SetState, input: &SetInput, now: OffsetDateTime) -> Result<SetPlan> {
    let step = doc.step();
    let mut no_op = false;
    let mut waiting = Vec::new();
    match input {
        SetInput::Nothing => no_op = true,
        SetInput::Issue { name, spec } => {
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
                    "certificate \"{name}\" must be --serving, --client or both"
                )));
            }
            // The signer's rules for leaf names: no bare or top-level
            // wildcards, no IP literals as DNS names, no control characters.
            for dns in &spec.dns_names {
                crate::leaf::check_leaf_dns_name(dns)
                    .map_err(|e| RotateError::SetInvalid(format!("certificate \"{name}\": {e}")))?;
            }
            if spec.serving && spec.dns_names.is_empty() && spec.ip_addresses.is_empty() {
                return Err(RotateError::SetInvalid(format!(
                    "serving certificate \"{name}\" needs at least one --dns or --ip"
                )));
            }
            if spec.lifetime <= Duration::ZERO {
                return Err(RotateError::SetInvalid(format!(
                    "certificate \"{name}\": lifetime must be positive"
                )));
            }
        }
        SetInput::Target {
            name,
            trusts,
            client_ca,
        } => {
            validate_name("target", name)?;
            for ca in trusts.iter().flatten() {
                if !doc.ca(ca)?.roles.serving {
                    return Err(RotateError::SetInvalid(format!(
                        "target \"{name}\" cannot --trusts \"{ca}\": that CA signs no serving certificates (role {})",
                        doc.cas[ca].roles
                    )));
                }
            }
            for ca in client_ca.iter().flatten() {
                if !doc.ca(ca)?.roles.client {
                    return Err(RotateError::SetInvalid(format!(
                        "target \"{name}\" cannot --client-ca \"{ca}\": that CA signs no client certificates (role {})",
                        doc.cas[ca].roles
                    )));
                }
            }
        }
        SetInput::Start {
            reason,
            imports,
            one_at_a_time: _,
        } => {
            if doc.running().is_some() {
                return Err(wrong_step(
                    "start",
                    step,
                    "a rotation is already running (finish it with advance, or abort it)",
                ));
            }
            if reason.trim().is_empty() {
                return Err(RotateError::SetInvalid(
                    "a rotation needs a non-empty reason".into(),
                ));
            }
            let mut seen = BTreeSet::new();
            let mut import_not_after = BTreeMap::new();
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
                import_not_after.insert(&import.ca, check_import(import, now)?);
            }
            for (name, ca) in &doc.cas {
                let leaf_lifetime = doc
                    .leaves
                    .values()
                    .filter(|l| &l.spec.ca == name)
                    .map(|l| l.spec.lifetime)
                    .max()
                    .unwrap_or(Duration::ZERO);
                match imports.iter().find(|i| &i.ca == name) {
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
                let _ = ca;
            }
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
            let acked = doc
                .acks
                .get(target)
                .is_some_and(|a| a.fingerprint == expected);
            let counted = match doc.running() {
                Some(r) if matches!(r.step, SetStep::TrustBoth | SetStep::UpdateCerts) => {
                    r.trust_both_loaded.contains(target)
                }
                _ => true,
            };
            no_op = acked && counted;
        }
        SetInput::Fail { target, reason } => {
            doc.target(target)?;
            if doc.running().is_none() {
                return Err(wrong_step("fail a target", step, "no rotation is running"));
            }
            if reason.trim().is_empty() {
                return Err(RotateError::SetInvalid("a failure needs a reason".into()));
            }
        }
        SetInput::Retry { target } => {
            doc.target(target)?;
            if !doc.failures.contains_key(target) {
                return Err(RotateError::SetInvalid(format!(
                    "target \"{target}\" has not failed: nothing to retry"
                )));
            }
        }
        SetInput::Advance { override_reason } => {
            let Some(_) = doc.running() else {
                return Err(wrong_step(
                    "advance",
                    step,
                    "no rotation is running (start one first)",
                ));
            };
            waiting = doc.waiting();
            if !waiting.is_empty() {
                match override_reason {
                    Some(r) if !r.trim().is_empty() => {}
                    Some(_) => {
                        return Err(RotateError::SetInvalid(
                            "an override needs a non-empty reason".into(),
                        ));
                    }
                    None => {
                        return Err(RotateError::SetStepBlocked {
                            step,
                            waiting: waiting.join(", "),
                        });
                    }
                }
            }
        }
        SetInput::Abort { override_reason } => {
            let Some(to) = doc.abort_target() else {
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
            let stranded = doc.stranded_by_abort();
            if !stranded.is_empty() {
                match override_reason {
                    Some(r) if !r.trim().is_empty() => waiting = stranded,
                    Some(_) => {
                        return Err(RotateError::SetInvalid(
                            "an override needs a non-empty reason".into(),
                        ));
                    }
                    None => {
                        return Err(RotateError::SetAbortStrands {
                            step,
                            to,
                            stranded: stranded.join(", "),
                            why: STRAND_TRUST_NEW.into(),
                        });
                    }
                }
            }
        }
    }
    Ok(SetPlan {
        now,
        input: input.clone(),
        no_op,
        waiting,
    })
}

/// Carries out `plan` with `rng`, then checks the new material with the
/// pre-flight trust matrix against the old.
pub fn apply<'d, R: CryptoRng + ?Sized + 'static>(
    doc: &'d SetState,
    plan: SetPlan,
    rng: &mut R,
) -> Result<Outcome<'d, SetState, SetEvent>> {
    let now = plan.now;
    if plan.no_op {
        return Ok(Outcome {
            document: Cow::Borrowed(doc),
            events: Vec::new(),
            next_wake: next_wake(doc, now),
        });
    }
    let mut next = doc.clone();
    let mut events = Vec::new();
    let from = doc.step();
    let mut material_changed = true;
    match plan.input {
        SetInput::Nothing => {}
        SetInput::Issue { name, spec } => {
            next.targets.entry(spec.target.clone()).or_default();
            let on_next = next.wants_next(&spec) && next.cas[&spec.ca].next.is_some();
            let ca = &next.cas[&spec.ca];
            let pair = if on_next {
                ca.next.as_ref().unwrap_or(&ca.current)
            } else {
                &ca.current
            };
            let signer = pair.issuer_for(&spec);
            let issued = issue_leaf(pair, &name, &spec, now, rng)?;
            events.push(SetEvent::Issued {
                name: name.clone(),
                target: spec.target.clone(),
                id: issued.cert.id(),
                issuer: signer.cert.id(),
            });
            next.leaves.insert(
                name,
                SetLeaf {
                    spec,
                    issued,
                    on_next,
                },
            );
        }
        SetInput::Target {
            name,
            trusts,
            client_ca,
        } => {
            let t = next.targets.entry(name.clone()).or_default();
            if let Some(trusts) = trusts {
                t.trusts = trusts;
            }
            if let Some(client_ca) = client_ca {
                t.client_ca = client_ca;
            }
            events.push(SetEvent::TargetChanged { target: name });
        }
        SetInput::Start {
            reason,
            imports,
            one_at_a_time,
        } => {
            for (name, ca) in next.cas.iter_mut() {
                // The time alone repeats for two rotations in one second
                // (start, abort, start): the random part keeps every
                // generation's subject apart, so no verifier building
                // paths by name confuses an old CA with a new one.
                let stamp = format!("{}-{:08x}", now.unix_timestamp(), rng.next_u32());
                let (signer, chain, imported) = match imports.iter().find(|i| &i.ca == name) {
                    Some(i) => (i.authority.clone(), i.chain.clone(), true),
                    None => (
                        CertificateAuthority::generate_root(
                            &format!("{name}-{stamp}"),
                            doc.key_algorithm,
                            now,
                            doc.ca_lifetime,
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
                // GEP-18: a CA that signed both serving and client
                // certificates gets a separate client CA, so that client
                // certificates can move (and be distrusted) on their own.
                let client_signer = if ca.roles.serving && ca.roles.client {
                    let c = CertificateAuthority::generate_root(
                        &format!("{name}-client-{stamp}"),
                        doc.key_algorithm,
                        now,
                        doc.ca_lifetime,
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
                ca.next = Some(CaPair {
                    signer,
                    client_signer,
                    chain,
                });
            }
            next.failures.clear();
            next.rotation = Some(Rotation {
                reason: reason.clone(),
                started_at: now,
                one_at_a_time,
                step: SetStep::TrustBoth,
                trust_both_loaded: BTreeSet::new(),
                clients_moved: BTreeSet::new(),
                updated_targets: BTreeSet::new(),
                overrides: Vec::new(),
                timeline: vec![TimelineEntry {
                    at: now,
                    step: SetStep::TrustBoth,
                    note: format!("started: {reason}"),
                }],
                completed_at: None,
            });
        }
        SetInput::Ack {
            target,
            fingerprint,
        } => {
            material_changed = false;
            // Update-certs' bundles trust both as well: loading them counts
            // as having loaded a bundle that accepts the new client CAs.
            if let Some(r) = next.rotation.as_mut()
                && matches!(r.step, SetStep::TrustBoth | SetStep::UpdateCerts)
            {
                r.trust_both_loaded.insert(target.clone());
            }
            next.acks.insert(
                target.clone(),
                Ack {
                    fingerprint: fingerprint.clone(),
                    at: now,
                },
            );
            events.push(SetEvent::Acked {
                target,
                fingerprint,
            });
        }
        SetInput::Fail { target, reason } => {
            material_changed = false;
            next.failures.insert(
                target.clone(),
                Failure {
                    reason: reason.clone(),
                    at: now,
                },
            );
            events.push(SetEvent::Failed { target, reason });
        }
        SetInput::Retry { target } => {
            material_changed = false;
            next.failures.remove(&target);
            // A failed target may hold anything between what it last
            // acknowledged and its current files: its old ack proves
            // nothing, so it is pending until it acknowledges again.
            next.acks.remove(&target);
            events.push(SetEvent::Retrying { target });
        }
        SetInput::Advance { override_reason } => {
            // Leaving trust-both moves every client certificate: name the
            // servers an override leaves behind, before the move hides them.
            let early_client_moves = if from == SetStep::TrustBoth {
                next.unready_client_moves()
            } else {
                Vec::new()
            };
            let to = match from {
                SetStep::TrustBoth => SetStep::UpdateCerts,
                SetStep::UpdateCerts => SetStep::TrustNew,
                SetStep::TrustNew => SetStep::Completed,
                SetStep::Reverting => SetStep::Idle,
                other => return Err(wrong_step("advance", other, "no rotation is running")),
            };
            let note = match (&override_reason, plan.waiting.is_empty()) {
                (Some(r), false) => format!("override: {r}"),
                _ => "every target loaded the previous step".to_string(),
            };
            if let (Some(reason), false) = (&override_reason, plan.waiting.is_empty())
                && let Some(r) = next.rotation.as_mut()
            {
                r.overrides.push(OverrideRecord {
                    at: now,
                    from,
                    to,
                    reason: reason.clone(),
                    waiting: plan.waiting.clone(),
                    warnings: early_client_moves,
                });
            }
            transition(&mut next, from, to, &note, now, &mut events);
        }
        SetInput::Abort { override_reason } => {
            let Some(to) = doc.abort_target() else {
                return Err(wrong_step("abort", from, "no rotation to abort"));
            };
            let mut note = match to {
                SetStep::Completed => {
                    "abort in trust-new rolls forward: the files are those of completed".to_string()
                }
                _ => "abort: every leaf goes back to the old CAs; bundles trust both until every target acks"
                    .to_string(),
            };
            if let (Some(reason), false) = (&override_reason, plan.waiting.is_empty()) {
                note = format!("{note} (override: {reason})");
                if let Some(r) = next.rotation.as_mut() {
                    r.overrides.push(OverrideRecord {
                        at: now,
                        from,
                        to,
                        reason: reason.clone(),
                        waiting: plan.waiting.clone(),
                        warnings: Vec::new(),
                    });
                }
            }
            transition(&mut next, from, to, &note, now, &mut events);
        }
    }
    settle(&mut next, now, rng, &mut events)?;
    if material_changed || events.iter().any(|e| matches!(e, SetEvent::Issued { .. })) {
        material::preflight(doc, &next, now)?;
    }
    let wake = next_wake(&next, now);
    Ok(Outcome {
        document: Cow::Owned(next),
        events,
        next_wake: wake,
    })
}

fn transition(
    next: &mut SetState,
    from: SetStep,
    to: SetStep,
    note: &str,
    now: OffsetDateTime,
    events: &mut Vec<SetEvent>,
) {
    let serving_targets = next.serving_targets();
    let client_cas: BTreeSet<String> = next.cas.keys().cloned().collect();
    let Some(r) = next.rotation.as_mut() else {
        return;
    };
    r.step = to;
    match to {
        SetStep::UpdateCerts => {
            // Whatever did not move in TrustBoth (an override) moves now.
            r.clients_moved = client_cas;
            if !r.one_at_a_time {
                r.updated_targets = serving_targets.into_iter().collect();
            }
        }
        SetStep::TrustNew => {
            r.updated_targets = serving_targets.into_iter().collect();
        }
        SetStep::Reverting => {
            r.clients_moved.clear();
            r.updated_targets.clear();
        }
        _ => {}
    }
    r.timeline.push(TimelineEntry {
        at: now,
        step: to,
        note: note.to_string(),
    });
    events.push(SetEvent::Step {
        from,
        to,
        note: note.to_string(),
    });
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
            if let Some(r) = next.rotation.as_mut() {
                r.completed_at = Some(now);
                next.history.push(RotationSummary {
                    reason: r.reason.clone(),
                    started_at: r.started_at,
                    ended_at: now,
                    outcome: "completed".into(),
                });
            }
            events.push(SetEvent::OldKeysDestroyed { ids: destroyed });
        }
        SetStep::Idle => {
            for ca in next.cas.values_mut() {
                ca.next = None;
            }
            if let Some(r) = next.rotation.take() {
                next.history.push(RotationSummary {
                    reason: r.reason,
                    started_at: r.started_at,
                    ended_at: now,
                    outcome: "reverted".into(),
                });
            }
        }
        _ => {}
    }
}

/// Makes the automatic moves the current acknowledgements allow, then
/// re-issues every leaf that is not on the generation it should be on.
fn settle<R: CryptoRng + ?Sized + 'static>(
    next: &mut SetState,
    now: OffsetDateTime,
    rng: &mut R,
    events: &mut Vec<SetEvent>,
) -> Result<()> {
    if let Some(r) = next.running()
        && r.step == SetStep::TrustBoth
    {
        // Client certificates of a CA move once every server that verifies
        // them has loaded its trust-both client-ca bundle.
        let ready: Vec<String> = next
            .cas
            .iter()
            .filter(|(name, ca)| ca.roles.client && !r.clients_moved.contains(*name))
            .filter(|(name, _)| {
                next.targets
                    .iter()
                    .filter(|(_, t)| t.client_ca.contains(*name))
                    .all(|(t, _)| r.trust_both_loaded.contains(t))
            })
            .map(|(name, _)| name.clone())
            .collect();
        if let Some(r) = next.rotation.as_mut() {
            r.clients_moved.extend(ready);
        }
    }
    if let Some(r) = next.running()
        && r.step == SetStep::UpdateCerts
        && r.one_at_a_time
    {
        let all_updated_loaded = r.updated_targets.iter().all(|t| next.is_loaded(t));
        if all_updated_loaded {
            let pending = next
                .serving_targets()
                .into_iter()
                .find(|t| !r.updated_targets.contains(t));
            if let (Some(t), Some(r)) = (pending, next.rotation.as_mut()) {
                r.updated_targets.insert(t);
            }
        }
    }
    let moves: Vec<(String, bool)> = next
        .leaves
        .iter()
        .filter_map(|(name, leaf)| {
            let want = next.wants_next(&leaf.spec);
            (want != leaf.on_next).then(|| (name.clone(), want))
        })
        .collect();
    for (name, want) in moves {
        let leaf = &next.leaves[&name];
        let ca = &next.cas[&leaf.spec.ca];
        let pair = match (want, &ca.next) {
            (true, Some(n)) => n,
            _ => &ca.current,
        };
        let signer = pair.issuer_for(&leaf.spec);
        let issued = issue_leaf(pair, &name, &leaf.spec, now, rng)?;
        events.push(SetEvent::Issued {
            name: name.clone(),
            target: leaf.spec.target.clone(),
            id: issued.cert.id(),
            issuer: signer.cert.id(),
        });
        if let Some(l) = next.leaves.get_mut(&name) {
            l.issued = issued;
            l.on_next = want;
        }
    }
    Ok(())
}

fn next_wake(doc: &SetState, now: OffsetDateTime) -> OffsetDateTime {
    // The set decides nothing on its own; the next thing that changes
    // without input is the first expiry among what it publishes.
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

pub(crate) mod duration_serde {
    use time::Duration;
    pub fn serialize<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&pki_core::policy::human(*d))
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let s: String = serde::Deserialize::deserialize(d)?;
        pki_core::policy::parse_duration(&s).map_err(serde::de::Error::custom)
    }
}
