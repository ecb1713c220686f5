//! The signer through the C ABI: imports, replacements validated and
//! rotated to, service-account key sets, the trust-break guard, leaf
//! changes and the JSON inputs' refusals.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::abi::{into_handle, os_rng};
use crate::buffer::{pki_buffer_data, pki_buffer_free};
use crate::document::{pki_document_create, pki_document_step, pki_kind};
use crate::error::pki_result;
use crate::error::pki_result::*;
use crate::open::pki_store_open;
use crate::signer::*;
use crate::step::take_result;
use crate::store::pki_store;
use crate::store::{Backing, pki_store_free};
use pki_core::{CertificateAuthority, CertificateParams, KeyAlgorithm, PrivateKey, Profile};
use pki_rotate::request::StepResult;
use pki_rotate::{Driver, KeyRing, Store};
use pki_rotate::{SignerEngine, SignerInput, SignerState};
use serde_json::{Value, json};
use std::ptr::{null, null_mut};
use time::{Duration, macros::datetime};

// 2026-01-01: every CA here is made at this time.
const T0: time::OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

fn at(days: i64) -> i64 {
    T0.unix_timestamp() + days * 86_400
}

fn root(cn: &str) -> CertificateAuthority {
    CertificateAuthority::generate_root(
        cn,
        KeyAlgorithm::EcdsaP256,
        T0,
        Duration::days(3650),
        &mut os_rng(),
    )
    .unwrap()
}

fn under(issuer: &CertificateAuthority, cn: &str) -> CertificateAuthority {
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut os_rng()).unwrap();
    let params = CertificateParams::new(
        Profile::IntermediateCa { path_len: Some(0) },
        cn,
        T0,
        Duration::days(700),
    )
    .unwrap();
    let cert = issuer
        .issue(&params, &key.public_key().unwrap(), &mut os_rng())
        .unwrap();
    CertificateAuthority::new(cert, key).unwrap()
}

fn pem_of(ca: &CertificateAuthority, chain: &[&CertificateAuthority]) -> String {
    let mut s = ca.cert.to_pem();
    s.push_str(&ca.key.to_pkcs8_pem().unwrap());
    for c in chain {
        s.push_str(&c.cert.to_pem());
    }
    s
}

fn public_pem(key: &PrivateKey) -> String {
    pki_core::pem::encode("PUBLIC KEY", &key.public_key_der().unwrap())
}

