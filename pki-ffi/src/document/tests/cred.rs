//! Credentials through the C ABI: rotations, advances, failed mints,
//! the shared trace and owners.

#![allow(clippy::unwrap_used, clippy::panic)]

use crate::document::{pki_document_create, pki_document_read, pki_document_step, pki_kind};
use crate::error::pki_result;
use crate::error::pki_result::*;
use crate::open::pki_store_open;
use crate::step::take_result;
use crate::store::pki_store;
use crate::store::pki_store_free;
use pki_rotate::request::step::{ActionKind, WaitReasonName};
use time::OffsetDateTime;

// The step result's action kinds and wait reasons, numbered for the
// tables below.
const PKI_CRED_ACTION_MINT: u32 = 1;
const PKI_CRED_ACTION_REVOKE: u32 = 2;
const PKI_CRED_ACTION_WAIT: u32 = 3;
const PKI_CRED_ACTION_REVOKE_STRAY: u32 = 4;
const PKI_CRED_WAIT_EXPIRY: u32 = 1;
const PKI_CRED_WAIT_GRACE: u32 = 2;
const PKI_CRED_WAIT_BACKOFF: u32 = 3;
const PKI_CRED_WAIT_MINT_ELSEWHERE: u32 = 4;

fn kind_number(kind: ActionKind) -> u32 {
    match kind {
        ActionKind::Mint => PKI_CRED_ACTION_MINT,
        ActionKind::Revoke => PKI_CRED_ACTION_REVOKE,
        ActionKind::Wait => PKI_CRED_ACTION_WAIT,
        ActionKind::RevokeStray => PKI_CRED_ACTION_REVOKE_STRAY,
    }
}

fn reason_number(reason: Option<WaitReasonName>) -> u32 {
    match reason {
        None => 0,
        Some(WaitReasonName::Expiry) => PKI_CRED_WAIT_EXPIRY,
        Some(WaitReasonName::Grace) => PKI_CRED_WAIT_GRACE,
        Some(WaitReasonName::Backoff) => PKI_CRED_WAIT_BACKOFF,
        Some(WaitReasonName::MintElsewhere) => PKI_CRED_WAIT_MINT_ELSEWHERE,
    }
}

const T0: i64 = 1_767_225_600; // 2026-01-01T00:00:00Z

struct Store(*mut pki_store);
impl Drop for Store {
    fn drop(&mut self) {
        // SAFETY: made by pki_store_open, freed once.
        unsafe { pki_store_free(self.0) }
    }
}

fn memory() -> Store {
    let mut raw = std::ptr::null_mut();
    // SAFETY: a valid location and out pointer.
    let r = unsafe { pki_store_open(c"memory:".as_ptr(), 7, std::ptr::null(), 0, &mut raw) };
    assert_eq!(r, PKI_RESULT_OK);
    Store(raw)
}

fn create(store: &Store, name: &str, input: &str) -> pki_result {
    let mut step = std::ptr::null_mut();
    // SAFETY: live store, slices valid for their lengths.
    let r = unsafe {
        pki_document_create(
            store.0,
            pki_kind::PKI_KIND_CRED as u32,
            name.as_ptr().cast(),
            name.len(),
            input.as_ptr().cast(),
            input.len(),
            T0,
            &mut step,
        )
    };
    take_result(step);
    r
}

/// An advance's action: kind, rotation, attempt, next wake,
/// credential, wait reason.
type Seen = (u32, u64, u32, i64, Vec<u8>, u32);

/// One cred step; on success, the action when it was an advance.
fn cred_step(
    store: &Store,
    name: &str,
    input: Option<&str>,
    now: i64,
) -> Result<Option<Seen>, pki_result> {
    let mut step = std::ptr::null_mut();
    let (p, n) = input.map_or((std::ptr::null(), 0), |i| (i.as_ptr().cast(), i.len()));
    // SAFETY: live store, slices valid for their lengths.
    let r = unsafe {
        pki_document_step(
            store.0,
            pki_kind::PKI_KIND_CRED as u32,
            name.as_ptr().cast(),
            name.len(),
            p,
            n,
            now,
            &mut step,
        )
    };
    if r != PKI_RESULT_OK {
        assert!(step.is_null());
        return Err(r);
    }
    let step = take_result(step).unwrap();
    Ok(step.action.map(|a| {
        (
            kind_number(a.kind),
            a.rotation,
            a.attempt,
            step.next_wake,
            a.credential().to_vec(),
            reason_number(a.wait_reason),
        )
    }))
}

