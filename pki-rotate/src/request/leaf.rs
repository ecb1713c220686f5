//! Leaf requests: a leaf reconciled against a signer, and the changes to
//! the leaves a signer keeps.

use super::{RequestError, ips, lifetime};
use crate::{LeafChange, LeafKind, LeafRequest};
use serde::{Deserialize, Serialize};

/// A leaf kind: `"server"`, `"client"`, `"server+client"`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum LeafKindName {
    /// A serving certificate.
    #[default]
    #[serde(rename = "server")]
    Server,
    /// A client certificate.
    #[serde(rename = "client")]
    Client,
    /// Both.
    #[serde(rename = "server+client")]
    ServerClient,
}

/// A leaf request.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeafRequestIn {
    /// What the leaf is for.
    pub kind: LeafKindName,
    /// Its DNS names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns_names: Vec<String>,
    /// Its IP addresses, as text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<String>,
    /// Its lifetime (the default leaf lifetime when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime_seconds: Option<i64>,
}

impl LeafRequestIn {
    /// The engine's leaf request.
    ///
    /// # Errors
    ///
    /// [`RequestError::Invalid`] naming the field: an empty DNS name, an IP
    /// address that does not parse, no DNS name and no IP address, or a
    /// lifetime that is not positive. The names themselves are checked by the
    /// engine ([`LeafRequest::validate`]).
    pub fn request(&self) -> Result<LeafRequest, RequestError> {
        if self.dns_names.iter().any(String::is_empty) {
            return Err(RequestError::invalid("dns_names", "a DNS name is empty"));
        }
        let ip_addresses = ips("ip_addresses", &self.ip_addresses)?;
        if self.dns_names.is_empty() && ip_addresses.is_empty() {
            return Err(RequestError::invalid(
                "dns_names, ip_addresses",
                "a leaf needs at least one DNS name or IP address",
            ));
        }
        Ok(LeafRequest {
            kind: match self.kind {
                LeafKindName::Server => LeafKind::Server,
                LeafKindName::Client => LeafKind::Client,
                LeafKindName::ServerClient => LeafKind::ServerClient,
            },
            dns_names: self.dns_names.clone(),
            ip_addresses,
            lifetime: lifetime(self.lifetime_seconds, crate::DEFAULT_LEAF_LIFETIME)?,
        })
    }
}

/// A leaf the signer keeps, named.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedLeaf {
    /// Its name (`certs/NAME/` in a directory store).
    pub name: String,
    /// What the leaf is for.
    pub kind: LeafKindName,
    /// Its DNS names.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dns_names: Vec<String>,
    /// Its IP addresses, as text.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ip_addresses: Vec<String>,
    /// Its lifetime (the default leaf lifetime when absent).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime_seconds: Option<i64>,
}

impl NamedLeaf {
    fn request(&self) -> Result<LeafRequest, RequestError> {
        LeafRequestIn {
            kind: self.kind,
            dns_names: self.dns_names.clone(),
            ip_addresses: self.ip_addresses.clone(),
            lifetime_seconds: self.lifetime_seconds,
        }
        .request()
    }
}

/// A leaf named only.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeafName {
    /// The leaf's name.
    pub name: String,
}

/// A change to the leaves a signer keeps.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum LeafChangeRequest {
    /// Add a leaf or change its request (more names, a longer lifetime).
    Request(NamedLeaf),
    /// Like `request`, and may also change the kind or drop names.
    Replace(NamedLeaf),
    /// Stop keeping a leaf.
    Remove(LeafName),
    /// Issue a new key and certificate now.
    Renew(LeafName),
}

impl LeafChangeRequest {
    /// The engine's leaf change.
    ///
    /// # Errors
    ///
    /// Those of [`LeafRequestIn::request`] for a request or a replacement.
    /// Removals and renewals never fail here.
    pub fn change(&self) -> Result<LeafChange, RequestError> {
        Ok(match self {
            LeafChangeRequest::Request(l) => LeafChange::Request {
                name: l.name.clone(),
                request: l.request()?,
            },
            LeafChangeRequest::Replace(l) => LeafChange::Replace {
                name: l.name.clone(),
                request: l.request()?,
            },
            LeafChangeRequest::Remove(n) => LeafChange::Remove {
                name: n.name.clone(),
            },
            LeafChangeRequest::Renew(n) => LeafChange::Renew {
                name: n.name.clone(),
            },
        })
    }
}
