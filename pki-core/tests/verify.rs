//! Path validation: chains built by pki-core's own issuance verify, and
//! each kind of defect gives its own error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use pki_core::verify::{BudgetKind, MAX_INTERMEDIATES};
use pki_core::{
    Budget, Bundle, Certificate, CertificateAuthority, CertificateParams, ExpectedName,
    KeyAlgorithm, ObjectIdentifier, PrivateKey, Profile, Purpose, SignatureCache, VerifyError,
    VerifyOptions, cross_sign, verify_chain, verify_chain_cached, verify_signature,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use time::{Duration, OffsetDateTime, macros::datetime};

// 2026-01-01: an arbitrary fixed issuance time; verification times are
// written relative to it.
const NOW: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

fn rng(seed: u64) -> ChaCha20Rng {
    // Keys and signatures from this stream: the same seed, the same output.
    pki_core::CryptoProvider::rust_crypto()
        .install_default()
        .expect("only the deterministic provider is installed in tests");
    ChaCha20Rng::seed_from_u64(seed)
}

fn root_at(cn: &str, at: OffsetDateTime, seed: u64) -> CertificateAuthority {
    CertificateAuthority::generate_root(
        cn,
        KeyAlgorithm::EcdsaP256,
        at,
        Duration::days(790),
        &mut rng(seed),
    )
    .unwrap()
}

fn new_root(cn: &str, seed: u64) -> CertificateAuthority {
    root_at(cn, NOW, seed)
}

fn intermediate(
    parent: &CertificateAuthority,
    cn: &str,
    path_len: Option<u8>,
    seed: u64,
) -> CertificateAuthority {
    let mut r = rng(seed);
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut r).unwrap();
    let params = CertificateParams::new(
        Profile::IntermediateCa { path_len },
        cn,
        NOW,
        Duration::days(400),
    )
    .unwrap();
    let cert = parent
        .issue(&params, &key.public_key().unwrap(), &mut r)
        .unwrap();
    CertificateAuthority::new(cert, key).unwrap()
}

fn leaf_with(
    ca: &CertificateAuthority,
    profile: Profile,
    dns: &[&str],
    ips: &[&str],
    issued_at: OffsetDateTime,
    seed: u64,
) -> Certificate {
    let mut r = rng(seed);
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut r).unwrap();
    let mut p = CertificateParams::new(profile, "web", issued_at, Duration::days(365)).unwrap();
    p.dns_names = dns.iter().map(|s| s.to_string()).collect();
    p.ip_addresses = ips.iter().map(|s| s.parse().unwrap()).collect();
    ca.issue(&p, &key.public_key().unwrap(), &mut r).unwrap()
}

fn server_leaf(ca: &CertificateAuthority, seed: u64) -> Certificate {
    leaf_with(
        ca,
        Profile::Server,
        &["web.ns.svc"],
        &["10.0.0.1"],
        NOW,
        seed,
    )
}

fn opts_at(time: OffsetDateTime) -> VerifyOptions {
    VerifyOptions::new(time, Purpose::ServerAuth)
}

fn opts() -> VerifyOptions {
    opts_at(NOW + Duration::days(1))
}

fn named(name: ExpectedName) -> VerifyOptions {
    let mut o = opts();
    o.name = Some(name);
    o
}

fn dns(name: &str) -> ExpectedName {
    ExpectedName::Dns(name.to_owned())
}

fn bundle(certs: &[&Certificate]) -> Bundle {
    Bundle::from_certs(certs.iter().map(|c| (*c).clone()))
}

#[test]
fn leaf_intermediate_root_chain_verifies_and_returns_the_path_leaf_first() {
    let root = new_root("root", 1);
    let inter = intermediate(&root, "issuing", Some(0), 2);
    let leaf = server_leaf(&inter, 3);
    let path = verify_chain(
        &leaf,
        std::slice::from_ref(&inter.cert),
        &bundle(&[&root.cert]),
        &named(dns("web.ns.svc")),
    )
    .unwrap();
    assert_eq!(path.certs, [leaf.clone(), inter.cert, root.cert.clone()]);
    assert_eq!(path.leaf(), Some(&leaf));
    assert_eq!(path.anchor(), Some(&root.cert));
}

#[test]
fn leaf_without_its_issuer_is_an_unknown_issuer() {
    let root = new_root("root", 1);
    let inter = intermediate(&root, "issuing", None, 2);
    let leaf = server_leaf(&inter, 3);
    let err = verify_chain(&leaf, &[], &bundle(&[&root.cert]), &opts()).unwrap_err();
    assert_eq!(
        err,
        VerifyError::UnknownIssuer {
            cert: leaf.id(),
            issuer: "CN=issuing".into()
        }
    );
}

/// The service-CA rotation: the new CA has the old CA's subject and a new
/// key. Bridge A (old CA signed by the new key) joins the bundle; bridge B
/// (new CA signed by the old key) follows new leaves in serving chains.
struct Rotation {
    old: CertificateAuthority,
    new: CertificateAuthority,
    bridge_a: Certificate,
    bridge_b: Certificate,
    old_leaf: Certificate,
    new_leaf: Certificate,
    rotated_at: OffsetDateTime,
}

fn rotation() -> Rotation {
    let old = new_root("service-ca", 1);
    let rotated_at = NOW + Duration::days(395);
    let new = root_at("service-ca", rotated_at, 2);
    let bridge_a = cross_sign(&old.cert, &new, old.cert.not_after(), &mut rng(3)).unwrap();
    let bridge_b = cross_sign(&new.cert, &old, old.cert.not_after(), &mut rng(4)).unwrap();
    let old_leaf = leaf_with(
        &old,
        Profile::Server,
        &["web.ns.svc"],
        &[],
        NOW + Duration::days(300),
        5,
    );
    let new_leaf = leaf_with(
        &new,
        Profile::Server,
        &["web.ns.svc"],
        &[],
        rotated_at + Duration::hours(1),
        6,
    );
    Rotation {
        old,
        new,
        bridge_a,
        bridge_b,
        old_leaf,
        new_leaf,
        rotated_at,
    }
}

#[test]
fn rotation_all_four_serving_chain_and_bundle_combinations_verify() {
    let r = rotation();
    let old_bundle = bundle(&[&r.old.cert]);
    let new_bundle = bundle(&[&r.new.cert, &r.bridge_a]);
    let mut o = opts_at(r.rotated_at + Duration::hours(2));
    o.name = Some(dns("web.ns.svc"));
    let old_chain: Vec<Certificate> = vec![];
    let new_chain = vec![r.bridge_b.clone()];

    let cells = [
        (
            &r.old_leaf,
            &old_chain,
            &old_bundle,
            vec![&r.old_leaf, &r.old.cert],
        ),
        (
            &r.old_leaf,
            &old_chain,
            &new_bundle,
            vec![&r.old_leaf, &r.bridge_a],
        ),
        (
            &r.new_leaf,
            &new_chain,
            &old_bundle,
            vec![&r.new_leaf, &r.bridge_b, &r.old.cert],
        ),
        (
            &r.new_leaf,
            &new_chain,
            &new_bundle,
            vec![&r.new_leaf, &r.new.cert],
        ),
    ];
    for (i, (leaf, chain, anchors, expected)) in cells.into_iter().enumerate() {
        let path = verify_chain(leaf, chain, anchors, &o)
            .unwrap_or_else(|e| panic!("cell {i} does not verify: {e}"));
        let expected: Vec<Certificate> = expected.into_iter().cloned().collect();
        assert_eq!(path.certs, expected, "cell {i}");
    }
}