fn failed_checks(r: &Value) -> Vec<String> {
    r["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["ok"] == false)
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

/// A store, freed when dropped.
struct TestStore(*mut pki_store);

impl Drop for TestStore {
    fn drop(&mut self) {
        // SAFETY: a live store, freed once.
        unsafe { pki_store_free(self.0) }
    }
}

fn memory() -> TestStore {
    let mut raw = null_mut();
    // SAFETY: a valid location and out pointer.
    let code = unsafe { pki_store_open(c"memory:".as_ptr(), 7, null(), 0, &mut raw) };
    assert_eq!(code, PKI_RESULT_OK);
    TestStore(raw)
}

fn take(step: StepResult) -> pki_result {
    drop(step);
    PKI_RESULT_OK
}

fn create(store: &TestStore, input: &Value) -> pki_result {
    let text = input.to_string();
    let mut out = null_mut();
    // SAFETY: a live store; the key and input are valid for their lengths.
    let code = unsafe {
        pki_document_create(
            store.0,
            pki_kind::PKI_KIND_SIGNER as u32,
            c"signer".as_ptr(),
            6,
            text.as_ptr().cast(),
            text.len(),
            T0.unix_timestamp(),
            &mut out,
        )
    };
    if code == PKI_RESULT_OK {
        take(take_result(out).unwrap())
    } else {
        assert!(out.is_null(), "written on failure");
        code
    }
}

/// One signer step; on success, the step (to free).
fn step(store: &TestStore, input: Option<&Value>, now: i64) -> Result<StepResult, pki_result> {
    let text = input.map(Value::to_string);
    let (p, n) = text
        .as_ref()
        .map_or((null(), 0), |t| (t.as_ptr().cast(), t.len()));
    let mut out = null_mut();
    // SAFETY: a live store; the key and input are valid for their lengths.
    let code = unsafe {
        pki_document_step(
            store.0,
            pki_kind::PKI_KIND_SIGNER as u32,
            c"signer".as_ptr(),
            6,
            p,
            n,
            now,
            &mut out,
        )
    };
    if code == PKI_RESULT_OK {
        Ok(take_result(out).unwrap())
    } else {
        assert!(out.is_null(), "written on failure");
        Err(code)
    }
}

fn step_code(store: &TestStore, input: &Value, now: i64) -> pki_result {
    step(store, Some(input), now).map_or_else(|c| c, take)
}

/// The signer document in `store` and its revision.
fn load(store: *const pki_store) -> (SignerState, String) {
    let (mut signer, mut revision) = (null_mut(), null_mut());
    // SAFETY: a live store; out pointers valid for the call.
    let code = unsafe { pki_signer_load(store, c"signer".as_ptr(), 6, &mut signer, &mut revision) };
    assert_eq!(code, PKI_RESULT_OK);
    // SAFETY: both written on success; each read, then freed once.
    unsafe {
        let state = (*signer).state.clone();
        let view = pki_buffer_data(revision);
        let rev =
            String::from_utf8(std::slice::from_raw_parts(view.data, view.len).to_vec()).unwrap();
        pki_buffer_free(revision);
        pki_signer_free(signer);
        (state, rev)
    }
}

fn validate(signer: *const pki_signer, input: &Value, now: i64) -> Result<Value, pki_result> {
    let text = input.to_string();
    let mut out = null_mut();
    // SAFETY: a live signer, valid slices and out pointer.
    let code =
        unsafe { pki_signer_validate(signer, text.as_ptr().cast(), text.len(), now, &mut out) };
    if code != PKI_RESULT_OK {
        return Err(code);
    }
    // SAFETY: the live buffer written above; the view is copied before the
    // buffer is freed once.
    let json = unsafe {
        let view = pki_buffer_data(out);
        let bytes = std::slice::from_raw_parts(view.data, view.len).to_vec();
        pki_buffer_free(out);
        bytes
    };
    Ok(serde_json::from_slice(&json).unwrap())
}

fn loaded(store: &TestStore) -> *mut pki_signer {
    let mut signer = null_mut();
    // SAFETY: a live store; valid key and out pointer.
    let code = unsafe { pki_signer_load(store.0, c"signer".as_ptr(), 6, &mut signer, null_mut()) };
    assert_eq!(code, PKI_RESULT_OK);
    signer
}

#[test]
fn import_validate_and_rotate_through_the_c_abi() {
    let org = root("Org Root");
    // pathlen 0 on the intermediate would forbid a CA below it: issue
    // the cluster CAs from the root's intermediate with none.
    let int = {
        let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut os_rng()).unwrap();
        let params = CertificateParams::new(
            Profile::IntermediateCa { path_len: None },
            "Org Intermediate",
            T0,
            Duration::days(1800),
        )
        .unwrap();
        let cert = org
            .issue(&params, &key.public_key().unwrap(), &mut os_rng())
            .unwrap();
        CertificateAuthority::new(cert, key).unwrap()
    };
    let cluster = under(&int, "cluster-ca");
    let imported = |pem: &str| {
        let store = memory();
        let code = create(&store, &json!({"import": {"ca": pem}}));
        (code, store)
    };
    let (code, store) = imported(&pem_of(&cluster, &[&int, &org]));
    assert_eq!(code, PKI_RESULT_OK);
    let signer = loaded(&store);
    // SAFETY: the live handle loaded above.
    let bundle = unsafe { (*signer).state.bundle.certs() };
    assert_eq!(bundle, std::slice::from_ref(&org.cert));

    let next = under(&int, "cluster-ca-2");
    let r = validate(signer, &json!({"ca": pem_of(&next, &[&int, &org])}), at(1)).unwrap();
    assert_eq!(r["ok"], true, "{r}");
    let r = validate(signer, &json!({"ca": pem_of(&next, &[])}), at(1)).unwrap();
    assert_eq!(r["ok"], false, "{r}");
    assert_eq!(failed_checks(&r), ["chain-supplied"]);
    assert_eq!(
        validate(signer, &json!({"ca": "x", "force": "no"}), at(1)),
        Err(PKI_RESULT_INVALID_ARGUMENT),
        "validation has no force"
    );

    let rotate_to = |pem: &str, force: Option<&str>| {
        let (code, store) = imported(&pem_of(&cluster, &[&int, &org]));
        assert_eq!(code, PKI_RESULT_OK);
        let mut to = json!({"ca": pem});
        if let Some(f) = force {
            to["force"] = json!(f);
        }
        let code = step_code(&store, &json!({"rotate_to": to}), at(1));
        if code == PKI_RESULT_OK {
            assert_eq!(load(store.0).0.history.len(), 1);
        }
        code
    };
    assert_eq!(
        rotate_to(&pem_of(&next, &[&int, &org]), None),
        PKI_RESULT_OK
    );
    let other = root("Other Root");
    let stranger = under(&other, "cluster-ca-3");
    let pem = pem_of(&stranger, &[&other]);
    assert_eq!(rotate_to(&pem, None), PKI_RESULT_VALIDATION_FAILED);
    assert_eq!(rotate_to(&pem, Some("org root replaced")), PKI_RESULT_OK);

    let (code, _none) = imported(&format!(
        "{}{}",
        pem_of(&cluster, &[&int, &org]),
        &*org.key.to_pkcs8_pem().unwrap()
    ));
    assert_eq!(code, PKI_RESULT_IMPORT);
    // SAFETY: freed once.
    unsafe { pki_signer_free(signer) };
}

#[test]
fn service_account_key_sets_reach_validation_and_rotation_through_the_c_abi() {
    let org = root("Org Root");
    let next = root("Next Root");
    let pem = pem_of(&next, &[]);
    let kept = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut os_rng()).unwrap();
    let other = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut os_rng()).unwrap();
    let current = public_pem(&kept);
    let dropped = public_pem(&other);
    let kept_too = format!("{}{}", public_pem(&other), public_pem(&kept));

    let store = memory();
    assert_eq!(
        create(&store, &json!({"import": {"ca": pem_of(&org, &[])}})),
        PKI_RESULT_OK
    );
    let signer = loaded(&store);
    let asked =
        |proposed: &str| json!({"ca": pem, "current_keys": current, "proposed_keys": proposed});
    assert_eq!(
        failed_checks(&validate(signer, &asked(&dropped), at(1)).unwrap()),
        ["service-account-key-kept"]
    );
    assert_eq!(
        failed_checks(&validate(signer, &asked(&kept_too), at(1)).unwrap()),
        Vec::<String>::new()
    );
    // SAFETY: freed once.
    unsafe { pki_signer_free(signer) };

    let rotate = |proposed: &str, force: Option<&str>| -> pki_result {
        let store = memory();
        assert_eq!(
            create(&store, &json!({"import": {"ca": pem_of(&org, &[])}})),
            PKI_RESULT_OK
        );
        let mut to = asked(proposed);
        if let Some(f) = force {
            to["force"] = json!(f);
        }
        let code = step_code(&store, &json!({"rotate_to": to}), at(1));
        if code == PKI_RESULT_OK && force.is_some() {
            let record = load(store.0).0.history.last().cloned().unwrap();
            assert_eq!(record.overridden[0].name, "service-account-key-kept");
        }
        code
    };
    assert_eq!(rotate(&dropped, None), PKI_RESULT_VALIDATION_FAILED);
    assert_eq!(rotate(&dropped, Some("key ring moved")), PKI_RESULT_OK);
    assert_eq!(rotate(&kept_too, None), PKI_RESULT_OK);
    // A key set without a key is an error, not an empty set.
    assert_eq!(
        rotate(&pem_of(&next, &[]).replace("PRIVATE KEY", "X"), None),
        PKI_RESULT_UNEXPECTED_PEM_LABEL
    );
}