/// An advance: kind, rotation, attempt, next wake, credential.
fn next_of(store: &Store, now: i64) -> (u32, u64, u32, i64, Vec<u8>) {
    let (k, r, a, w, c, _) = cred_step(store, "db", None, now).unwrap().unwrap();
    (k, r, a, w, c)
}

fn report(store: &Store, input: &str, now: i64) -> pki_result {
    match cred_step(store, "db", Some(input), now) {
        Ok(action) => {
            assert!(action.is_none(), "a report has no action");
            PKI_RESULT_OK
        }
        Err(r) => r,
    }
}

fn read(store: &Store, output: u32, now: i64) -> Result<Vec<u8>, pki_result> {
    let mut buf = std::ptr::null_mut();
    // SAFETY: live store, static name, out pointer valid.
    let r = unsafe {
        pki_document_read(
            store.0,
            pki_kind::PKI_KIND_CRED as u32,
            c"db".as_ptr(),
            2,
            output,
            now,
            &mut buf,
        )
    };
    if r != PKI_RESULT_OK {
        return Err(r);
    }
    // SAFETY: the buffer written above, read then freed once.
    unsafe {
        let b = crate::buffer::pki_buffer_data(buf);
        let bytes = std::slice::from_raw_parts(b.data, b.len).to_vec();
        crate::buffer::pki_buffer_free(buf);
        Ok(bytes)
    }
}

