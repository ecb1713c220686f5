//! [`CredentialPolicy`]: how long a credential lives and how long its
//! predecessor stays usable.

use crate::model::error::{Result, RotateError};
use pki_core::policy::human;
use time::Duration;

/// How long a credential lives and how long its predecessor stays usable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CredentialPolicy {
    /// A credential is rotated once `mint_time + expire` has passed (CCO's
    /// `ExpireHours`).
    pub expire: Duration,
    /// The previous credential is revoked once `mint_time + grace` of its
    /// successor has passed (CCO hardcodes 10 minutes).
    pub grace: Duration,
}

impl CredentialPolicy {
    /// Refuses an expiry that is not positive, a negative grace, and a
    /// grace not shorter than the expiry (the next rotation would be due
    /// while the old credential still waits: three would be live).
    ///
    /// # Errors
    ///
    /// [`CredentialError::InvalidPolicy`](crate::CredentialError::InvalidPolicy)
    /// saying which of these holds.
    pub fn validate(&self) -> Result<()> {
        if self.expire <= Duration::ZERO {
            return Err(RotateError::Credential(
                crate::CredentialError::InvalidPolicy(format!(
                    "expiry must be positive, got {}",
                    human(self.expire)
                )),
            ));
        }
        if self.grace < Duration::ZERO {
            return Err(RotateError::Credential(
                crate::CredentialError::InvalidPolicy(format!(
                    "grace period must not be negative, got {}",
                    human(self.grace)
                )),
            ));
        }
        if self.grace >= self.expire {
            return Err(RotateError::Credential(
                crate::CredentialError::InvalidPolicy(format!(
                    "grace period {} must be shorter than the expiry {}: the next rotation would be due before the old credential is revoked",
                    human(self.grace),
                    human(self.expire)
                )),
            ));
        }
        Ok(())
    }
}