#[test]
fn old_serving_chain_with_bridge_b_still_verifies_against_both_bundles() {
    // A server that already appends bridge B to an old leaf's chain must not
    // break: bridge B is simply not used.
    let r = rotation();
    let o = opts_at(r.rotated_at + Duration::hours(2));
    let chain = vec![r.bridge_b.clone()];
    for anchors in [bundle(&[&r.old.cert]), bundle(&[&r.new.cert, &r.bridge_a])] {
        verify_chain(&r.old_leaf, &chain, &anchors, &o).unwrap();
    }
}

#[test]
fn new_leaf_without_bridge_b_does_not_verify_against_the_old_bundle() {
    let r = rotation();
    let o = opts_at(r.rotated_at + Duration::hours(2));
    let err = verify_chain(&r.new_leaf, &[], &bundle(&[&r.old.cert]), &o).unwrap_err();
    // The old CA has the right name but the wrong key.
    assert_eq!(
        err,
        VerifyError::BadSignature {
            cert: r.new_leaf.id(),
            issuer: r.old.cert.id()
        }
    );
}

#[test]
fn expired_bridge_in_the_bundle_stops_trusting_old_leaves() {
    let r = rotation();
    let short_bridge = cross_sign(
        &r.old.cert,
        &r.new,
        r.rotated_at + Duration::days(10),
        &mut rng(7),
    )
    .unwrap();
    let anchors = bundle(&[&r.new.cert, &short_bridge]);
    verify_chain(
        &r.old_leaf,
        &[],
        &anchors,
        &opts_at(r.rotated_at + Duration::days(9)),
    )
    .unwrap();
    let at = r.rotated_at + Duration::days(20);
    let err = verify_chain(&r.old_leaf, &[], &anchors, &opts_at(at)).unwrap_err();
    assert_eq!(
        err,
        VerifyError::Expired {
            cert: short_bridge.id(),
            not_after: short_bridge.not_after(),
            time: at
        }
    );
}

#[test]
fn expired_leaf_is_reported_with_its_not_after_and_the_time() {
    let root = new_root("root", 1);
    let leaf = server_leaf(&root, 3);
    let at = leaf.not_after() + Duration::seconds(1);
    let err = verify_chain(&leaf, &[], &bundle(&[&root.cert]), &opts_at(at)).unwrap_err();
    assert_eq!(
        err,
        VerifyError::Expired {
            cert: leaf.id(),
            not_after: leaf.not_after(),
            time: at
        }
    );
    assert!(err.to_string().contains("expired at"), "{err}");
    // NotAfter itself is still valid (inclusive), and so is any fraction
    // of that second.
    let last = leaf.not_after() + Duration::milliseconds(999);
    verify_chain(&leaf, &[], &bundle(&[&root.cert]), &opts_at(last)).unwrap();
}

#[test]
fn leaf_before_its_not_before_is_not_yet_valid() {
    let root = new_root("root", 1);
    let leaf = server_leaf(&root, 3);
    let at = leaf.not_before() - Duration::seconds(1);
    let err = verify_chain(&leaf, &[], &bundle(&[&root.cert]), &opts_at(at)).unwrap_err();
    assert!(matches!(err, VerifyError::NotYetValid { ref cert, .. } if *cert == leaf.id()));
}

#[test]
fn expired_intermediate_is_reported_rather_than_the_failed_other_candidates() {
    // Leaves are capped at their issuer's NotAfter, cross-signed certs are
    // not: a bridge B that ends early is an intermediate that expires
    // before the leaf it carries.
    let r = rotation();
    let short_b = cross_sign(
        &r.new.cert,
        &r.old,
        r.rotated_at + Duration::days(10),
        &mut rng(8),
    )
    .unwrap();
    let at = r.rotated_at + Duration::days(20);
    let err = verify_chain(
        &r.new_leaf,
        std::slice::from_ref(&short_b),
        &bundle(&[&r.old.cert]),
        &opts_at(at),
    )
    .unwrap_err();
    // The old CA (right name, wrong key) was tried first; the expiry found
    // on the real path says more.
    assert_eq!(
        err,
        VerifyError::Expired {
            cert: short_b.id(),
            not_after: short_b.not_after(),
            time: at
        }
    );
}

#[test]
fn wrong_dns_name_lists_the_names_the_leaf_has() {
    let root = new_root("root", 1);
    let leaf = server_leaf(&root, 3);
    let err = verify_chain(
        &leaf,
        &[],
        &bundle(&[&root.cert]),
        &named(dns("other.ns.svc")),
    )
    .unwrap_err();
    assert_eq!(
        err,
        VerifyError::NameMismatch {
            expected: "DNS:other.ns.svc".into(),
            presented: vec!["web.ns.svc".into(), "10.0.0.1".into()]
        }
    );
}

#[test]
fn dns_names_match_case_insensitively_and_ignore_a_trailing_dot() {
    let root = new_root("root", 1);
    let leaf = server_leaf(&root, 3);
    for name in ["WEB.ns.SVC", "web.ns.svc."] {
        verify_chain(&leaf, &[], &bundle(&[&root.cert]), &named(dns(name))).unwrap();
    }
}

#[test]
fn wildcard_matches_exactly_one_left_most_label_and_never_an_ip() {
    let root = new_root("root", 1);
    let leaf = leaf_with(&root, Profile::Server, &["*.apps.example.com"], &[], NOW, 3);
    let anchors = bundle(&[&root.cert]);
    verify_chain(
        &leaf,
        &[],
        &anchors,
        &named(dns("console.apps.example.com")),
    )
    .unwrap();
    for name in [
        "apps.example.com",
        "a.b.apps.example.com",
        "console.apps.example.org",
    ] {
        let err = verify_chain(&leaf, &[], &anchors, &named(dns(name))).unwrap_err();
        assert!(
            matches!(err, VerifyError::NameMismatch { .. }),
            "{name}: {err}"
        );
    }
    let ip_leaf = leaf_with(&root, Profile::Server, &["*.0.0.1"], &[], NOW, 4);
    let err = verify_chain(&ip_leaf, &[], &anchors, &named(dns("10.0.0.1"))).unwrap_err();
    assert!(matches!(err, VerifyError::NameMismatch { .. }), "{err}");
}

#[test]
fn wildcard_reference_name_is_refused() {
    let root = new_root("root", 1);
    let leaf = leaf_with(&root, Profile::Server, &["*.example.com"], &[], NOW, 3);
    let err = verify_chain(
        &leaf,
        &[],
        &bundle(&[&root.cert]),
        &named(dns("*.example.com")),
    )
    .unwrap_err();
    assert!(
        matches!(err, VerifyError::InvalidReferenceName { .. }),
        "{err}"
    );
}

#[test]
fn ip_addresses_match_exact_octets_only() {
    let root = new_root("root", 1);
    let leaf = server_leaf(&root, 3);
    let anchors = bundle(&[&root.cert]);
    verify_chain(
        &leaf,
        &[],
        &anchors,
        &named(ExpectedName::Ip("10.0.0.1".parse().unwrap())),
    )
    .unwrap();
    // An address given as a DNS reference is matched as an address.
    verify_chain(&leaf, &[], &anchors, &named(dns("10.0.0.1"))).unwrap();
    let err = verify_chain(
        &leaf,
        &[],
        &anchors,
        &named(ExpectedName::Ip("10.0.0.2".parse().unwrap())),
    )
    .unwrap_err();
    assert!(matches!(err, VerifyError::NameMismatch { .. }));
    let err = verify_chain(
        &leaf,
        &[],
        &anchors,
        &named(ExpectedName::Ip("::ffff:10.0.0.1".parse().unwrap())),
    )
    .unwrap_err();
    assert!(matches!(err, VerifyError::NameMismatch { .. }));
}

