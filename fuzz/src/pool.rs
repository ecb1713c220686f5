//! The pool: a deterministic set of valid certificates made with
//! pki-core's own issuance (roots, intermediates, cross-signed bridges,
//! leaves), built once per process from a seeded ChaCha20 RNG.

use super::{NOW, SEED};
use pki_core::{
    Certificate, CertificateAuthority, CertificateParams, KeyAlgorithm, PrivateKey, Profile,
    cross_sign,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::sync::OnceLock;
use time::{Duration, OffsetDateTime};

/// A pool certificate with a human label (for debugging reproducers).
#[derive(Clone, Debug)]
pub struct PoolCert {
    /// What it is, e.g. `bridge-a` or `leaf-under-intermediate`.
    pub label: &'static str,
    /// The certificate.
    pub cert: Certificate,
}

/// Valid certificates and the P-256 keys that signed them.
pub struct Pool {
    /// Certificates; index 0 is a server leaf, then the others in no
    /// meaningful order.
    pub certs: Vec<PoolCert>,
    /// P-256 keys of the pool (CA keys first) for re-signing mutated TBS.
    pub p256_keys: Vec<(&'static str, p256::ecdsa::SigningKey)>,
    /// Private keys of the pool in pki-core form (for the corpus).
    pub keys: Vec<(&'static str, PrivateKey)>,
}

impl Pool {
    /// The certificate at `i` modulo the pool size.
    pub fn cert(&self, i: u8) -> &Certificate {
        &self.certs[usize::from(i) % self.certs.len()].cert
    }
}

fn p256(key: &PrivateKey) -> p256::ecdsa::SigningKey {
    use p256::pkcs8::DecodePrivateKey;
    p256::ecdsa::SigningKey::from_pkcs8_der(&key.to_pkcs8_der().expect("pkcs8"))
        .expect("pool key is P-256")
}

fn intermediate(
    parent: &CertificateAuthority,
    cn: &str,
    path_len: Option<u8>,
    at: OffsetDateTime,
    lifetime: Duration,
    rng: &mut ChaCha20Rng,
) -> CertificateAuthority {
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, rng).expect("key");
    let params = CertificateParams::new(Profile::IntermediateCa { path_len }, cn, at, lifetime)
        .expect("params");
    let cert = parent
        .issue(&params, &key.public_key().expect("spki"), rng)
        .expect("intermediate");
    CertificateAuthority::new(cert, key).expect("ca")
}

struct LeafSpec<'a> {
    profile: Profile,
    cn: &'a str,
    dns: &'a [&'a str],
    ips: &'a [&'a str],
    at: OffsetDateTime,
    lifetime: Duration,
}

fn leaf(
    ca: &CertificateAuthority,
    spec: &LeafSpec<'_>,
    key: &PrivateKey,
    rng: &mut ChaCha20Rng,
) -> Certificate {
    let mut p =
        CertificateParams::new(spec.profile, spec.cn, spec.at, spec.lifetime).expect("params");
    p.dns_names = spec.dns.iter().map(|s| s.to_string()).collect();
    p.ip_addresses = spec.ips.iter().map(|s| s.parse().expect("ip")).collect();
    ca.issue(&p, &key.public_key().expect("spki"), rng)
        .expect("leaf")
}