/// A memory store where another writer changes the signer document
/// (adds a leaf) just before the first compare-and-swap write of it.
struct Racing {
    inner: pki_rotate::MemoryStore,
    raced: std::sync::atomic::AtomicBool,
}

impl pki_rotate::Store for Racing {
    fn location(&self) -> String {
        self.inner.location()
    }
    fn get(
        &self,
        key: &str,
    ) -> pki_rotate::Result<Option<(pki_rotate::Files, pki_rotate::Revision)>> {
        self.inner.get(key)
    }
    fn put(
        &self,
        key: &str,
        expected: Option<&pki_rotate::Revision>,
        files: &pki_rotate::Files,
    ) -> pki_rotate::Result<pki_rotate::Revision> {
        if key == "signer"
            && expected.is_some()
            && !self.raced.swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            let web = SignerInput::request(
                "web",
                pki_rotate::LeafRequest::server(vec!["web.example".into()]),
            );
            Driver::new(&self.inner)
                .step::<SignerEngine, _>(key, &web, T0 + Duration::days(1), &mut os_rng())
                .unwrap();
        }
        self.inner.put(key, expected, files)
    }
}

#[test]
fn a_store_backed_rotation_to_a_supplied_ca_validates_against_the_store_and_writes_by_compare_and_swap()
 {
    let store = TestStore(into_handle(pki_store {
        backing: Backing::Files(Box::new(Racing {
            inner: pki_rotate::MemoryStore::new(),
            raced: false.into(),
        })),
        location: "memory:".into(),
        tokens: None,
    }));
    let org = root("Org Root");
    assert_eq!(
        create(&store, &json!({"import": {"ca": pem_of(&org, &[])}})),
        PKI_RESULT_OK
    );
    // The store keeps a service-account key ring, as `pki keys` does.
    let kept = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut os_rng()).unwrap();
    let mut files = pki_rotate::Files::new();
    files
        .insert(
            "keys/public.pem",
            pki_rotate::File::public(public_pem(&kept)),
        )
        .unwrap();
    // SAFETY: the live store created above.
    unsafe { (*store.0).of::<KeyRing>().put("keys", None, &files) }.unwrap();
    let (before, revision) = load(store.0);

    let next = root("Next Root");
    let pem = pem_of(&next, &[]);
    let stranger =
        public_pem(&PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut os_rng()).unwrap());
    // Dropping the key ring's key is refused, and nothing is written.
    let code = step_code(
        &store,
        &json!({"rotate_to": {"ca": pem, "proposed_keys": stranger}}),
        at(1),
    );
    assert_eq!(code, PKI_RESULT_VALIDATION_FAILED);
    assert_eq!(load(store.0).1, revision);

    // Another writer adds a leaf while this rotation is being decided:
    // the first write loses, the rotation is decided again from the
    // fresh document, and its leaf is re-issued by the new CA too.
    let step = step(&store, Some(&json!({"rotate_to": {"ca": pem}})), at(1)).unwrap();
    assert!(step.changed);
    assert_eq!(step.attempts, 2);
    take(step);
    let (after, new_revision) = load(store.0);
    assert_ne!(new_revision, revision);
    assert_eq!(after.ca.cert, next.cert);
    assert_ne!(before.ca.cert, after.ca.cert);
    assert_eq!(after.history.len(), 1);
    let web = &after.leaves["web"].issued.as_ref().unwrap().cert;
    assert!(pki_core::issued_by(web, &next.cert).issued_by);
}

