//! The external-CA engine: import, validation of a replacement, rotation
//! to a supplied CA, same-key renewal, over the driver and a MemoryStore.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use pki_core::{
    Bundle, CaImport, CertificateAuthority, CertificateParams, KeyAlgorithm, PrivateKey, Profile,
};
use pki_rotate::external::{ServiceAccountKeys, check, check_service_account_keys};
use pki_rotate::preflight::{MatrixInputs, matrix};
use pki_rotate::{
    Driver, ExternalEngine, ExternalInput, LeafRequest, MemoryStore, Replacement, RotateError,
    RotationReason, SignerEngine, SignerInput, SignerPolicy, SignerState, Store,
};
use support::seed::{T0, rng, root};
use time::{Duration, OffsetDateTime};

const KEY: &str = "signer";

fn under(issuer: &CertificateAuthority, cn: &str, path_len: u8, seed: u64) -> CertificateAuthority {
    sub_ca(issuer, cn, Some(path_len), seed)
}

fn import_of(ca: &CertificateAuthority, chain: &[&CertificateAuthority]) -> CaImport {
    CaImport {
        cert: ca.cert.clone(),
        key: Some(ca.key.clone()),
        chain: chain.iter().map(|c| c.cert.clone()).collect(),
    }
}

fn replace(import: CaImport, force: Option<&str>) -> ExternalInput {
    ExternalInput::Replace(Box::new(Replacement {
        import,
        force: force.map(str::to_string),
        service_accounts: ServiceAccountKeys::default(),
    }))
}

struct Org {
    root: CertificateAuthority,
    int: CertificateAuthority,
    cluster: CertificateAuthority,
}

fn org(seed: u64) -> Org {
    let root = root("Org Root", 3650, seed);
    let int = under(&root, "Org Intermediate", 1, seed + 1);
    let cluster = under(&int, "cluster-ca", 0, seed + 2);
    Org { root, int, cluster }
}

/// A store holding the imported `o.cluster` with one leaf.
fn imported(o: &Org) -> (MemoryStore, OffsetDateTime) {
    let store = MemoryStore::new();
    let driver = Driver::new(&store);
    let state = SignerState::import(
        &import_of(&o.cluster, &[&o.int, &o.root]),
        SignerPolicy::default(),
        T0,
    )
    .unwrap();
    assert_eq!(state.bundle.certs(), std::slice::from_ref(&o.root.cert));
    driver.create::<SignerEngine>(KEY, &state).unwrap();
    let web = SignerInput::request("web", LeafRequest::server(vec!["web.example".into()]));
    driver
        .step::<SignerEngine, _>(KEY, &web, T0, &mut rng(50))
        .unwrap();
    (store, T0 + Duration::days(1))
}

fn snapshot(store: &MemoryStore) -> Vec<u8> {
    let (files, _) = store.get(KEY).unwrap().unwrap();
    let mut out = Vec::new();
    for (path, file) in files.iter() {
        out.extend_from_slice(path.as_bytes());
        out.extend_from_slice(&file.contents);
    }
    out
}

#[test]
fn imported_chain_survives_the_store_and_serving_chains_carry_it() {
    let o = org(1);
    let (store, _) = imported(&o);
    let (state, _) = Driver::new(&store).load::<SignerEngine>(KEY).unwrap();
    let ext = state.external.as_ref().expect("imported");
    assert_eq!(ext.chain, [o.int.cert.clone(), o.root.cert.clone()]);
    let leaf = &state.leaves["web"].issued.as_ref().unwrap().cert;
    assert_eq!(
        state.serving_chain(leaf),
        [leaf.clone(), o.cluster.cert.clone(), o.int.cert.clone()]
    );
    // The JSON form keeps it too.
    let again = SignerState::from_json(&state.to_json().unwrap()).unwrap();
    assert_eq!(again.external, state.external);
}

