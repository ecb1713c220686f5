//! A credential's inputs: `pki_cred_create` and `pki_cred_step` (an
//! advance, or a report of what the embedder did).

use crate::abi::seconds;
use crate::error::Failure;
use base64::Engine as _;
use pki_rotate::credential::{CredentialInput, CredentialPolicy, Secret};
use serde::Deserialize;

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