#[test]
fn the_store_backed_step_refuses_a_trust_break_unless_a_reason_allows_it() {
    let store = memory();
    assert_eq!(
        create(&store, &json!({"common_name": "service-ca"})),
        PKI_RESULT_OK
    );
    let forced = |reason: &str, allow: Option<&str>| {
        let mut input = json!({"forced": {"reason": reason}});
        if let Some(a) = allow {
            input["allow_trust_break"] = json!(a);
        }
        input
    };
    assert_eq!(
        step_code(&store, &forced("first", None), at(1)),
        PKI_RESULT_OK
    );
    let (_, revision) = load(store.0);
    // A day later, clients may still hold the bundle of two rotations ago.
    assert_eq!(
        step_code(&store, &forced("second", None), at(2)),
        PKI_RESULT_TRUST_BREAK
    );
    crate::error::with_last_error(|m| assert!(m.contains("until"), "{m}"));
    assert_eq!(load(store.0).1, revision);
    assert_eq!(
        step_code(&store, &forced("second", Some("  ")), at(2)),
        PKI_RESULT_INVALID_ARGUMENT
    );
    assert_eq!(
        step_code(&store, &forced("second", Some("lab store")), at(2)),
        PKI_RESULT_OK
    );
    let (after, _) = load(store.0);
    let record = after.history.last().unwrap();
    assert_eq!(record.overridden[0].name, "bundle-of-two-rotations-ago");
    assert!(record.overridden[0].detail.contains("lab store"));
}