#[test]
fn client_certificate_is_refused_for_server_auth_and_accepted_for_client_auth() {
    let root = new_root("root", 1);
    let leaf = leaf_with(&root, Profile::Client, &[], &[], NOW, 3);
    let anchors = bundle(&[&root.cert]);
    let err = verify_chain(&leaf, &[], &anchors, &opts()).unwrap_err();
    assert_eq!(
        err,
        VerifyError::EkuNotAllowed {
            cert: leaf.id(),
            purpose: Purpose::ServerAuth
        }
    );
    let mut client = opts();
    client.purpose = Purpose::ClientAuth;
    verify_chain(&leaf, &[], &anchors, &client).unwrap();

    let both = leaf_with(&root, Profile::ServerClient, &["web"], &[], NOW, 4);
    verify_chain(&both, &[], &anchors, &opts()).unwrap();
    verify_chain(&both, &[], &anchors, &client).unwrap();
}

#[test]
fn path_len_zero_intermediate_cannot_have_a_ca_below_it() {
    let root = new_root("root", 1);
    let top = intermediate(&root, "top", Some(0), 2);
    let below = intermediate(&top, "below", None, 3);
    let leaf = server_leaf(&below, 4);
    let anchors = bundle(&[&root.cert]);
    let chain = vec![below.cert.clone(), top.cert.clone()];
    let err = verify_chain(&leaf, &chain, &anchors, &opts()).unwrap_err();
    assert_eq!(
        err,
        VerifyError::PathLenExceeded {
            cert: top.cert.id(),
            path_len: 0,
            below: 1
        }
    );

    let top1 = intermediate(&root, "top", Some(1), 5);
    let below1 = intermediate(&top1, "below", None, 6);
    let leaf1 = server_leaf(&below1, 7);
    let chain1 = vec![below1.cert.clone(), top1.cert.clone()];
    verify_chain(&leaf1, &chain1, &anchors, &opts()).unwrap();
}

#[test]
fn end_entity_certificate_used_as_issuer_is_not_a_ca() {
    let root = new_root("root", 1);
    let mut r = rng(2);
    let server_key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut r).unwrap();
    let mut p = CertificateParams::new(Profile::Server, "server", NOW, Duration::days(30)).unwrap();
    p.dns_names = vec!["server".into()];
    let server = root
        .issue(&p, &server_key.public_key().unwrap(), &mut r)
        .unwrap();
    // CertificateAuthority::new refuses a non-CA; its fields are public.
    let not_a_ca = CertificateAuthority {
        cert: server.clone(),
        key: server_key,
    };
    let leaf = server_leaf(&not_a_ca, 3);
    let err = verify_chain(
        &leaf,
        std::slice::from_ref(&server),
        &bundle(&[&root.cert]),
        &opts(),
    )
    .unwrap_err();
    assert_eq!(
        err,
        VerifyError::NotACa {
            cert: server.id(),
            reason: "basicConstraints cA is FALSE"
        }
    );
    // A leaf is never its own anchor.
    let err = verify_chain(&server, &[], &bundle(&[&server]), &opts()).unwrap_err();
    assert!(matches!(err, VerifyError::UnknownIssuer { .. }), "{err}");
}

#[test]
fn cross_signing_loop_terminates_with_unknown_issuer() {
    let x = new_root("ca-x", 1);
    let y = new_root("ca-y", 2);
    let x_by_y = cross_sign(&x.cert, &y, x.cert.not_after(), &mut rng(3)).unwrap();
    let y_by_x = cross_sign(&y.cert, &x, y.cert.not_after(), &mut rng(4)).unwrap();
    let leaf = server_leaf(&x, 5);
    let unrelated = new_root("unrelated", 6);
    let err = verify_chain(
        &leaf,
        &[x_by_y.clone(), y_by_x.clone()],
        &bundle(&[&unrelated.cert]),
        &opts(),
    )
    .unwrap_err();
    assert!(
        matches!(err, VerifyError::UnknownIssuer { ref cert, .. } if *cert == y_by_x.id()),
        "{err}"
    );
}

#[test]
fn dense_web_of_same_name_cross_signs_exhausts_the_budget_instead_of_hanging() {
    let cas: Vec<CertificateAuthority> = (0..8).map(|i| new_root("mesh", 10 + i)).collect();
    let mut pool = Vec::new();
    for (i, target) in cas.iter().enumerate() {
        for (j, signer) in cas.iter().enumerate() {
            if i != j {
                let seed = 100 + (i * 8 + j) as u64;
                pool.push(
                    cross_sign(
                        &target.cert,
                        signer,
                        target.cert.not_after(),
                        &mut rng(seed),
                    )
                    .unwrap(),
                );
            }
        }
    }
    let leaf = server_leaf(&cas[0], 3);
    let unrelated = new_root("unrelated", 4);
    let err = verify_chain(&leaf, &pool, &bundle(&[&unrelated.cert]), &opts()).unwrap_err();
    assert_eq!(
        err,
        VerifyError::BudgetExceeded {
            what: BudgetKind::Signatures
        }
    );
}

#[test]
fn budget_exhaustion_is_a_distinct_fatal_error() {
    let r = rotation();
    let anchors = bundle(&[&r.old.cert]);
    let chain = vec![r.bridge_b.clone()];
    let mut o = opts_at(r.rotated_at + Duration::hours(2));
    verify_chain(&r.new_leaf, &chain, &anchors, &o).unwrap();

    // Bridge B is tried first (its SKI is the leaf's AKI); the old root
    // above it needs a second signature check.
    o.budget = Budget {
        signatures: 1,
        ..Budget::default()
    };
    assert_eq!(
        verify_chain(&r.new_leaf, &chain, &anchors, &o).unwrap_err(),
        VerifyError::BudgetExceeded {
            what: BudgetKind::Signatures
        }
    );
    o.budget = Budget {
        build_steps: 1,
        ..Budget::default()
    };
    let err = verify_chain(&r.new_leaf, &chain, &anchors, &o).unwrap_err();
    assert_eq!(
        err,
        VerifyError::BudgetExceeded {
            what: BudgetKind::BuildSteps
        }
    );
    assert_eq!(
        err.to_string(),
        "path building exceeded its budget of path-building steps"
    );
}

#[test]
fn path_longer_than_the_maximum_is_refused() {
    let root = new_root("root", 1);
    let mut cas = vec![intermediate(&root, "ca-0", None, 100)];
    for i in 1..=MAX_INTERMEDIATES {
        let next = intermediate(
            cas.last().unwrap(),
            &format!("ca-{i}"),
            None,
            100 + i as u64,
        );
        cas.push(next);
    }
    let leaf = server_leaf(cas.last().unwrap(), 3);
    let chain: Vec<Certificate> = cas.iter().rev().map(|c| c.cert.clone()).collect();
    let anchors = bundle(&[&root.cert]);
    let err = verify_chain(&leaf, &chain, &anchors, &opts()).unwrap_err();
    assert!(matches!(err, VerifyError::PathTooLong { .. }), "{err}");
    verify_chain(
        &leaf,
        &chain[..chain.len() - 1],
        &bundle(&[&cas[0].cert]),
        &opts(),
    )
    .unwrap();
}

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

#[test]
fn anchors_are_tried_before_intermediates_and_a_bundled_intermediate_is_an_anchor() {
    let root = new_root("root", 1);
    let inter = intermediate(&root, "issuing", None, 2);
    let leaf = server_leaf(&inter, 3);
    // The intermediate in the bundle ends the path; the root among the
    // untrusted certificates is ignored.
    let path = verify_chain(
        &leaf,
        std::slice::from_ref(&root.cert),
        &bundle(&[&inter.cert]),
        &opts(),
    )
    .unwrap();
    assert_eq!(path.certs, [leaf, inter.cert]);
}

