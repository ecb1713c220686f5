//! A credential's requests: create, and a step (an advance, or a report
//! of what the embedder did).

use super::{RequestError, seconds};
use crate::credential::{CredentialInput, CredentialPolicy, Secret};
use base64::Engine as _;
use serde::{Deserialize, Serialize};

/// Creates a credential.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredCreate {
    /// Rotate once this long has passed since the mint.
    pub expire_seconds: i64,
    /// Revoke the previous credential this long after its successor's mint.
    pub grace_seconds: i64,
}

impl CredCreate {
    /// The credential's policy (checked by the engine).
    pub fn policy(&self) -> CredentialPolicy {
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
) -> Result<Option<Vec<u8>>, RequestError> {
    match (text, base64) {
        (Some(_), Some(_)) => Err(RequestError::invalid(
            what,
            format!("give `{what}` or `{what}_base64`, not both"),
        )),
        (Some(t), None) => Ok(Some(t.as_bytes().to_vec())),
        (None, Some(b)) => base64::engine::general_purpose::STANDARD
            .decode(b)
            .map(Some)
            .map_err(|e| RequestError::invalid(format!("{what}_base64"), e.to_string())),
        (None, None) => Ok(None),
    }
}

/// An advance, by an owner or none.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredAdvance {
    /// The replica that keeps its mint captures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
}

/// A mint's result.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredMinted {
    /// The rotation minted for.
    pub rotation: u64,
    /// The attempt.
    pub attempt: u32,
    /// The credential, as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential: Option<String>,
    /// The credential, as base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credential_base64: Option<String>,
}

/// A failed mint.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredMintFailed {
    /// The rotation minted for.
    pub rotation: u64,
    /// The attempt.
    pub attempt: u32,
    /// Why, on one line in the status.
    pub message: String,
    /// What the mint returned before it failed, as text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured: Option<String>,
    /// The same as base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub captured_base64: Option<String>,
}

/// A rotation named only.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredRevoked {
    /// The rotation whose old credential is revoked.
    pub rotation: u64,
}

/// A failed revocation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredRevokeFailed {
    /// The rotation whose old credential was to be revoked.
    pub rotation: u64,
    /// Why.
    pub message: String,
}

/// A stray credential revoked.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredStrayRevoked {
    /// The rotation of the failed mint.
    pub rotation: u64,
    /// Its attempt.
    pub attempt: u32,
}

/// A stray credential's revocation failed.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CredStrayRevokeFailed {
    /// The rotation of the failed mint.
    pub rotation: u64,
    /// Its attempt.
    pub attempt: u32,
    /// Why.
    pub message: String,
}

/// One credential step: advance (none given), or report what the
/// embedder did.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum CredStep {
    /// Advance with no owner (no request given).
    #[serde(skip)]
    #[default]
    Default,
    /// Take every due bookkeeping step and say what to do next.
    Advance(CredAdvance),
    /// The mint produced the credential.
    Minted(CredMinted),
    /// The mint failed.
    MintFailed(CredMintFailed),
    /// The old credential is revoked.
    Revoked(CredRevoked),
    /// Its revocation failed.
    RevokeFailed(CredRevokeFailed),
    /// A stray credential is revoked.
    StrayRevoked(CredStrayRevoked),
    /// A stray credential's revocation failed.
    StrayRevokeFailed(CredStrayRevokeFailed),
}

/// What a credential step does: advance (as an owner, or none), or record
/// one report.
#[derive(Debug)]
pub enum CredRequest {
    /// Advance, as this owner.
    Advance(Option<String>),
    /// Record one report.
    Report(CredentialInput),
}

fn secret(bytes: Vec<u8>) -> Secret {
    Secret::from_output(&zeroize::Zeroizing::new(bytes))
}

impl CredStep {
    /// The request it makes.
    ///
    /// # Errors
    ///
    /// [`RequestError::Invalid`] naming the field: an unusable `owner`, a
    /// `minted` report with neither or both of `credential` and
    /// `credential_base64`, a failed mint with both `captured` and
    /// `captured_base64`, or base64 that does not decode.
    pub fn request(&self) -> Result<CredRequest, RequestError> {
        Ok(match self {
            CredStep::Default => CredRequest::Advance(None),
            CredStep::Advance(CredAdvance { owner }) => {
                if let Some(o) = owner {
                    crate::credential::validate_owner(o)
                        .map_err(|e| RequestError::invalid("owner", e.to_string()))?;
                }
                CredRequest::Advance(owner.clone())
            }
            CredStep::Minted(m) => {
                let value = bytes_of(&m.credential, &m.credential_base64, "credential")?
                    .ok_or_else(|| {
                        RequestError::invalid("minted", "needs `credential` or `credential_base64`")
                    })?;
                CredRequest::Report(CredentialInput::Minted {
                    rotation: m.rotation,
                    attempt: m.attempt,
                    value: secret(value),
                })
            }
            CredStep::MintFailed(f) => CredRequest::Report(CredentialInput::MintFailed {
                rotation: f.rotation,
                attempt: f.attempt,
                message: f.message.clone(),
                captured: bytes_of(&f.captured, &f.captured_base64, "captured")?
                    .map(secret)
                    .filter(|v| !v.is_empty()),
            }),
            CredStep::Revoked(r) => CredRequest::Report(CredentialInput::Revoked {
                rotation: r.rotation,
            }),
            CredStep::RevokeFailed(r) => CredRequest::Report(CredentialInput::RevokeFailed {
                rotation: r.rotation,
                message: r.message.clone(),
            }),
            CredStep::StrayRevoked(s) => CredRequest::Report(CredentialInput::StrayRevoked {
                rotation: s.rotation,
                attempt: s.attempt,
            }),
            CredStep::StrayRevokeFailed(s) => {
                CredRequest::Report(CredentialInput::StrayRevokeFailed {
                    rotation: s.rotation,
                    attempt: s.attempt,
                    message: s.message.clone(),
                })
            }
        })
    }
}
