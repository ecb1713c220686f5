//! The result codes keep their numbers and names; failures and panics
//! become codes and last-error messages.

use super::*;
use pki_rotate::RotateError;

/// The number of every code, written out: renumbering a code, reusing a
/// number or adding a code without pinning it here fails this test (a
/// new variant does not even compile until it has an arm). The C test
/// `tests/c/codes.c` pins the same numbers against the header.
fn pinned(code: pki_result) -> u32 {
    match code {
        PKI_RESULT_OK => 0,
        PKI_RESULT_NULL_PARAMETER => 1,
        PKI_RESULT_PANIC => 2,
        PKI_RESULT_INVALID_ARGUMENT => 3,
        PKI_RESULT_BUILDER_CONSUMED => 4,
        PKI_RESULT_NOT_FOUND => 5,
        PKI_RESULT_UNEXPECTED => 99,
        PKI_RESULT_PEM => 100,
        PKI_RESULT_UNEXPECTED_PEM_LABEL => 101,
        PKI_RESULT_NO_PEM_BLOCK => 102,
        PKI_RESULT_CERTIFICATE_DECODE => 103,
        PKI_RESULT_MALFORMED_EXTENSION => 104,
        PKI_RESULT_KEY_DECODE => 105,
        PKI_RESULT_UNSUPPORTED_KEY => 106,
        PKI_RESULT_RSA_KEY_TOO_SMALL => 107,
        PKI_RESULT_KEY_MISMATCH => 108,
        PKI_RESULT_CRYPTO => 200,
        PKI_RESULT_ISSUANCE => 201,
        PKI_RESULT_TIME => 202,
        PKI_RESULT_INVALID_POLICY => 203,
        PKI_RESULT_NOT_A_CA => 204,
        PKI_RESULT_NO_ROOT => 205,
        PKI_RESULT_CLOCK_BEFORE_CA => 300,
        PKI_RESULT_EMPTY_FORCED_REASON => 301,
        PKI_RESULT_INVALID_GRACE => 302,
        PKI_RESULT_INVALID_LEAF_NAME => 303,
        PKI_RESULT_INVALID_REFRESH_FRACTION => 304,
        PKI_RESULT_TRUST_CHECK_FAILED => 305,
        PKI_RESULT_EXPIRED => 306,
        PKI_RESULT_UNKNOWN_LEAF => 307,
        PKI_RESULT_UNKNOWN_BUNDLE => 308,
        PKI_RESULT_UNSUPPORTED_STATE_VERSION => 400,
        PKI_RESULT_CORRUPT_STATE => 401,
        PKI_RESULT_STORE => 402,
        PKI_RESULT_CONFLICT => 403,
        PKI_RESULT_NOT_INITIALIZED => 404,
        PKI_RESULT_ALREADY_INITIALIZED => 405,
        PKI_RESULT_UNKNOWN_OUTCOME => 406,
        PKI_RESULT_VERIFY_EXPIRED => 500,
        PKI_RESULT_VERIFY_NOT_YET_VALID => 501,
        PKI_RESULT_VERIFY_UNKNOWN_ISSUER => 502,
        PKI_RESULT_VERIFY_BAD_SIGNATURE => 503,
        PKI_RESULT_VERIFY_UNSUPPORTED_SIGNATURE_ALGORITHM => 504,
        PKI_RESULT_VERIFY_SIGNATURE_ALGORITHM_MISMATCH => 505,
        PKI_RESULT_VERIFY_UNSUPPORTED_PUBLIC_KEY => 506,
        PKI_RESULT_VERIFY_NOT_A_CA => 507,
        PKI_RESULT_VERIFY_PATH_LEN_EXCEEDED => 508,
        PKI_RESULT_VERIFY_MISSING_KEY_CERT_SIGN => 509,
        PKI_RESULT_VERIFY_LEAF_KEY_USAGE => 510,
        PKI_RESULT_VERIFY_EKU_NOT_ALLOWED => 511,
        PKI_RESULT_VERIFY_UNKNOWN_CRITICAL_EXTENSION => 512,
        PKI_RESULT_VERIFY_NAME_CONSTRAINT_VIOLATION => 513,
        PKI_RESULT_VERIFY_NAME_MISMATCH => 514,
        PKI_RESULT_VERIFY_INVALID_REFERENCE_NAME => 515,
        PKI_RESULT_VERIFY_MALFORMED_CERTIFICATE => 516,
        PKI_RESULT_VERIFY_PATH_TOO_LONG => 517,
        PKI_RESULT_VERIFY_BUDGET_EXCEEDED => 518,
        PKI_RESULT_VERIFY_CA_NOT_V3 => 519,
        PKI_RESULT_VERIFY_END_ENTITY_NOT_V3 => 520,
        PKI_RESULT_VERIFY_OTHER => 599,
        PKI_RESULT_IMPORT => 700,
        PKI_RESULT_VALIDATION_FAILED => 701,
        PKI_RESULT_IMPORTED_CA => 702,
        PKI_RESULT_TRUST_BREAK => 740,
        PKI_RESULT_SET_UNKNOWN_CA => 600,
        PKI_RESULT_SET_UNKNOWN_TARGET => 601,
        PKI_RESULT_SET_INVALID => 602,
        PKI_RESULT_SET_WRONG_STEP => 603,
        PKI_RESULT_SET_STEP_BLOCKED => 604,
        PKI_RESULT_SET_STALE_FINGERPRINT => 605,
        PKI_RESULT_SET_TARGET_FAILED => 606,
        PKI_RESULT_SET_CA_REFUSED => 607,
        PKI_RESULT_SET_TRUST_BROKEN => 608,
        PKI_RESULT_SET_ABORT_STRANDS => 609,
        PKI_RESULT_INVALID_CREDENTIAL_NAME => 680,
        PKI_RESULT_INVALID_CREDENTIAL_POLICY => 681,
        PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT => 682,
        PKI_RESULT_KEYRING_POLICY => 650,
        PKI_RESULT_KEYRING_IMPORT => 651,
        PKI_RESULT_KEYRING_RETIRE => 652,
        PKI_RESULT_KEYRING_CLOCK_BEHIND => 653,
        PKI_RESULT_TOKEN_MALFORMED => 654,
        PKI_RESULT_TOKEN_UNSUPPORTED_ALGORITHM => 655,
        PKI_RESULT_TOKEN_UNKNOWN_KID => 656,
        PKI_RESULT_TOKEN_KEY_NO_LONGER_ACCEPTED => 657,
        PKI_RESULT_TOKEN_BAD_SIGNATURE => 658,
        PKI_RESULT_TOKEN_EXPIRED => 659,
        PKI_RESULT_TOKEN_NOT_YET_VALID => 660,
        PKI_RESULT_TOKEN_LIFETIME => 661,
        PKI_RESULT_JWK_UNSUPPORTED_KEY => 662,
        PKI_RESULT_PKCS11_NOT_OPEN => 800,
        PKI_RESULT_PKCS11_WRONG_PIN => 801,
        PKI_RESULT_PKCS11_TOKEN_NOT_FOUND => 802,
        PKI_RESULT_PKCS11_KEY_NOT_FOUND => 803,
        PKI_RESULT_PKCS11_KEY_REPLACED => 804,
        PKI_RESULT_PKCS11_TOKEN_FULL => 805,
        PKI_RESULT_PKCS11 => 899,
    }
}

