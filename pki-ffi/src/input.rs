//! The JSON inputs of the C ABI, one shape per request, and their
//! conversion into the engines' inputs.
//!
//! Every request crosses the ABI as one JSON value (pointer + length, UTF-8,
//! no NUL needed): the create and step requests of each engine, a leaf
//! request, a replacement CA to validate. Fields are `snake_case`;
//! enumerations are lowercase text (`"p256"`, `"server"`,
//! `"serving+client"`, `"trust-both"`); durations are `_seconds` integers;
//! PEM is text. Unknown fields are refused, so a misspelt option is an
//! error, never ignored: malformed input is `PKI_RESULT_INVALID_ARGUMENT`
//! with serde's message (what and where). What the JSON cannot say is
//! checked by the engine with its own codes (an empty forced reason is
//! `PKI_RESULT_EMPTY_FORCED_REASON`, a bad policy `PKI_RESULT_INVALID_POLICY`).

use crate::abi::seconds;
use crate::error::Failure;
use base64::Engine as _;
use pki_core::{CaImport, KeyAlgorithm};
use pki_rotate::credential::{CredentialInput, CredentialPolicy, Secret};
use pki_rotate::set::ImportedCa;
use pki_rotate::{
    ForcedRotation, KeyRingInput, KeyRingPolicy, LeafChange, LeafKind, LeafRequest, LeafSpec,
    Roles, ServiceAccountKeys, SetInput, SetStep, SignerPolicy, SignerState,
};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::net::IpAddr;
use time::OffsetDateTime;

/// A key type: `"p256"` (the default), `"p384"`, `"rsa2048"`, `"rsa3072"`,
/// `"rsa4096"`.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum KeyTypeIn {
    P256,
    P384,
    Rsa2048,
    Rsa3072,
    Rsa4096,
}

impl KeyTypeIn {
    pub(crate) fn algorithm(self) -> KeyAlgorithm {
        match self {
            KeyTypeIn::P256 => KeyAlgorithm::EcdsaP256,
            KeyTypeIn::P384 => KeyAlgorithm::EcdsaP384,
            KeyTypeIn::Rsa2048 => KeyAlgorithm::Rsa2048,
            KeyTypeIn::Rsa3072 => KeyAlgorithm::Rsa3072,
            KeyTypeIn::Rsa4096 => KeyAlgorithm::Rsa4096,
        }
    }
}

/// A signer policy; every field optional, the others kept from the base
/// (the default policy at creation, the document's at a step).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PolicyIn {
    lifetime_seconds: Option<i64>,
    min_trust_seconds: Option<i64>,
    /// 0 = unknown.
    reload_interval_seconds: Option<i64>,
    leaf_refresh_fraction: Option<f64>,
    keep_previous_root: Option<bool>,
}

impl PolicyIn {
    /// `base` with the fields given here, not checked yet.
    pub(crate) fn over(&self, mut base: SignerPolicy) -> SignerPolicy {
        if let Some(s) = self.lifetime_seconds {
            base.rotation.lifetime = seconds(s);
        }
        if let Some(s) = self.min_trust_seconds {
            base.rotation.min_trust = seconds(s);
        }
        if let Some(s) = self.reload_interval_seconds {
            base.rotation.reload_interval = (s != 0).then(|| seconds(s));
        }
        if let Some(f) = self.leaf_refresh_fraction {
            base.leaf_refresh_fraction = f;
        }
        if let Some(k) = self.keep_previous_root {
            base.keep_previous_root = k;
        }
        base
    }
}

/// A CA given as PEM: its certificate (possibly with its key and the chain
/// above it), its key and its chain.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CaIn {
    ca: String,
    key: Option<String>,
    chain: Option<String>,
}

impl CaIn {
    pub(crate) fn parse(&self) -> Result<CaImport, Failure> {
        Ok(CaImport::parse(
            self.ca.as_bytes(),
            self.key.as_deref().map(str::as_bytes),
            self.chain.as_deref().map(str::as_bytes),
        )?)
    }
}

/// `pki_signer_create`: a new CA, an imported one, or a saved document.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SignerCreateIn {
    common_name: Option<String>,
    key_type: Option<KeyTypeIn>,
    policy: Option<PolicyIn>,
    import: Option<CaIn>,
    state: Option<Box<RawValue>>,
}