#[test]
fn a_rotation_through_the_c_abi_mints_once_and_never_revokes_current() {
    let store = memory();
    assert_eq!(
        create(
            &store,
            "db",
            r#"{"expire_seconds": 3600, "grace_seconds": 3600}"#
        ),
        PKI_RESULT_INVALID_CREDENTIAL_POLICY
    );
    assert_eq!(
        create(
            &store,
            "Bad",
            r#"{"expire_seconds": 3600, "grace_seconds": 60}"#
        ),
        PKI_RESULT_INVALID_CREDENTIAL_NAME
    );
    assert_eq!(
        create(&store, "db", r#"{"expire_seconds": 3600}"#),
        PKI_RESULT_INVALID_ARGUMENT
    );
    assert_eq!(
        create(
            &store,
            "db",
            r#"{"expire_seconds": 3600, "grace_seconds": 60}"#
        ),
        PKI_RESULT_OK
    );
    assert_eq!(read(&store, 1, T0), Err(PKI_RESULT_NOT_FOUND));
    assert_eq!(
        next_of(&store, T0),
        (PKI_CRED_ACTION_MINT, 1, 1, T0, vec![])
    );
    let minted = |r: u64, a: u32, c: &str| {
        format!(r#"{{"minted": {{"rotation": {r}, "attempt": {a}, "credential": "{c}"}}}}"#)
    };
    assert_eq!(
        report(&store, &minted(1, 2, "x"), T0),
        PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT
    );
    assert_eq!(report(&store, &minted(1, 1, "one\\n"), T0), PKI_RESULT_OK);
    assert_eq!(
        report(&store, r#"{"revoked": {"rotation": 1}}"#, T0),
        PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT
    );
    assert_eq!(
        next_of(&store, T0),
        (PKI_CRED_ACTION_WAIT, 0, 0, T0 + 3600, vec![])
    );
    // Due: the bookkeeping steps are taken, then a mint is asked for.
    assert_eq!(
        next_of(&store, T0 + 3600),
        (PKI_CRED_ACTION_MINT, 2, 1, T0 + 3600, vec![])
    );
    assert_eq!(
        report(
            &store,
            r#"{"mint_failed": {"rotation": 2, "attempt": 1, "message": "quota exceeded"}}"#,
            T0 + 3600
        ),
        PKI_RESULT_OK
    );
    assert_eq!(
        next_of(&store, T0 + 3600),
        (PKI_CRED_ACTION_WAIT, 0, 0, T0 + 3630, vec![])
    );
    assert_eq!(
        next_of(&store, T0 + 3630),
        (PKI_CRED_ACTION_MINT, 2, 2, T0 + 3630, vec![])
    );
    // A credential that is not UTF-8 crosses as base64.
    assert_eq!(
        report(
            &store,
            r#"{"minted": {"rotation": 2, "attempt": 2, "credential_base64": "dHdv/w=="}}"#,
            T0 + 3630
        ),
        PKI_RESULT_OK
    );
    assert_eq!(
        next_of(&store, T0 + 3631),
        (PKI_CRED_ACTION_WAIT, 0, 0, T0 + 3690, vec![])
    );
    assert_eq!(
        next_of(&store, T0 + 3690),
        (PKI_CRED_ACTION_REVOKE, 1, 0, T0 + 3690, b"one".to_vec())
    );
    let text = String::from_utf8(read(&store, 0, T0 + 3690).unwrap()).unwrap();
    assert!(
        text.contains("\"state\":\"revoking\"") && !text.contains("two"),
        "{text}"
    );
    assert_eq!(
        report(&store, r#"{"revoked": {"rotation": 1}}"#, T0 + 3690),
        PKI_RESULT_OK
    );
    assert_eq!(read(&store, 1, T0 + 3690), Ok(b"two\xff".to_vec()));
    assert_eq!(read(&store, 2, T0), Err(PKI_RESULT_INVALID_ARGUMENT));
    assert_eq!(next_of(&store, T0 + 3690).0, PKI_CRED_ACTION_WAIT);
}

#[test]
fn an_advance_reports_its_revision_rounds_and_events_like_every_step() {
    let store = memory();
    let mut step = std::ptr::null_mut();
    let input = r#"{"expire_seconds": 3600, "grace_seconds": 60}"#;
    // SAFETY: live store, slices valid for their lengths.
    let code = unsafe {
        pki_document_create(
            store.0,
            pki_kind::PKI_KIND_CRED as u32,
            c"db".as_ptr(),
            2,
            input.as_ptr().cast(),
            input.len(),
            T0,
            &mut step,
        )
    };
    assert_eq!(code, PKI_RESULT_OK);
    let created = take_result(step).unwrap();
    assert_eq!(created.next_wake, T0, "a mint is due at once");
    let mut step = std::ptr::null_mut();
    // SAFETY: as above.
    let code = unsafe {
        pki_document_step(
            store.0,
            pki_kind::PKI_KIND_CRED as u32,
            c"db".as_ptr(),
            2,
            std::ptr::null(),
            0,
            T0,
            &mut step,
        )
    };
    assert_eq!(code, PKI_RESULT_OK);
    let step = take_result(step).unwrap();
    assert!(step.changed);
    assert_eq!(step.attempts, 1);
    assert_ne!(step.revision, created.revision);
    let e = &step.events[0];
    assert_eq!(e.kind(), "mint-started");
    assert_eq!(e.0["attempt"], 1);
    assert!(e.message().contains("minting"));
}

#[test]
fn a_failed_mint_that_returned_a_credential_is_revoked_before_the_next_attempt() {
    let store = memory();
    assert_eq!(
        create(
            &store,
            "db",
            r#"{"expire_seconds": 3600, "grace_seconds": 60}"#
        ),
        PKI_RESULT_OK
    );
    assert_eq!(next_of(&store, T0).0, PKI_CRED_ACTION_MINT);
    assert_eq!(
        report(
            &store,
            r#"{"mint_failed": {"rotation": 1, "attempt": 1, "message": "timed out", "captured": "stray\n"}}"#,
            T0
        ),
        PKI_RESULT_OK
    );
    // Revoked at once, and again after the mint's backoff: no mint
    // while it may be live.
    for now in [T0, T0 + 30] {
        assert_eq!(
            next_of(&store, now),
            (PKI_CRED_ACTION_REVOKE_STRAY, 1, 1, now, b"stray".to_vec())
        );
    }
    assert_eq!(
        report(
            &store,
            r#"{"stray_revoke_failed": {"rotation": 1, "attempt": 1, "message": "timed out"}}"#,
            T0 + 30
        ),
        PKI_RESULT_OK
    );
    assert_eq!(
        report(
            &store,
            r#"{"stray_revoked": {"rotation": 5, "attempt": 1}}"#,
            T0 + 30
        ),
        PKI_RESULT_UNEXPECTED_CREDENTIAL_REPORT
    );
    assert_eq!(
        next_of(&store, T0 + 31),
        (PKI_CRED_ACTION_WAIT, 0, 0, T0 + 60, vec![])
    );
    assert_eq!(
        report(
            &store,
            r#"{"stray_revoked": {"rotation": 1, "attempt": 1}}"#,
            T0 + 60
        ),
        PKI_RESULT_OK
    );
    assert_eq!(
        next_of(&store, T0 + 60),
        (PKI_CRED_ACTION_MINT, 1, 2, T0 + 60, vec![])
    );
}

/// The rotations of `tests/data/cred-trace.txt` through the C ABI: a
/// controller advancing until it must wait, performing and reporting
/// each action. `tests/cred_trace.rs` runs the same trace through the
/// CLI: the actions asked for are the same.
#[test]
fn the_c_abi_asks_for_the_actions_of_the_shared_trace() {
    const TRACE: &str = include_str!("../../../../tests/data/cred-trace.txt");
    let store = memory();
    assert_eq!(
        create(
            &store,
            "db",
            r#"{"expire_seconds": 7200, "grace_seconds": 600}"#
        ),
        PKI_RESULT_OK
    );
    let mut runs: Vec<(i64, Vec<Vec<String>>)> = Vec::new();
    for line in TRACE.lines() {
        let line = line.split('#').next().unwrap().trim();
        let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        match words.first().map(String::as_str) {
            None => {}
            Some("at") => runs.push((unix(&words[1]), Vec::new())),
            Some(_) => runs.last_mut().unwrap().1.push(words),
        }
    }
    assert!(runs.len() >= 5);
    let reason_name = |r| match r {
        PKI_CRED_WAIT_EXPIRY => "expiry",
        PKI_CRED_WAIT_GRACE => "grace",
        PKI_CRED_WAIT_BACKOFF => "backoff",
        _ => "other",
    };
    for (now, lines) in runs {
        let mut asked = Vec::new();
        let mut outcomes = lines
            .iter()
            .filter(|l| l[0] != "wait")
            .map(|l| l.last().unwrap().clone());
        loop {
            let (kind, rotation, attempt, wake, credential, reason) =
                cred_step(&store, "db", None, now).unwrap().unwrap();
            let credential = String::from_utf8(credential).unwrap();
            if kind == PKI_CRED_ACTION_WAIT {
                asked.push(format!("wait {} {}", rfc3339(wake), reason_name(reason)));
                break;
            }
            assert_eq!((wake, reason), (now, 0), "an action is due now");
            let outcome = outcomes.next().expect("more actions than the trace");
            let ok = outcome == "ok";
            let input = match kind {
                PKI_CRED_ACTION_MINT => {
                    asked.push(format!("mint {rotation} {attempt}"));
                    let ra = format!(r#""rotation": {rotation}, "attempt": {attempt}"#);
                    match outcome.as_str() {
                        "ok" => format!(
                            r#"{{"minted": {{{ra}, "credential": "cred-{rotation}-{attempt}"}}}}"#
                        ),
                        "fail-printed" => format!(
                            r#"{{"mint_failed": {{{ra}, "message": "hook failed", "captured": "stray-{rotation}-{attempt}"}}}}"#
                        ),
                        _ => {
                            format!(r#"{{"mint_failed": {{{ra}, "message": "hook failed"}}}}"#)
                        }
                    }
                }
                PKI_CRED_ACTION_REVOKE => {
                    assert!(credential.starts_with(&format!("cred-{rotation}-")));
                    asked.push(format!("revoke {rotation}"));
                    if ok {
                        format!(r#"{{"revoked": {{"rotation": {rotation}}}}}"#)
                    } else {
                        format!(
                            r#"{{"revoke_failed": {{"rotation": {rotation}, "message": "hook failed"}}}}"#
                        )
                    }
                }
                PKI_CRED_ACTION_REVOKE_STRAY => {
                    assert_eq!(credential, format!("stray-{rotation}-{attempt}"));
                    asked.push(format!("revoke-stray {rotation} {attempt}"));
                    let ra = format!(r#""rotation": {rotation}, "attempt": {attempt}"#);
                    if ok {
                        format!(r#"{{"stray_revoked": {{{ra}}}}}"#)
                    } else {
                        format!(r#"{{"stray_revoke_failed": {{{ra}, "message": "hook failed"}}}}"#)
                    }
                }
                other => panic!("unknown action {other}"),
            };
            assert_eq!(report(&store, &input, now), PKI_RESULT_OK);
        }
        let expected: Vec<String> = lines
            .iter()
            .map(|l| {
                let words = if l[0] == "wait" {
                    &l[..]
                } else {
                    &l[..l.len() - 1]
                };
                words.join(" ")
            })
            .collect();
        assert_eq!(asked, expected, "the run at {}", rfc3339(now));
    }
}

fn unix(text: &str) -> i64 {
    OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
        .unwrap()
        .unix_timestamp()
}

fn rfc3339(t: i64) -> String {
    pki_core::datetime::rfc3339(OffsetDateTime::from_unix_timestamp(t).unwrap())
}

#[test]
fn a_mint_another_owner_recorded_is_never_handed_out_and_a_late_one_is_revoked() {
    let store = memory();
    let next_as = |owner: &str| {
        let input = format!(r#"{{"advance": {{"owner": "{owner}"}}}}"#);
        match cred_step(&store, "db", Some(&input), T0) {
            Ok(a) => {
                let (kind, _, _, wake, _, reason) = a.unwrap();
                (PKI_RESULT_OK, kind, reason, wake)
            }
            Err(r) => (r, 0, 0, 0),
        }
    };
    assert_eq!(
        create(
            &store,
            "db",
            r#"{"expire_seconds": 3600, "grace_seconds": 60}"#
        ),
        PKI_RESULT_OK
    );
    assert_eq!(
        next_as("replica-a"),
        (PKI_RESULT_OK, PKI_CRED_ACTION_MINT, 0, T0)
    );
    assert_eq!(
        next_as("replica-b"),
        (
            PKI_RESULT_OK,
            PKI_CRED_ACTION_WAIT,
            PKI_CRED_WAIT_MINT_ELSEWHERE,
            T0 + 30
        )
    );
    assert_eq!(
        next_of(&store, T0).0,
        PKI_CRED_ACTION_WAIT,
        "no owner: not its mint"
    );
    assert_eq!(
        next_as("replica-a").1,
        PKI_CRED_ACTION_MINT,
        "asked again after a restart"
    );
    assert_eq!(next_as("bad owner").0, PKI_RESULT_INVALID_ARGUMENT);
    // A replica that minted anyway (without owners) reports late: kept
    // and revoked, never dropped.
    for c in ["a", "b"] {
        let input =
            format!(r#"{{"minted": {{"rotation": 1, "attempt": 1, "credential": "{c}"}}}}"#);
        assert_eq!(report(&store, &input, T0), PKI_RESULT_OK);
    }
    assert_eq!(
        next_of(&store, T0),
        (PKI_CRED_ACTION_REVOKE_STRAY, 1, 1, T0, b"b".to_vec())
    );
}