/// How many codes `pinned` lists.
const PINNED_CODES: usize = 97;

#[test]
fn every_result_code_keeps_its_pinned_number() {
    assert_eq!(
        ALL_RESULTS.len(),
        PINNED_CODES,
        "a code is missing from ALL_RESULTS or from `pinned`"
    );
    for (code, _) in ALL_RESULTS {
        assert_eq!(*code as u32, pinned(*code), "{code:?} was renumbered");
    }
    assert_eq!(PKI_RESULT_CONFLICT as u32, 403);
    assert_ne!(PKI_RESULT_CONFLICT as u32, PKI_RESULT_STORE as u32);
}

#[test]
fn every_code_has_a_unique_number_and_matching_name() {
    let mut seen = std::collections::BTreeSet::new();
    for (code, name) in ALL_RESULTS {
        assert!(seen.insert(*code as u32), "{name} reuses a number");
        assert!(name.ends_with('\0'));
        assert_eq!(format!("{code:?}\0"), *name);
    }
}

#[test]
fn a_write_that_may_have_landed_has_its_own_code_and_name() {
    assert_eq!(PKI_RESULT_UNKNOWN_OUTCOME as u32, 406);
    for other in [PKI_RESULT_STORE, PKI_RESULT_CONFLICT] {
        assert_ne!(PKI_RESULT_UNKNOWN_OUTCOME, other);
    }
    // SAFETY: pki_result_name returns a static NUL-terminated string.
    let name = unsafe { std::ffi::CStr::from_ptr(pki_result_name(406)) };
    assert_eq!(name.to_str(), Ok("PKI_RESULT_UNKNOWN_OUTCOME"));

    let e = RotateError::Store(pki_rotate::StoreError::UnknownOutcome {
        store: "etcd://127.0.0.1:2379/pki".into(),
        key: "signer".into(),
        detail: "no answer to the commit".into(),
    });
    let text = e.to_string();
    let failure = Failure::from(e);
    assert_eq!(failure.code, PKI_RESULT_UNKNOWN_OUTCOME);
    assert_eq!(failure.message, text);
    assert!(
        failure.message.contains("rerunning the command is safe"),
        "{}",
        failure.message
    );
    let code = boundary(|| {
        Err(Failure::from(RotateError::Store(
            pki_rotate::StoreError::UnknownOutcome {
                store: "s".into(),
                key: "k".into(),
                detail: "d".into(),
            },
        )))
    });
    assert_eq!(code, PKI_RESULT_UNKNOWN_OUTCOME);
    with_last_error(|m| assert!(m.contains("may have landed"), "{m}"));
}

#[test]
fn a_panic_becomes_a_code_and_a_message() {
    #[allow(clippy::panic)]
    let code = boundary(|| panic!("boom"));
    assert_eq!(code, PKI_RESULT_PANIC);
    with_last_error(|m| assert!(m.contains("boom"), "{m}"));
    assert_eq!(boundary(|| Ok(())), PKI_RESULT_OK);
    assert_eq!(pki_last_error_length(), 0);
}