/// Certificates with content pki-core does not issue (name constraints,
/// e-mail addresses, names encoded in other string types), built with
/// x509-cert's builder and signed with a pki-core CA's key.
mod custom {
    use super::*;
    use der::Encode;
    use der::asn1::{Any, OctetString, SetOfVec};
    use der::referenced::OwnedToRef;
    use p256::pkcs8::DecodePrivateKey;
    use x509_cert::attr::AttributeTypeAndValue;
    use x509_cert::builder::{Builder, CertificateBuilder};
    use x509_cert::certificate::TbsCertificate;
    use x509_cert::ext::pkix::{
        AuthorityKeyIdentifier, BasicConstraints, KeyUsage, KeyUsages, SubjectKeyIdentifier,
    };
    use x509_cert::ext::{Extension, ToExtension};
    use x509_cert::name::{Name, RdnSequence, RelativeDistinguishedName};
    use x509_cert::serial_number::SerialNumber;
    use x509_cert::time::Validity;

    pub const CN: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.3");
    pub const O: ObjectIdentifier = ObjectIdentifier::new_unwrap("2.5.4.10");
    pub const EMAIL: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.9.1");

    struct Fixed {
        issuer: Name,
        subject: Name,
        extensions: Vec<Extension>,
    }

    impl x509_cert::builder::Profile for Fixed {
        fn get_issuer(&self, _subject: &Name) -> Name {
            self.issuer.clone()
        }
        fn get_subject(&self) -> Name {
            self.subject.clone()
        }
        fn build_extensions(
            &self,
            _spk: spki::SubjectPublicKeyInfoRef<'_>,
            _issuer_spk: spki::SubjectPublicKeyInfoRef<'_>,
            _tbs: &TbsCertificate,
        ) -> x509_cert::builder::Result<Vec<Extension>> {
            Ok(self.extensions.clone())
        }
    }

    /// A name of one attribute per RDN, each value of the given string type.
    pub fn name(rdns: &[(ObjectIdentifier, der::Tag, &str)]) -> Name {
        let mut seq = RdnSequence::default();
        for (oid, tag, value) in rdns {
            let atv = AttributeTypeAndValue {
                oid: *oid,
                value: Any::new(*tag, value.as_bytes()).unwrap(),
            };
            seq.push(RelativeDistinguishedName::from(
                SetOfVec::try_from(vec![atv]).unwrap(),
            ));
        }
        let der = der::Encode::to_der(&seq).unwrap();
        <Name as der::Decode>::from_der(&der).unwrap()
    }

    pub fn ext<T>(value: &T, subject: &Name) -> Extension
    where
        for<'a> &'a T: ToExtension<Error = der::Error>,
    {
        value.to_extension(subject, &[]).unwrap()
    }

    /// A certificate for `key` named `subject`, issued under the name
    /// `issuer_name` and signed by `signer`, with SKI and AKI added to
    /// `extensions`. Valid from an hour before `NOW` for 300 days.
    pub fn issue(
        signer: &CertificateAuthority,
        issuer_name: Name,
        subject: Name,
        key: &PrivateKey,
        mut extensions: Vec<Extension>,
    ) -> Certificate {
        let spki = key.public_key().unwrap();
        let ski = SubjectKeyIdentifier::try_from(spki.owned_to_ref()).unwrap();
        let aki = AuthorityKeyIdentifier {
            key_identifier: Some(OctetString::new(signer.cert.ski().unwrap()).unwrap()),
            authority_cert_issuer: None,
            authority_cert_serial_number: None,
        };
        extensions.push(ext(&ski, &subject));
        extensions.push(ext(&aki, &subject));
        let validity = Validity::new(
            pki_core::datetime::to_x509(NOW - Duration::hours(1)).unwrap(),
            pki_core::datetime::to_x509(NOW + Duration::days(300)).unwrap(),
        );
        let profile = Fixed {
            issuer: issuer_name,
            subject,
            extensions,
        };
        let builder = CertificateBuilder::new(
            profile,
            SerialNumber::new(&[0x42, 1]).unwrap(),
            validity,
            spki,
        )
        .unwrap();
        let signer =
            p256::ecdsa::SigningKey::from_pkcs8_der(&signer.key.to_pkcs8_der().unwrap()).unwrap();
        let x509 = builder
            .build::<_, p256::ecdsa::DerSignature>(&signer)
            .unwrap();
        Certificate::from_der(&x509.to_der().unwrap()).unwrap()
    }

    /// A CA named `subject` under `parent` (issuer name as `parent` writes
    /// it), with `more` extensions.
    pub fn ca(
        parent: &CertificateAuthority,
        subject: Name,
        more: Vec<Extension>,
        seed: u64,
    ) -> CertificateAuthority {
        let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng(seed)).unwrap();
        let mut extensions = vec![
            ext(
                &BasicConstraints {
                    ca: true,
                    path_len_constraint: None,
                },
                &subject,
            ),
            ext(
                &KeyUsage(KeyUsages::KeyCertSign | KeyUsages::CRLSign),
                &subject,
            ),
        ];
        extensions.extend(more);
        let cert = issue(
            parent,
            parent.cert.subject().clone(),
            subject,
            &key,
            extensions,
        );
        CertificateAuthority::new(cert, key).unwrap()
    }

    /// A TLS server leaf named `subject` under `ca`, issued under the name
    /// `issuer_name`, with `more` extensions (a subjectAltName, say).
    pub fn server_leaf(
        ca: &CertificateAuthority,
        issuer_name: Name,
        subject: Name,
        more: Vec<Extension>,
        seed: u64,
    ) -> Certificate {
        use x509_cert::ext::pkix::ExtendedKeyUsage;
        let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng(seed)).unwrap();
        let mut extensions = vec![
            ext(
                &BasicConstraints {
                    ca: false,
                    path_len_constraint: None,
                },
                &subject,
            ),
            ext(&KeyUsage(KeyUsages::DigitalSignature.into()), &subject),
            ext(&ExtendedKeyUsage(vec![pki_core::EKU_SERVER_AUTH]), &subject),
        ];
        extensions.extend(more);
        issue(ca, issuer_name, subject, &key, extensions)
    }
}

mod distinguished_names {
    //! RFC 5280 §7.1: names are compared after RFC 4518 preparation.

    use super::custom::{self, CN, O};
    use super::*;
    use der::Tag;

    #[test]
    fn issuer_name_in_another_case_spacing_and_string_type_chains_to_its_ca() {
        let root = new_root("root", 1);
        let ca = custom::ca(
            &root,
            custom::name(&[
                (O, Tag::Utf8String, "Example Corp"),
                (CN, Tag::Utf8String, "Issuing CA"),
            ]),
            vec![],
            2,
        );
        let issuer = custom::name(&[
            (O, Tag::PrintableString, "EXAMPLE  CORP "),
            (CN, Tag::PrintableString, " issuing ca"),
        ]);
        let leaf = custom::server_leaf(
            &ca,
            issuer,
            custom::name(&[(CN, Tag::Utf8String, "web")]),
            vec![],
            3,
        );
        assert_ne!(leaf.issuer(), ca.cert.subject());
        assert!(ca.cert.subject_matches_issuer_of(&leaf));
        let path = verify_chain(
            &leaf,
            std::slice::from_ref(&ca.cert),
            &bundle(&[&root.cert]),
            &opts(),
        )
        .unwrap();
        assert_eq!(path.certs.len(), 3);
        assert!(pki_core::issued_by(&leaf, &ca.cert).issued_by);
    }

