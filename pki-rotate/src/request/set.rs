//! A CA set's requests: create and step.

use super::{CaPem, KeyType, RequestError, ips, lifetime, seconds};
use crate::set::ImportedCa;
use crate::{LeafSpec, Roles, SetInput, SetStep};
use pki_core::KeyAlgorithm;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// One CA of a new set.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetCa {
    /// Its name (`cluster`, `etcd`…).
    pub name: String,
    /// `"serving"`, `"client"` or `"serving+client"`.
    pub roles: String,
}

/// Creates a CA set.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetCreate {
    /// One new CA per item.
    pub cas: Vec<SetCa>,
    /// The CAs' key type (`"p256"` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_type: Option<KeyType>,
    /// The CAs' lifetime (1825 days by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime_seconds: Option<i64>,
}

impl SetCreate {
    /// The CAs with their roles.
    ///
    /// # Errors
    ///
    /// [`RequestError::Rotate`] with
    /// [`SetError::Invalid`](crate::SetError::Invalid) for roles that do not
    /// parse.
    pub fn cas(&self) -> Result<Vec<(String, Roles)>, RequestError> {
        self.cas
            .iter()
            .map(|c| Ok((c.name.clone(), c.roles.parse::<Roles>()?)))
            .collect()
    }

    /// The CAs' key algorithm.
    pub fn algorithm(&self) -> KeyAlgorithm {
        self.key_type
            .map_or(KeyAlgorithm::EcdsaP256, KeyType::algorithm)
    }

    /// The CAs' lifetime.
    pub fn lifetime(&self) -> time::Duration {
        self.lifetime_seconds
            .map_or(crate::set::DEFAULT_CA_LIFETIME, seconds)
    }
}

/// A CA imported at the start of a set's rotation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetImport {
    /// The CA of the set it replaces.
    pub name: String,
    /// Its certificate (and possibly key and chain), PEM.
    pub ca: String,
    /// Its key, PEM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Its chain, PEM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
}

/// A leaf of a set, issued for a target.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetIssue {
    /// The leaf's name.
    pub name: String,
    /// The CA that signs it.
    pub ca: String,
    /// A serving certificate.
    #[serde(default)]
    pub serving: bool,
    /// A client certificate.
    #[serde(default)]
    pub client: bool,
    /// Its DNS names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns_names: Vec<String>,
    /// Its IP addresses, as text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<String>,
    /// Its common name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_name: Option<String>,
    /// The target that loads it (created if new).
    pub target: String,
    /// Its lifetime (365 days by default, cut at the CA's NotAfter).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime_seconds: Option<i64>,
    /// Move a leaf another target has.
    #[serde(default)]
    pub replace: bool,
}

/// A target and the bundles it loads.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetTarget {
    /// The target's name.
    pub name: String,
    /// The CAs whose serving bundle it loads (absent: kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusts: Option<Vec<String>>,
    /// The CAs whose client bundle it loads (absent: kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_ca: Option<Vec<String>>,
}

/// Starts a rotation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetStart {
    /// Why (recorded).
    pub reason: String,
    /// Move serving certificates one target at a time.
    #[serde(default)]
    pub one_at_a_time: bool,
    /// CAs supplied instead of generated.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<SetImport>,
}

/// A target and a fingerprint it loaded.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetAck {
    /// The target.
    pub target: String,
    /// What it loaded.
    pub fingerprint: String,
}

/// A target that failed to load its files.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetFail {
    /// The target.
    pub target: String,
    /// Why.
    pub reason: String,
}

/// A target named only.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetRetry {
    /// The target.
    pub target: String,
}

/// Go to the next step.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetAdvance {
    /// Passes a gate that still waits for targets (recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub override_reason: Option<String>,
    /// The step being left (once left, nothing to do).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<SetStep>,
}

/// Abort to the step's safe target.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetAbort {
    /// Allows an abort that strands targets (recorded with them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub override_reason: Option<String>,
}

/// One CA set step: one request; none is a report.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum SetStepRequest {
    /// Nothing: a report.
    #[default]
    Nothing,
    /// Issue (or re-issue) a leaf.
    Issue(SetIssue),
    /// Create a target or set the bundles it loads.
    Target(SetTarget),
    /// Start a rotation.
    Start(SetStart),
    /// A target loaded its files.
    Ack(SetAck),
    /// A target failed to load its files.
    Fail(SetFail),
    /// A failed target will try again.
    Retry(SetRetry),
    /// Go to the next step.
    Advance(SetAdvance),
    /// Abort.
    Abort(SetAbort),
}

impl SetStepRequest {
    /// The engine's input at `now` (imported CAs are validated at `now`).
    ///
    /// # Errors
    ///
    /// [`RequestError::Invalid`] for an IP address that does not parse or a
    /// lifetime that is not positive in an issue; for each imported CA of a
    /// start, [`RequestError::Rotate`] when it does not read (see
    /// [`CaPem::parse`](super::CaPem::parse)) or does not validate at `now`.
    pub fn input(&self, now: OffsetDateTime) -> Result<SetInput, RequestError> {
        Ok(match self {
            SetStepRequest::Nothing => SetInput::Nothing,
            SetStepRequest::Issue(i) => i.input()?,
            SetStepRequest::Target(t) => {
                let set = |v: &Option<Vec<String>>| v.as_ref().map(|l| l.iter().cloned().collect());
                SetInput::Target {
                    name: t.name.clone(),
                    trusts: set(&t.trusts),
                    client_ca: set(&t.client_ca),
                }
            }
            SetStepRequest::Start(s) => SetInput::Start {
                reason: s.reason.clone(),
                one_at_a_time: s.one_at_a_time,
                imports: s
                    .imports
                    .iter()
                    .map(|i| i.imported(now))
                    .collect::<Result<_, _>>()?,
            },
            SetStepRequest::Ack(a) => SetInput::Ack {
                target: a.target.clone(),
                fingerprint: a.fingerprint.clone(),
            },
            SetStepRequest::Fail(f) => SetInput::Fail {
                target: f.target.clone(),
                reason: f.reason.clone(),
            },
            SetStepRequest::Retry(r) => SetInput::Retry {
                target: r.target.clone(),
            },
            SetStepRequest::Advance(a) => SetInput::Advance {
                override_reason: a.override_reason.clone(),
                from: a.from,
            },
            SetStepRequest::Abort(a) => SetInput::Abort {
                override_reason: a.override_reason.clone(),
            },
        })
    }
}

impl SetIssue {
    fn input(&self) -> Result<SetInput, RequestError> {
        Ok(SetInput::Issue {
            name: self.name.clone(),
            replace: self.replace,
            spec: LeafSpec {
                ca: self.ca.clone(),
                serving: self.serving,
                client: self.client,
                dns_names: self.dns_names.clone(),
                ip_addresses: ips("ip_addresses", &self.ip_addresses)?,
                common_name: self.common_name.clone(),
                target: self.target.clone(),
                lifetime: lifetime(self.lifetime_seconds, crate::set::DEFAULT_SET_LEAF_LIFETIME)?,
            },
        })
    }
}

impl SetImport {
    fn imported(&self, now: OffsetDateTime) -> Result<ImportedCa, RequestError> {
        let import = CaPem {
            ca: self.ca.clone(),
            key: self.key.clone(),
            chain: self.chain.clone(),
        }
        .parse()?;
        Ok(ImportedCa::new(&self.name, import.validate(now)?))
    }
}
