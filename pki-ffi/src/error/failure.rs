//! `Failure`, a failed call inside the library, and the result code of
//! each error of the engines.

use super::pki_result::{self, *};
use pki_core::VerifyError;
use pki_rotate::RotateError;
use pki_rotate::request::RequestError;

/// A failed call: the code returned and the message left in the last error.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: pki_result,
    pub(crate) message: String,
}

impl Failure {
    pub(crate) fn new(code: pki_result, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// A NULL pointer where one is required; `what` names the parameter.
    pub(crate) fn null(what: &str) -> Self {
        Failure::new(
            PKI_RESULT_NULL_PARAMETER,
            format!("parameter `{what}` is NULL"),
        )
    }

    pub(crate) fn invalid(message: impl Into<String>) -> Self {
        Failure::new(PKI_RESULT_INVALID_ARGUMENT, message)
    }
}

impl From<pki_core::Error> for Failure {
    fn from(e: pki_core::Error) -> Self {
        use pki_core::Error as E;
        let code = match &e {
            E::Pem { .. } => PKI_RESULT_PEM,
            E::UnexpectedPemLabel { .. } => PKI_RESULT_UNEXPECTED_PEM_LABEL,
            E::NoPemBlock { .. } => PKI_RESULT_NO_PEM_BLOCK,
            E::CertificateDecode { .. } => PKI_RESULT_CERTIFICATE_DECODE,
            E::MalformedExtension { .. } | E::DuplicateExtension { .. } => {
                PKI_RESULT_MALFORMED_EXTENSION
            }
            E::KeyDecode { .. } => PKI_RESULT_KEY_DECODE,
            E::UnsupportedKey { .. } => PKI_RESULT_UNSUPPORTED_KEY,
            E::RsaKeyTooSmall { .. } => PKI_RESULT_RSA_KEY_TOO_SMALL,
            E::KeyMismatch { .. } => PKI_RESULT_KEY_MISMATCH,
            E::Crypto { .. } => PKI_RESULT_CRYPTO,
            E::Issuance { .. } => PKI_RESULT_ISSUANCE,
            E::Time { .. } => PKI_RESULT_TIME,
            E::InvalidPolicy { .. } => PKI_RESULT_INVALID_POLICY,
            E::NotACa { .. } => PKI_RESULT_NOT_A_CA,
            E::NoRoot => PKI_RESULT_NO_ROOT,
            E::Import { source, .. } => return Failure::from((**source).clone()),
            E::TwoPrivateKeys { .. }
            | E::KeyWithoutCertificate { .. }
            | E::NoCertificate { .. }
            | E::EncryptedKey { .. }
            | E::ChainOutOfOrder { .. }
            | E::ChainHasNoRoot { .. }
            | E::ChainVerification { .. }
            | E::UnsupportedSignature { .. }
            | E::MissingPrivateKey { .. } => PKI_RESULT_IMPORT,
            E::Pkcs11TokenNotOpen { .. } => {
                // The engine names the CLI's variables; through the C ABI
                // the module comes with the store.
                return Failure::new(
                    PKI_RESULT_PKCS11_NOT_OPEN,
                    format!(
                        "{e}; through the C ABI: open the store with the `pkcs11_module` and \
                         `pkcs11_pin_file` options"
                    ),
                );
            }
            E::Pkcs11Uri { .. } => PKI_RESULT_INVALID_ARGUMENT,
            E::Pkcs11WrongPin { .. } => PKI_RESULT_PKCS11_WRONG_PIN,
            E::Pkcs11TokenNotFound { .. } => PKI_RESULT_PKCS11_TOKEN_NOT_FOUND,
            E::Pkcs11KeyNotFound { .. } => PKI_RESULT_PKCS11_KEY_NOT_FOUND,
            E::Pkcs11KeyReplaced { .. } => PKI_RESULT_PKCS11_KEY_REPLACED,
            E::Pkcs11TokenFull { .. } => PKI_RESULT_PKCS11_TOKEN_FULL,
            E::Pkcs11Module { .. }
            | E::Pkcs11KeyAmbiguous { .. }
            | E::Pkcs11KeyExists { .. }
            | E::Pkcs11UnsupportedMechanism { .. }
            | E::Pkcs11 { .. } => PKI_RESULT_PKCS11,
            _ => PKI_RESULT_UNEXPECTED,
        };
        Failure::new(code, e.to_string())
    }
}

impl From<RotateError> for Failure {
    fn from(e: RotateError) -> Self {
        use pki_rotate::{CredentialError, DocumentError, SetError, SignerError, StoreError};
        let code = match &e {
            RotateError::Core(inner) => return Failure::from(inner.clone()),
            RotateError::InvalidText { .. } => PKI_RESULT_INVALID_ARGUMENT,
            RotateError::TrustCheckFailed { .. } => PKI_RESULT_TRUST_CHECK_FAILED,
            RotateError::Expired { .. } => PKI_RESULT_EXPIRED,
            RotateError::KeyRing(k) => keyring_result(k),
            RotateError::Store(s) => match s {
                StoreError::Conflict { .. } | StoreError::TooManyConflicts { .. } => {
                    PKI_RESULT_CONFLICT
                }
                StoreError::NotInitialized(_) => PKI_RESULT_NOT_INITIALIZED,
                StoreError::AlreadyInitialized(_) => PKI_RESULT_ALREADY_INITIALIZED,
                StoreError::UnknownOutcome { .. } => PKI_RESULT_UNKNOWN_OUTCOME,
                StoreError::InvalidKey { .. } => PKI_RESULT_INVALID_ARGUMENT,
                StoreError::Io { .. } | StoreError::Backend { .. } | StoreError::Sealing { .. } => {
                    PKI_RESULT_STORE
                }
                _ => PKI_RESULT_UNEXPECTED,
            },
            RotateError::Document(d) => match d {
                DocumentError::Unsupported { .. } => PKI_RESULT_UNSUPPORTED_STATE_VERSION,
                _ => PKI_RESULT_CORRUPT_STATE,
            },
            RotateError::Signer(s) => match s {
                SignerError::ClockBeforeCa { .. } => PKI_RESULT_CLOCK_BEFORE_CA,
                SignerError::EmptyForcedReason => PKI_RESULT_EMPTY_FORCED_REASON,
                SignerError::InvalidGrace(_) => PKI_RESULT_INVALID_GRACE,
                SignerError::InvalidLeafName(_) => PKI_RESULT_INVALID_LEAF_NAME,
                SignerError::InvalidRefreshFraction(_) => PKI_RESULT_INVALID_REFRESH_FRACTION,
                SignerError::UnknownLeaf(_) => PKI_RESULT_UNKNOWN_LEAF,
                SignerError::ValidationFailed { .. } | SignerError::LeafRefused { .. } => {
                    PKI_RESULT_VALIDATION_FAILED
                }
                SignerError::ImportedCaRenewal { .. } | SignerError::ImportedCaRotation { .. } => {
                    PKI_RESULT_IMPORTED_CA
                }
                SignerError::TrustBreak { .. } => PKI_RESULT_TRUST_BREAK,
                SignerError::UnknownBundle { .. } => PKI_RESULT_UNKNOWN_BUNDLE,
                SignerError::InvalidConsumerName(_) => PKI_RESULT_INVALID_ARGUMENT,
                _ => PKI_RESULT_UNEXPECTED,
            },
            RotateError::Set(s) => match s {
                SetError::UnknownCa(_) => PKI_RESULT_SET_UNKNOWN_CA,
                SetError::UnknownTarget(_) => PKI_RESULT_SET_UNKNOWN_TARGET,
                SetError::Invalid(_) => PKI_RESULT_SET_INVALID,
                SetError::WrongStep { .. } => PKI_RESULT_SET_WRONG_STEP,
                SetError::StepBlocked { .. } => PKI_RESULT_SET_STEP_BLOCKED,
                SetError::StaleFingerprint { .. } => PKI_RESULT_SET_STALE_FINGERPRINT,
                SetError::TargetFailed { .. } => PKI_RESULT_SET_TARGET_FAILED,
                SetError::CaRefused { .. } => PKI_RESULT_SET_CA_REFUSED,
                SetError::TrustBroken(_) => PKI_RESULT_SET_TRUST_BROKEN,
                SetError::AbortStrands { .. } => PKI_RESULT_SET_ABORT_STRANDS,
                _ => PKI_RESULT_UNEXPECTED,
            },
            RotateError::Credential(c) => match c {
                CredentialError::InvalidName(_) => PKI_RESULT_INVALID_CREDENTIAL_NAME,
                CredentialError::InvalidPolicy(_) => PKI_RESULT_INVALID_CREDENTIAL_POLICY,
                CredentialError::UnexpectedReport { .. } => PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT,
                _ => PKI_RESULT_UNEXPECTED,
            },
            _ => PKI_RESULT_UNEXPECTED,
        };
        Failure::new(code, e.to_string())
    }
}

impl From<RequestError> for Failure {
    fn from(e: RequestError) -> Self {
        match e {
            RequestError::Rotate(e) => Failure::from(e),
            other => Failure::invalid(other.to_string()),
        }
    }
}

impl From<VerifyError> for Failure {
    fn from(e: VerifyError) -> Self {
        use VerifyError as E;
        let code = match &e {
            E::Expired { .. } => PKI_RESULT_VERIFY_EXPIRED,
            E::NotYetValid { .. } => PKI_RESULT_VERIFY_NOT_YET_VALID,
            E::UnknownIssuer { .. } => PKI_RESULT_VERIFY_UNKNOWN_ISSUER,
            E::BadSignature { .. } => PKI_RESULT_VERIFY_BAD_SIGNATURE,
            E::UnsupportedSignatureAlgorithm { .. } => {
                PKI_RESULT_VERIFY_UNSUPPORTED_SIGNATURE_ALGORITHM
            }
            E::SignatureAlgorithmMismatch { .. } => PKI_RESULT_VERIFY_SIGNATURE_ALGORITHM_MISMATCH,
            E::UnsupportedPublicKey { .. } | E::WeakPublicKey { .. } => {
                PKI_RESULT_VERIFY_UNSUPPORTED_PUBLIC_KEY
            }
            E::NotACa { .. } => PKI_RESULT_VERIFY_NOT_A_CA,
            E::PathLenExceeded { .. } => PKI_RESULT_VERIFY_PATH_LEN_EXCEEDED,
            E::MissingKeyCertSign { .. } => PKI_RESULT_VERIFY_MISSING_KEY_CERT_SIGN,
            E::LeafKeyUsage { .. } => PKI_RESULT_VERIFY_LEAF_KEY_USAGE,
            E::EkuNotAllowed { .. } => PKI_RESULT_VERIFY_EKU_NOT_ALLOWED,
            E::UnknownCriticalExtension { .. } => PKI_RESULT_VERIFY_UNKNOWN_CRITICAL_EXTENSION,
            E::NameConstraintViolation { .. } => PKI_RESULT_VERIFY_NAME_CONSTRAINT_VIOLATION,
            E::NameMismatch { .. } => PKI_RESULT_VERIFY_NAME_MISMATCH,
            E::InvalidReferenceName { .. } => PKI_RESULT_VERIFY_INVALID_REFERENCE_NAME,
            E::MalformedCertificate { .. } => PKI_RESULT_VERIFY_MALFORMED_CERTIFICATE,
            E::PathTooLong { .. } => PKI_RESULT_VERIFY_PATH_TOO_LONG,
            E::BudgetExceeded { .. } => PKI_RESULT_VERIFY_BUDGET_EXCEEDED,
            E::CaNotV3 { .. } => PKI_RESULT_VERIFY_CA_NOT_V3,
            E::EndEntityNotV3 { .. } => PKI_RESULT_VERIFY_END_ENTITY_NOT_V3,
            _ => PKI_RESULT_VERIFY_OTHER,
        };
        Failure::new(code, e.to_string())
    }
}

/// The result code of a key ring error.
fn keyring_result(e: &pki_rotate::KeyRingError) -> pki_result {
    use pki_rotate::KeyRingError as K;
    use pki_rotate::keyring::JoseError as J;
    match e {
        K::Policy(_) => PKI_RESULT_KEYRING_POLICY,
        K::Import { .. } => PKI_RESULT_KEYRING_IMPORT,
        K::Retire { .. } => PKI_RESULT_KEYRING_RETIRE,
        K::ClockBehind { .. } => PKI_RESULT_KEYRING_CLOCK_BEHIND,
        K::TokenLifetime(_) => PKI_RESULT_TOKEN_LIFETIME,
        K::Jose(j) => match j {
            J::Malformed { .. } | J::TooLarge { .. } => PKI_RESULT_TOKEN_MALFORMED,
            J::UnsupportedAlgorithm(_) | J::CriticalHeader(_) => {
                PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM
            }
            J::UnknownKid(_) => PKI_RESULT_TOKEN_UNKNOWN_KID,
            J::KeyNoLongerAccepted { .. } => PKI_RESULT_TOKEN_KEY_NO_LONGER_ACCEPTED,
            J::AlgorithmMismatch { .. } | J::BadSignature(_) => PKI_RESULT_TOKEN_BAD_SIGNATURE,
            J::Expired { .. } => PKI_RESULT_TOKEN_EXPIRED,
            J::NotYetValid { .. } => PKI_RESULT_TOKEN_NOT_YET_VALID,
            J::UnsupportedKey { .. } => PKI_RESULT_JWK_UNSUPPORTED_KEY,
            _ => PKI_RESULT_UNEXPECTED,
        },
        _ => PKI_RESULT_UNEXPECTED,
    }
}
