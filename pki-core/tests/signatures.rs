//! Signatures along a path: what the signature cache remembers, the
//! algorithm identifiers it checks, tampered signatures, and RSA.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use pki_core::{
    Certificate, CertificateAuthority, CertificateParams, KeyAlgorithm, ObjectIdentifier,
    PrivateKey, Profile, SignatureCache, VerifyError, verify_chain, verify_chain_cached,
    verify_signature,
};
use time::Duration;

mod support;

use support::fixtures::*;

/// A copy of `cert` that shares nothing with it (as if parsed again), so
/// that only a [`SignatureCache`] can remember its signature.
fn reparsed(cert: &Certificate) -> Certificate {
    Certificate::from_der(cert.der()).unwrap()
}

#[test]
fn signature_cache_hits_on_the_second_leaf_through_the_same_intermediate() {
    let root = new_root("root", 1);
    let inter = intermediate(&root, "issuing", None, 2);
    let first = server_leaf(&inter, 3);
    let second = server_leaf(&inter, 4);
    let anchors = bundle(&[&root.cert]);
    let cache = SignatureCache::new();

    // The serving chain is read again for each leaf, as a TLS client would.
    let chain = vec![reparsed(&inter.cert)];
    let a = verify_chain_cached(&first, &chain, &anchors, &opts(), &cache).unwrap();
    assert_eq!((cache.hits(), cache.misses(), cache.len()), (0, 2, 2));
    let chain = vec![reparsed(&inter.cert)];
    let b = verify_chain_cached(&second, &chain, &anchors, &opts(), &cache).unwrap();
    assert_eq!((cache.hits(), cache.misses(), cache.len()), (1, 3, 3));
    assert_eq!(b, verify_chain(&second, &chain, &anchors, &opts()).unwrap());
    assert_eq!(a.certs[1..], b.certs[1..]);

    // A failed check is remembered too, and still reported as such.
    let stranger = new_root("issuing", 5);
    let anchors = bundle(&[&stranger.cert]);
    let err = verify_chain_cached(&first, &[], &anchors, &opts(), &cache);
    let again = verify_chain_cached(&first, &[], &anchors, &opts(), &cache);
    assert_eq!((cache.hits(), cache.misses(), cache.len()), (2, 4, 4));
    assert_eq!(err, again);
    assert_eq!(err, verify_chain(&first, &[], &anchors, &opts()));
    assert!(
        matches!(again, Err(VerifyError::BadSignature { .. })),
        "{again:?}"
    );
}

#[test]
fn new_leaf_through_bridge_b_costs_two_signature_checks_against_the_old_bundle() {
    // The old root has the leaf's issuer name but not its key: trying it
    // first, as an anchor, would waste a check on every new leaf.
    let r = rotation();
    let o = opts_at(r.rotated_at + Duration::hours(2));
    let cache = SignatureCache::new();
    let path = verify_chain_cached(
        &r.new_leaf,
        std::slice::from_ref(&r.bridge_b),
        &bundle(&[&r.old.cert]),
        &o,
        &cache,
    )
    .unwrap();
    assert_eq!(path.certs, [r.new_leaf, r.bridge_b, r.old.cert]);
    assert_eq!((cache.hits(), cache.misses()), (0, 2));
}

#[test]
fn verify_chain_remembers_signatures_in_the_bundle_it_is_given() {
    let r = rotation();
    let o = opts_at(r.rotated_at + Duration::hours(2));
    let old_bundle = bundle(&[&r.old.cert]);
    let second_leaf = leaf_with(
        &r.new,
        Profile::Server,
        &["other.ns.svc"],
        &[],
        r.rotated_at + Duration::hours(1),
        7,
    );
    let chain = [reparsed(&r.bridge_b)];
    verify_chain(&r.new_leaf, &chain, &old_bundle, &o).unwrap();
    let cache = old_bundle.signature_cache();
    assert_eq!((cache.hits(), cache.misses()), (0, 2));
    // The bridge's signature is not checked again, for this bundle or a
    // clone of it, even in a new copy of the bridge; the second leaf's own
    // signature is.
    let chain = [reparsed(&r.bridge_b)];
    verify_chain(&second_leaf, &chain, &old_bundle.clone(), &o).unwrap();
    assert_eq!((cache.hits(), cache.misses()), (1, 3));
    // Another bundle has its own cache.
    let other = bundle(&[&r.old.cert]);
    verify_chain(
        &reparsed(&second_leaf),
        &[reparsed(&r.bridge_b)],
        &other,
        &o,
    )
    .unwrap();
    assert_eq!(other.signature_cache().misses(), 2);
}

#[test]
fn a_certificate_remembers_the_key_that_verified_it_across_bundles() {
    // The old leaf against the old bundle (the old root) and against the
    // new bundle (the new root and bridge A, which carries the old key):
    // one signature check in all, as the matrix of a rotation needs.
    let r = rotation();
    let o = opts_at(r.rotated_at + Duration::hours(2));
    let old_bundle = bundle(&[&r.old.cert]);
    let new_bundle = bundle(&[&r.new.cert, &r.bridge_a]);
    verify_chain(&r.old_leaf, &[], &old_bundle, &o).unwrap();
    let path = verify_chain(&r.old_leaf, &[], &new_bundle, &o).unwrap();
    assert_eq!(path.anchor(), Some(&r.bridge_a));
    assert_eq!(old_bundle.signature_cache().misses(), 1);
    let new_cache = new_bundle.signature_cache();
    assert_eq!((new_cache.hits(), new_cache.misses()), (0, 0));
    // Remembering counts in the budget like a check, and never turns a
    // wrong key into a right one.
    let mut tight = o.clone();
    tight.budget.signatures = 0;
    assert!(matches!(
        verify_chain(&r.old_leaf, &[], &old_bundle, &tight),
        Err(VerifyError::BudgetExceeded { .. })
    ));
    let stranger = bundle(&[&new_root("service-ca", 9).cert]);
    assert!(matches!(
        verify_chain(&r.old_leaf, &[], &stranger, &o),
        Err(VerifyError::BadSignature { .. })
    ));
}