    #[test]
    fn issuer_name_with_another_word_does_not_chain() {
        let root = new_root("root", 1);
        let ca = custom::ca(
            &root,
            custom::name(&[(CN, Tag::Utf8String, "Issuing CA")]),
            vec![],
            2,
        );
        let issuer = custom::name(&[(CN, Tag::Utf8String, "IssuingCA")]);
        let leaf = custom::server_leaf(
            &ca,
            issuer,
            custom::name(&[(CN, Tag::Utf8String, "web")]),
            vec![],
            3,
        );
        let err = verify_chain(
            &leaf,
            std::slice::from_ref(&ca.cert),
            &bundle(&[&root.cert]),
            &opts(),
        )
        .unwrap_err();
        assert!(matches!(err, VerifyError::UnknownIssuer { .. }), "{err}");
    }
}

mod name_constraints {
    //! pki-core does not issue nameConstraints, so these CAs are built with
    //! x509-cert's builder directly.

    use super::*;
    use der::asn1::{Ia5String, OctetString};
    use x509_cert::ext::pkix::NameConstraints;
    use x509_cert::ext::pkix::constraints::name::GeneralSubtree;
    use x509_cert::ext::pkix::name::GeneralName;

    fn subtree(base: GeneralName) -> GeneralSubtree {
        GeneralSubtree {
            base,
            minimum: 0,
            maximum: None,
        }
    }

    fn dns_tree(name: &str) -> GeneralSubtree {
        subtree(GeneralName::DnsName(Ia5String::new(name).unwrap()))
    }

    fn ip_tree(net_and_mask: &[u8]) -> GeneralSubtree {
        subtree(GeneralName::IpAddress(
            OctetString::new(net_and_mask).unwrap(),
        ))
    }

    /// An intermediate under `root` with `nc`.
    fn constrained(
        root: &CertificateAuthority,
        nc: NameConstraints,
        seed: u64,
    ) -> CertificateAuthority {
        let subject = pki_core::common_name_to_name("constrained").unwrap();
        let nc = custom::ext(&nc, &subject);
        custom::ca(root, subject, vec![nc], seed)
    }

    fn check(
        ca: &CertificateAuthority,
        root: &CertificateAuthority,
        dns: &[&str],
        ips: &[&str],
    ) -> Result<(), VerifyError> {
        let leaf = leaf_with(ca, Profile::Server, dns, ips, NOW, 50);
        verify_chain(
            &leaf,
            std::slice::from_ref(&ca.cert),
            &bundle(&[&root.cert]),
            &opts(),
        )
        .map(|_| ())
    }

    #[test]
    fn permitted_dns_subtree_admits_names_below_it_only() {
        let root = new_root("root", 1);
        let ca = constrained(
            &root,
            NameConstraints {
                permitted_subtrees: Some(vec![dns_tree("allowed.example")]),
                excluded_subtrees: None,
            },
            2,
        );
        check(&ca, &root, &["allowed.example", "a.allowed.example"], &[]).unwrap();
        check(&ca, &root, &["*.allowed.example"], &[]).unwrap();
        let err = check(&ca, &root, &["a.allowed.example", "evil.example"], &[]).unwrap_err();
        assert!(
            matches!(err, VerifyError::NameConstraintViolation { ref name, reason: "outside every permitted subtree", .. } if name == "DNS:evil.example"),
            "{err}"
        );
        let err = check(&ca, &root, &["notallowed.example"], &[]).unwrap_err();
        assert!(
            matches!(err, VerifyError::NameConstraintViolation { .. }),
            "{err}"
        );
    }

    #[test]
    fn excluded_subtrees_refuse_names_and_wildcards_that_cover_them() {
        let root = new_root("root", 1);
        let ca = constrained(
            &root,
            NameConstraints {
                permitted_subtrees: None,
                excluded_subtrees: Some(vec![
                    dns_tree("secret.example"),
                    ip_tree(&[10, 0, 0, 0, 255, 0, 0, 0]),
                ]),
            },
            2,
        );
        check(&ca, &root, &["public.example"], &["192.168.1.1"]).unwrap();
        for (dns, ips) in [
            (&["db.secret.example"][..], &[][..]),
            (&["*.secret.example"][..], &[][..]),
            (&["public.example"][..], &["10.1.2.3"][..]),
        ] {
            let err = check(&ca, &root, dns, ips).unwrap_err();
            assert!(
                matches!(
                    err,
                    VerifyError::NameConstraintViolation {
                        reason: "within an excluded subtree",
                        ..
                    }
                ),
                "{dns:?} {ips:?}: {err}"
            );
        }
        // `*.example` may stand for `secret.example`.
        let err = check(&ca, &root, &["*.example.org", "*.example"], &[]).unwrap_err();
        assert!(
            matches!(err, VerifyError::NameConstraintViolation { .. }),
            "{err}"
        );
    }

    #[test]
    fn permitted_ip_subtree_applies_the_mask() {
        let root = new_root("root", 1);
        let ca = constrained(
            &root,
            NameConstraints {
                permitted_subtrees: Some(vec![ip_tree(&[10, 0, 0, 0, 255, 255, 0, 0])]),
                excluded_subtrees: None,
            },
            2,
        );
        // DNS names are not constrained by IP subtrees.
        check(&ca, &root, &["web"], &["10.0.200.1"]).unwrap();
        let err = check(&ca, &root, &["web"], &["10.1.0.1"]).unwrap_err();
        assert!(
            matches!(err, VerifyError::NameConstraintViolation { .. }),
            "{err}"
        );
    }

    #[test]
    fn permitted_directory_name_constrains_the_leaf_subject() {
        let root = new_root("root", 1);
        let ca = constrained(
            &root,
            NameConstraints {
                permitted_subtrees: Some(vec![subtree(GeneralName::DirectoryName(
                    "CN=internal".parse().unwrap(),
                ))]),
                excluded_subtrees: None,
            },
            2,
        );
        let err = check(&ca, &root, &["web"], &[]).unwrap_err();
        assert!(
            matches!(err, VerifyError::NameConstraintViolation { ref name, .. } if name.starts_with("DirName:")),
            "{err}"
        );
    }
}

mod directory_name_constraints {
    use super::custom::{self, CN, O};
    use super::*;
    use der::Tag;
    use x509_cert::ext::pkix::NameConstraints;
    use x509_cert::ext::pkix::constraints::name::GeneralSubtree;
    use x509_cert::ext::pkix::name::GeneralName;

    fn ca_with(
        permitted: Option<&str>,
        excluded: Option<&str>,
    ) -> (CertificateAuthority, CertificateAuthority) {
        let root = new_root("root", 1);
        let tree = |o: &str| {
            vec![GeneralSubtree {
                base: GeneralName::DirectoryName(custom::name(&[(O, Tag::PrintableString, o)])),
                minimum: 0,
                maximum: None,
            }]
        };
        let nc = NameConstraints {
            permitted_subtrees: permitted.map(tree),
            excluded_subtrees: excluded.map(tree),
        };
        let subject = custom::name(&[(CN, Tag::Utf8String, "constrained")]);
        let nc = custom::ext(&nc, &subject);
        let ca = custom::ca(&root, subject, vec![nc], 2);
        (root, ca)
    }

    fn leaf_in(ca: &CertificateAuthority, organization: &str) -> Certificate {
        let subject = custom::name(&[
            (O, Tag::Utf8String, organization),
            (CN, Tag::Utf8String, "web"),
        ]);
        custom::server_leaf(ca, ca.cert.subject().clone(), subject, vec![], 3)
    }

    fn verify(
        root: &CertificateAuthority,
        ca: &CertificateAuthority,
        leaf: &Certificate,
    ) -> Result<(), VerifyError> {
        verify_chain(
            leaf,
            std::slice::from_ref(&ca.cert),
            &bundle(&[&root.cert]),
            &opts(),
        )
        .map(|_| ())
    }