impl SignerCreateIn {
    pub(crate) fn document(
        &self,
        now: OffsetDateTime,
        rng: &mut pki_core::OsRng,
    ) -> Result<SignerState, Failure> {
        let policy = || -> Result<SignerPolicy, Failure> {
            let mut base = SignerPolicy::default();
            if let Some(k) = self.key_type {
                base.key_algorithm = k.algorithm();
            }
            let policy = self.policy.clone().unwrap_or_default().over(base);
            policy.validate()?;
            Ok(policy)
        };
        match (&self.common_name, &self.import, &self.state) {
            (Some(cn), None, None) => Ok(SignerState::new(cn, policy()?, now, rng)?),
            (None, Some(ca), None) => Ok(SignerState::import(&ca.parse()?, policy()?, now)?),
            (None, None, Some(state)) => {
                if self.key_type.is_some() || self.policy.is_some() {
                    return Err(Failure::invalid(
                        "parameter `input`: a saved `state` carries its own key type and policy",
                    ));
                }
                Ok(SignerState::from_json(state.get().as_bytes())?)
            }
            _ => Err(Failure::invalid(
                "parameter `input`: give exactly one of `common_name` (a new CA), `import` \
                 (an existing CA) and `state` (a saved document)",
            )),
        }
    }
}

/// A leaf kind: `"server"`, `"client"`, `"server+client"`.
#[derive(Debug, Clone, Copy, Deserialize)]
pub(crate) enum LeafKindIn {
    #[serde(rename = "server")]
    Server,
    #[serde(rename = "client")]
    Client,
    #[serde(rename = "server+client")]
    ServerClient,
}

fn ips(texts: &[String]) -> Result<Vec<IpAddr>, Failure> {
    texts
        .iter()
        .map(|t| {
            t.parse()
                .map_err(|_| Failure::invalid(format!("\"{t}\" is not an IP address")))
        })
        .collect()
}

fn lifetime(s: Option<i64>, default: time::Duration) -> Result<time::Duration, Failure> {
    match s {
        None => Ok(default),
        Some(s) if s > 0 => Ok(seconds(s)),
        Some(s) => Err(Failure::invalid(format!(
            "`lifetime_seconds` must be positive, got {s}"
        ))),
    }
}

/// A leaf request: `pki_leaf_reconcile`'s, and the signer's kept leaves.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LeafIn {
    kind: LeafKindIn,
    #[serde(default)]
    dns_names: Vec<String>,
    #[serde(default)]
    ip_addresses: Vec<String>,
    lifetime_seconds: Option<i64>,
}

impl LeafIn {
    pub(crate) fn request(&self) -> Result<LeafRequest, Failure> {
        if self.dns_names.iter().any(String::is_empty) {
            return Err(Failure::invalid("a DNS name is empty"));
        }
        let ip_addresses = ips(&self.ip_addresses)?;
        if self.dns_names.is_empty() && ip_addresses.is_empty() {
            return Err(Failure::invalid(
                "a leaf needs at least one DNS name or IP address",
            ));
        }
        Ok(LeafRequest {
            kind: match self.kind {
                LeafKindIn::Server => LeafKind::Server,
                LeafKindIn::Client => LeafKind::Client,
                LeafKindIn::ServerClient => LeafKind::ServerClient,
            },
            dns_names: self.dns_names.clone(),
            ip_addresses,
            lifetime: lifetime(self.lifetime_seconds, pki_rotate::DEFAULT_LEAF_LIFETIME)?,
        })
    }
}

/// A leaf the signer keeps, named.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NamedLeafIn {
    name: String,
    kind: LeafKindIn,
    #[serde(default)]
    dns_names: Vec<String>,
    #[serde(default)]
    ip_addresses: Vec<String>,
    lifetime_seconds: Option<i64>,
}

