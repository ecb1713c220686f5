//! The ABI called from Rust through the rlib: a rotation round trip, and
//! mutated inputs (bit flips, truncations, splices of valid PEM and state)
//! that must return a code, never `PKI_RESULT_PANIC`.

#![allow(clippy::expect_used, clippy::panic)]

use pki_ffi::*;
use std::ptr;

/// 2026-01-01T00:00:00Z
const T0: i64 = 1_767_225_600;
const DAY: i64 = 86_400;

fn ok(r: pki_result) {
    assert_eq!(r, pki_result::PKI_RESULT_OK, "{}", last_error());
}

fn last_error() -> String {
    let mut buf = vec![0u8; pki_last_error_length() + 1];
    let mut n = 0usize;
    // SAFETY: buf is valid for its length; n for one write.
    let r = unsafe { pki_last_error(buf.as_mut_ptr().cast(), buf.len(), &mut n) };
    assert_eq!(r, pki_result::PKI_RESULT_OK);
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

fn view(b: pki_bytes) -> Vec<u8> {
    if b.data.is_null() {
        return Vec::new();
    }
    // SAFETY: the library guarantees `len` readable bytes while the owner lives.
    unsafe { std::slice::from_raw_parts(b.data, b.len) }.to_vec()
}

fn take(buf: *mut pki_buffer) -> Vec<u8> {
    // SAFETY: a buffer the library returned, freed once here.
    unsafe {
        let v = view(pki_buffer_data(buf));
        pki_buffer_free(buf);
        v
    }
}

/// The JSON document in a buffer the library returned, freed here.
fn json(buf: *mut pki_buffer) -> serde_json::Value {
    serde_json::from_slice(&take(buf)).expect("the library returns JSON")
}

/// A text field of a JSON document, as bytes.
fn text(doc: &serde_json::Value, field: &str) -> Vec<u8> {
    doc[field]
        .as_str()
        .expect("a text field")
        .as_bytes()
        .to_vec()
}

struct Fixture {
    state: Vec<u8>,
    bundle_pem: Vec<u8>,
    chain_pem: Vec<u8>,
    key_pem: Vec<u8>,
}

const REQUEST: &str = r#"{"kind": "server", "dns_names": ["ffi.example"]}"#;

/// A memory store holding a signer created at T0.
fn store_with_signer() -> *mut pki_store {
    let input = r#"{"common_name": "ffi-ca"}"#;
    // SAFETY: every pointer below is a live handle or a local valid for the call.
    unsafe {
        let mut store = ptr::null_mut();
        ok(pki_store_open(
            c"memory:".as_ptr(),
            7,
            ptr::null(),
            0,
            &mut store,
        ));
        let mut step = ptr::null_mut();
        ok(pki_document_create(
            store,
            pki_kind::PKI_KIND_SIGNER as u32,
            c"signer".as_ptr(),
            6,
            input.as_ptr().cast(),
            input.len(),
            T0,
            &mut step,
        ));
        pki_buffer_free(step);
        store
    }
}

/// A signer rotated once, its bundle, and a leaf of the new CA (with bridge B).
fn fixture() -> Fixture {
    // SAFETY: every pointer below is a live handle or a local valid for the call.
    unsafe {
        let store = store_with_signer();
        let mut step = ptr::null_mut();
        ok(pki_document_step(
            store,
            pki_kind::PKI_KIND_SIGNER as u32,
            c"signer".as_ptr(),
            6,
            ptr::null(),
            0,
            T0 + 396 * DAY,
            &mut step,
        ));
        let step = json(step);
        let events = step["events"].as_array().expect("events");
        assert_eq!(events.len(), 1);
        assert_eq!(events[0]["kind"], "rotated");
        let mut next = ptr::null_mut();
        ok(pki_signer_load(
            store,
            c"signer".as_ptr(),
            6,
            &mut next,
            ptr::null_mut(),
        ));
        pki_store_free(store);

        let mut leaf = ptr::null_mut();
        ok(pki_leaf_reconcile(
            next,
            REQUEST.as_ptr().cast(),
            REQUEST.len(),
            T0 + 396 * DAY,
            ptr::null(),
            0,
            ptr::null(),
            0,
            &mut leaf,
        ));
        let leaf = json(leaf);
        let chain_pem = text(&leaf, "chain_pem");
        let key_pem = text(&leaf, "key_pem");

        let mut state = ptr::null_mut();
        ok(pki_signer_to_state(next, &mut state));
        let mut bundle = ptr::null_mut();
        ok(pki_signer_bundle(next, &mut bundle));
        let mut pem = ptr::null_mut();
        ok(pki_bundle_export(
            bundle,
            pki_bundle_output::PKI_BUNDLE_PEM as u32,
            &mut pem,
        ));
        pki_bundle_free(bundle);
        pki_signer_free(next);
        Fixture {
            state: take(state),
            bundle_pem: take(pem),
            chain_pem,
            key_pem,
        }
    }
}

/// xorshift64*: deterministic mutations without a dependency.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, input: &[u8]) -> Vec<u8> {
    let mut v = input.to_vec();
    match rng.below(5) {
        0 => v.truncate(rng.below(v.len())),
        1 => {
            for _ in 0..=rng.below(8) {
                let i = rng.below(v.len());
                if let Some(b) = v.get_mut(i) {
                    *b ^= 1 << rng.below(8);
                }
            }
        }
        2 => {
            let i = rng.below(v.len());
            v.drain(i..(i + rng.below(64)).min(v.len()));
        }
        3 => {
            let i = rng.below(v.len());
            let extra: Vec<u8> = (0..rng.below(32)).map(|_| rng.next() as u8).collect();
            v.splice(i..i, extra);
        }
        _ => {
            // Swap a base64 character for another inside a PEM body.
            let i = rng.below(v.len());
            if v.get(i).is_some_and(u8::is_ascii_alphanumeric) {
                v[i] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"[rng.below(26)];
            }
        }
    }
    v
}

