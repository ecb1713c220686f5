#![allow(clippy::unwrap_used)]
use super::*;
use crate::{
    CertificateAuthority, CertificateParams, KeyAlgorithm, PrivateKey, Profile, cross_sign,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use time::{Duration, macros::datetime};

// 2026-01-01: an arbitrary fixed issuance time.
const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

fn rng(seed: u64) -> ChaCha20Rng {
    ChaCha20Rng::seed_from_u64(seed)
}

fn root(cn: &str, days: i64, rng: &mut ChaCha20Rng) -> CertificateAuthority {
    CertificateAuthority::generate_root(cn, KeyAlgorithm::EcdsaP256, T0, Duration::days(days), rng)
        .unwrap()
}

fn leaf(ca: &CertificateAuthority, days: i64, rng: &mut ChaCha20Rng) -> Certificate {
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, rng).unwrap();
    let mut params =
        CertificateParams::new(Profile::Server, "web", T0, Duration::days(days)).unwrap();
    params.dns_names.push("web.example".into());
    ca.issue(&params, &key.public_key().unwrap(), rng).unwrap()
}

fn intermediate(
    issuer: &CertificateAuthority,
    cn: &str,
    path_len: Option<u8>,
    rng: &mut ChaCha20Rng,
) -> CertificateAuthority {
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, rng).unwrap();
    let params = CertificateParams::new(
        Profile::IntermediateCa { path_len },
        cn,
        T0,
        Duration::days(300),
    )
    .unwrap();
    let cert = issuer
        .issue(&params, &key.public_key().unwrap(), rng)
        .unwrap();
    CertificateAuthority::new(cert, key).unwrap()
}

fn codes(findings: &[Finding]) -> Vec<(&'static str, &str)> {
    findings
        .iter()
        .map(|f| (f.code.as_str(), f.cert.as_str()))
        .collect()
}

/// A rotation as the signer makes it: old and new CA sharing a Subject,
/// bridge A (old CA by the new key) in the bundle, bridge B (new CA by the
/// old key) after the leaf.
#[test]
fn a_rotated_bundle_and_its_bridged_serving_chain_give_no_finding() {
    let mut r = rng(1);
    let old = root("service-ca", 790, &mut r);
    let mut params = CertificateParams::new(Profile::RootCa, "x", T0, Duration::days(790)).unwrap();
    params.subject = old.cert.subject().clone();
    let new_key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut r).unwrap();
    let new =
        CertificateAuthority::new(params.self_signed(&new_key, &mut r).unwrap(), new_key).unwrap();
    let bridge_a = cross_sign(&old.cert, &new, old.cert.not_after(), &mut r).unwrap();
    let bridge_b = cross_sign(&new.cert, &old, old.cert.not_after(), &mut r).unwrap();
    let web = leaf(&new, 365, &mut r);
    let bundle = [new.cert.clone(), bridge_a];
    let chain = [web, bridge_b];
    let sources = [
        Source {
            name: "ca-bundle.crt",
            certs: &bundle,
        },
        Source {
            name: "tls.crt",
            certs: &chain,
        },
    ];
    let found = lint(&sources, T0 + Duration::days(10));
    assert!(found.is_empty(), "{found:?}");
}

#[test]
fn a_certificate_given_twice_is_a_duplicate_warning_named_by_file_and_position() {
    let mut r = rng(2);
    let ca = root("ca", 30, &mut r);
    let certs = [ca.cert.clone(), ca.cert.clone()];
    let found = lint(
        &[Source {
            name: "b.pem",
            certs: &certs,
        }],
        T0,
    );
    assert_eq!(codes(&found), [("duplicate-cert", "b.pem#2")]);
    assert_eq!(found[0].severity, Severity::Warning);
    assert!(found[0].detail.contains("b.pem#1"), "{}", found[0].detail);
    assert!(!has_errors(&found));
    assert_eq!(
        found[0].to_string(),
        format!("warning duplicate-cert b.pem#2: {}", found[0].detail)
    );
}

#[test]
fn anchors_outside_their_validity_are_found_at_the_time_given() {
    let mut r = rng(3);
    let ca = root("ca", 30, &mut r);
    let certs = [ca.cert.clone()];
    let source = [Source {
        name: "bundle",
        certs: &certs,
    }];
    assert!(lint(&source, T0 + Duration::days(1)).is_empty());
    let late = lint(&source, T0 + Duration::days(31));
    assert_eq!(codes(&late), [("anchor-expired", "bundle#1")]);
    assert!(has_errors(&late));
    let early = lint(&source, T0 - Duration::days(1));
    assert_eq!(codes(&early), [("anchor-not-yet-valid", "bundle#1")]);
    assert!(!has_errors(&early));
}

