//! Path validation: chains built by pki-core's own issuance verify, and
//! each kind of defect gives its own error.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
use pki_core::verify::{BudgetKind, MAX_INTERMEDIATES};
use pki_core::{
    Budget, Certificate, CertificateAuthority, CertificateParams, ExpectedName, KeyAlgorithm,
    PrivateKey, Profile, Purpose, VerifyError, cross_sign, verify_chain,
};
use time::Duration;

mod support;

use support::fixtures::*;

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

/// A server certificate issued by `root`, with its key, posing as a CA:
/// `CertificateAuthority::new` refuses a non-CA, but its fields are public.
fn end_entity_as_issuer(root: &CertificateAuthority) -> CertificateAuthority {
    let mut r = rng(2);
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut r).unwrap();
    let mut p = CertificateParams::new(Profile::Server, "server", NOW, Duration::days(30)).unwrap();
    p.dns_names = vec!["server".into()];
    let cert = root.issue(&p, &key.public_key().unwrap(), &mut r).unwrap();
    CertificateAuthority {
        cert,
        key: key.into(),
    }
}

#[test]
fn a_certificate_that_passed_in_one_role_and_purpose_is_checked_again_in_another() {
    // A pass is remembered with the certificate (and its clones): it must
    // not answer for another purpose or another role.
    let root = new_root("root", 1);
    let anchors = bundle(&[&root.cert]);
    let not_a_ca = end_entity_as_issuer(&root);
    let server = not_a_ca.cert.clone();
    for _ in 0..2 {
        verify_chain(&server, &[], &anchors, &opts()).unwrap();
    }
    let mut client = opts();
    client.purpose = Purpose::ClientAuth;
    for _ in 0..2 {
        let err = verify_chain(&server, &[], &anchors, &client).unwrap_err();
        assert_eq!(
            err,
            VerifyError::EkuNotAllowed {
                cert: server.id(),
                purpose: Purpose::ClientAuth
            }
        );
    }
    let leaf = server_leaf(&not_a_ca, 3);
    for _ in 0..2 {
        let err =
            verify_chain(&leaf, std::slice::from_ref(&server), &anchors, &opts()).unwrap_err();
        assert_eq!(
            err,
            VerifyError::NotACa {
                cert: server.id(),
                reason: "basicConstraints cA is FALSE"
            }
        );
    }
    // Nor as a trust anchor of its own.
    let err = verify_chain(&leaf, &[], &bundle(&[&server]), &opts()).unwrap_err();
    assert!(matches!(err, VerifyError::NotACa { .. }), "{err}");
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
    let not_a_ca = end_entity_as_issuer(&root);
    let server = not_a_ca.cert.clone();
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