fn build_pool() -> Pool {
    let mut rng = ChaCha20Rng::seed_from_u64(SEED);
    let rng = &mut rng;
    let p = KeyAlgorithm::EcdsaP256;
    let rotated_at = NOW + Duration::days(395);

    // The service-CA rotation: old CA, new CA with the same subject, and
    // the two bridges.
    let old = CertificateAuthority::generate_root("service-ca", p, NOW, Duration::days(790), rng)
        .expect("root");
    let new_key = PrivateKey::generate(p, rng).expect("key");
    let mut params = CertificateParams::new(
        Profile::RootCa,
        "service-ca",
        rotated_at,
        Duration::days(790),
    )
    .expect("params");
    params.subject = old.cert.subject().clone();
    let new = CertificateAuthority::new(params.self_signed(&new_key, rng).expect("root"), new_key)
        .expect("ca");
    let bridge_a =
        cross_sign(&old.cert, &new, rotated_at + Duration::days(395), rng).expect("bridge a");
    let bridge_b = cross_sign(&new.cert, &old, old.cert.not_after(), rng).expect("bridge b");

    // A two-level hierarchy whose first intermediate is also cross-signed
    // by the service CA, and whose second violates the pathLenConstraint.
    let other =
        CertificateAuthority::generate_root("other-root", p, NOW, Duration::days(3650), rng)
            .expect("root");
    let issuing = intermediate(
        &other,
        "issuing-ca",
        Some(0),
        NOW,
        Duration::days(1825),
        rng,
    );
    let sub = intermediate(
        &issuing,
        "sub-issuing-ca",
        None,
        NOW,
        Duration::days(1000),
        rng,
    );
    let issuing_x = cross_sign(&issuing.cert, &old, old.cert.not_after(), rng).expect("cross");

    // RSA: a 2048-bit root, a P-256 intermediate signed with RSA, and a leaf
    // carrying the RSA key (keyEncipherment).
    let rsa_root = CertificateAuthority::generate_root(
        "rsa-root",
        KeyAlgorithm::Rsa2048,
        NOW,
        Duration::days(3650),
        rng,
    )
    .expect("rsa root");
    let rsa_issuing = intermediate(
        &rsa_root,
        "rsa-issuing",
        None,
        NOW,
        Duration::days(1825),
        rng,
    );

    let k_web = PrivateKey::generate(p, rng).expect("key");
    let k_new = PrivateKey::generate(p, rng).expect("key");
    let k_api = PrivateKey::generate(p, rng).expect("key");
    let k_client = PrivateKey::generate(p, rng).expect("key");
    let year = Duration::days(365);
    let web = leaf(
        &old,
        &LeafSpec {
            profile: Profile::Server,
            cn: "web",
            dns: &["web.ns.svc", "web.ns.svc.cluster.local"],
            ips: &["10.0.0.1"],
            at: NOW,
            lifetime: year,
        },
        &k_web,
        rng,
    );
    let web_new = leaf(
        &new,
        &LeafSpec {
            profile: Profile::ServerClient,
            cn: "web",
            dns: &["web.ns.svc", "*.apps.example.com"],
            ips: &[],
            at: rotated_at,
            lifetime: year,
        },
        &k_new,
        rng,
    );
    let api = leaf(
        &issuing,
        &LeafSpec {
            profile: Profile::Server,
            cn: "api.example.com",
            dns: &["api.example.com"],
            ips: &["::1", "192.168.1.10"],
            at: NOW,
            lifetime: year,
        },
        &k_api,
        rng,
    );
    let client = leaf(
        &sub,
        &LeafSpec {
            profile: Profile::Client,
            cn: "client",
            dns: &["client.example.com"],
            ips: &[],
            at: NOW,
            lifetime: year,
        },
        &k_client,
        rng,
    );
    let rsa_leaf = leaf(
        &rsa_issuing,
        &LeafSpec {
            profile: Profile::Server,
            cn: "rsa.example.com",
            dns: &["rsa.example.com"],
            ips: &["127.0.0.1"],
            at: NOW,
            lifetime: year,
        },
        rsa_root.key.private_key().expect("an in-process key"),
        rng,
    );
    let short = leaf(
        &old,
        &LeafSpec {
            profile: Profile::Server,
            cn: "short",
            dns: &["short.ns.svc"],
            ips: &[],
            at: NOW + Duration::days(1),
            lifetime: Duration::hours(1),
        },
        &k_web,
        rng,
    );

    let certs = vec![
        PoolCert {
            label: "leaf-old-ca",
            cert: web,
        },
        PoolCert {
            label: "service-ca-old",
            cert: old.cert.clone(),
        },
        PoolCert {
            label: "service-ca-new",
            cert: new.cert.clone(),
        },
        PoolCert {
            label: "bridge-a-old-by-new",
            cert: bridge_a,
        },
        PoolCert {
            label: "bridge-b-new-by-old",
            cert: bridge_b,
        },
        PoolCert {
            label: "leaf-new-ca",
            cert: web_new,
        },
        PoolCert {
            label: "other-root",
            cert: other.cert.clone(),
        },
        PoolCert {
            label: "issuing-ca-pathlen0",
            cert: issuing.cert.clone(),
        },
        PoolCert {
            label: "issuing-ca-cross-signed",
            cert: issuing_x,
        },
        PoolCert {
            label: "sub-issuing-ca",
            cert: sub.cert.clone(),
        },
        PoolCert {
            label: "leaf-issuing-ca",
            cert: api,
        },
        PoolCert {
            label: "client-leaf-sub-ca",
            cert: client,
        },
        PoolCert {
            label: "rsa-root",
            cert: rsa_root.cert.clone(),
        },
        PoolCert {
            label: "rsa-issuing",
            cert: rsa_issuing.cert.clone(),
        },
        PoolCert {
            label: "rsa-leaf",
            cert: rsa_leaf,
        },
        PoolCert {
            label: "short-lived-leaf",
            cert: short,
        },
    ];
    // Every CA here was made in this process.
    let in_process = |key: &pki_core::CaKey| key.private_key().expect("an in-process key").clone();
    let keys = vec![
        ("service-ca-old", in_process(&old.key)),
        ("service-ca-new", in_process(&new.key)),
        ("other-root", in_process(&other.key)),
        ("issuing-ca", in_process(&issuing.key)),
        ("sub-issuing-ca", in_process(&sub.key)),
        ("rsa-issuing", in_process(&rsa_issuing.key)),
        ("leaf-web", k_web),
        ("leaf-new", k_new),
        ("leaf-api", k_api),
        ("leaf-client", k_client),
        ("rsa-root", in_process(&rsa_root.key)),
    ];
    let p256_keys = keys
        .iter()
        .filter(|(_, k)| k.algorithm() == KeyAlgorithm::EcdsaP256)
        .map(|(l, k)| (*l, p256(k)))
        .collect();
    Pool {
        certs,
        p256_keys,
        keys,
    }
}

/// The pool, built on first use.
pub fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(build_pool)
}