    #[test]
    fn permitted_directory_name_matches_another_case_spacing_and_string_type() {
        let (root, ca) = ca_with(Some("Example Corp"), None);
        verify(&root, &ca, &leaf_in(&ca, "EXAMPLE   corp")).unwrap();
        let err = verify(&root, &ca, &leaf_in(&ca, "Other Corp")).unwrap_err();
        assert!(
            matches!(
                err,
                VerifyError::NameConstraintViolation {
                    reason: "outside every permitted subtree",
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn excluded_directory_name_cannot_be_dodged_by_case_or_spacing() {
        let (root, ca) = ca_with(None, Some("Secret Corp"));
        verify(&root, &ca, &leaf_in(&ca, "Public Corp")).unwrap();
        let err = verify(&root, &ca, &leaf_in(&ca, " secret  CORP")).unwrap_err();
        assert!(
            matches!(
                err,
                VerifyError::NameConstraintViolation {
                    reason: "within an excluded subtree",
                    ..
                }
            ),
            "{err}"
        );
    }
}

mod email_and_uri_constraints {
    //! rfc822Name constraints (on subjectAltName e-mail addresses and on
    //! the subject DN's emailAddress attributes) and URI constraints.

    use super::custom::{self, CN, EMAIL};
    use super::*;
    use der::Tag;
    use der::asn1::Ia5String;
    use x509_cert::ext::pkix::constraints::name::GeneralSubtree;
    use x509_cert::ext::pkix::name::GeneralName;
    use x509_cert::ext::pkix::{NameConstraints, SubjectAltName};

    fn email(s: &str) -> GeneralName {
        GeneralName::Rfc822Name(Ia5String::new(s).unwrap())
    }

    fn uri(s: &str) -> GeneralName {
        GeneralName::UniformResourceIdentifier(Ia5String::new(s).unwrap())
    }

    fn dns(s: &str) -> GeneralName {
        GeneralName::DnsName(Ia5String::new(s).unwrap())
    }

    fn trees(bases: Vec<GeneralName>) -> Option<Vec<GeneralSubtree>> {
        Some(
            bases
                .into_iter()
                .map(|base| GeneralSubtree {
                    base,
                    minimum: 0,
                    maximum: None,
                })
                .collect(),
        )
    }

    fn ca_with(nc: NameConstraints) -> (CertificateAuthority, CertificateAuthority) {
        let root = new_root("root", 1);
        let subject = custom::name(&[(CN, Tag::Utf8String, "constrained")]);
        let nc = custom::ext(&nc, &subject);
        let ca = custom::ca(&root, subject, vec![nc], 2);
        (root, ca)
    }

    /// A leaf with the subject `CN=web` (plus `emailAddress=<dn_email>`
    /// when given) and the subjectAltNames `sans`.
    fn verify_leaf(
        (root, ca): &(CertificateAuthority, CertificateAuthority),
        dn_email: Option<&str>,
        sans: Vec<GeneralName>,
    ) -> Result<(), VerifyError> {
        let mut rdns = vec![(CN, Tag::Utf8String, "web")];
        if let Some(e) = dn_email {
            rdns.push((EMAIL, Tag::Ia5String, e));
        }
        let subject = custom::name(&rdns);
        let san = custom::ext(&SubjectAltName(sans), &subject);
        let leaf = custom::server_leaf(ca, ca.cert.subject().clone(), subject, vec![san], 3);
        verify_chain(
            &leaf,
            std::slice::from_ref(&ca.cert),
            &bundle(&[&root.cert]),
            &opts(),
        )
        .map(|_| ())
    }

    fn assert_violation(result: Result<(), VerifyError>, name: &str) {
        match result {
            Err(VerifyError::NameConstraintViolation { name: n, .. }) if n.starts_with(name) => {}
            other => panic!("expected a violation by {name}, got {other:?}"),
        }
    }

    #[test]
    fn subject_email_address_outside_a_permitted_rfc822_subtree_is_refused() {
        // The leaf has no e-mail subjectAltName, only a DNS one: the DN's
        // emailAddress must still be checked.
        let ca = ca_with(NameConstraints {
            permitted_subtrees: trees(vec![email(".example.com")]),
            excluded_subtrees: None,
        });
        verify_leaf(&ca, Some("ops@mail.example.com"), vec![dns("web")]).unwrap();
        assert_violation(
            verify_leaf(&ca, Some("attacker@evil.test"), vec![dns("web")]),
            "email:attacker@evil.test",
        );
    }

    #[test]
    fn subject_email_address_in_an_excluded_rfc822_subtree_is_refused() {
        let ca = ca_with(NameConstraints {
            permitted_subtrees: None,
            excluded_subtrees: trees(vec![email("evil.test")]),
        });
        verify_leaf(&ca, Some("ops@good.test"), vec![dns("web")]).unwrap();
        assert_violation(
            verify_leaf(&ca, Some("OPS@EVIL.test"), vec![]),
            "email:OPS@EVIL.test",
        );
    }

    #[test]
    fn rfc822_subject_alt_names_are_checked_against_mailbox_host_and_domain_subtrees() {
        let ca = ca_with(NameConstraints {
            permitted_subtrees: trees(vec![
                email("root@admin.test"),
                email("example.com"),
                email(".corp.test"),
            ]),
            excluded_subtrees: None,
        });
        verify_leaf(
            &ca,
            None,
            vec![
                email("root@ADMIN.test"),
                email("ops@example.com"),
                email("ops@mail.corp.test"),
            ],
        )
        .unwrap();
        for outside in ["other@admin.test", "ops@mail.example.com", "ops@corp.test"] {
            assert_violation(
                verify_leaf(&ca, None, vec![email(outside)]),
                &format!("email:{outside}"),
            );
        }
    }

    #[test]
    fn uri_subject_alt_names_are_checked_by_host() {
        let ca = ca_with(NameConstraints {
            permitted_subtrees: trees(vec![uri(".example.com"), uri("api.test")]),
            excluded_subtrees: trees(vec![uri("secret.example.com")]),
        });
        verify_leaf(
            &ca,
            None,
            vec![
                uri("https://www.example.com/index.html"),
                uri("spiffe://api.test/ns/default"),
            ],
        )
        .unwrap();
        for bad in [
            "https://evil.test/",
            "https://secret.example.com/x",
            "https://example.com/",
            "urn:uuid:6e8bc430-9c3a-11d9-9669-0800200c9a66",
            "https://10.0.0.1/",
        ] {
            assert_violation(
                verify_leaf(&ca, None, vec![uri(bad)]),
                &format!("URI:{bad}"),
            );
        }
    }

    #[test]
    fn name_constraint_work_counts_in_the_budget_and_fails_fast() {
        // 5 intermediates with 2,000 excluded subtrees each over a leaf
        // with 10,000 names: 10^8 comparisons if nothing stops them.
        let root = new_root("root", 1);
        let excluded: Vec<GeneralName> = (0..2000)
            .map(|i| dns(&format!("excluded-{i}.example")))
            .collect();
        let mut cas: Vec<CertificateAuthority> = Vec::new();
        for level in 0..5 {
            let parent = cas.last().unwrap_or(&root);
            let subject = custom::name(&[(CN, Tag::Utf8String, &format!("ca-{level}"))]);
            let nc = NameConstraints {
                permitted_subtrees: None,
                excluded_subtrees: trees(excluded.clone()),
            };
            let nc = custom::ext(&nc, &subject);
            let ca = custom::ca(parent, subject, vec![nc], 10 + level);
            cas.push(ca);
        }
        let names: Vec<String> = (0..10_000).map(|i| format!("host-{i}.internal")).collect();
        let names: Vec<&str> = names.iter().map(String::as_str).collect();
        let leaf = leaf_with(cas.last().unwrap(), Profile::Server, &names, &[], NOW, 3);
        let chain: Vec<Certificate> = cas.iter().rev().map(|c| c.cert.clone()).collect();

        let started = std::time::Instant::now();
        let err = verify_chain(&leaf, &chain, &bundle(&[&root.cert]), &opts()).unwrap_err();
        assert_eq!(
            err,
            VerifyError::BudgetExceeded {
                what: BudgetKind::NameConstraintChecks
            }
        );
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "took {:?}",
            started.elapsed()
        );

        // With a budget large enough, the same path verifies: nothing is excluded.
        let mut o = opts();
        o.budget.name_constraint_checks = usize::MAX;
        let small = leaf_with(
            cas.last().unwrap(),
            Profile::Server,
            &names[..10],
            &[],
            NOW,
            4,
        );
        verify_chain(&small, &chain, &bundle(&[&root.cert]), &o).unwrap();
    }
}

mod malformed_input {
    use super::*;
    use proptest::prelude::*;
    use std::sync::OnceLock;

    /// A root, an intermediate and a leaf, made once.
    fn chain() -> &'static (Certificate, Certificate, Certificate) {
        static CHAIN: OnceLock<(Certificate, Certificate, Certificate)> = OnceLock::new();
        CHAIN.get_or_init(|| {
            let root = new_root("root", 1);
            let inter = intermediate(&root, "issuing", Some(0), 2);
            let leaf = server_leaf(&inter, 3);
            (root.cert, inter.cert, leaf)
        })
    }

    fn mutate(der: &[u8], edits: &[(usize, u8)]) -> Vec<u8> {
        let mut out = der.to_vec();
        for (at, byte) in edits {
            let i = at % out.len();
            out[i] = *byte;
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Invariant 4 of the design: corrupt certificates give errors, never panics,
        /// wherever they sit on the path.
        #[test]
        fn corrupted_certificates_never_panic_the_verifier(
            edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..4),
            position in 0usize..3,
        ) {
            let (root, inter, leaf) = chain();
            let mut certs = [root.clone(), inter.clone(), leaf.clone()];
            let Ok(bad) = Certificate::from_der(&mutate(certs[position].der(), &edits)) else {
                return Ok(());
            };
            certs[position] = bad;
            let [root, inter, leaf] = certs;
            let mut o = opts();
            o.name = Some(dns("web.ns.svc"));
            let result = verify_chain(&leaf, &[inter], &Bundle::from_certs([root]), &o);
            if let Err(e) = result {
                prop_assert!(!e.to_string().is_empty());
            }
        }
    }
}

mod rfc5280_gaps {
    //! Names must be well formed before constraints apply to them, the
    //! profile checks RFC 5280 asks of a leaf and of a nameConstraints
    //! extension, and a CA whose basicConstraints is not critical
    //! (accepted, as RFC 5280 §6.1.4(k) and NIST PKITS 4.6.4 say).

    use super::custom::{self, CN};
    use super::*;
    use der::Tag;
    use der::asn1::{Ia5String, OctetString};
    use x509_cert::ext::Extension;
    use x509_cert::ext::pkix::constraints::name::GeneralSubtree;
    use x509_cert::ext::pkix::name::GeneralName;
    use x509_cert::ext::pkix::{
        BasicConstraints, KeyUsage, KeyUsages, NameConstraints, SubjectAltName,
    };

    fn dns_name(s: &str) -> GeneralName {
        GeneralName::DnsName(Ia5String::new(s).unwrap())
    }

    fn email(s: &str) -> GeneralName {
        GeneralName::Rfc822Name(Ia5String::new(s).unwrap())
    }

    fn permitting(bases: Vec<GeneralName>) -> NameConstraints {
        NameConstraints {
            permitted_subtrees: Some(
                bases
                    .into_iter()
                    .map(|base| GeneralSubtree {
                        base,
                        minimum: 0,
                        maximum: None,
                    })
                    .collect(),
            ),
            excluded_subtrees: None,
        }
    }

    /// root → CA with `nc` → leaf with the subjectAltNames `sans`.
    fn verify_under(nc: NameConstraints, sans: Vec<GeneralName>) -> Result<(), VerifyError> {
        let root = new_root("root", 1);
        let subject = custom::name(&[(CN, Tag::Utf8String, "constrained")]);
        let nc = custom::ext(&nc, &subject);
        let ca = custom::ca(&root, subject, vec![nc], 2);
        let subject = custom::name(&[(CN, Tag::Utf8String, "web")]);
        let san = custom::ext(&SubjectAltName(sans), &subject);
        let leaf = custom::server_leaf(&ca, ca.cert.subject().clone(), subject, vec![san], 3);
        verify_chain(
            &leaf,
            std::slice::from_ref(&ca.cert),
            &bundle(&[&root.cert]),
            &opts(),
        )
        .map(|_| ())
    }

    fn assert_malformed(result: Result<(), VerifyError>, says: &str) {
        match result {
            Err(VerifyError::MalformedCertificate { reason, .. }) if reason.contains(says) => {}
            other => panic!("expected a malformed certificate ({says}), got {other:?}"),
        }
    }

    #[test]
    fn a_dns_san_with_a_leading_period_under_a_permitting_constraint_is_refused() {
        let nc = || permitting(vec![dns_name("example.com")]);
        verify_under(nc(), vec![dns_name("foo.example.com")]).unwrap();
        let err = verify_under(
            nc(),
            vec![dns_name(".example.com"), dns_name("foo.example.com")],
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                VerifyError::NameConstraintViolation { ref name, reason: "malformed dNSName", .. }
                    if name == "DNS:.example.com"
            ),
            "{err:?}"
        );
    }

    #[test]
    fn an_email_san_with_two_at_signs_under_an_email_constraint_is_refused() {
        let nc = || permitting(vec![email("example.com")]);
        let good = || vec![dns_name("web"), email("good@example.com")];
        verify_under(nc(), good()).unwrap();
        let mut sans = good();
        sans.push(email("invalid@address@example.com"));
        let err = verify_under(nc(), sans).unwrap_err();
        assert!(
            matches!(
                err,
                VerifyError::NameConstraintViolation { ref name, reason: "malformed rfc822Name", .. }
                    if name == "email:invalid@address@example.com"
            ),
            "{err:?}"
        );
    }

    #[test]
    fn a_dns_name_constraint_with_a_leading_period_or_a_wildcard_is_refused() {
        // x509-limbo rfc5280::nc::invalid-dnsname-leading-period and
        // invalid-dnsname-wildcard: a dNSName constraint is a host name.
        for base in [".example.com", "*.example.com"] {
            assert_malformed(
                verify_under(
                    permitting(vec![dns_name(base)]),
                    vec![dns_name("foo.example.com")],
                ),
                "is not a host name",
            );
        }
    }

    #[test]
    fn name_constraints_without_any_subtree_are_refused() {
        // x509-limbo webpki::nc::intermediate-permitted-excluded-subtrees-*.
        for nc in [
            NameConstraints {
                permitted_subtrees: None,
                excluded_subtrees: None,
            },
            NameConstraints {
                permitted_subtrees: Some(vec![]),
                excluded_subtrees: Some(vec![]),
            },
        ] {
            assert_malformed(
                verify_under(nc, vec![dns_name("foo.example.com")]),
                "nameConstraints",
            );
        }
    }

    #[test]
    fn name_constraints_in_an_end_entity_certificate_are_refused() {
        let root = new_root("root", 1);
        let subject = custom::name(&[(CN, Tag::Utf8String, "web")]);
        let nc = custom::ext(&permitting(vec![dns_name("example.com")]), &subject);
        let san = custom::ext(&SubjectAltName(vec![dns_name("example.com")]), &subject);
        let leaf = custom::server_leaf(
            &root,
            root.cert.subject().clone(),
            subject,
            vec![san, nc],
            3,
        );
        let err = verify_chain(&leaf, &[], &bundle(&[&root.cert]), &opts()).unwrap_err();
        assert!(
            matches!(err, VerifyError::MalformedCertificate { ref reason, .. } if reason.contains("end-entity")),
            "{err:?}"
        );
    }

    /// A server leaf under `root` with an empty subject and a
    /// subjectAltName marked `critical` or not.
    fn empty_subject_leaf(root: &CertificateAuthority, critical: bool) -> Certificate {
        let subject = custom::name(&[]);
        let mut san = custom::ext(&SubjectAltName(vec![dns_name("example.com")]), &subject);
        san.critical = critical;
        custom::server_leaf(root, root.cert.subject().clone(), subject, vec![san], 3)
    }

    #[test]
    fn an_empty_subject_needs_a_critical_subject_alt_name() {
        let root = new_root("root", 1);
        let anchors = bundle(&[&root.cert]);
        verify_chain(&empty_subject_leaf(&root, true), &[], &anchors, &opts()).unwrap();
        let err =
            verify_chain(&empty_subject_leaf(&root, false), &[], &anchors, &opts()).unwrap_err();
        assert!(
            matches!(err, VerifyError::MalformedCertificate { ref reason, .. } if reason.contains("empty subject")),
            "{err:?}"
        );
    }

    /// An extension exactly as given (criticality included).
    fn raw_ext<T: der::Encode + der::oid::AssociatedOid>(value: &T, critical: bool) -> Extension {
        Extension {
            extn_id: T::OID,
            critical,
            extn_value: OctetString::new(value.to_der().unwrap()).unwrap(),
        }
    }

    #[test]
    fn an_intermediate_whose_basic_constraints_is_not_critical_is_a_ca() {
        // NIST PKITS 4.6.4 (Valid basicConstraints Not Critical Test4);
        // RFC 5280 §6.1.4(k) asks only for cA = TRUE. A trust anchor's
        // must still be critical (x509-limbo
        // rfc5280::root-non-critical-basic-constraints, in the
        // conformance test).
        let root = new_root("root", 1);
        let subject = custom::name(&[(CN, Tag::Utf8String, "non-critical")]);
        let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng(4)).unwrap();
        let bc = BasicConstraints {
            ca: true,
            path_len_constraint: None,
        };
        let ku = KeyUsage(KeyUsages::KeyCertSign | KeyUsages::CRLSign);
        let cert = custom::issue(
            &root,
            root.cert.subject().clone(),
            subject.clone(),
            &key,
            vec![raw_ext(&bc, false), raw_ext(&ku, true)],
        );
        assert_eq!(cert.basic_constraints().map(|b| b.critical), Some(false));
        let ca = CertificateAuthority::new(cert, key).unwrap();
        let leaf_subject = custom::name(&[(CN, Tag::Utf8String, "web")]);
        let leaf = custom::server_leaf(&ca, subject, leaf_subject, vec![], 5);
        let path = verify_chain(
            &leaf,
            std::slice::from_ref(&ca.cert),
            &bundle(&[&root.cert]),
            &opts(),
        )
        .unwrap();
        assert_eq!(path.certs.len(), 3);
    }
}