#[test]
fn mutated_inputs_return_codes_and_never_panic() {
    let f = fixture();
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let mut signer = ptr::null_mut();
    // SAFETY: all pointers are locals valid for the calls, or live handles.
    unsafe {
        ok(pki_signer_from_state(
            f.state.as_ptr(),
            f.state.len(),
            &mut signer,
        ));
        let mut bundle = ptr::null_mut();
        ok(pki_bundle_from_pem(
            f.bundle_pem.as_ptr(),
            f.bundle_pem.len(),
            &mut bundle,
        ));

        let mut codes = std::collections::BTreeMap::<String, usize>::new();
        let mut record = |r: pki_result| {
            assert_ne!(r, pki_result::PKI_RESULT_PANIC, "{}", last_error());
            *codes.entry(format!("{r:?}")).or_default() += 1;
        };
        for _ in 0..150 {
            let state = mutate(&mut rng, &f.state);
            let mut out = ptr::null_mut();
            let r = pki_signer_from_state(state.as_ptr(), state.len(), &mut out);
            record(r);
            pki_signer_free(out);

            let pem = mutate(&mut rng, &f.bundle_pem);
            let mut out = ptr::null_mut();
            record(pki_bundle_from_pem(pem.as_ptr(), pem.len(), &mut out));
            pki_bundle_free(out);

            let chain = mutate(&mut rng, &f.chain_pem);
            let mut path = ptr::null_mut();
            record(pki_verify_chain(
                bundle,
                chain.as_ptr(),
                chain.len(),
                T0 + 400 * DAY,
                0,
                c"ffi.example".as_ptr(),
                11,
                &mut path,
            ));
            pki_buffer_free(path);

            let key = mutate(&mut rng, &f.key_pem);
            let request = mutate(&mut rng, REQUEST.as_bytes());
            let mut leaf = ptr::null_mut();
            record(pki_leaf_reconcile(
                signer,
                request.as_ptr().cast(),
                request.len(),
                T0 + 400 * DAY,
                ptr::null(),
                0,
                ptr::null(),
                0,
                &mut leaf,
            ));
            pki_buffer_free(leaf);
            let mut leaf = ptr::null_mut();
            record(pki_leaf_reconcile(
                signer,
                REQUEST.as_ptr().cast(),
                REQUEST.len(),
                T0 + 400 * DAY,
                chain.as_ptr(),
                chain.len(),
                key.as_ptr(),
                key.len(),
                &mut leaf,
            ));
            pki_buffer_free(leaf);

            let mut lineage = pki_lineage {
                issued_by: false,
                rule: pki_lineage_rule::PKI_LINEAGE_LEGACY_NAME_MISMATCH,
            };
            record(pki_signer_check_lineage(
                signer,
                chain.as_ptr(),
                chain.len(),
                &mut lineage,
                ptr::null_mut(),
            ));
        }
        // The mutations reached past the parsers.
        assert!(codes.len() >= 4, "{codes:?}");
        pki_bundle_free(bundle);
        pki_signer_free(signer);
    }
}