#[test]
fn automatic_rotation_leaves_an_imported_ca_alone_and_status_asks_for_a_replacement() {
    let o = org(10);
    let (store, now) = imported(&o);
    let fresh = Driver::new(&store).load::<SignerEngine>(KEY).unwrap().0;
    let status = pki_rotate::status::SignerStatus::of(&fresh, now).unwrap();
    assert_eq!(status.health, pki_rotate::status::Health::Ok);
    // Past the imported CA's D − M point: the signer would rotate its own CA.
    let late = T0 + Duration::days(600);
    let step = Driver::new(&store)
        .step::<SignerEngine, _>(KEY, &SignerInput::default(), late, &mut rng(11))
        .unwrap();
    assert_eq!(step.document.ca.cert, o.cluster.cert);
    let status = pki_rotate::status::SignerStatus::of(&step.document, late).unwrap();
    assert_eq!(status.health, pki_rotate::status::Health::ActionDue);
    assert!(
        status.pending.iter().any(|p| matches!(
            p,
            pki_rotate::status::PendingAction::SupplyReplacement { ca_id, expires_at, .. }
                if *ca_id == o.cluster.cert.id() && *expires_at == o.cluster.cert.not_after()
        )),
        "{:?}",
        status.pending
    );
}

#[test]
fn a_replacement_under_the_same_root_passes_and_keeps_the_root_pin() {
    let o = org(20);
    let (store, now) = imported(&o);
    let before = Driver::new(&store).load::<SignerEngine>(KEY).unwrap().0;
    let pin = before.bundle.root_pin().unwrap();
    let int2 = under(&o.root, "Org Intermediate 2", 1, 23);
    let next = under(&int2, "cluster-ca", 0, 24);
    let step = Driver::new(&store)
        .step::<ExternalEngine, _>(
            KEY,
            &replace(import_of(&next, &[&int2, &o.root]), None),
            now,
            &mut rng(25),
        )
        .unwrap();
    let after = step.document.into_signer();
    assert_eq!(after.bundle.root_pin().unwrap(), pin);
    assert_eq!(
        after.history.last().unwrap().reason,
        RotationReason::Supplied
    );
    let leaf = &after.leaves["web"].issued.as_ref().unwrap().cert;
    assert!(pki_core::issued_by(leaf, &next.cert).issued_by);
    // The old leaf's chain still verifies against the new bundle.
    let old_leaf = &before.leaves["web"].issued.as_ref().unwrap().cert;
    let cells = matrix(
        &MatrixInputs {
            old_chain: Some(&before.serving_chain(old_leaf)),
            new_chain: Some(&after.serving_chain(leaf)),
            old_bundle: Some(&before.bundle),
            new_bundle: &after.bundle,
        },
        &[now],
    );
    assert!(cells.iter().all(|c| c.verified()), "{cells:?}");
}

#[test]
fn a_replacement_from_another_root_is_refused_naming_the_breaking_cell_and_nothing_is_written() {
    let o = org(30);
    let (store, now) = imported(&o);
    let before = snapshot(&store);
    let other = org(40);
    let input = replace(import_of(&other.cluster, &[&other.int, &other.root]), None);
    let err = Driver::new(&store)
        .step::<ExternalEngine, _>(KEY, &input, now, &mut rng(31))
        .unwrap_err();
    let RotateError::Signer(pki_rotate::SignerError::ValidationFailed { failed, .. }) = &err else {
        panic!("{err}");
    };
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].name, check::CHAINS_TO_CURRENT_TRUST);
    assert!(
        err.to_string().contains("new serving chain x old bundle"),
        "{err}"
    );
    assert_eq!(snapshot(&store), before);

    // Forced: accepted, recorded with the overridden check; the new bundle
    // keeps the old root, so servers that have not refreshed stay trusted.
    let input = replace(
        import_of(&other.cluster, &[&other.int, &other.root]),
        Some("org root replaced"),
    );
    let after = Driver::new(&store)
        .step::<ExternalEngine, _>(KEY, &input, now, &mut rng(32))
        .unwrap()
        .document
        .into_signer();
    let record = after.history.last().unwrap();
    assert_eq!(
        record.reason,
        RotationReason::Forced {
            reason: "org root replaced".into()
        }
    );
    assert_eq!(record.overridden[0].name, check::CHAINS_TO_CURRENT_TRUST);
    assert!(after.bundle.contains(&o.root.cert) && after.bundle.contains(&other.root.cert));
}

