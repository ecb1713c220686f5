//! `Failure`, a failed call inside the library, and the result code of
//! each error of the engines.

use super::pki_result::{self, *};
use pki_core::VerifyError;
use pki_rotate::RotateError;

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
            _ => PKI_RESULT_UNEXPECTED,
        };
        Failure::new(code, e.to_string())
    }
}

impl From<RotateError> for Failure {
    fn from(e: RotateError) -> Self {
        use RotateError as E;
        let code = match &e {
            E::Core(inner) => return Failure::from(inner.clone()),
            E::ClockBeforeCa { .. } => PKI_RESULT_CLOCK_BEFORE_CA,
            E::EmptyForcedReason => PKI_RESULT_EMPTY_FORCED_REASON,
            E::InvalidGrace(_) => PKI_RESULT_INVALID_GRACE,
            E::InvalidLeafName(_) => PKI_RESULT_INVALID_LEAF_NAME,
            E::InvalidRefreshFraction(_) => PKI_RESULT_INVALID_REFRESH_FRACTION,
            E::UnknownLeaf(_) => PKI_RESULT_UNKNOWN_LEAF,
            E::UnsupportedDocument { .. } => PKI_RESULT_UNSUPPORTED_STATE_VERSION,
            E::CorruptState { .. }
            | E::Json { .. }
            | E::Material { .. }
            | E::InconsistentDocument { .. } => PKI_RESULT_CORRUPT_STATE,
            E::InvalidText { .. } => PKI_RESULT_INVALID_ARGUMENT,
            E::Conflict { .. } | E::TooManyConflicts { .. } => PKI_RESULT_CONFLICT,
            E::NotInitialized(_) => PKI_RESULT_NOT_INITIALIZED,
            E::AlreadyInitialized(_) => PKI_RESULT_ALREADY_INITIALIZED,
            E::UnknownOutcome { .. } => PKI_RESULT_UNKNOWN_OUTCOME,
            E::InvalidKey { .. } => PKI_RESULT_INVALID_ARGUMENT,
            E::Io { .. } | E::Backend { .. } => PKI_RESULT_STORE,
            E::TrustCheckFailed { .. } => PKI_RESULT_TRUST_CHECK_FAILED,
            E::Expired { .. } => PKI_RESULT_EXPIRED,
            E::ValidationFailed { .. } | E::LeafRefused { .. } => PKI_RESULT_VALIDATION_FAILED,
            E::ImportedCaRenewal { .. } | E::ImportedCaRotation { .. } => PKI_RESULT_IMPORTED_CA,
            E::TrustBreak { .. } => PKI_RESULT_TRUST_BREAK,
            E::SetUnknownCa(_) => PKI_RESULT_SET_UNKNOWN_CA,
            E::SetUnknownTarget(_) => PKI_RESULT_SET_UNKNOWN_TARGET,
            E::SetInvalid(_) => PKI_RESULT_SET_INVALID,
            E::SetWrongStep { .. } => PKI_RESULT_SET_WRONG_STEP,
            E::SetStepBlocked { .. } => PKI_RESULT_SET_STEP_BLOCKED,
            E::SetStaleFingerprint { .. } => PKI_RESULT_SET_STALE_FINGERPRINT,
            E::SetTargetFailed { .. } => PKI_RESULT_SET_TARGET_FAILED,
            E::SetCaRefused { .. } => PKI_RESULT_SET_CA_REFUSED,
            E::SetTrustBroken(_) => PKI_RESULT_SET_TRUST_BROKEN,
            E::SetAbortStrands { .. } => PKI_RESULT_SET_ABORT_STRANDS,
            E::InvalidCredentialName(_) => PKI_RESULT_INVALID_CREDENTIAL_NAME,
            E::InvalidCredentialPolicy(_) => PKI_RESULT_INVALID_CREDENTIAL_POLICY,
            E::UnexpectedCredentialReport { .. } => PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT,
            E::KeyRing(k) => crate::keys::keyring_result(k),
            _ => PKI_RESULT_UNEXPECTED,
        };
        Failure::new(code, e.to_string())
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
