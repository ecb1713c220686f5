//! One request schema: every request an embedder sends to an engine, and
//! what a step did, as serde types defined once.
//!
//! The C ABI (pki-ffi) takes a document kind and one of these as JSON
//! through a few generic functions; the Go package's request structs and
//! result codes are generated from these definitions. Each request:
//!
//! - is a JSON object in `snake_case`; enumerations are lowercase text
//!   (`"p256"`, `"server"`, `"serving+client"`, `"trust-both"`); durations
//!   are `_seconds` integers; PEM is text;
//! - may carry `"version": 1` ([`REQUEST_VERSION`], the schema version;
//!   absent means 1). Another version is refused
//!   ([`RequestError::UnsupportedVersion`]), never read as this one;
//! - refuses unknown fields ([`RequestError::UnknownField`] names it), so a
//!   misspelt option is an error, never ignored;
//! - converts into the engine's own input, checking what JSON cannot say
//!   ([`RequestError::Invalid`] names the field); the engine then refuses
//!   what it refuses with its own errors ([`RequestError::Rotate`]).
//!
//! One file per engine ([`signer`], [`leaf`], [`set`], [`keys`],
//! [`cred`]) and the step result ([`step`]); what they share (a key type,
//! a CA as PEM, IP addresses, a lifetime) is here.

pub mod cred;
pub mod keys;
pub mod leaf;
pub mod set;
pub mod signer;
pub mod step;

pub use cred::{CredCreate, CredRequest, CredStep};
pub use keys::{KeyRingCreate, KeyRingPolicyFields, KeyRingStep};
pub use leaf::{LeafChangeRequest, LeafKindName, LeafRequestIn};
pub use set::{SetCreate, SetStepRequest};
pub use signer::{
    CreateSite, SignerCreate, SignerPolicyFields, SignerRequest, SignerStep, ValidateRequest,
};
pub use step::{NextAction, StepEvent, StepResult};

use crate::RotateError;
use pki_core::{CaImport, KeyAlgorithm};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use std::net::IpAddr;

/// The version of the request schema this build reads and of the step
/// results it writes.
pub const REQUEST_VERSION: u32 = 1;

/// Why a request was refused before any engine ran (or, for
/// [`RequestError::Rotate`], by the engine's own checks while converting).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RequestError {
    /// The JSON does not parse as the request: malformed, a field of the
    /// wrong type, a required field missing.
    #[error("{what}: {message}")]
    Json {
        /// Which request (`"input"`, …).
        what: String,
        /// serde's message: what and where.
        message: String,
    },
    /// A field this version of the request does not have.
    #[error("{what}: unknown field `{field}` ({message})")]
    UnknownField {
        /// Which request.
        what: String,
        /// The field's name.
        field: String,
        /// serde's message (the fields expected).
        message: String,
    },
    /// A schema version this build does not read.
    #[error("{what}: request version {version} is not supported (this build reads {supported})")]
    UnsupportedVersion {
        /// Which request.
        what: String,
        /// The version given.
        version: u64,
        /// The version this build reads.
        supported: u32,
    },
    /// A field whose value parses but cannot be used, or fields that do
    /// not go together.
    #[error("{what}: `{field}`: {reason}")]
    Invalid {
        /// Which request.
        what: String,
        /// The field (or fields) concerned.
        field: String,
        /// What is wrong.
        reason: String,
    },
    /// What an engine's own checks refused while converting the request.
    #[error(transparent)]
    Rotate(#[from] RotateError),
}

impl From<pki_core::Error> for RequestError {
    fn from(e: pki_core::Error) -> Self {
        RequestError::Rotate(RotateError::Core(e))
    }
}

