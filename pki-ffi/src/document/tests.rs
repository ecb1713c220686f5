//! The generic functions: one request schema for every kind, its version
//! and its fields checked before any engine runs.

#![allow(clippy::unwrap_used, clippy::panic)]

use super::*;
use crate::error::with_last_error;
use crate::open::pki_store_open;
use crate::step::take_result;
use crate::store::pki_store_free;
use pki_result::*;

const T0: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

/// `pki_document_create` and `pki_document_step`.
type Entry = unsafe extern "C" fn(
    *const pki_store,
    u32,
    *const c_char,
    usize,
    *const c_char,
    usize,
    i64,
    *mut *mut pki_buffer,
) -> pki_result;

/// Steps (or creates) `kind` at `key` in a fresh memory store with
/// `request`; the result, whether it wrote, and the last error.
fn run(
    create_first: Option<&str>,
    kind: u32,
    key: &str,
    request: &str,
) -> (pki_result, bool, String) {
    let mut store = std::ptr::null_mut();
    // SAFETY: a valid location and out pointer.
    let opened = unsafe { pki_store_open(c"memory:".as_ptr(), 7, std::ptr::null(), 0, &mut store) };
    assert_eq!(opened, PKI_RESULT_OK);
    let call = |f: Entry, req: &str| {
        let mut step = std::ptr::null_mut();
        // SAFETY: a live store, slices valid for their lengths.
        let r = unsafe {
            f(
                store,
                kind,
                key.as_ptr().cast(),
                key.len(),
                req.as_ptr().cast(),
                req.len(),
                T0,
                &mut step,
            )
        };
        let changed = take_result(step).is_some_and(|r| r.changed);
        (r, changed, with_last_error(str::to_string))
    };
    if let Some(create) = create_first {
        assert_eq!(call(pki_document_create, create).0, PKI_RESULT_OK);
    }
    let out = call(pki_document_step, request);
    // SAFETY: made above, freed once.
    unsafe { pki_store_free(store) };
    out
}

#[test]
fn every_kind_is_created_and_stepped_through_the_same_functions() {
    let signer = r#"{"version": 1, "common_name": "ca"}"#;
    let r = run(Some(signer), 0, "signer", r#"{"forced": {"reason": "r"}}"#);
    assert_eq!((r.0, r.1), (PKI_RESULT_OK, true), "{}", r.2);
    let set = r#"{"cas": [{"name": "cluster", "roles": "serving"}]}"#;
    let r = run(
        Some(set),
        1,
        "set",
        r#"{"target": {"name": "n1", "trusts": ["cluster"]}}"#,
    );
    assert_eq!((r.0, r.1), (PKI_RESULT_OK, true), "{}", r.2);
    let r = run(Some("{}"), 2, "keys", r#"{"forced": "r"}"#);
    assert_eq!((r.0, r.1), (PKI_RESULT_OK, true), "{}", r.2);
    let cred = r#"{"expire_seconds": 100, "grace_seconds": 10}"#;
    let r = run(Some(cred), 3, "db", r#"{"version": 1}"#);
    assert_eq!((r.0, r.1), (PKI_RESULT_OK, true), "{}", r.2);
}

#[test]
fn an_unknown_kind_version_or_field_is_refused_by_name() {
    let r = run(None, 9, "signer", "{}");
    assert_eq!(r.0, PKI_RESULT_INVALID_ARGUMENT);
    assert!(r.2.contains("`kind`: 9"), "{}", r.2);
    let r = run(
        Some(r#"{"common_name": "ca"}"#),
        0,
        "signer",
        r#"{"version": 2}"#,
    );
    assert_eq!(r.0, PKI_RESULT_INVALID_ARGUMENT);
    assert!(r.2.contains("request version 2"), "{}", r.2);
    let r = run(Some("{}"), 2, "keys", r#"{"retyre": []}"#);
    assert_eq!(r.0, PKI_RESULT_INVALID_ARGUMENT);
    assert!(r.2.contains("unknown field `retyre`"), "{}", r.2);
}

mod cred;
mod signer;