impl NamedLeafIn {
    fn request(&self) -> Result<LeafRequest, Failure> {
        LeafIn {
            kind: self.kind,
            dns_names: self.dns_names.clone(),
            ip_addresses: self.ip_addresses.clone(),
            lifetime_seconds: self.lifetime_seconds,
        }
        .request()
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NameIn {
    name: String,
}

/// A change to the leaves a signer keeps.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum LeafChangeIn {
    /// Add a leaf or change its request (more names, a longer lifetime).
    Request(NamedLeafIn),
    /// Like `request`, and may also change the kind or drop names.
    Replace(NamedLeafIn),
    /// Stop keeping a leaf.
    Remove(NameIn),
    /// Issue a new key and certificate now.
    Renew(NameIn),
}

impl LeafChangeIn {
    fn change(&self) -> Result<LeafChange, Failure> {
        Ok(match self {
            LeafChangeIn::Request(l) => LeafChange::Request {
                name: l.name.clone(),
                request: l.request()?,
            },
            LeafChangeIn::Replace(l) => LeafChange::Replace {
                name: l.name.clone(),
                request: l.request()?,
            },
            LeafChangeIn::Remove(n) => LeafChange::Remove {
                name: n.name.clone(),
            },
            LeafChangeIn::Renew(n) => LeafChange::Renew {
                name: n.name.clone(),
            },
        })
    }
}

/// A forced rotation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForcedIn {
    reason: String,
    /// 0 or absent: the normal grace.
    grace_seconds: Option<i64>,
    #[serde(default)]
    no_bridges: bool,
}

/// A replacement CA and the service-account key sets to compare.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ValidateIn {
    ca: String,
    key: Option<String>,
    chain: Option<String>,
    current_keys: Option<String>,
    proposed_keys: Option<String>,
}

fn key_set(pem: &Option<String>) -> Result<Option<Vec<Vec<u8>>>, Failure> {
    pem.as_deref()
        .map(|p| ServiceAccountKeys::keys_from_pem(p.as_bytes()))
        .transpose()
        .map_err(Failure::from)
}

impl ValidateIn {
    pub(crate) fn import(&self) -> Result<CaImport, Failure> {
        CaIn {
            ca: self.ca.clone(),
            key: self.key.clone(),
            chain: self.chain.clone(),
        }
        .parse()
    }

    /// Both key sets as given (no key ring of a store).
    pub(crate) fn key_sets(&self) -> Result<ServiceAccountKeys, Failure> {
        Ok(ServiceAccountKeys {
            current: key_set(&self.current_keys)?,
            proposed: key_set(&self.proposed_keys)?,
        })
    }
}

/// `pki_signer_step`'s `rotate_to`: a replacement CA, and the reason to
/// override its failed checks.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RotateToIn {
    ca: String,
    key: Option<String>,
    chain: Option<String>,
    current_keys: Option<String>,
    proposed_keys: Option<String>,
    force: Option<String>,
}

impl RotateToIn {
    pub(crate) fn validate_in(&self) -> ValidateIn {
        ValidateIn {
            ca: self.ca.clone(),
            key: self.key.clone(),
            chain: self.chain.clone(),
            current_keys: self.current_keys.clone(),
            proposed_keys: self.proposed_keys.clone(),
        }
    }

    pub(crate) fn force(&self) -> Option<String> {
        self.force.clone()
    }

    /// The proposed key set as given, when no current set is: the store's
    /// key ring is then the current one.
    pub(crate) fn uses_store_keys(&self) -> bool {
        self.current_keys.is_none()
    }

    pub(crate) fn proposed_keys(&self) -> Option<&[u8]> {
        self.proposed_keys.as_deref().map(str::as_bytes)
    }
}

/// `pki_signer_step`: every field optional; `{}` (or NULL) is the periodic
/// controller step.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SignerStepIn {
    pub(crate) policy: Option<PolicyIn>,
    forced: Option<ForcedIn>,
    allow_trust_break: Option<String>,
    #[serde(default)]
    leaves: Vec<LeafChangeIn>,
    pub(crate) rotate_to: Option<RotateToIn>,
    #[serde(default)]
    pub(crate) renew_same_key: bool,
}

impl SignerStepIn {
    /// Whether the input asks for something besides `rotate_to` or
    /// `renew_same_key`, which are requests of their own.
    pub(crate) fn has_signer_fields(&self) -> bool {
        self.policy.is_some()
            || self.forced.is_some()
            || self.allow_trust_break.is_some()
            || !self.leaves.is_empty()
    }

