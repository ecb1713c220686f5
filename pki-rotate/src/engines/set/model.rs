//! The CA set's data: its CAs, leaves and targets, the rotation's
//! bookkeeping, what a caller asks and what happens.

use super::material;
use crate::engines::leaf::IssuedLeaf;
use crate::model::document::Files;
use crate::model::error::{Result, RotateError};
use pki_core::{Certificate, CertificateAuthority, KeyAlgorithm};
use rand_core::CryptoRng;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use time::{Duration, OffsetDateTime};

use super::MIN_CA_VALIDITY;

mod event;
mod input;

pub use event::SetEvent;
pub use input::{ImportedCa, SetInput};

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
            other => Err(RotateError::Set(crate::SetError::Invalid(format!(
                "unknown CA roles \"{}\": use serving, client or serving+client",
                other.escape_debug()
            )))),
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
pub use crate::model::SetStep;

impl std::str::FromStr for SetStep {
    type Err = RotateError;
    fn from_str(s: &str) -> Result<Self> {
        Ok(match s {
            "idle" => SetStep::Idle,
            "trust-both" => SetStep::TrustBoth,
            "update-certs" => SetStep::UpdateCerts,
            "trust-new" => SetStep::TrustNew,
            "completed" => SetStep::Completed,
            "reverting" => SetStep::Reverting,
            other => {
                return Err(RotateError::Set(crate::SetError::Invalid(format!(
                    "unknown step \"{}\": use idle, trust-both, update-certs, trust-new, completed or reverting",
                    other.escape_debug()
                ))));
            }
        })
    }
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
    /// The public part of what it loaded (bundles, certificates and the
    /// chains they present): what the pre-flight takes it to hold until it
    /// acknowledges again, whatever it was given since. None in documents
    /// written before this was kept; the pre-flight then takes the files
    /// the document gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loaded: Option<material::LoadedMaterial>,
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
    /// The red cells of the pre-flight trust matrix the override accepted:
    /// which target would reject which certificate of which other, holding
    /// what it last loaded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub red_cells: Vec<String>,
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
    /// The override reason the request that made this transition gave
    /// (whether or not the gate needed it): a request giving it again is
    /// the same request, and nothing to do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub override_reason: Option<String>,
}

/// The rotation in progress (or the last one, once completed).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Rotation {
    /// Why it was started.
    pub(crate) reason: String,
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    pub(crate) started_at: OffsetDateTime,
    /// Move serving certificates one target at a time (StarlingX).
    pub(crate) one_at_a_time: bool,
    /// The current step.
    pub(crate) step: SetStep,
    /// Targets that acknowledged trust-both files (first half of TrustBoth).
    pub(crate) trust_both_loaded: BTreeSet<String>,
    /// CAs whose client certificates moved to the new client CA.
    pub(crate) clients_moved: BTreeSet<String>,
    /// Targets whose serving certificates moved to the new CAs.
    pub(crate) updated_targets: BTreeSet<String>,
    /// Gates passed by override.
    pub(crate) overrides: Vec<OverrideRecord>,
    /// What happened, in order.
    pub(crate) timeline: Vec<TimelineEntry>,
    /// When it completed.
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub(crate) completed_at: Option<OffsetDateTime>,
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
    pub(crate) key_algorithm: KeyAlgorithm,
    /// Lifetime of generated CAs.
    pub(crate) ca_lifetime: Duration,
    /// CAs by name.
    pub(crate) cas: BTreeMap<String, SetCa>,
    /// Leaves by name.
    pub(crate) leaves: BTreeMap<String, SetLeaf>,
    /// Targets by name.
    pub(crate) targets: BTreeMap<String, TargetSpec>,
    /// Last acknowledgement per target.
    pub(crate) acks: BTreeMap<String, Ack>,
    /// Targets reported as failed.
    pub(crate) failures: BTreeMap<String, Failure>,
    /// The rotation in progress, or the last completed one.
    pub(crate) rotation: Option<Rotation>,
    /// Finished rotations, oldest first.
    pub(crate) history: Vec<RotationSummary>,
    /// The token objects that hold the CA keys (None: every CA key is in
    /// this process, in the CA's key file).
    pub(crate) token_keys: Option<super::token_keys::SetTokenKeys>,
}