#[test]
fn signature_cache_is_shared_between_threads() {
    let root = new_root("root", 1);
    let inter = intermediate(&root, "issuing", None, 2);
    let leaves: Vec<Certificate> = (0..4).map(|i| server_leaf(&inter, 10 + i)).collect();
    let anchors = bundle(&[&root.cert]);
    let cache = SignatureCache::new();
    std::thread::scope(|s| {
        for leaf in &leaves {
            let chain = vec![reparsed(&inter.cert)];
            let (anchors, cache) = (&anchors, &cache);
            s.spawn(move || verify_chain_cached(leaf, &chain, anchors, &opts(), cache).unwrap());
        }
    });
    assert_eq!(cache.hits() + cache.misses(), 8);
    assert_eq!(cache.len(), 5);
}

/// Replaces every occurrence of `from` by `to` (same length) in `der`.
fn patch(der: &[u8], from: &[u8], to: &[u8], occurrences: usize) -> Vec<u8> {
    let mut out = der.to_vec();
    let mut done = 0;
    let mut i = 0;
    while i + from.len() <= out.len() && done < occurrences {
        if &out[i..i + from.len()] == from {
            out[i..i + from.len()].copy_from_slice(to);
            done += 1;
            i += from.len();
        } else {
            i += 1;
        }
    }
    assert_eq!(done, occurrences);
    out
}

const ECDSA_SHA256_OID: [u8; 10] = [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
const ECDSA_SHA512_OID: [u8; 10] = [0x06, 0x08, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x04];

#[test]
fn unsupported_signature_algorithm_is_an_explicit_error() {
    let root = new_root("root", 1);
    let leaf = server_leaf(&root, 3);
    let tampered =
        Certificate::from_der(&patch(leaf.der(), &ECDSA_SHA256_OID, &ECDSA_SHA512_OID, 2)).unwrap();
    let expected = VerifyError::UnsupportedSignatureAlgorithm {
        cert: tampered.id(),
        oid: ObjectIdentifier::new_unwrap("1.2.840.10045.4.3.4"),
    };
    assert_eq!(
        verify_signature(root.cert.public_key(), &tampered).unwrap_err(),
        expected
    );
    assert_eq!(
        verify_chain(&tampered, &[], &bundle(&[&root.cert]), &opts()).unwrap_err(),
        expected
    );
}

#[test]
fn signature_algorithm_inside_tbs_must_equal_the_outer_one() {
    let root = new_root("root", 1);
    let leaf = server_leaf(&root, 3);
    // Only the first occurrence (inside the TBS) changes.
    let tampered =
        Certificate::from_der(&patch(leaf.der(), &ECDSA_SHA256_OID, &ECDSA_SHA512_OID, 1)).unwrap();
    let err = verify_signature(root.cert.public_key(), &tampered).unwrap_err();
    assert!(
        matches!(err, VerifyError::SignatureAlgorithmMismatch { .. }),
        "{err}"
    );
}

#[test]
fn tampered_signature_is_a_bad_signature() {
    let root = new_root("root", 1);
    let leaf = server_leaf(&root, 3);
    let mut der = leaf.der().to_vec();
    let last = der.len() - 1;
    der[last] ^= 0x01;
    let tampered = Certificate::from_der(&der).unwrap();
    let err = verify_chain(&tampered, &[], &bundle(&[&root.cert]), &opts()).unwrap_err();
    assert_eq!(
        err,
        VerifyError::BadSignature {
            cert: tampered.id(),
            issuer: root.cert.id()
        }
    );
}

#[test]
fn verify_signature_checks_self_signed_roots_and_rejects_other_keys() {
    let a = new_root("root", 1);
    let b = new_root("root", 2);
    verify_signature(a.cert.public_key(), &a.cert).unwrap();
    let err = verify_signature(b.cert.public_key(), &a.cert).unwrap_err();
    assert!(
        matches!(err, VerifyError::BadSignature { ref issuer, .. } if issuer.starts_with("spki:")),
        "{err}"
    );
}

#[test]
fn rsa_root_and_rsa_leaf_verify() {
    let mut r = rng(1);
    let root = CertificateAuthority::generate_root(
        "rsa-root",
        KeyAlgorithm::Rsa2048,
        NOW,
        Duration::days(790),
        &mut r,
    )
    .unwrap();
    let key = PrivateKey::generate(KeyAlgorithm::Rsa2048, &mut r).unwrap();
    let mut p = CertificateParams::new(Profile::Server, "web", NOW, Duration::days(30)).unwrap();
    p.dns_names = vec!["web".into()];
    let leaf = root.issue(&p, &key.public_key().unwrap(), &mut r).unwrap();
    let ec_leaf = server_leaf(&root, 3);
    let anchors = bundle(&[&root.cert]);
    verify_chain(&leaf, &[], &anchors, &named(dns("web"))).unwrap();
    verify_chain(&ec_leaf, &[], &anchors, &opts()).unwrap();
}