    /// The signer input besides the policy (which needs the document).
    pub(crate) fn signer_input(&self) -> Result<pki_rotate::SignerInput, Failure> {
        let allow_trust_break = match &self.allow_trust_break {
            Some(r) if r.trim().is_empty() => {
                return Err(Failure::invalid(
                    "parameter `input`: `allow_trust_break` must not be blank (it is recorded)",
                ));
            }
            other => other.clone(),
        };
        Ok(pki_rotate::SignerInput {
            forced: self.forced.as_ref().map(|f| ForcedRotation {
                reason: f.reason.clone(),
                grace: f.grace_seconds.filter(|s| *s != 0).map(seconds),
                no_bridges: f.no_bridges,
            }),
            leaves: self
                .leaves
                .iter()
                .map(LeafChangeIn::change)
                .collect::<Result<_, _>>()?,
            allow_trust_break,
            ..pki_rotate::SignerInput::default()
        })
    }
}

/// One CA of a new set.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetCaIn {
    name: String,
    roles: String,
}

/// `pki_set_create`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetCreateIn {
    cas: Vec<SetCaIn>,
    key_type: Option<KeyTypeIn>,
    lifetime_seconds: Option<i64>,
}

/// The CLI's `pki set init --lifetime` default: 1825 days.
const DEFAULT_SET_LIFETIME: time::Duration = time::Duration::days(1825);

impl SetCreateIn {
    pub(crate) fn cas(&self) -> Result<Vec<(String, Roles)>, Failure> {
        self.cas
            .iter()
            .map(|c| Ok((c.name.clone(), c.roles.parse::<Roles>()?)))
            .collect()
    }

    pub(crate) fn algorithm(&self) -> KeyAlgorithm {
        self.key_type
            .map_or(KeyAlgorithm::EcdsaP256, KeyTypeIn::algorithm)
    }

    pub(crate) fn lifetime(&self) -> time::Duration {
        self.lifetime_seconds.map_or(DEFAULT_SET_LIFETIME, seconds)
    }
}

/// A CA imported at the start of a set's rotation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SetImportIn {
    name: String,
    ca: String,
    key: Option<String>,
    chain: Option<String>,
}

/// `pki_set_step`: one request; NULL asks for nothing (a report).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum SetStepIn {
    #[default]
    Nothing,
    Issue {
        name: String,
        ca: String,
        #[serde(default)]
        serving: bool,
        #[serde(default)]
        client: bool,
        #[serde(default)]
        dns_names: Vec<String>,
        #[serde(default)]
        ip_addresses: Vec<String>,
        common_name: Option<String>,
        target: String,
        lifetime_seconds: Option<i64>,
        #[serde(default)]
        replace: bool,
    },
    Target {
        name: String,
        trusts: Option<Vec<String>>,
        client_ca: Option<Vec<String>>,
    },
    Start {
        reason: String,
        #[serde(default)]
        one_at_a_time: bool,
        #[serde(default)]
        imports: Vec<SetImportIn>,
    },
    Ack {
        target: String,
        fingerprint: String,
    },
    Fail {
        target: String,
        reason: String,
    },
    Retry {
        target: String,
    },
    Advance {
        override_reason: Option<String>,
        from: Option<SetStep>,
    },
    Abort {
        override_reason: Option<String>,
    },
}