#[test]
fn a_self_signed_replacement_of_a_generated_ca_is_bridged_both_ways() {
    let store = MemoryStore::new();
    let driver = Driver::new(&store);
    let state = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(60)).unwrap();
    driver.create::<SignerEngine>(KEY, &state).unwrap();
    let web = SignerInput::request("web", LeafRequest::server(vec!["web.example".into()]));
    let before = driver
        .step::<SignerEngine, _>(KEY, &web, T0, &mut rng(61))
        .unwrap()
        .document;
    let new_root = root("New Root", 800, 62);
    let now = T0 + Duration::days(30);
    let after = driver
        .step::<ExternalEngine, _>(
            KEY,
            &replace(import_of(&new_root, &[]), None),
            now,
            &mut rng(63),
        )
        .unwrap()
        .document
        .into_signer();
    assert!(after.bridge.is_some());
    let old_leaf = &before.leaves["web"].issued.as_ref().unwrap().cert;
    let new_leaf = &after.leaves["web"].issued.as_ref().unwrap().cert;
    let cells = matrix(
        &MatrixInputs {
            old_chain: Some(&before.serving_chain(old_leaf)),
            new_chain: Some(&after.serving_chain(new_leaf)),
            old_bundle: Some(&before.bundle),
            new_bundle: &after.bundle,
        },
        &[now, T0 + Duration::days(300)],
    );
    assert_eq!(cells.len(), 8);
    assert!(cells.iter().all(|c| c.verified()), "{cells:?}");
}

/// `cn` under `issuer` with `path_len` (None: no pathLenConstraint).
fn sub_ca(
    issuer: &CertificateAuthority,
    cn: &str,
    path_len: Option<u8>,
    seed: u64,
) -> CertificateAuthority {
    let mut r = rng(seed);
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut r).unwrap();
    let params = CertificateParams::new(
        Profile::IntermediateCa { path_len },
        cn,
        T0,
        Duration::days(700),
    )
    .unwrap();
    let cert = issuer
        .issue(&params, &key.public_key().unwrap(), &mut r)
        .unwrap();
    CertificateAuthority::new(cert, key).unwrap()
}

#[test]
fn a_self_signed_replacement_of_an_imported_intermediate_is_bridged_to_the_external_root() {
    // An organisation that lets its cluster CA have one CA below it.
    let org_root = root("Org Root", 3650, 70);
    let int = sub_ca(&org_root, "Org Intermediate", None, 71);
    let cluster = sub_ca(&int, "cluster-ca", Some(1), 72);
    let o = Org {
        root: org_root,
        int,
        cluster,
    };
    let (store, now) = imported(&o);
    let before = Driver::new(&store).load::<SignerEngine>(KEY).unwrap().0;
    let new_root = root("New Cluster Root", 800, 73);
    let input = replace(import_of(&new_root, &[]), None);
    let report = pki_rotate::validate_replacement(
        &before,
        &import_of(&new_root, &[]),
        &ServiceAccountKeys::default(),
        now,
    );
    assert!(report.ok, "{report:?}");
    Driver::new(&store)
        .step::<ExternalEngine, _>(KEY, &input, now, &mut rng(74))
        .unwrap();
    // Read back from the store: bridge B and the chain above it persist.
    let after = Driver::new(&store).load::<SignerEngine>(KEY).unwrap().0;
    let bridge_b = after.bridge.clone().expect("bridge B");
    assert!(pki_core::issued_by(&bridge_b, &o.cluster.cert).issued_by);
    assert!(bridge_b.not_after() <= o.cluster.cert.not_after());
    let new_leaf = &after.leaves["web"].issued.as_ref().unwrap().cert;
    assert_eq!(
        after.serving_chain(new_leaf),
        [
            new_leaf.clone(),
            bridge_b,
            o.cluster.cert.clone(),
            o.int.cert.clone()
        ]
    );
    let old_leaf = &before.leaves["web"].issued.as_ref().unwrap().cert;
    let cells = matrix(
        &MatrixInputs {
            old_chain: Some(&before.serving_chain(old_leaf)),
            new_chain: Some(&after.serving_chain(new_leaf)),
            old_bundle: Some(&before.bundle),
            new_bundle: &after.bundle,
        },
        &[now, T0 + Duration::days(300)],
    );
    assert_eq!(cells.len(), 8);
    assert!(cells.iter().all(|c| c.verified()), "{cells:?}");
    assert_eq!(before.bundle.certs(), std::slice::from_ref(&o.root.cert));
}

