//! A CA set's inputs: `pki_set_create` and `pki_set_step`.

use super::{CaIn, KeyTypeIn, ips, lifetime};
use crate::abi::seconds;
use crate::error::Failure;
use pki_core::KeyAlgorithm;
use pki_rotate::set::ImportedCa;
use pki_rotate::{LeafSpec, Roles, SetInput, SetStep};
use serde::Deserialize;
use time::OffsetDateTime;

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
        self.lifetime_seconds
            .map_or(pki_rotate::set::DEFAULT_CA_LIFETIME, seconds)
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