#[test]
fn leaves_are_requested_renewed_replaced_and_removed_in_steps() {
    let store = memory();
    assert_eq!(
        create(
            &store,
            &json!({"common_name": "service-ca", "key_type": "p384"})
        ),
        PKI_RESULT_OK
    );
    let web = json!({"name": "web", "kind": "server", "dns_names": ["web.example"]});
    assert_eq!(
        step_code(&store, &json!({"leaves": [{"request": web}]}), at(1)),
        PKI_RESULT_OK
    );
    let (doc, _) = load(store.0);
    let first = doc.leaves["web"].issued.clone().unwrap().cert;
    assert_eq!(doc.policy.key_algorithm, KeyAlgorithm::EcdsaP384);
    // The same request again is nothing to do; a renewal re-issues.
    let quiet = step(&store, Some(&json!({"leaves": [{"request": web}]})), at(2)).unwrap();
    assert!(!quiet.changed);
    take(quiet);
    assert_eq!(
        step_code(
            &store,
            &json!({"leaves": [{"renew": {"name": "web"}}]}),
            at(2)
        ),
        PKI_RESULT_OK
    );
    let renewed = load(store.0).0.leaves["web"].issued.clone().unwrap().cert;
    assert_ne!(first, renewed);
    // Dropping a name needs `replace`.
    let fewer = json!({"name": "web", "kind": "server+client", "ip_addresses": ["10.0.0.1"]});
    assert_ne!(
        step_code(&store, &json!({"leaves": [{"request": fewer}]}), at(3)),
        PKI_RESULT_OK
    );
    assert_eq!(
        step_code(&store, &json!({"leaves": [{"replace": fewer}]}), at(3)),
        PKI_RESULT_OK
    );
    assert_eq!(
        step_code(
            &store,
            &json!({"leaves": [{"remove": {"name": "web"}}]}),
            at(4)
        ),
        PKI_RESULT_OK
    );
    assert!(load(store.0).0.leaves.is_empty());
    assert_eq!(
        step_code(
            &store,
            &json!({"leaves": [{"renew": {"name": "web"}}]}),
            at(4)
        ),
        PKI_RESULT_UNKNOWN_LEAF
    );
}