#[test]
fn a_self_signed_replacement_of_a_sign_leaves_only_ca_is_refused_saying_what_breaks_until_when() {
    // The k3s topology: the cluster CA has pathLenConstraint 0.
    let o = org(80);
    let (store, now) = imported(&o);
    let before = snapshot(&store);
    let new_root = root("New Cluster Root", 800, 81);
    let err = Driver::new(&store)
        .step::<ExternalEngine, _>(
            KEY,
            &replace(import_of(&new_root, &[]), None),
            now,
            &mut rng(82),
        )
        .unwrap_err();
    let RotateError::Signer(pki_rotate::SignerError::ValidationFailed { failed, .. }) = &err else {
        panic!("{err}");
    };
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].name, check::CHAINS_TO_CURRENT_TRUST);
    let text = err.to_string();
    // M (395 days, the default policy sets no reload interval) after the rotation.
    let until = pki_core::datetime::rfc3339(now + Duration::days(395));
    assert!(
        text.contains("pathLenConstraint 0")
            && text.contains("new serving chain x old bundle")
            && text.contains(&format!("until {until}")),
        "{text}"
    );
    assert_eq!(snapshot(&store), before);
}

#[test]
fn same_key_renewal_reissues_nothing_and_is_refused_on_an_imported_ca() {
    let store = MemoryStore::new();
    let driver = Driver::new(&store);
    let state = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(70)).unwrap();
    driver.create::<SignerEngine>(KEY, &state).unwrap();
    let web = SignerInput::request("web", LeafRequest::server(vec!["web.example".into()]));
    let before = driver
        .step::<SignerEngine, _>(KEY, &web, T0, &mut rng(71))
        .unwrap()
        .document;
    let now = T0 + Duration::days(200);
    let step = driver
        .step::<ExternalEngine, _>(KEY, &ExternalInput::RenewSameKey, now, &mut rng(72))
        .unwrap();
    let after = step.document.into_signer();
    assert_eq!(after.ca.cert.spki_der(), before.ca.cert.spki_der());
    assert_eq!(after.ca.cert.ski(), before.ca.cert.ski());
    assert_eq!(
        Bundle::from_certs([after.ca.cert.clone()]).spki_pins(),
        Bundle::from_certs([before.ca.cert.clone()]).spki_pins()
    );
    assert_eq!(
        after.leaves["web"].issued.as_ref().unwrap().cert,
        before.leaves["web"].issued.as_ref().unwrap().cert
    );
    // The next controller step keeps the leaf too.
    let next = driver
        .step::<SignerEngine, _>(KEY, &SignerInput::default(), now, &mut rng(73))
        .unwrap();
    assert!(!next.changed, "{:?}", next.events);

    let o = org(80);
    let (store, now) = imported(&o);
    let before = snapshot(&store);
    let err = Driver::new(&store)
        .step::<ExternalEngine, _>(KEY, &ExternalInput::RenewSameKey, now, &mut rng(81))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::Signer(pki_rotate::SignerError::ImportedCaRenewal { .. })
        ),
        "{err}"
    );
    assert_eq!(snapshot(&store), before);
}

#[test]
fn the_service_account_check_fails_only_when_a_current_key_is_dropped() {
    let a = vec![1u8, 2, 3];
    let b = vec![4u8, 5, 6];
    let cases = [
        (None, None, true),
        (Some(vec![a.clone()]), None, true),
        (
            Some(vec![a.clone()]),
            Some(vec![a.clone(), b.clone()]),
            true,
        ),
        (
            Some(vec![a.clone(), b.clone()]),
            Some(vec![b.clone()]),
            false,
        ),
        (Some(vec![a.clone()]), Some(vec![b.clone()]), false),
    ];
    for (current, proposed, ok) in cases {
        let c = check_service_account_keys(&ServiceAccountKeys {
            current: current.clone(),
            proposed: proposed.clone(),
        });
        assert_eq!(c.name, check::SERVICE_ACCOUNT_KEY_KEPT);
        assert_eq!(c.ok, ok, "{current:?} -> {proposed:?}: {}", c.detail);
    }
}

#[test]
fn a_forced_replacement_with_the_wrong_key_is_still_refused() {
    let o = org(90);
    let (store, now) = imported(&o);
    let before = snapshot(&store);
    let int2 = under(&o.int, "cluster-ca-2", 0, 93);
    let mut import = import_of(&int2, &[&o.int, &o.root]);
    import.key = Some(o.cluster.key.clone());
    let err = Driver::new(&store)
        .step::<ExternalEngine, _>(KEY, &replace(import, Some("please")), now, &mut rng(94))
        .unwrap_err();
    assert!(err.to_string().contains("key-matches"), "{err}");
    assert!(err.to_string().contains("cannot be forced"), "{err}");
    assert_eq!(snapshot(&store), before);
}