impl Rotation {
    /// Why it was started.
    pub fn reason(&self) -> &str {
        &self.reason
    }
    /// When it started.
    pub fn started_at(&self) -> OffsetDateTime {
        self.started_at
    }
    /// Serving certificates move one target at a time (StarlingX).
    pub fn one_at_a_time(&self) -> bool {
        self.one_at_a_time
    }
    /// Its step.
    pub fn step(&self) -> SetStep {
        self.step
    }
    /// The step of `rotation`, Idle when there is none.
    pub(super) fn step_of(rotation: Option<&Rotation>) -> SetStep {
        rotation.map_or(SetStep::Idle, |r| r.step)
    }
    /// `rotation` when it is in progress (not idle or completed).
    pub(super) fn running_of(rotation: Option<&Rotation>) -> Option<&Rotation> {
        rotation.filter(|r| !matches!(r.step, SetStep::Idle | SetStep::Completed))
    }
    /// Targets that acknowledged files trusting both generations.
    pub fn trust_both_loaded(&self) -> &BTreeSet<String> {
        &self.trust_both_loaded
    }
    /// CAs whose client certificates moved to the new client CA.
    pub fn clients_moved(&self) -> &BTreeSet<String> {
        &self.clients_moved
    }
    /// Targets whose serving certificates moved to the new CAs.
    pub fn updated_targets(&self) -> &BTreeSet<String> {
        &self.updated_targets
    }
    /// Gates passed by override, in order.
    pub fn overrides(&self) -> &[OverrideRecord] {
        &self.overrides
    }
    /// What happened, in order.
    pub fn timeline(&self) -> &[TimelineEntry] {
        &self.timeline
    }
    /// When it completed.
    pub fn completed_at(&self) -> Option<OffsetDateTime> {
        self.completed_at
    }
}

impl SetState {
    /// Key type of new CAs.
    pub fn key_algorithm(&self) -> KeyAlgorithm {
        self.key_algorithm
    }
    /// Lifetime of generated CAs.
    pub fn ca_lifetime(&self) -> Duration {
        self.ca_lifetime
    }
    /// CAs by name.
    pub fn cas(&self) -> &BTreeMap<String, SetCa> {
        &self.cas
    }
    /// Leaves by name.
    pub fn leaves(&self) -> &BTreeMap<String, SetLeaf> {
        &self.leaves
    }
    /// Targets by name.
    pub fn targets(&self) -> &BTreeMap<String, TargetSpec> {
        &self.targets
    }
    /// The last acknowledgement of each target.
    pub fn acks(&self) -> &BTreeMap<String, Ack> {
        &self.acks
    }
    /// Targets reported as failed.
    pub fn failures(&self) -> &BTreeMap<String, Failure> {
        &self.failures
    }
    /// The rotation in progress, or the last completed one.
    pub fn rotation(&self) -> Option<&Rotation> {
        self.rotation.as_ref()
    }
    /// Finished rotations, oldest first.
    pub fn history(&self) -> &[RotationSummary] {
        &self.history
    }
}

/// Names of CAs, targets and leaves become file and directory names.
///
/// # Errors
///
/// [`SetError::Invalid`](crate::SetError::Invalid) naming `what` when `name` is
/// empty, longer than 64 bytes, starts with `.` or holds a character other than
/// `a-z`, `0-9`, `-` and `_`.
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
        Err(RotateError::Set(crate::SetError::Invalid(format!(
            "invalid {what} name \"{}\": use 1-64 characters of a-z, 0-9, '-' and '_'",
            name.escape_debug()
        ))))
    }
}