mod weak_leaf_keys {
    //! The leaf's own key meets the floor issuers' keys meet (x509-limbo
    //! webpki::forbidden-*-leaf). pki-core makes no weak keys, so OpenSSL
    //! makes them, and signs the leaf with a pki-core CA's key.

    use super::*;
    use std::path::Path;
    use std::process::Command;

    fn openssl(dir: &Path, args: &[&str]) {
        let o = Command::new("openssl")
            .current_dir(dir)
            .args(args)
            .output()
            .expect("openssl is installed (Debian: apt-get install openssl)");
        assert!(
            o.status.success(),
            "openssl {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }

    /// A server leaf for a key OpenSSL generates with `genpkey_args`,
    /// issued by `ca`, valid from `NOW`.
    fn leaf_with_key(ca: &CertificateAuthority, genpkey_args: &[&str]) -> Certificate {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::write(d.join("ca.pem"), ca.cert.to_pem()).unwrap();
        std::fs::write(d.join("ca.key"), ca.key.to_pkcs8_pem().unwrap().as_bytes()).unwrap();
        std::fs::write(
            d.join("ext.cnf"),
            "basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\n\
             extendedKeyUsage=serverAuth\nsubjectAltName=DNS:web\n\
             subjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n",
        )
        .unwrap();
        let mut genpkey = vec!["genpkey"];
        if genpkey_args.first() == Some(&"-genparam") {
            // DSA: parameters first, then the key.
            genpkey.extend_from_slice(genpkey_args);
            genpkey.extend(["-out", "params.pem"]);
            openssl(d, &genpkey);
            genpkey = vec!["genpkey", "-paramfile", "params.pem"];
        } else {
            genpkey.extend_from_slice(genpkey_args);
        }
        genpkey.extend(["-out", "leaf.key"]);
        openssl(d, &genpkey);
        openssl(
            d,
            &[
                "req", "-new", "-key", "leaf.key", "-subj", "/CN=web", "-out", "leaf.csr",
            ],
        );
        openssl(
            d,
            &[
                "x509",
                "-req",
                "-in",
                "leaf.csr",
                "-CA",
                "ca.pem",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-days",
                "30",
                "-extfile",
                "ext.cnf",
                "-out",
                "leaf.pem",
            ],
        );
        Certificate::from_pem(&std::fs::read(d.join("leaf.pem")).unwrap()).unwrap()
    }

    fn verify_leaf(root: &CertificateAuthority, leaf: &Certificate) -> Result<(), VerifyError> {
        // The leaf is valid from when OpenSSL made it.
        let mut o = opts_at(OffsetDateTime::now_utc() + Duration::minutes(1));
        o.name = Some(dns("web"));
        verify_chain(leaf, &[], &bundle(&[&root.cert]), &o).map(|_| ())
    }

    #[test]
    fn a_leaf_with_a_weak_key_is_refused_and_a_p521_leaf_is_not() {
        let now = OffsetDateTime::now_utc();
        let root = CertificateAuthority::generate_root(
            "root",
            KeyAlgorithm::EcdsaP256,
            now - Duration::hours(1),
            Duration::days(90),
            &mut rng(1),
        )
        .unwrap();
        let weak: [(&[&str], &str); 4] = [
            (
                &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:1024"],
                "1024 bits",
            ),
            (
                &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2052"],
                "2052 bits",
            ),
            (
                &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-192"],
                "curve 1.2.840.10045.3.1.1",
            ),
            (
                &[
                    "-genparam",
                    "-algorithm",
                    "DSA",
                    "-pkeyopt",
                    "dsa_paramgen_bits:1024",
                ],
                "DSA",
            ),
        ];
        for (args, says) in weak {
            let leaf = leaf_with_key(&root, args);
            match verify_leaf(&root, &leaf) {
                Err(VerifyError::WeakPublicKey { reason, .. }) if reason.contains(says) => {}
                other => panic!("{args:?}: expected a weak key ({says}), got {other:?}"),
            }
        }
        for args in [
            &["-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-521"][..],
            &["-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"][..],
        ] {
            verify_leaf(&root, &leaf_with_key(&root, args)).unwrap();
        }
    }
}