#[test]
fn a_self_signed_ca_is_imported_as_its_own_root_and_is_not_renewed_by_pki() {
    let ca = root("Imported Root", 800, 100);
    let state = SignerState::import(&import_of(&ca, &[]), SignerPolicy::default(), T0).unwrap();
    assert_eq!(state.bundle.certs(), std::slice::from_ref(&ca.cert));
    let store = MemoryStore::new();
    let driver = Driver::new(&store);
    driver.create::<SignerEngine>(KEY, &state).unwrap();
    let web = SignerInput::request("web", LeafRequest::server(vec!["web.example".into()]));
    let step = driver
        .step::<SignerEngine, _>(KEY, &web, T0, &mut rng(101))
        .unwrap();
    let leaf = &step.document.leaves["web"].issued.as_ref().unwrap().cert;
    assert_eq!(step.document.serving_chain(leaf).len(), 1);
    let err = driver
        .step::<ExternalEngine, _>(KEY, &ExternalInput::RenewSameKey, T0, &mut rng(102))
        .unwrap_err();
    assert!(
        matches!(
            err,
            RotateError::Signer(pki_rotate::SignerError::ImportedCaRenewal { .. })
        ),
        "{err}"
    );
    // An expired CA is not imported.
    let late = T0 + Duration::days(900);
    let err = SignerState::import(&import_of(&ca, &[]), SignerPolicy::default(), late).unwrap_err();
    assert!(err.to_string().contains("not valid at"), "{err}");
}

#[test]
fn an_expired_external_root_stays_in_the_bundle_and_the_store_stays_readable() {
    // The organisation's root lives one year; the imported CA is cut to it.
    let root = root("Short Root", 365, 70);
    let int = under(&root, "Org Intermediate", 1, 71);
    let cluster = under(&int, "cluster-ca", 0, 72);
    let store = MemoryStore::new();
    let driver = Driver::new(&store);
    let state = SignerState::import(
        &import_of(&cluster, &[&int, &root]),
        SignerPolicy::default(),
        T0,
    )
    .unwrap();
    driver.create::<SignerEngine>(KEY, &state).unwrap();

    // A step after the root expired: whatever the engine decides, the store
    // must still load, with the root it is trusted by.
    let after = root.cert.not_after() + Duration::days(1);
    let _ = driver.step::<SignerEngine, _>(KEY, &SignerInput::default(), after, &mut rng(73));
    let (state, _) = driver.load::<SignerEngine>(KEY).unwrap();
    assert_eq!(state.bundle.certs(), std::slice::from_ref(&root.cert));
}

#[test]
fn service_account_keys_are_read_from_pem_and_from_the_store_key_ring() {
    let mut r = rng(90);
    let kept = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut r).unwrap();
    let other = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut r).unwrap();
    let public = |k: &PrivateKey| pki_core::pem::encode("PUBLIC KEY", &k.public_key_der().unwrap());
    // A public key and a private key: both give their SubjectPublicKeyInfo.
    let pem = format!("{}{}", public(&kept), *other.to_pkcs8_pem().unwrap());
    let keys = ServiceAccountKeys::keys_from_pem(pem.as_bytes()).unwrap();
    assert_eq!(
        keys,
        [
            kept.public_key_der().unwrap(),
            other.public_key_der().unwrap()
        ]
    );
    let certificate = root("Not A Key", 10, 91).cert.to_pem();
    let err = ServiceAccountKeys::keys_from_pem(certificate.as_bytes()).unwrap_err();
    assert!(
        matches!(
            &err,
            RotateError::Core(pki_core::Error::UnexpectedPemLabel { .. })
        ),
        "{err}"
    );

    let store = MemoryStore::new();
    let none = ServiceAccountKeys::from_store(&store, None).unwrap();
    assert_eq!(none, ServiceAccountKeys::default());
    let mut files = pki_rotate::Files::new();
    files
        .insert("keys/public.pem", pki_rotate::File::public(public(&kept)))
        .unwrap();
    store.put("keys", None, &files).unwrap();
    let keys = ServiceAccountKeys::from_store(&store, Some(public(&other).as_bytes())).unwrap();
    let check = check_service_account_keys(&keys);
    assert!(!check.ok, "{}", check.detail);
}