#[test]
fn an_expired_intermediate_in_a_chain_is_not_an_anchor() {
    let mut r = rng(4);
    let ca = root("ca", 30, &mut r);
    let chain = [leaf(&ca, 10, &mut r), ca.cert.clone()];
    // The chain's self-signed root is its anchor; an issuer of a chain
    // without one is not.
    let found = lint(
        &[Source {
            name: "c",
            certs: &chain,
        }],
        T0 + Duration::days(40),
    );
    assert_eq!(codes(&found), [("anchor-expired", "c#2")]);
    let without_root = [chain[0].clone()];
    assert!(
        lint(
            &[Source {
                name: "c",
                certs: &without_root
            }],
            T0 + Duration::days(40)
        )
        .is_empty()
    );
}

#[test]
fn a_ca_below_a_pathlen_zero_ca_is_a_pathlen_violation() {
    let mut r = rng(5);
    let top = root("root", 400, &mut r);
    let constrained = intermediate(&top, "issuing", Some(0), &mut r);
    let below = intermediate(&constrained, "too-deep", None, &mut r);
    let chain = [
        leaf(&below, 30, &mut r),
        below.cert.clone(),
        constrained.cert.clone(),
    ];
    let bundle = [top.cert.clone()];
    let found = lint(
        &[
            Source {
                name: "chain",
                certs: &chain,
            },
            Source {
                name: "bundle",
                certs: &bundle,
            },
        ],
        T0,
    );
    assert_eq!(codes(&found), [("pathlen-violation", "chain#2")]);
    assert!(found[0].detail.contains("chain#3"), "{}", found[0].detail);
    // pathlen:1 allows it.
    let mut r = rng(5);
    let top = root("root", 400, &mut r);
    let constrained = intermediate(&top, "issuing", Some(1), &mut r);
    let below = intermediate(&constrained, "deep-enough", None, &mut r);
    let chain = [
        leaf(&below, 30, &mut r),
        below.cert.clone(),
        constrained.cert.clone(),
    ];
    assert!(
        lint(
            &[Source {
                name: "chain",
                certs: &chain
            }],
            T0
        )
        .is_empty()
    );
}

#[test]
fn one_key_under_two_subjects_is_a_cross_sign_mismatch() {
    let mut r = rng(6);
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut r).unwrap();
    let make = |cn: &str, r: &mut ChaCha20Rng| {
        CertificateParams::new(Profile::RootCa, cn, T0, Duration::days(90))
            .unwrap()
            .self_signed(&key, r)
            .unwrap()
    };
    let certs = [make("ca", &mut r), make("ca-renamed", &mut r)];
    let found = lint(
        &[Source {
            name: "b",
            certs: &certs,
        }],
        T0,
    );
    assert_eq!(codes(&found), [("cross-sign-mismatch", "b#2")]);
    assert!(found[0].detail.contains("Subject"), "{}", found[0].detail);
}

/// `CN=ca` with its value as a PrintableString (the builders write UTF8String).
fn printable_cn(cn: &str) -> x509_cert::name::Name {
    use der::asn1::SetOfVec;
    use x509_cert::attr::AttributeTypeAndValue;
    use x509_cert::name::{RdnSequence, RelativeDistinguishedName};
    let value = der::Any::new(der::Tag::PrintableString, cn.as_bytes()).unwrap();
    let atv = AttributeTypeAndValue {
        oid: der::asn1::ObjectIdentifier::new_unwrap("2.5.4.3"),
        value,
    };
    let rdn = RelativeDistinguishedName::from(SetOfVec::try_from(vec![atv]).unwrap());
    // Name keeps its RDN sequence private: through its encoding.
    use der::{Decode, Encode};
    let der = RdnSequence::from(vec![rdn]).to_der().unwrap();
    x509_cert::name::Name::from_der(&der).unwrap()
}

#[test]
fn a_ca_renewed_with_a_printable_string_subject_is_a_name_string_type_error() {
    let mut r = rng(7);
    let ca = root("ca", 90, &mut r);
    let web = leaf(&ca, 30, &mut r);
    let mut params = CertificateParams::new(Profile::RootCa, "x", T0, Duration::days(90)).unwrap();
    params.subject = printable_cn("ca");
    let renewed = params
        .self_signed(ca.key.private_key().unwrap(), &mut r)
        .unwrap();
    let bundle = [renewed];
    let chain = [web];
    let found = lint(
        &[
            Source {
                name: "bundle",
                certs: &bundle,
            },
            Source {
                name: "chain",
                certs: &chain,
            },
        ],
        T0,
    );
    assert_eq!(codes(&found), [("name-string-type", "chain#1")]);
    assert!(
        found[0]
            .detail
            .contains("UTF8String here, PrintableString there"),
        "{}",
        found[0].detail
    );
    // Given with the original CA too, the renewal itself is named.
    let both = [ca.cert.clone(), bundle[0].clone()];
    let found = lint(
        &[Source {
            name: "bundle",
            certs: &both,
        }],
        T0,
    );
    assert_eq!(codes(&found), [("name-string-type", "bundle#2")]);
}
