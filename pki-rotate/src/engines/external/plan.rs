//! Deciding what an operator's request to an external CA does: validate a
//! replacement (or force it), or renew the current CA on its key.

use super::validation::Validation;
use super::{ExternalInput, ExternalPlan};
use crate::engines::signer::{OverriddenCheck, SignerState};
use crate::model::error::{Result, RotateError};
use pki_core::datetime::rfc3339;
use time::OffsetDateTime;

/// Decides: validates a replacement (refusing it unless every failing
/// check may be and is overridden), or checks that renewal is possible.
///
/// # Errors
///
/// For a renewal:
/// [`SignerError::ImportedCaRenewal`](crate::SignerError::ImportedCaRenewal)
/// when the CA was imported, [`RotateError::Expired`] when it is not valid at
/// `now`, a [`RotateError::Core`] when `now` plus the lifetime overflows. For a
/// replacement:
/// [`SignerError::EmptyForcedReason`](crate::SignerError::EmptyForcedReason)
/// and [`RotateError::InvalidText`] for a force reason that is blank or cannot
/// be recorded;
/// [`SignerError::ValidationFailed`](crate::SignerError::ValidationFailed) when
/// a check fails and no force is given, or a check that cannot be forced fails;
/// a [`RotateError::Core`] when the replacement does not make a CA.
pub fn plan(
    state: &SignerState,
    input: &ExternalInput,
    now: OffsetDateTime,
) -> Result<ExternalPlan> {
    match input {
        ExternalInput::Nothing => Ok(ExternalPlan::Nothing {
            now,
            already_done: None,
        }),
        ExternalInput::RenewSameKey => {
            if state.external.is_some() {
                return Err(RotateError::Signer(crate::SignerError::ImportedCaRenewal {
                    ca: state.ca.cert.id(),
                }));
            }
            if !state.ca.cert.is_valid_at(now) {
                return Err(RotateError::Expired {
                    what: format!("CA {}", state.ca.cert.id()),
                    at: state.ca.cert.not_after(),
                });
            }
            pki_core::datetime::add(now, state.policy.rotation.lifetime)?;
            Ok(ExternalPlan::RenewSameKey { now })
        }
        ExternalInput::Replace(replacement) => {
            let force = match &replacement.force {
                Some(r) if r.trim().is_empty() => {
                    return Err(RotateError::Signer(crate::SignerError::EmptyForcedReason));
                }
                other => other.clone(),
            };
            if let Some(reason) = &force {
                crate::model::text::check_reason("the forced rotation's reason", reason)?;
            }
            // The request's identity is the CA it supplies: the one in use
            // already (a rerun after a lost reply, or after a kill) is done.
            if replacement.import.cert == state.ca.cert {
                let since = state
                    .history
                    .iter()
                    .rev()
                    .find(|r| r.to == state.ca.cert.id())
                    .map(|r| format!(" since {}", rfc3339(r.at)))
                    .unwrap_or_default();
                return Ok(ExternalPlan::Nothing {
                    now,
                    already_done: Some(format!(
                        "CA {} is the CA in use{since}",
                        state.ca.cert.id()
                    )),
                });
            }
            let validation = Validation::run(
                state,
                &replacement.import,
                &replacement.service_accounts,
                now,
            );
            let failed: Vec<OverriddenCheck> = validation.report.overridden();
            let hard = validation.report.failed().any(|c| !c.overridable());
            if !failed.is_empty() && (force.is_none() || hard) {
                return Err(RotateError::Signer(crate::SignerError::ValidationFailed {
                    failed,
                    forced: force.is_some(),
                }));
            }
            let ca = replacement.import.authority()?;
            Ok(ExternalPlan::Replace {
                now,
                ca: Box::new(ca),
                chain: replacement.import.chain.clone(),
                topology: validation.topology,
                force,
                overridden: failed,
            })
        }
    }
}
