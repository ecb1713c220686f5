//! cryptoki's errors as pki's: the return values a user can act on
//! become their own [`Error`] variants, the rest a one-line
//! [`Error::Pkcs11`] that names the operation.

use crate::error::Error;
use cryptoki::error::{Error as CkError, RvError};

/// What was being done when a call failed: the context of its error.
#[derive(Debug, Clone)]
pub(super) struct Doing<'a> {
    /// The token's label.
    pub token: &'a str,
    /// What was being done (`signing`, `generating a P-256 key`).
    pub what: &'a str,
    /// The mechanism in use, if any (`CKM_ECDSA`).
    pub mechanism: Option<&'static str>,
    /// The key object concerned, if any (`object="ca" id=%01`).
    pub object: Option<String>,
}

impl<'a> Doing<'a> {
    /// `what` on `token`, with no mechanism or object.
    pub fn new(token: &'a str, what: &'a str) -> Self {
        Doing {
            token,
            what,
            mechanism: None,
            object: None,
        }
    }

    /// The same with a mechanism.
    pub fn mechanism(mut self, mechanism: &'static str) -> Self {
        self.mechanism = Some(mechanism);
        self
    }

    /// The same about a key object.
    pub fn object(mut self, object: String) -> Self {
        self.object = Some(object);
        self
    }

    /// `e` as pki's error.
    pub fn error(&self, e: CkError) -> Error {
        let token = self.token.to_owned();
        let rv = match &e {
            CkError::Pkcs11(rv, _) => Some(*rv),
            _ => None,
        };
        match rv {
            Some(RvError::PinIncorrect | RvError::PinLenRange) => Error::Pkcs11WrongPin { token },
            Some(RvError::DeviceMemory) => Error::Pkcs11TokenFull {
                token,
                operation: self.what.to_owned(),
            },
            Some(RvError::MechanismInvalid | RvError::MechanismParamInvalid) => {
                Error::Pkcs11UnsupportedMechanism {
                    token,
                    mechanism: self.mechanism.unwrap_or("the mechanism asked for").to_owned(),
                }
            }
            Some(RvError::ObjectHandleInvalid | RvError::KeyHandleInvalid)
                if self.object.is_some() =>
            {
                Error::Pkcs11KeyNotFound {
                    token,
                    object: self.object.clone().unwrap_or_default(),
                }
            }
            Some(RvError::PinLocked) => self.other(
                "the user PIN is locked after too many wrong tries: have the token's security officer unlock it",
            ),
            Some(RvError::TokenNotPresent | RvError::DeviceRemoved) => {
                self.other("the token was removed")
            }
            _ => self.other(&one_line(&e.to_string())),
        }
    }

    /// [`Error::Pkcs11`] with `reason`.
    pub fn other(&self, reason: &str) -> Error {
        Error::Pkcs11 {
            operation: format!("{} on token \"{}\"", self.what, self.token),
            reason: reason.to_owned(),
        }
    }
}

/// `text` on one line.
pub(super) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use cryptoki::context::Function;

    fn mapped(rv: RvError) -> Error {
        Doing::new("ca", "signing")
            .mechanism("CKM_ECDSA")
            .object("id=%01".into())
            .error(CkError::Pkcs11(rv, Function::Sign))
    }

    #[test]
    fn each_return_value_a_user_can_act_on_has_its_own_one_line_error() {
        assert_eq!(
            mapped(RvError::PinIncorrect),
            Error::Pkcs11WrongPin { token: "ca".into() }
        );
        assert_eq!(
            mapped(RvError::DeviceMemory),
            Error::Pkcs11TokenFull {
                token: "ca".into(),
                operation: "signing".into()
            }
        );
        assert_eq!(
            mapped(RvError::MechanismInvalid),
            Error::Pkcs11UnsupportedMechanism {
                token: "ca".into(),
                mechanism: "CKM_ECDSA".into()
            }
        );
        assert_eq!(
            mapped(RvError::ObjectHandleInvalid),
            Error::Pkcs11KeyNotFound {
                token: "ca".into(),
                object: "id=%01".into()
            }
        );
        for rv in [
            RvError::PinIncorrect,
            RvError::DeviceMemory,
            RvError::MechanismInvalid,
            RvError::KeyHandleInvalid,
            RvError::PinLocked,
            RvError::GeneralError,
        ] {
            let text = mapped(rv).to_string();
            assert!(!text.contains('\n'), "{text}");
            assert!(text.contains("\"ca\""), "{text}");
        }
        let full = mapped(RvError::DeviceMemory).to_string();
        assert!(full.contains("destroy key objects nothing uses"), "{full}");
    }
}
