//! The decoded tree on demand, and the serial read from the DER.

use super::*;
use crate::{CertificateAuthority, KeyAlgorithm};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::net::IpAddr;
use time::{Duration, macros::datetime};

/// 2026-01-01: an arbitrary fixed issuance time.
const ISSUED_AT: time::OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

fn root_ca(seed: u64) -> CertificateAuthority {
    CertificateAuthority::generate_root(
        "ca",
        KeyAlgorithm::EcdsaP256,
        ISSUED_AT,
        Duration::days(30),
        &mut ChaCha20Rng::seed_from_u64(seed),
    )
    .unwrap()
}

fn root(seed: u64) -> Certificate {
    root_ca(seed).cert
}

#[test]
fn the_decoded_structure_is_made_only_when_asked_for() {
    let cert = Certificate::from_der(root(1).der()).unwrap();
    // What a store's checks read comes from the fields kept at parse.
    let _ = (cert.ski(), cert.aki(), cert.not_after(), cert.serial());
    let _ = (cert.dns_names(), cert.spki_der(), cert.extended_key_usage());
    assert!(cert.0.memo.more.get().is_none());
    assert_eq!(cert.subject().to_string(), "CN=ca");
    assert!(cert.0.memo.more().tree.get().is_some());
}

#[test]
fn the_serial_read_from_the_der_is_the_decoded_one() {
    // The content octets of the INTEGER, as x509-cert hands them out.
    for seed in 0..64 {
        let cert = root(seed);
        assert_eq!(
            cert.serial(),
            cert.x509().tbs_certificate().serial_number().as_bytes(),
            "seed {seed}"
        );
    }
}

#[test]
fn names_in_order_are_those_issued_lowercased_and_nothing_else() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let now = ISSUED_AT;
    let ca = root_ca(7);
    let key = crate::PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng).unwrap();
    let mut params =
        crate::CertificateParams::new(crate::Profile::Server, "web", now, Duration::days(1))
            .unwrap();
    params.dns_names = vec!["Web.Example".into(), "web.ns.svc".into()];
    let v4: IpAddr = "10.0.0.1".parse().unwrap();
    let v6: IpAddr = "2001:db8::1".parse().unwrap();
    params.ip_addresses = vec![v4, v6];
    let cert = ca
        .issue(&params, &key.public_key().unwrap(), &mut rng)
        .unwrap();

    assert!(cert.has_names_in_order(&["web.example", "web.ns.svc"], &[v4, v6]));
    // The request's case does not matter: issuance lowercases.
    assert!(cert.has_names_in_order(&["WEB.EXAMPLE", "Web.Ns.Svc"], &[v4, v6]));
    for (dns, ips) in [
        (&["web.ns.svc", "web.example"][..], &[v4, v6][..]),
        (&["web.example", "web.ns.svc"], &[v6, v4]),
        (&["web.example"], &[v4, v6]),
        (&["web.example", "web.ns.svc", "more.example"], &[v4, v6]),
        (&["web.example", "web.ns.svc"], &[v4]),
        (&["web.example", "web.ns.svc"], &[v4, v6, v4]),
        (&["web.example", "web.ns.sv"], &[v4, v6]),
        (&[], &[]),
    ] {
        assert!(!cert.has_names_in_order(dns, ips), "{dns:?} {ips:?}");
    }
    // A certificate without the extension holds no names.
    let root = root(1);
    assert!(root.has_names_in_order::<&str>(&[], &[]));
    assert!(!root.has_names_in_order(&["ca"], &[]));
}