impl SetStepIn {
    pub(crate) fn input(&self, now: OffsetDateTime) -> Result<SetInput, Failure> {
        let set = |v: &Option<Vec<String>>| v.as_ref().map(|l| l.iter().cloned().collect());
        Ok(match self {
            SetStepIn::Nothing => SetInput::Nothing,
            SetStepIn::Issue {
                name,
                ca,
                serving,
                client,
                dns_names,
                ip_addresses,
                common_name,
                target,
                lifetime_seconds,
                replace,
            } => SetInput::Issue {
                name: name.clone(),
                replace: *replace,
                spec: LeafSpec {
                    ca: ca.clone(),
                    serving: *serving,
                    client: *client,
                    dns_names: dns_names.clone(),
                    ip_addresses: ips(ip_addresses)?,
                    common_name: common_name.clone(),
                    target: target.clone(),
                    lifetime: lifetime(
                        *lifetime_seconds,
                        pki_rotate::set::DEFAULT_SET_LEAF_LIFETIME,
                    )?,
                },
            },
            SetStepIn::Target {
                name,
                trusts,
                client_ca,
            } => SetInput::Target {
                name: name.clone(),
                trusts: set(trusts),
                client_ca: set(client_ca),
            },
            SetStepIn::Start {
                reason,
                one_at_a_time,
                imports,
            } => SetInput::Start {
                reason: reason.clone(),
                one_at_a_time: *one_at_a_time,
                imports: imports
                    .iter()
                    .map(|i| {
                        let import = CaIn {
                            ca: i.ca.clone(),
                            key: i.key.clone(),
                            chain: i.chain.clone(),
                        }
                        .parse()?;
                        Ok(ImportedCa::new(&i.name, import.validate(now)?))
                    })
                    .collect::<Result<_, Failure>>()?,
            },
            SetStepIn::Ack {
                target,
                fingerprint,
            } => SetInput::Ack {
                target: target.clone(),
                fingerprint: fingerprint.clone(),
            },
            SetStepIn::Fail { target, reason } => SetInput::Fail {
                target: target.clone(),
                reason: reason.clone(),
            },
            SetStepIn::Retry { target } => SetInput::Retry {
                target: target.clone(),
            },
            SetStepIn::Advance {
                override_reason,
                from,
            } => SetInput::Advance {
                override_reason: override_reason.clone(),
                from: *from,
            },
            SetStepIn::Abort { override_reason } => SetInput::Abort {
                override_reason: override_reason.clone(),
            },
        })
    }
}

/// A key ring policy; every field optional (the default's otherwise).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KeyRingPolicyIn {
    key_type: Option<KeyTypeIn>,
    lifetime_seconds: Option<i64>,
    grace_seconds: Option<i64>,
    /// 0 = not stated.
    max_token_lifetime_seconds: Option<i64>,
}

impl KeyRingPolicyIn {
    fn policy(&self) -> Result<KeyRingPolicy, Failure> {
        let mut p = KeyRingPolicy::default();
        if let Some(k) = self.key_type {
            if matches!(k, KeyTypeIn::P384) {
                return Err(Failure::invalid(
                    "key type \"p384\" is not a key type of the key ring (p256, rsa2048, \
                     rsa3072, rsa4096)",
                ));
            }
            p.algorithm = k.algorithm();
        }
        if let Some(s) = self.lifetime_seconds {
            p.lifetime = seconds(s);
        }
        if let Some(s) = self.grace_seconds {
            p.grace = seconds(s);
        }
        if let Some(s) = self.max_token_lifetime_seconds {
            p.max_token_lifetime = (s != 0).then(|| seconds(s));
        }
        Ok(p)
    }
}

/// `pki_keyring_create`: a new ring, an imported key set, or a saved document.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KeyRingCreateIn {
    policy: Option<KeyRingPolicyIn>,
    import: Option<String>,
    state: Option<Box<RawValue>>,
}

impl KeyRingCreateIn {
    pub(crate) fn document(
        &self,
        now: OffsetDateTime,
        rng: &mut pki_core::OsRng,
    ) -> Result<pki_rotate::KeyRing, Failure> {
        use pki_rotate::{ImportedKeys, KeyRing};
        if let Some(state) = &self.state {
            if self.policy.is_some() || self.import.is_some() {
                return Err(Failure::invalid(
                    "parameter `input`: a saved `state` comes alone (it carries its policy and keys)",
                ));
            }
            return Ok(KeyRing::from_json(state.get().as_bytes())?);
        }
        let policy = self.policy.clone().unwrap_or_default().policy()?;
        Ok(match &self.import {
            Some(keys) => KeyRing::import(
                policy,
                ImportedKeys::parse("import", keys.as_bytes())?,
                now,
                rng,
            )?,
            None => KeyRing::new(policy, now, rng)?,
        })
    }
}

/// `pki_keyring_step`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KeyRingStepIn {
    forced: Option<String>,
    #[serde(default)]
    retire: Vec<String>,
}

impl KeyRingStepIn {
    pub(crate) fn input(&self) -> KeyRingInput {
        let mut input = KeyRingInput::retire(self.retire.iter().cloned());
        input.forced = self.forced.clone();
        input
    }
}

/// `pki_cred_create`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct CredCreateIn {
    expire_seconds: i64,
    grace_seconds: i64,
}

