//! Result codes, the thread-local last error, and the panic boundary.

mod boundary;
mod failure;
mod last_error;
mod read_last_error;

pub(crate) use boundary::{boundary, boundary_value};
pub(crate) use failure::Failure;
#[cfg(test)]
pub(crate) use last_error::with_last_error;
pub use read_last_error::{pki_last_error, pki_last_error_length};

/// The result of every fallible `pki_` function.
///
/// `PKI_RESULT_OK` is 0; the others come in blocks of 100 per domain
/// (general, parsing, issuance and policy, rotation, state, verification).
/// A number, once given, is never reused or changed. The detail of a failure
/// is in `pki_last_error` on the same thread.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum pki_result {
    /// Success.
    PKI_RESULT_OK = 0,

    /// A pointer argument that must not be NULL was NULL.
    PKI_RESULT_NULL_PARAMETER = 1,
    /// A panic was caught at the ABI boundary (a bug in pki); nothing changed.
    PKI_RESULT_PANIC = 2,
    /// An argument is out of range or malformed (bad enum value, text that is
    /// not UTF-8, an IP address that does not parse, a length too large…).
    PKI_RESULT_INVALID_ARGUMENT = 3,
    /// A builder was used after it was consumed. No longer returned: leaf
    /// requests are JSON now (the number stays taken).
    PKI_RESULT_BUILDER_CONSUMED = 4,
    /// A looked-up entry does not exist.
    PKI_RESULT_NOT_FOUND = 5,
    /// An error that none of the other codes describes; see the message.
    PKI_RESULT_UNEXPECTED = 99,

    /// A PEM block could not be read (truncated, bad base64, headers…).
    PKI_RESULT_PEM = 100,
    /// A PEM block has an unexpected label.
    PKI_RESULT_UNEXPECTED_PEM_LABEL = 101,
    /// The input holds no PEM block of the expected kind.
    PKI_RESULT_NO_PEM_BLOCK = 102,
    /// A certificate's DER could not be decoded.
    PKI_RESULT_CERTIFICATE_DECODE = 103,
    /// An extension of a certificate is malformed.
    PKI_RESULT_MALFORMED_EXTENSION = 104,
    /// A private key could not be decoded.
    PKI_RESULT_KEY_DECODE = 105,
    /// The key type is not supported.
    PKI_RESULT_UNSUPPORTED_KEY = 106,
    /// An RSA key shorter than 2048 bits was refused.
    PKI_RESULT_RSA_KEY_TOO_SMALL = 107,
    /// A private key does not belong to its certificate.
    PKI_RESULT_KEY_MISMATCH = 108,

    /// Key generation, encoding or signing failed.
    PKI_RESULT_CRYPTO = 200,
    /// A certificate could not be issued from its parameters.
    PKI_RESULT_ISSUANCE = 201,
    /// A time is out of range or inconsistent.
    PKI_RESULT_TIME = 202,
    /// The rotation policy breaks the validity math.
    PKI_RESULT_INVALID_POLICY = 203,
    /// A certificate that must be a CA is not one.
    PKI_RESULT_NOT_A_CA = 204,
    /// A bundle has no self-signed root to pin.
    PKI_RESULT_NO_ROOT = 205,

    /// The time given is before the current CA's NotBefore.
    PKI_RESULT_CLOCK_BEFORE_CA = 300,
    /// A forced rotation was asked for with an empty reason.
    PKI_RESULT_EMPTY_FORCED_REASON = 301,
    /// A forced rotation's grace period is not positive.
    PKI_RESULT_INVALID_GRACE = 302,
    /// A leaf name is not usable.
    PKI_RESULT_INVALID_LEAF_NAME = 303,
    /// A leaf refresh fraction outside (0, 1).
    PKI_RESULT_INVALID_REFRESH_FRACTION = 304,
    /// The pre-flight trust matrix refused the rotation.
    PKI_RESULT_TRUST_CHECK_FAILED = 305,
    /// A certificate or key is already expired.
    PKI_RESULT_EXPIRED = 306,
    /// A renewal names a leaf the signer does not keep (removing one is
    /// nothing to do).
    PKI_RESULT_UNKNOWN_LEAF = 307,
    /// An ack names a CA bundle the signer did not publish (or published
    /// longer ago than it remembers); the message says how many it keeps.
    PKI_RESULT_UNKNOWN_BUNDLE = 308,

    /// The state bytes have a format version this build does not read.
    PKI_RESULT_UNSUPPORTED_STATE_VERSION = 400,
    /// The state bytes or a named blob are malformed or missing.
    PKI_RESULT_CORRUPT_STATE = 401,
    /// A store failed: an I/O error, an unreachable or broken backend.
    /// Retrying at once is not expected to help.
    PKI_RESULT_STORE = 402,
    /// Another writer changed the document since it was read (a lost
    /// compare-and-swap, or too many in a row): read again and retry.
    PKI_RESULT_CONFLICT = 403,
    /// The store holds no document at the key (create one first).
    PKI_RESULT_NOT_INITIALIZED = 404,
    /// A document already exists where one was to be created.
    PKI_RESULT_ALREADY_INITIALIZED = 405,
    /// A store write was sent but its answer was lost (a timeout, a
    /// connection dropped after the request went out), and the store could
    /// not find out whether it was applied: the document may be the new one
    /// or the old one. Unlike every other failure, this one does not promise
    /// that the store is unchanged. Stepping again with the same request is
    /// safe: one that landed is recorded in the document and is then
    /// nothing to do.
    PKI_RESULT_UNKNOWN_OUTCOME = 406,

    /// A certificate of the path is expired at the verification time.
    PKI_RESULT_VERIFY_EXPIRED = 500,
    /// A certificate of the path is not yet valid at the verification time.
    PKI_RESULT_VERIFY_NOT_YET_VALID = 501,
    /// No trusted issuer was found.
    PKI_RESULT_VERIFY_UNKNOWN_ISSUER = 502,
    /// A signature does not verify.
    PKI_RESULT_VERIFY_BAD_SIGNATURE = 503,
    /// A signature algorithm is not supported.
    PKI_RESULT_VERIFY_UNSUPPORTED_SIGNATURE_ALGORITHM = 504,
    /// Inner and outer signature algorithms differ.
    PKI_RESULT_VERIFY_SIGNATURE_ALGORITHM_MISMATCH = 505,
    /// A public key is refused: an issuer's, or the leaf's own when it is
    /// weak.
    PKI_RESULT_VERIFY_UNSUPPORTED_PUBLIC_KEY = 506,
    /// An issuer is not a CA.
    PKI_RESULT_VERIFY_NOT_A_CA = 507,
    /// A pathLenConstraint is exceeded.
    PKI_RESULT_VERIFY_PATH_LEN_EXCEEDED = 508,
    /// An issuer's keyUsage lacks keyCertSign.
    PKI_RESULT_VERIFY_MISSING_KEY_CERT_SIGN = 509,
    /// The leaf's keyUsage does not allow the purpose.
    PKI_RESULT_VERIFY_LEAF_KEY_USAGE = 510,
    /// An extendedKeyUsage does not allow the purpose.
    PKI_RESULT_VERIFY_EKU_NOT_ALLOWED = 511,
    /// An unknown critical extension.
    PKI_RESULT_VERIFY_UNKNOWN_CRITICAL_EXTENSION = 512,
    /// A name violates a CA's name constraints.
    PKI_RESULT_VERIFY_NAME_CONSTRAINT_VIOLATION = 513,
    /// The leaf is not valid for the expected name.
    PKI_RESULT_VERIFY_NAME_MISMATCH = 514,
    /// The expected name is not a valid reference name.
    PKI_RESULT_VERIFY_INVALID_REFERENCE_NAME = 515,
    /// A certificate breaks the RFC 5280 profile.
    PKI_RESULT_VERIFY_MALFORMED_CERTIFICATE = 516,
    /// The path needs too many intermediates.
    PKI_RESULT_VERIFY_PATH_TOO_LONG = 517,
    /// Path building ran out of its work budget.
    PKI_RESULT_VERIFY_BUDGET_EXCEEDED = 518,
    /// An issuing CA is not X.509 v3.
    PKI_RESULT_VERIFY_CA_NOT_V3 = 519,
    /// The leaf is not X.509 v3.
    PKI_RESULT_VERIFY_END_ENTITY_NOT_V3 = 520,
    /// The chain did not verify for another reason; see the message.
    PKI_RESULT_VERIFY_OTHER = 599,
    /// An imported CA's input is unusable: two keys, a key without a
    /// certificate, an encrypted key, a chain out of order or without its
    /// root, no key where one is needed.
    PKI_RESULT_IMPORT = 700,
    /// A supplied CA failed validation (the message names every failed check).
    PKI_RESULT_VALIDATION_FAILED = 701,
    /// The operation needs a CA pki generated; this one was imported.
    PKI_RESULT_IMPORTED_CA = 702,
    /// A rotation would cut consumers off (an expired CA; a rotation while
    /// clients may still hold the bundle of two rotations ago) and no
    /// reason to allow it was given; the message names who breaks and
    /// until when. Nothing was written. (740-749: the trust-break guard.)
    PKI_RESULT_TRUST_BREAK = 740,
    /// A CA set operation names a CA the set does not have.
    PKI_RESULT_SET_UNKNOWN_CA = 600,
    /// A CA set operation names a target the set does not have.
    PKI_RESULT_SET_UNKNOWN_TARGET = 601,
    /// A CA set request is not valid (a bad name, a role the CA lacks…).
    PKI_RESULT_SET_INVALID = 602,
    /// Not allowed in the set's current step (start while running, abort twice…).
    PKI_RESULT_SET_WRONG_STEP = 603,
    /// The set cannot advance: targets have not acknowledged (no override).
    PKI_RESULT_SET_STEP_BLOCKED = 604,
    /// An acknowledgement names a fingerprint other than the target's current one.
    PKI_RESULT_SET_STALE_FINGERPRINT = 605,
    /// The target is marked failed: retry it first.
    PKI_RESULT_SET_TARGET_FAILED = 606,
    /// A new CA of the set is not valid long enough.
    PKI_RESULT_SET_CA_REFUSED = 607,
    /// The set's pre-flight trust matrix has a red cell.
    PKI_RESULT_SET_TRUST_BROKEN = 608,
    /// An abort would strand targets (in trust-new: targets that have not
    /// loaded it, as rolling forward destroys the old CA keys); no override.
    PKI_RESULT_SET_ABORT_STRANDS = 609,

    /// A credential name is not usable (1-64 of `a-z0-9._-`, not starting with `.`).
    PKI_RESULT_INVALID_CREDENTIAL_NAME = 680,
    /// A credential policy is refused (expiry not positive, grace not
    /// shorter than the expiry).
    PKI_RESULT_INVALID_CREDENTIAL_POLICY = 681,
    /// A reported credential result is not the one the document waits for
    /// (another attempt, the current credential's revocation…); nothing
    /// was recorded.
    PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT = 682,

    /// A key ring policy was refused: a grace period that does not cover the
    /// longest token lifetime, or a non-positive duration.
    PKI_RESULT_KEYRING_POLICY = 650,
    /// A key set to import holds no usable key, or a block that is not one.
    PKI_RESULT_KEYRING_IMPORT = 651,
    /// Retiring a key was refused (the active key, an unknown one, or one
    /// still in its grace period).
    PKI_RESULT_KEYRING_RETIRE = 652,
    /// The time given is before the active key became active.
    PKI_RESULT_KEYRING_CLOCK_BEHIND = 653,
    /// A token, a claims set, a JWK or a JWK Set is malformed or too large.
    PKI_RESULT_TOKEN_MALFORMED = 654,
    /// A token's algorithm is not ES256 or RS256, or it has critical headers.
    PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM = 655,
    /// No accepted key has the token's `kid`.
    PKI_RESULT_TOKEN_UNKNOWN_KID = 656,
    /// The token's key was accepted, but its grace period has ended.
    PKI_RESULT_TOKEN_KEY_NO_LONGER_ACCEPTED = 657,
    /// The token's signature does not verify (or its algorithm does not fit the key).
    PKI_RESULT_TOKEN_BAD_SIGNATURE = 658,
    /// The token's `exp` is not after the verification time.
    PKI_RESULT_TOKEN_EXPIRED = 659,
    /// The token's `nbf` is after the verification time.
    PKI_RESULT_TOKEN_NOT_YET_VALID = 660,
    /// Signing was refused: the claims would outlive the grace period.
    PKI_RESULT_TOKEN_LIFETIME = 661,
    /// A key is not usable for tokens (type, curve or size).
    PKI_RESULT_JWK_UNSUPPORTED_KEY = 662,

    /// A CA key is in a PKCS#11 token and the store was opened without a
    /// module (`pkcs11_module`; the CLI's `PKI_PKCS11_MODULE`): nothing was
    /// written. (800-899: CA keys in PKCS#11 tokens.)
    PKI_RESULT_PKCS11_NOT_OPEN = 800,
    /// The token refused the user PIN.
    PKI_RESULT_PKCS11_WRONG_PIN = 801,
    /// No token of the module matches the URI's token attributes.
    PKI_RESULT_PKCS11_TOKEN_NOT_FOUND = 802,
    /// The token holds no private key object the URI names (it was
    /// deleted, or the URI names another one).
    PKI_RESULT_PKCS11_KEY_NOT_FOUND = 803,
    /// The key object a CA's URI finds is not the CA's key (its public key
    /// differs from the one recorded): it was replaced.
    PKI_RESULT_PKCS11_KEY_REPLACED = 804,
    /// The token has no room for another key object.
    PKI_RESULT_PKCS11_TOKEN_FULL = 805,
    /// Any other failure of a PKCS#11 module or token (a module that
    /// cannot be loaded, a mechanism the token lacks…); see the message.
    PKI_RESULT_PKCS11 = 899,
}