#[test]
fn malformed_inputs_are_refused_with_the_field_that_is_wrong() {
    let store = memory();
    for (input, want) in [
        (json!({}), PKI_RESULT_INVALID_ARGUMENT),
        (
            json!({"common_name": "a", "comon_name": "b"}),
            PKI_RESULT_INVALID_ARGUMENT,
        ),
        (
            json!({"common_name": "a", "key_type": "p521"}),
            PKI_RESULT_INVALID_ARGUMENT,
        ),
        (json!({"common_name": 7}), PKI_RESULT_INVALID_ARGUMENT),
        (
            json!({"common_name": "a", "policy": {"lifetime_seconds": 0}}),
            PKI_RESULT_INVALID_POLICY,
        ),
        (
            json!({"common_name": "a", "policy": {"leaf_refresh_fraction": 1.5}}),
            PKI_RESULT_INVALID_REFRESH_FRACTION,
        ),
        (
            json!({"state": {"version": 99}}),
            PKI_RESULT_UNSUPPORTED_STATE_VERSION,
        ),
    ] {
        assert_eq!(create(&store, &input), want, "{input}");
    }
    crate::error::with_last_error(|m| assert!(m.contains("version"), "{m}"));
    assert_eq!(
        create(&store, &json!({"common_name": "service-ca"})),
        PKI_RESULT_OK
    );
    assert_eq!(
        create(&store, &json!({"common_name": "service-ca"})),
        PKI_RESULT_ALREADY_INITIALIZED
    );
    for (input, want) in [
        (
            json!({"forcd": {"reason": "x"}}),
            PKI_RESULT_INVALID_ARGUMENT,
        ),
        (
            json!({"forced": {"reason": ""}}),
            PKI_RESULT_EMPTY_FORCED_REASON,
        ),
        (
            json!({"forced": {"reason": "x", "grace_seconds": -1}}),
            PKI_RESULT_INVALID_GRACE,
        ),
        (
            json!({"policy": {"min_trust_seconds": 0}}),
            PKI_RESULT_INVALID_POLICY,
        ),
        (
            json!({"leaves": [{"request": {"name": "w", "kind": "server"}}]}),
            PKI_RESULT_INVALID_ARGUMENT,
        ),
        (
            json!({"leaves": [{"request": {"name": "w", "kind": "sever", "dns_names": ["a"]}}]}),
            PKI_RESULT_INVALID_ARGUMENT,
        ),
        (
            json!({"leaves": [{"request": {"name": "w", "kind": "server", "ip_addresses": ["300.1.1.1"]}}]}),
            PKI_RESULT_INVALID_ARGUMENT,
        ),
        (
            json!({"leaves": [{"request": {"name": "W!", "kind": "server", "dns_names": ["a"]}}]}),
            PKI_RESULT_INVALID_LEAF_NAME,
        ),
        (
            json!({"renew_same_key": true, "forced": {"reason": "x"}}),
            PKI_RESULT_INVALID_ARGUMENT,
        ),
        (
            json!({"rotate_to": {"ca": "no"}, "renew_same_key": true}),
            PKI_RESULT_INVALID_ARGUMENT,
        ),
        (json!([1, 2]), PKI_RESULT_INVALID_ARGUMENT),
    ] {
        assert_eq!(step_code(&store, &input, at(1)), want, "{input}");
    }
    let mut out = null_mut();
    // SAFETY: a live store; the input is deliberately not UTF-8.
    let code = unsafe {
        pki_document_step(
            store.0,
            pki_kind::PKI_KIND_SIGNER as u32,
            c"signer".as_ptr(),
            6,
            b"{\"a\xff\":1}".as_ptr().cast(),
            8,
            at(1),
            &mut out,
        )
    };
    assert_eq!(code, PKI_RESULT_INVALID_ARGUMENT);
    assert!(out.is_null());
}

#[test]
fn a_saved_state_and_a_renewal_on_the_same_key_round_trip_through_stores() {
    let store = memory();
    assert_eq!(
        create(&store, &json!({"common_name": "service-ca"})),
        PKI_RESULT_OK
    );
    let signer = loaded(&store);
    let mut state = null_mut();
    // SAFETY: a live signer and out pointer.
    let code = unsafe { pki_signer_to_state(signer, &mut state) };
    assert_eq!(code, PKI_RESULT_OK);
    // SAFETY: the live buffer; copied, then freed once.
    let bytes = unsafe {
        let view = pki_buffer_data(state);
        let b = std::slice::from_raw_parts(view.data, view.len).to_vec();
        pki_buffer_free(state);
        b
    };
    let copy = memory();
    let saved: Value = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(create(&copy, &json!({"state": saved})), PKI_RESULT_OK);
    // SAFETY: the live handle loaded above.
    assert_eq!(load(copy.0).0.ca.cert, unsafe { &(*signer).state }.ca.cert);
    // SAFETY: freed once.
    unsafe { pki_signer_free(signer) };

    assert_eq!(
        step_code(&copy, &json!({"renew_same_key": true}), at(30)),
        PKI_RESULT_OK
    );
    let renewed = load(copy.0).0;
    let original = load(store.0).0;
    assert_ne!(renewed.ca.cert, original.ca.cert);
    assert_eq!(
        renewed.ca.cert.public_key(),
        original.ca.cert.public_key(),
        "the same key"
    );
}

mod by_parts;
