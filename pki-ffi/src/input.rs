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
//!
//! One file per engine (`signer`, `leaf`, `set`, `keys`, `cred`); what
//! they share (a key type, a CA as PEM, IP addresses, a lifetime) is here.

mod cred;
mod keys;
mod leaf;
mod set;
mod signer;

pub(crate) use cred::{CredCreateIn, CredRequest, CredStepIn};
pub(crate) use keys::{KeyRingCreateIn, KeyRingStepIn};
pub(crate) use leaf::LeafIn;
pub(crate) use set::{SetCreateIn, SetStepIn};
pub(crate) use signer::{PolicyIn, SignerCreateIn, SignerStepIn, ValidateIn};

use crate::abi::seconds;
use crate::error::Failure;
use pki_core::{CaImport, KeyAlgorithm};
use serde::Deserialize;
use std::net::IpAddr;

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