impl SetState {
    /// A new set: one self-signed CA per `(name, roles)`, subject `CN=name`.
    ///
    /// # Errors
    ///
    /// [`SetError::Invalid`](crate::SetError::Invalid) when `cas` is empty,
    /// names a CA twice or with an invalid name ([`validate_name`]), or
    /// `ca_lifetime` is 24 hours or less; a [`RotateError::Core`] when a key or
    /// a self-signed certificate cannot be made.
    pub fn new<R: CryptoRng + ?Sized>(
        cas: &[(String, Roles)],
        key_algorithm: KeyAlgorithm,
        ca_lifetime: Duration,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Self> {
        Self::build(cas, key_algorithm, ca_lifetime, now, rng, None)
    }

    /// [`SetState::new`] with every CA key made in the PKCS#11 token
    /// `store` names, through `access`. Each key's id comes from
    /// `location` (where the store is) and the CA's name
    /// ([`crate::engines::token_keys::first_key_id`]), so a rerun of a
    /// creation that crashed before its store write adopts the keys it made.
    ///
    /// # Errors
    ///
    /// Those of [`SetState::new`]; a [`RotateError::Core`] also when the token
    /// cannot be reached or refuses to find or make a key.
    pub fn new_in_token<R: CryptoRng + ?Sized>(
        cas: &[(String, Roles)],
        key_algorithm: KeyAlgorithm,
        ca_lifetime: Duration,
        (access, store, location): (
            &std::sync::Arc<dyn pki_core::TokenAccess>,
            &pki_core::Pkcs11Uri,
            &str,
        ),
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Self> {
        let mut keys = super::token_keys::SetTokenKeys::new(store);
        keys.attach(access);
        Self::build(
            cas,
            key_algorithm,
            ca_lifetime,
            now,
            rng,
            Some((keys, location)),
        )
    }

    fn build<R: CryptoRng + ?Sized>(
        cas: &[(String, Roles)],
        key_algorithm: KeyAlgorithm,
        ca_lifetime: Duration,
        now: OffsetDateTime,
        rng: &mut R,
        mut token: Option<(super::token_keys::SetTokenKeys, &str)>,
    ) -> Result<Self> {
        if cas.is_empty() {
            return Err(RotateError::Set(crate::SetError::Invalid(
                "a CA set needs at least one CA (--ca NAME:ROLES)".into(),
            )));
        }
        if ca_lifetime <= MIN_CA_VALIDITY {
            return Err(RotateError::Set(crate::SetError::Invalid(format!(
                "CA lifetime {} must be longer than 24 hours",
                pki_core::policy::human(ca_lifetime),
            ))));
        }
        let mut map = BTreeMap::new();
        for (name, roles) in cas {
            validate_name("CA", name)?;
            let signer = match &mut token {
                None => {
                    CertificateAuthority::generate_root(name, key_algorithm, now, ca_lifetime, rng)?
                }
                Some((keys, location)) => {
                    let id = crate::engines::token_keys::first_key_id(location, name);
                    let uri = keys
                        .store
                        .private_key(&id, &crate::engines::token_keys::key_label(name, 1));
                    let key =
                        keys.make_first(&super::token_keys::slot(name, "ca"), &uri, key_algorithm)?;
                    root_on(key.into(), name, now, ca_lifetime, rng)?
                }
            };
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
                return Err(RotateError::Set(crate::SetError::Invalid(format!(
                    "CA \"{name}\" is named twice"
                ))));
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
            token_keys: token.map(|(keys, _)| keys),
        })
    }

    /// The current step.
    pub fn step(&self) -> SetStep {
        Rotation::step_of(self.rotation.as_ref())
    }

    /// The rotation in progress (None when idle or completed).
    pub fn running(&self) -> Option<&Rotation> {
        Rotation::running_of(self.rotation.as_ref())
    }

    pub(super) fn ca(&self, name: &str) -> Result<&SetCa> {
        self.cas
            .get(name)
            .ok_or_else(|| RotateError::Set(crate::SetError::UnknownCa(name.to_string())))
    }

    pub(super) fn target(&self, name: &str) -> Result<&TargetSpec> {
        self.targets
            .get(name)
            .ok_or_else(|| RotateError::Set(crate::SetError::UnknownTarget(name.to_string())))
    }

    /// The fingerprint target `name` must acknowledge now.
    ///
    /// # Errors
    ///
    /// [`SetError::UnknownTarget`](crate::SetError::UnknownTarget) when the set
    /// has no target `name`.
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
    ///
    /// # Errors
    ///
    /// Those of [`material::target_files`].
    pub fn target_files(&self) -> Result<BTreeMap<String, Files>> {
        material::all_target_files(self)
    }
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

/// A self-signed root CA named `name` on `key`, wherever the key is.
pub(crate) fn root_on<R: CryptoRng + ?Sized>(
    key: pki_core::CaKey,
    name: &str,
    now: OffsetDateTime,
    lifetime: Duration,
    rng: &mut R,
) -> Result<CertificateAuthority> {
    let params = pki_core::CertificateParams::new(pki_core::Profile::RootCa, name, now, lifetime)?;
    let cert = params.self_signed_with(&key, rng)?;
    Ok(CertificateAuthority::new(cert, key)?)
}
