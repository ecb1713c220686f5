//! Leaf requests: `pki_leaf_reconcile`'s, and the changes to the leaves a
//! signer keeps.

use super::{ips, lifetime};
use crate::error::Failure;
use pki_rotate::{LeafChange, LeafKind, LeafRequest};
use serde::Deserialize;

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
    pub(super) fn change(&self) -> Result<LeafChange, Failure> {
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