impl RequestError {
    /// An unusable `field` of the request `input`.
    pub fn invalid(field: impl Into<String>, reason: impl Into<String>) -> Self {
        RequestError::Invalid {
            what: "input".into(),
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// Reads one request from JSON: the `version` field checked and removed,
/// then every other field read into `T`, unknown fields refused. `what`
/// names the request in messages (`"input"`).
///
/// # Errors
///
/// [`RequestError::Json`] for JSON that does not parse, a field of the wrong
/// type or missing, or a `version` that is not an unsigned integer;
/// [`RequestError::UnknownField`] for a field `T` does not have;
/// [`RequestError::UnsupportedVersion`] for a `version` other than
/// [`REQUEST_VERSION`].
pub fn from_json<T: DeserializeOwned>(what: &str, bytes: &[u8]) -> Result<T, RequestError> {
    let json = |e: serde_json::Error| classify(what, &e);
    let mut value: serde_json::Value = serde_json::from_slice(bytes).map_err(json)?;
    if let Some(map) = value.as_object_mut()
        && let Some(version) = map.remove("version")
    {
        match version.as_u64() {
            Some(v) if v == u64::from(REQUEST_VERSION) => {}
            Some(v) => {
                return Err(RequestError::UnsupportedVersion {
                    what: what.into(),
                    version: v,
                    supported: REQUEST_VERSION,
                });
            }
            None => {
                return Err(RequestError::Json {
                    what: what.into(),
                    message: format!("`version` must be a positive integer, got {version}"),
                });
            }
        }
    }
    T::deserialize(value).map_err(json)
}

/// [`from_json`] for a step request, where asking for nothing is the
/// engine's default input (its periodic step): no request at all (`None`),
/// and `{}` or `{"version": 1}` alone, are `T::default()`.
///
/// # Errors
///
/// Those of [`from_json`]. No request at all is not an error.
pub fn from_json_or_default<T: DeserializeOwned + Default>(
    what: &str,
    bytes: Option<&[u8]>,
) -> Result<T, RequestError> {
    let Some(bytes) = bytes else {
        return Ok(T::default());
    };
    let value: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| classify(what, &e))?;
    let empty = value
        .as_object()
        .is_some_and(|m| m.keys().all(|k| k == "version"));
    let parsed: serde_json::Value = from_json(what, bytes)?;
    if empty {
        return Ok(T::default());
    }
    T::deserialize(parsed).map_err(|e| classify(what, &e))
}

/// A serde error as a [`RequestError`], an unknown field by name.
fn classify(what: &str, e: &serde_json::Error) -> RequestError {
    let message = e.to_string();
    if let Some(rest) = message.strip_prefix("unknown field `")
        && let Some((field, _)) = rest.split_once('`')
    {
        return RequestError::UnknownField {
            what: what.into(),
            field: field.into(),
            message,
        };
    }
    RequestError::Json {
        what: what.into(),
        message,
    }
}

/// A key type: `"p256"` (the default), `"p384"`, `"rsa2048"`, `"rsa3072"`,
/// `"rsa4096"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KeyType {
    /// ECDSA P-256.
    P256,
    /// ECDSA P-384.
    P384,
    /// RSA 2048.
    Rsa2048,
    /// RSA 3072.
    Rsa3072,
    /// RSA 4096.
    Rsa4096,
}

impl KeyType {
    /// The key algorithm of pki-core.
    pub fn algorithm(self) -> KeyAlgorithm {
        match self {
            KeyType::P256 => KeyAlgorithm::EcdsaP256,
            KeyType::P384 => KeyAlgorithm::EcdsaP384,
            KeyType::Rsa2048 => KeyAlgorithm::Rsa2048,
            KeyType::Rsa3072 => KeyAlgorithm::Rsa3072,
            KeyType::Rsa4096 => KeyAlgorithm::Rsa4096,
        }
    }
}

/// A CA given as PEM: its certificate (possibly with its key and the chain
/// above it, issuer first), its key and its chain.
#[derive(Debug, Clone, Default, serde::Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CaPem {
    /// The certificate, and possibly its key and chain.
    pub ca: String,
    /// Its private key, when not in `ca`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The chain above it, issuer first, when not in `ca`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
}

impl CaPem {
    /// The CA parsed (not validated yet).
    ///
    /// # Errors
    ///
    /// [`RequestError::Rotate`] with the PEM's or the key's error (see
    /// [`CaImport::parse`]) when the certificate, key or chain does not read.
    pub fn parse(&self) -> Result<CaImport, RequestError> {
        Ok(CaImport::parse(
            self.ca.as_bytes(),
            self.key.as_deref().map(str::as_bytes),
            self.chain.as_deref().map(str::as_bytes),
        )?)
    }
}

/// IP addresses given as text.
fn ips(field: &str, texts: &[String]) -> Result<Vec<IpAddr>, RequestError> {
    texts
        .iter()
        .map(|t| {
            t.parse()
                .map_err(|_| RequestError::invalid(field, format!("\"{t}\" is not an IP address")))
        })
        .collect()
}

/// A duration in seconds.
pub fn seconds(seconds: i64) -> time::Duration {
    time::Duration::seconds(seconds)
}

/// An optional positive lifetime, `default` when absent.
fn lifetime(s: Option<i64>, default: time::Duration) -> Result<time::Duration, RequestError> {
    match s {
        None => Ok(default),
        Some(s) if s > 0 => Ok(seconds(s)),
        Some(s) => Err(RequestError::invalid(
            "lifetime_seconds",
            format!("must be positive, got {s}"),
        )),
    }
}

#[cfg(test)]
mod tests;
