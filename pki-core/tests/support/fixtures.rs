//! CAs, intermediates and leaves issued by pki-core at a fixed time, and
//! options to verify them at that time.

#![allow(dead_code, clippy::unwrap_used)]

use pki_core::{
    Bundle, Certificate, CertificateAuthority, CertificateParams, ExpectedName, KeyAlgorithm,
    PrivateKey, Profile, Purpose, VerifyOptions, cross_sign,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use time::{Duration, OffsetDateTime, macros::datetime};

// 2026-01-01: an arbitrary fixed issuance time; verification times are
// written relative to it.
pub const NOW: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

pub fn rng(seed: u64) -> ChaCha20Rng {
    // Keys and signatures from this stream: the same seed, the same output.
    pki_core::CryptoProvider::rust_crypto()
        .install_default()
        .expect("only the deterministic provider is installed in tests");
    ChaCha20Rng::seed_from_u64(seed)
}

pub fn root_at(cn: &str, at: OffsetDateTime, seed: u64) -> CertificateAuthority {
    CertificateAuthority::generate_root(
        cn,
        KeyAlgorithm::EcdsaP256,
        at,
        Duration::days(790),
        &mut rng(seed),
    )
    .unwrap()
}

pub fn new_root(cn: &str, seed: u64) -> CertificateAuthority {
    root_at(cn, NOW, seed)
}

pub fn intermediate(
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

pub fn leaf_with(
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

pub fn server_leaf(ca: &CertificateAuthority, seed: u64) -> Certificate {
    leaf_with(
        ca,
        Profile::Server,
        &["web.ns.svc"],
        &["10.0.0.1"],
        NOW,
        seed,
    )
}

pub fn opts_at(time: OffsetDateTime) -> VerifyOptions {
    VerifyOptions::new(time, Purpose::ServerAuth)
}

pub fn opts() -> VerifyOptions {
    opts_at(NOW + Duration::days(1))
}

pub fn named(name: ExpectedName) -> VerifyOptions {
    let mut o = opts();
    o.name = Some(name);
    o
}

pub fn dns(name: &str) -> ExpectedName {
    ExpectedName::Dns(name.to_owned())
}

pub fn bundle(certs: &[&Certificate]) -> Bundle {
    Bundle::from_certs(certs.iter().map(|c| (*c).clone()))
}

/// The service-CA rotation: the new CA has the old CA's subject and a new
/// key. Bridge A (old CA signed by the new key) joins the bundle; bridge B
/// (new CA signed by the old key) follows new leaves in serving chains.
pub struct Rotation {
    pub old: CertificateAuthority,
    pub new: CertificateAuthority,
    pub bridge_a: Certificate,
    pub bridge_b: Certificate,
    pub old_leaf: Certificate,
    pub new_leaf: Certificate,
    pub rotated_at: OffsetDateTime,
}

pub fn rotation() -> Rotation {
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