use pki_result::*;

/// Every code with its name, for `pki_result_name` and the tests.
pub(crate) const ALL_RESULTS: &[(pki_result, &str)] = &[
    (PKI_RESULT_OK, "PKI_RESULT_OK\0"),
    (PKI_RESULT_NULL_PARAMETER, "PKI_RESULT_NULL_PARAMETER\0"),
    (PKI_RESULT_PANIC, "PKI_RESULT_PANIC\0"),
    (PKI_RESULT_INVALID_ARGUMENT, "PKI_RESULT_INVALID_ARGUMENT\0"),
    (PKI_RESULT_BUILDER_CONSUMED, "PKI_RESULT_BUILDER_CONSUMED\0"),
    (PKI_RESULT_NOT_FOUND, "PKI_RESULT_NOT_FOUND\0"),
    (PKI_RESULT_UNEXPECTED, "PKI_RESULT_UNEXPECTED\0"),
    (PKI_RESULT_PEM, "PKI_RESULT_PEM\0"),
    (
        PKI_RESULT_UNEXPECTED_PEM_LABEL,
        "PKI_RESULT_UNEXPECTED_PEM_LABEL\0",
    ),
    (PKI_RESULT_NO_PEM_BLOCK, "PKI_RESULT_NO_PEM_BLOCK\0"),
    (
        PKI_RESULT_CERTIFICATE_DECODE,
        "PKI_RESULT_CERTIFICATE_DECODE\0",
    ),
    (
        PKI_RESULT_MALFORMED_EXTENSION,
        "PKI_RESULT_MALFORMED_EXTENSION\0",
    ),
    (PKI_RESULT_KEY_DECODE, "PKI_RESULT_KEY_DECODE\0"),
    (PKI_RESULT_UNSUPPORTED_KEY, "PKI_RESULT_UNSUPPORTED_KEY\0"),
    (
        PKI_RESULT_RSA_KEY_TOO_SMALL,
        "PKI_RESULT_RSA_KEY_TOO_SMALL\0",
    ),
    (PKI_RESULT_KEY_MISMATCH, "PKI_RESULT_KEY_MISMATCH\0"),
    (PKI_RESULT_CRYPTO, "PKI_RESULT_CRYPTO\0"),
    (PKI_RESULT_ISSUANCE, "PKI_RESULT_ISSUANCE\0"),
    (PKI_RESULT_TIME, "PKI_RESULT_TIME\0"),
    (PKI_RESULT_INVALID_POLICY, "PKI_RESULT_INVALID_POLICY\0"),
    (PKI_RESULT_NOT_A_CA, "PKI_RESULT_NOT_A_CA\0"),
    (PKI_RESULT_NO_ROOT, "PKI_RESULT_NO_ROOT\0"),
    (PKI_RESULT_CLOCK_BEFORE_CA, "PKI_RESULT_CLOCK_BEFORE_CA\0"),
    (
        PKI_RESULT_EMPTY_FORCED_REASON,
        "PKI_RESULT_EMPTY_FORCED_REASON\0",
    ),
    (PKI_RESULT_INVALID_GRACE, "PKI_RESULT_INVALID_GRACE\0"),
    (
        PKI_RESULT_INVALID_LEAF_NAME,
        "PKI_RESULT_INVALID_LEAF_NAME\0",
    ),
    (
        PKI_RESULT_INVALID_REFRESH_FRACTION,
        "PKI_RESULT_INVALID_REFRESH_FRACTION\0",
    ),
    (
        PKI_RESULT_TRUST_CHECK_FAILED,
        "PKI_RESULT_TRUST_CHECK_FAILED\0",
    ),
    (PKI_RESULT_EXPIRED, "PKI_RESULT_EXPIRED\0"),
    (PKI_RESULT_UNKNOWN_LEAF, "PKI_RESULT_UNKNOWN_LEAF\0"),
    (PKI_RESULT_UNKNOWN_BUNDLE, "PKI_RESULT_UNKNOWN_BUNDLE\0"),
    (
        PKI_RESULT_UNSUPPORTED_STATE_VERSION,
        "PKI_RESULT_UNSUPPORTED_STATE_VERSION\0",
    ),
    (PKI_RESULT_CORRUPT_STATE, "PKI_RESULT_CORRUPT_STATE\0"),
    (PKI_RESULT_STORE, "PKI_RESULT_STORE\0"),
    (PKI_RESULT_CONFLICT, "PKI_RESULT_CONFLICT\0"),
    (PKI_RESULT_NOT_INITIALIZED, "PKI_RESULT_NOT_INITIALIZED\0"),
    (
        PKI_RESULT_ALREADY_INITIALIZED,
        "PKI_RESULT_ALREADY_INITIALIZED\0",
    ),
    (PKI_RESULT_UNKNOWN_OUTCOME, "PKI_RESULT_UNKNOWN_OUTCOME\0"),
    (PKI_RESULT_VERIFY_EXPIRED, "PKI_RESULT_VERIFY_EXPIRED\0"),
    (
        PKI_RESULT_VERIFY_NOT_YET_VALID,
        "PKI_RESULT_VERIFY_NOT_YET_VALID\0",
    ),
    (
        PKI_RESULT_VERIFY_UNKNOWN_ISSUER,
        "PKI_RESULT_VERIFY_UNKNOWN_ISSUER\0",
    ),
    (
        PKI_RESULT_VERIFY_BAD_SIGNATURE,
        "PKI_RESULT_VERIFY_BAD_SIGNATURE\0",
    ),
    (
        PKI_RESULT_VERIFY_UNSUPPORTED_SIGNATURE_ALGORITHM,
        "PKI_RESULT_VERIFY_UNSUPPORTED_SIGNATURE_ALGORITHM\0",
    ),
    (
        PKI_RESULT_VERIFY_SIGNATURE_ALGORITHM_MISMATCH,
        "PKI_RESULT_VERIFY_SIGNATURE_ALGORITHM_MISMATCH\0",
    ),
    (
        PKI_RESULT_VERIFY_UNSUPPORTED_PUBLIC_KEY,
        "PKI_RESULT_VERIFY_UNSUPPORTED_PUBLIC_KEY\0",
    ),
    (PKI_RESULT_VERIFY_NOT_A_CA, "PKI_RESULT_VERIFY_NOT_A_CA\0"),
    (
        PKI_RESULT_VERIFY_PATH_LEN_EXCEEDED,
        "PKI_RESULT_VERIFY_PATH_LEN_EXCEEDED\0",
    ),
    (
        PKI_RESULT_VERIFY_MISSING_KEY_CERT_SIGN,
        "PKI_RESULT_VERIFY_MISSING_KEY_CERT_SIGN\0",
    ),
    (
        PKI_RESULT_VERIFY_LEAF_KEY_USAGE,
        "PKI_RESULT_VERIFY_LEAF_KEY_USAGE\0",
    ),
    (
        PKI_RESULT_VERIFY_EKU_NOT_ALLOWED,
        "PKI_RESULT_VERIFY_EKU_NOT_ALLOWED\0",
    ),
    (
        PKI_RESULT_VERIFY_UNKNOWN_CRITICAL_EXTENSION,
        "PKI_RESULT_VERIFY_UNKNOWN_CRITICAL_EXTENSION\0",
    ),
    (
        PKI_RESULT_VERIFY_NAME_CONSTRAINT_VIOLATION,
        "PKI_RESULT_VERIFY_NAME_CONSTRAINT_VIOLATION\0",
    ),
    (
        PKI_RESULT_VERIFY_NAME_MISMATCH,
        "PKI_RESULT_VERIFY_NAME_MISMATCH\0",
    ),
    (
        PKI_RESULT_VERIFY_INVALID_REFERENCE_NAME,
        "PKI_RESULT_VERIFY_INVALID_REFERENCE_NAME\0",
    ),
    (
        PKI_RESULT_VERIFY_MALFORMED_CERTIFICATE,
        "PKI_RESULT_VERIFY_MALFORMED_CERTIFICATE\0",
    ),
    (
        PKI_RESULT_VERIFY_PATH_TOO_LONG,
        "PKI_RESULT_VERIFY_PATH_TOO_LONG\0",
    ),
    (
        PKI_RESULT_VERIFY_BUDGET_EXCEEDED,
        "PKI_RESULT_VERIFY_BUDGET_EXCEEDED\0",
    ),
    (PKI_RESULT_VERIFY_CA_NOT_V3, "PKI_RESULT_VERIFY_CA_NOT_V3\0"),
    (
        PKI_RESULT_VERIFY_END_ENTITY_NOT_V3,
        "PKI_RESULT_VERIFY_END_ENTITY_NOT_V3\0",
    ),
    (PKI_RESULT_VERIFY_OTHER, "PKI_RESULT_VERIFY_OTHER\0"),
    (PKI_RESULT_IMPORT, "PKI_RESULT_IMPORT\0"),
    (
        PKI_RESULT_VALIDATION_FAILED,
        "PKI_RESULT_VALIDATION_FAILED\0",
    ),
    (PKI_RESULT_IMPORTED_CA, "PKI_RESULT_IMPORTED_CA\0"),
    (PKI_RESULT_TRUST_BREAK, "PKI_RESULT_TRUST_BREAK\0"),
    (PKI_RESULT_SET_UNKNOWN_CA, "PKI_RESULT_SET_UNKNOWN_CA\0"),
    (
        PKI_RESULT_SET_UNKNOWN_TARGET,
        "PKI_RESULT_SET_UNKNOWN_TARGET\0",
    ),
    (PKI_RESULT_SET_INVALID, "PKI_RESULT_SET_INVALID\0"),
    (PKI_RESULT_SET_WRONG_STEP, "PKI_RESULT_SET_WRONG_STEP\0"),
    (PKI_RESULT_SET_STEP_BLOCKED, "PKI_RESULT_SET_STEP_BLOCKED\0"),
    (
        PKI_RESULT_SET_STALE_FINGERPRINT,
        "PKI_RESULT_SET_STALE_FINGERPRINT\0",
    ),
    (
        PKI_RESULT_SET_TARGET_FAILED,
        "PKI_RESULT_SET_TARGET_FAILED\0",
    ),
    (PKI_RESULT_SET_CA_REFUSED, "PKI_RESULT_SET_CA_REFUSED\0"),
    (PKI_RESULT_SET_TRUST_BROKEN, "PKI_RESULT_SET_TRUST_BROKEN\0"),
    (
        PKI_RESULT_SET_ABORT_STRANDS,
        "PKI_RESULT_SET_ABORT_STRANDS\0",
    ),
    (
        PKI_RESULT_INVALID_CREDENTIAL_NAME,
        "PKI_RESULT_INVALID_CREDENTIAL_NAME\0",
    ),
    (
        PKI_RESULT_INVALID_CREDENTIAL_POLICY,
        "PKI_RESULT_INVALID_CREDENTIAL_POLICY\0",
    ),
    (
        PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT,
        "PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT\0",
    ),
    (PKI_RESULT_KEYRING_POLICY, "PKI_RESULT_KEYRING_POLICY\0"),
    (PKI_RESULT_KEYRING_IMPORT, "PKI_RESULT_KEYRING_IMPORT\0"),
    (PKI_RESULT_KEYRING_RETIRE, "PKI_RESULT_KEYRING_RETIRE\0"),
    (
        PKI_RESULT_KEYRING_CLOCK_BEHIND,
        "PKI_RESULT_KEYRING_CLOCK_BEHIND\0",
    ),
    (PKI_RESULT_TOKEN_MALFORMED, "PKI_RESULT_TOKEN_MALFORMED\0"),
    (
        PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM,
        "PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM\0",
    ),
    (
        PKI_RESULT_TOKEN_UNKNOWN_KID,
        "PKI_RESULT_TOKEN_UNKNOWN_KID\0",
    ),
    (
        PKI_RESULT_TOKEN_KEY_NO_LONGER_ACCEPTED,
        "PKI_RESULT_TOKEN_KEY_NO_LONGER_ACCEPTED\0",
    ),
    (
        PKI_RESULT_TOKEN_BAD_SIGNATURE,
        "PKI_RESULT_TOKEN_BAD_SIGNATURE\0",
    ),
    (PKI_RESULT_TOKEN_EXPIRED, "PKI_RESULT_TOKEN_EXPIRED\0"),
    (
        PKI_RESULT_TOKEN_NOT_YET_VALID,
        "PKI_RESULT_TOKEN_NOT_YET_VALID\0",
    ),
    (PKI_RESULT_TOKEN_LIFETIME, "PKI_RESULT_TOKEN_LIFETIME\0"),
    (
        PKI_RESULT_JWK_UNSUPPORTED_KEY,
        "PKI_RESULT_JWK_UNSUPPORTED_KEY\0",
    ),
    (PKI_RESULT_PKCS11_NOT_OPEN, "PKI_RESULT_PKCS11_NOT_OPEN\0"),
    (PKI_RESULT_PKCS11_WRONG_PIN, "PKI_RESULT_PKCS11_WRONG_PIN\0"),
    (
        PKI_RESULT_PKCS11_TOKEN_NOT_FOUND,
        "PKI_RESULT_PKCS11_TOKEN_NOT_FOUND\0",
    ),
    (
        PKI_RESULT_PKCS11_KEY_NOT_FOUND,
        "PKI_RESULT_PKCS11_KEY_NOT_FOUND\0",
    ),
    (
        PKI_RESULT_PKCS11_KEY_REPLACED,
        "PKI_RESULT_PKCS11_KEY_REPLACED\0",
    ),
    (
        PKI_RESULT_PKCS11_TOKEN_FULL,
        "PKI_RESULT_PKCS11_TOKEN_FULL\0",
    ),
    (PKI_RESULT_PKCS11, "PKI_RESULT_PKCS11\0"),
];

/// The name of a code as Rust text (`PKI_RESULT_CONFLICT`, or `result 7`
/// for a number that is not a code), for messages about callbacks.
pub(crate) fn result_name(code: u32) -> String {
    ALL_RESULTS
        .iter()
        .find(|(c, _)| *c as u32 == code)
        .map(|(_, name)| name.trim_end_matches('\0').to_string())
        .unwrap_or_else(|| format!("result {code}"))
}

/// Name of a result code (`"PKI_RESULT_OK"`), or `"PKI_RESULT_UNKNOWN"` for a
/// number that is not a code. Never NULL.
///
/// The returned string is static: do not free it.
#[unsafe(no_mangle)]
pub extern "C" fn pki_result_name(result: u32) -> *const std::ffi::c_char {
    boundary_value(c"PKI_RESULT_UNKNOWN".as_ptr(), || {
        ALL_RESULTS
            .iter()
            .find(|(code, _)| *code as u32 == result)
            .map(|(_, name)| name.as_ptr().cast())
            .unwrap_or(c"PKI_RESULT_UNKNOWN".as_ptr())
    })
}

#[cfg(test)]
mod tests;