/// Mutations of valid JSON inputs (every engine's create and step) return
/// a code, never a panic, and reach past the JSON parser.
#[test]
fn mutated_json_inputs_return_codes_and_never_panic() {
    let mut rng = Rng(0xfeed_face_0123_4567);
    let inputs: [(&str, &[u8]); 8] = [
        ("signer-create", br#"{"common_name": "a", "key_type": "p256", "policy": {"lifetime_seconds": 100000000}}"#),
        ("signer-step", br#"{"forced": {"reason": "r", "grace_seconds": 60}, "leaves": [{"request": {"name": "w", "kind": "server", "dns_names": ["w.example"]}}]}"#),
        ("set-create", br#"{"cas": [{"name": "cluster", "roles": "serving+client"}], "lifetime_seconds": 100000000}"#),
        ("set-step", br#"{"issue": {"name": "web", "ca": "cluster", "serving": true, "dns_names": ["w"], "target": "t"}}"#),
        ("keyring-create", br#"{"policy": {"key_type": "p256", "grace_seconds": 3600}}"#),
        ("keyring-step", br#"{"forced": "r", "retire": ["kid"]}"#),
        ("cred-create", br#"{"expire_seconds": 3600, "grace_seconds": 60}"#),
        ("cred-step", br#"{"minted": {"rotation": 1, "attempt": 1, "credential_base64": "b25l"}}"#),
    ];
    let mut codes = std::collections::BTreeMap::<String, usize>::new();
    // SAFETY: all pointers are locals valid for the calls, or live handles.
    unsafe {
        for _ in 0..60 {
            let mut store = ptr::null_mut();
            ok(pki_store_open(
                c"memory:".as_ptr(),
                7,
                ptr::null(),
                0,
                &mut store,
            ));
            for (what, input) in inputs {
                let input = mutate(&mut rng, input);
                let (p, n) = (input.as_ptr().cast(), input.len());
                let mut step = ptr::null_mut();
                let r = match what {
                    "signer-create" => pki_document_create(
                        store,
                        pki_kind::PKI_KIND_SIGNER as u32,
                        c"signer".as_ptr(),
                        6,
                        p,
                        n,
                        T0,
                        &mut step,
                    ),
                    "signer-step" => pki_document_step(
                        store,
                        pki_kind::PKI_KIND_SIGNER as u32,
                        c"signer".as_ptr(),
                        6,
                        p,
                        n,
                        T0,
                        &mut step,
                    ),
                    "set-create" => pki_document_create(
                        store,
                        pki_kind::PKI_KIND_SET as u32,
                        c"set".as_ptr(),
                        3,
                        p,
                        n,
                        T0,
                        &mut step,
                    ),
                    "set-step" => pki_document_step(
                        store,
                        pki_kind::PKI_KIND_SET as u32,
                        c"set".as_ptr(),
                        3,
                        p,
                        n,
                        T0,
                        &mut step,
                    ),
                    "keyring-create" => pki_document_create(
                        store,
                        pki_kind::PKI_KIND_KEYRING as u32,
                        c"keys".as_ptr(),
                        4,
                        p,
                        n,
                        T0,
                        &mut step,
                    ),
                    "keyring-step" => pki_document_step(
                        store,
                        pki_kind::PKI_KIND_KEYRING as u32,
                        c"keys".as_ptr(),
                        4,
                        p,
                        n,
                        T0,
                        &mut step,
                    ),
                    "cred-create" => pki_document_create(
                        store,
                        pki_kind::PKI_KIND_CRED as u32,
                        c"db".as_ptr(),
                        2,
                        p,
                        n,
                        T0,
                        &mut step,
                    ),
                    _ => pki_document_step(
                        store,
                        pki_kind::PKI_KIND_CRED as u32,
                        c"db".as_ptr(),
                        2,
                        p,
                        n,
                        T0,
                        &mut step,
                    ),
                };
                assert_ne!(r, pki_result::PKI_RESULT_PANIC, "{what}: {}", last_error());
                assert_eq!(r == pki_result::PKI_RESULT_OK, !step.is_null());
                *codes.entry(format!("{what} {r:?}")).or_default() += 1;
                pki_buffer_free(step);
            }
            pki_store_free(store);
        }
    }
    // Some mutations still parse and reach the engines.
    assert!(
        codes
            .keys()
            .filter(|k| !k.ends_with("INVALID_ARGUMENT"))
            .count()
            >= 8,
        "{codes:?}"
    );
}

#[test]
fn the_unmutated_fixture_verifies_and_its_leaf_is_up_to_date() {
    let f = fixture();
    // SAFETY: all pointers are locals valid for the calls, or live handles.
    unsafe {
        let mut signer = ptr::null_mut();
        ok(pki_signer_from_state(
            f.state.as_ptr(),
            f.state.len(),
            &mut signer,
        ));
        let mut bundle = ptr::null_mut();
        ok(pki_bundle_from_pem(
            f.bundle_pem.as_ptr(),
            f.bundle_pem.len(),
            &mut bundle,
        ));
        let mut path = ptr::null_mut();
        ok(pki_verify_chain(
            bundle,
            f.chain_pem.as_ptr(),
            f.chain_pem.len(),
            T0 + 400 * DAY,
            0,
            c"ffi.example".as_ptr(),
            11,
            &mut path,
        ));
        assert_eq!(take(path).windows(5).filter(|w| w == b"BEGIN").count(), 2);

        let mut leaf = ptr::null_mut();
        ok(pki_leaf_reconcile(
            signer,
            REQUEST.as_ptr().cast(),
            REQUEST.len(),
            T0 + 400 * DAY,
            f.chain_pem.as_ptr(),
            f.chain_pem.len(),
            f.key_pem.as_ptr(),
            f.key_pem.len(),
            &mut leaf,
        ));
        let leaf = json(leaf);
        assert_eq!(
            leaf["reason_code"],
            pki_leaf_reason::PKI_LEAF_UP_TO_DATE as u32
        );
        assert_eq!(text(&leaf, "chain_pem"), f.chain_pem);
        pki_bundle_free(bundle);
        pki_signer_free(signer);
    }
}

/// What the mutating callback store below answers: Secret data and a revision.
struct Answer {
    entries: std::sync::Mutex<Vec<(Vec<u8>, Vec<u8>)>>,
}

unsafe extern "C" fn answer_get(
    user_data: *mut std::ffi::c_void,
    _key: *const std::ffi::c_char,
    _key_len: usize,
    reply: *mut pki_store_reply,
) -> u32 {
    // SAFETY: user_data is the `Answer` the test keeps alive for the store.
    let answer = unsafe { &*user_data.cast::<Answer>() };
    let entries = answer.entries.lock().expect("lock");
    // SAFETY: local pointers valid for each call; the secret is freed once.
    unsafe {
        let mut sec = ptr::null_mut();
        ok(pki_secret_new(&mut sec));
        for (k, v) in entries.iter() {
            // Keys that are not Secret data keys are refused by the setter;
            // the test mutates values only.
            ok(pki_secret_set(
                sec,
                k.as_ptr().cast(),
                k.len(),
                v.as_ptr(),
                v.len(),
            ));
        }
        ok(pki_store_reply_set(reply, sec, b"7".as_ptr(), 1));
        pki_secret_free(sec);
    }
    0
}

unsafe extern "C" fn answer_put(
    _user_data: *mut std::ffi::c_void,
    _key: *const std::ffi::c_char,
    _key_len: usize,
    _expected: *const u8,
    _expected_len: usize,
    _data: *const pki_secret,
    reply: *mut pki_store_reply,
) -> u32 {
    // SAFETY: the reply of the running callback; a local revision.
    unsafe { ok(pki_store_reply_set(reply, ptr::null(), b"8".as_ptr(), 1)) };
    0
}

#[test]
fn mutated_documents_from_a_callback_store_return_codes_and_never_panic() {
    let f = fixture();
    let mut rng = Rng(0x0dd_ba11_cafe_f00d);
    // SAFETY: all pointers are locals valid for the calls, or live handles;
    // the Answer outlives the store that points to it.
    unsafe {
        let mut signer = ptr::null_mut();
        ok(pki_signer_from_state(
            f.state.as_ptr(),
            f.state.len(),
            &mut signer,
        ));
        let mut sec = ptr::null_mut();
        ok(pki_signer_to_secret(signer, &mut sec));
        let mut good = Vec::new();
        for i in 0..pki_secret_len(sec) {
            let (mut k, mut v) = (
                pki_bytes {
                    data: ptr::null(),
                    len: 0,
                },
                pki_bytes {
                    data: ptr::null(),
                    len: 0,
                },
            );
            ok(pki_secret_entry(sec, i, &mut k, &mut v));
            good.push((view(k), view(v)));
        }
        pki_secret_free(sec);
        pki_signer_free(signer);

        let answer = Answer {
            entries: std::sync::Mutex::new(good.clone()),
        };
        let callbacks = pki_store_callbacks {
            get: Some(answer_get),
            put: Some(answer_put),
            release: None,
            location: ptr::null(),
            location_len: 0,
        };
        let mut store = ptr::null_mut();
        ok(pki_store_new_callbacks(
            &callbacks,
            (&answer as *const Answer).cast_mut().cast(),
            &mut store,
        ));

        // Unmutated, the document steps; then every mutation returns a code.
        let mut step = ptr::null_mut();
        ok(pki_document_step(
            store,
            pki_kind::PKI_KIND_SIGNER as u32,
            c"signer".as_ptr(),
            6,
            ptr::null(),
            0,
            T0 + 400 * DAY,
            &mut step,
        ));
        pki_buffer_free(step);
        let mut codes = std::collections::BTreeMap::<String, usize>::new();
        for _ in 0..120 {
            let mut entries = good.clone();
            let i = rng.below(entries.len());
            entries[i].1 = mutate(&mut rng, &entries[i].1);
            if rng.below(4) == 0 {
                entries.remove(rng.below(entries.len()));
            }
            *answer.entries.lock().expect("lock") = entries;
            let mut step = ptr::null_mut();
            let r = pki_document_step(
                store,
                pki_kind::PKI_KIND_SIGNER as u32,
                c"signer".as_ptr(),
                6,
                ptr::null(),
                0,
                T0 + 400 * DAY,
                &mut step,
            );
            assert_ne!(r, pki_result::PKI_RESULT_PANIC, "{}", last_error());
            *codes.entry(format!("{r:?}")).or_default() += 1;
            pki_buffer_free(step);
        }
        // The mutations reached the document's parsers.
        assert!(codes.contains_key("PKI_RESULT_CORRUPT_STATE"), "{codes:?}");
        pki_store_free(store);
    }
}
