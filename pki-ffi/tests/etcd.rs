//! The C ABI over a real etcd server on 127.0.0.1 (started here): a URL
//! store steps a signer like any other store, replicas in threads racing at
//! the rotation point rotate once, and bad URLs and unreachable servers get
//! their own result codes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![allow(clippy::undocumented_unsafe_blocks)] // every pointer here is a live local or handle

#[path = "../../pki-etcd/tests/support/etcd.rs"]
mod etcd;

use pki_ffi::*;
use std::ptr;

// 2026-01-01T00:00:00Z: the library never reads the clock.
const T0: i64 = 1_767_225_600;
const DAY: i64 = 86_400;

fn open(url: &str) -> (pki_result, *mut pki_store) {
    let mut store = ptr::null_mut();
    let r = unsafe { pki_store_open(url.as_ptr().cast(), url.len(), ptr::null(), 0, &mut store) };
    (r, store)
}

/// A step result's JSON document, its buffer freed.
fn result(buffer: *mut pki_buffer) -> serde_json::Value {
    let data = unsafe { pki_buffer_data(buffer) };
    let bytes = unsafe { std::slice::from_raw_parts(data.data, data.len) };
    let value = serde_json::from_slice(bytes).expect("a step result is JSON");
    unsafe { pki_buffer_free(buffer) };
    value
}

fn step(store: *const pki_store, now: i64) -> serde_json::Value {
    let mut out = ptr::null_mut();
    let r = unsafe {
        pki_document_step(
            store,
            pki_kind::PKI_KIND_SIGNER as u32,
            "signer".as_ptr().cast(),
            6,
            ptr::null(),
            0,
            now,
            &mut out,
        )
    };
    assert_eq!(r, pki_result::PKI_RESULT_OK);
    result(out)
}

#[test]
fn a_url_store_steps_a_signer_and_racing_replicas_rotate_once() {
    let server = etcd::Etcd::start();
    let url = server.url("ffi/service-ca");
    let (r, store) = open(&url);
    assert_eq!(r, pki_result::PKI_RESULT_OK);
    unsafe {
        let input = r#"{"common_name": "service-ca"}"#;
        let mut created = ptr::null_mut();
        assert_eq!(
            pki_document_create(
                store,
                pki_kind::PKI_KIND_SIGNER as u32,
                "signer".as_ptr().cast(),
                6,
                input.as_ptr().cast(),
                input.len(),
                T0,
                &mut created
            ),
            pki_result::PKI_RESULT_OK
        );
        // Nothing is due before the CA is: it is stepped again then.
        assert_eq!(result(created)["next_wake"], T0 + 395 * DAY + 1);
    }

    // Nothing due: the next check is the first second with less than M left.
    let quiet = step(store, T0 + 10 * DAY);
    assert_eq!(quiet["changed"], false);
    assert_eq!(quiet["next_wake"], T0 + 395 * DAY + 1);

    // Four replicas, each with its own connection, step at the rotation point.
    let rotated: usize = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let url = url.clone();
                scope.spawn(move || {
                    let (r, store) = open(&url);
                    assert_eq!(r, pki_result::PKI_RESULT_OK);
                    let s = step(store, T0 + 396 * DAY);
                    let n = s["events"]
                        .as_array()
                        .expect("events")
                        .iter()
                        .filter(|e| e["kind"] == "rotated")
                        .count();
                    // Every replica ends on the store's document; after the
                    // rotation bridge B is retired next, at day 790 + 1 s.
                    assert_eq!(s["next_wake"], T0 + 790 * DAY + 1);
                    unsafe { pki_store_free(store) };
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert_eq!(rotated, 1);
    unsafe { pki_store_free(store) };
}

#[test]
fn bad_urls_and_unreachable_servers_have_their_own_codes() {
    for bad in [
        "etcd://127.0.0.1:2379",
        "etcd://host:port/x",
        "http://127.0.0.1/x",
    ] {
        let (r, store) = open(bad);
        assert_eq!(r, pki_result::PKI_RESULT_INVALID_ARGUMENT, "{bad}");
        assert!(store.is_null());
    }
    let port = etcd::free_port();
    let started = std::time::Instant::now();
    let (r, store) = open(&format!("etcd://127.0.0.1:{port}/x"));
    assert_eq!(r, pki_result::PKI_RESULT_STORE);
    assert!(store.is_null());
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
}