impl CredCreateIn {
    pub(crate) fn policy(&self) -> CredentialPolicy {
        CredentialPolicy {
            expire: seconds(self.expire_seconds),
            grace: seconds(self.grace_seconds),
        }
    }
}

/// Bytes given as text or as base64 (for credentials that are not UTF-8).
fn bytes_of(
    text: &Option<String>,
    base64: &Option<String>,
    what: &str,
) -> Result<Option<Vec<u8>>, Failure> {
    match (text, base64) {
        (Some(_), Some(_)) => Err(Failure::invalid(format!(
            "parameter `input`: give `{what}` or `{what}_base64`, not both"
        ))),
        (Some(t), None) => Ok(Some(t.as_bytes().to_vec())),
        (None, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map(Some)
            .map_err(|e| Failure::invalid(format!("parameter `input`: `{what}_base64`: {e}"))),
        (None, None) => Ok(None),
    }
}

/// `pki_cred_step`: advance (NULL), or report what the embedder did.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub(crate) enum CredStepIn {
    #[serde(skip)]
    #[default]
    Default,
    Advance {
        owner: Option<String>,
    },
    Minted {
        rotation: u64,
        attempt: u32,
        credential: Option<String>,
        credential_base64: Option<String>,
    },
    MintFailed {
        rotation: u64,
        attempt: u32,
        message: String,
        captured: Option<String>,
        captured_base64: Option<String>,
    },
    Revoked {
        rotation: u64,
    },
    RevokeFailed {
        rotation: u64,
        message: String,
    },
    StrayRevoked {
        rotation: u64,
        attempt: u32,
    },
    StrayRevokeFailed {
        rotation: u64,
        attempt: u32,
        message: String,
    },
}

/// What a credential step does: advance (as an owner, or none), or record
/// one report.
pub(crate) enum CredRequest {
    Advance(Option<String>),
    Report(CredentialInput),
}

impl CredStepIn {
    pub(crate) fn request(&self) -> Result<CredRequest, Failure> {
        Ok(match self {
            CredStepIn::Default => CredRequest::Advance(None),
            CredStepIn::Advance { owner } => {
                if let Some(o) = owner {
                    pki_rotate::credential::validate_owner(o)
                        .map_err(|e| Failure::invalid(e.to_string()))?;
                }
                CredRequest::Advance(owner.clone())
            }
            CredStepIn::Minted {
                rotation,
                attempt,
                credential,
                credential_base64,
            } => {
                let value =
                    bytes_of(credential, credential_base64, "credential")?.ok_or_else(|| {
                        Failure::invalid(
                            "parameter `input`: `minted` needs `credential` or `credential_base64`",
                        )
                    })?;
                CredRequest::Report(CredentialInput::Minted {
                    rotation: *rotation,
                    attempt: *attempt,
                    value: Secret::from_output(&zeroize::Zeroizing::new(value)),
                })
            }
            CredStepIn::MintFailed {
                rotation,
                attempt,
                message,
                captured,
                captured_base64,
            } => CredRequest::Report(CredentialInput::MintFailed {
                rotation: *rotation,
                attempt: *attempt,
                message: message.clone(),
                captured: bytes_of(captured, captured_base64, "captured")?
                    .map(|b| Secret::from_output(&zeroize::Zeroizing::new(b)))
                    .filter(|v| !v.is_empty()),
            }),
            CredStepIn::Revoked { rotation } => CredRequest::Report(CredentialInput::Revoked {
                rotation: *rotation,
            }),
            CredStepIn::RevokeFailed { rotation, message } => {
                CredRequest::Report(CredentialInput::RevokeFailed {
                    rotation: *rotation,
                    message: message.clone(),
                })
            }
            CredStepIn::StrayRevoked { rotation, attempt } => {
                CredRequest::Report(CredentialInput::StrayRevoked {
                    rotation: *rotation,
                    attempt: *attempt,
                })
            }
            CredStepIn::StrayRevokeFailed {
                rotation,
                attempt,
                message,
            } => CredRequest::Report(CredentialInput::StrayRevokeFailed {
                rotation: *rotation,
                attempt: *attempt,
                message: message.clone(),
            }),
        })
    }
}
