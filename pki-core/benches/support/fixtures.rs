//! The workloads of issue 8's pki-core rows, shared by the criterion
//! benches (`rows.rs`) and the side-by-side runner (`compare.rs`).
//!
//! A service-CA rotation: an old root, a new root with the same subject,
//! bridge A (old CA signed by the new key, in the new bundle) and bridge B
//! (new CA signed by the old key, served after new leaves).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use pki_core::{
    Bundle, Certificate, CertificateAuthority, CertificateParams, KeyAlgorithm, PrivateKey,
    Profile, Purpose, VerifyOptions, cross_sign, verify_chain,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use time::{Duration, OffsetDateTime, macros::datetime};

/// 2026-01-01: issuance of the old CA; the new one comes 400 days later.
pub const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

/// Number of leaves of every row.
pub const LEAVES: usize = 1000;

/// Everything the matrix and the PEM rows read.
pub struct Rotation {
    pub old_root: Certificate,
    pub new_root: Certificate,
    pub bridge_a: Certificate,
    pub bridge_b: Certificate,
    pub old_leaves: Vec<Certificate>,
    pub new_leaves: Vec<Certificate>,
    /// The verification time: one day after the rotation.
    pub at: OffsetDateTime,
}

impl Rotation {
    /// The bundle clients had before the rotation.
    pub fn old_bundle(&self) -> Bundle {
        Bundle::from_certs([self.old_root.clone()])
    }

    /// The bundle clients have after it: the new root and bridge A.
    pub fn new_bundle(&self) -> Bundle {
        Bundle::from_certs([self.new_root.clone(), self.bridge_a.clone()])
    }
}

fn leaf_params(i: usize, at: OffsetDateTime) -> CertificateParams {
    let mut p = CertificateParams::new(Profile::Server, "svc", at, Duration::days(365)).unwrap();
    p.dns_names = vec![format!("svc{i}.ns.svc")];
    p
}

/// `n` leaves of `ca` sharing one key: the matrix measures verification,
/// not key generation.
fn leaves(
    ca: &CertificateAuthority,
    n: usize,
    at: OffsetDateTime,
    rng: &mut ChaCha20Rng,
) -> Vec<Certificate> {
    let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, rng).unwrap();
    let spki = key.public_key().unwrap();
    (0..n)
        .map(|i| ca.issue(&leaf_params(i, at), &spki, rng).unwrap())
        .collect()
}

/// The rotation with `n` leaves on each side.
pub fn rotation(n: usize) -> Rotation {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let old = CertificateAuthority::generate_root(
        "bench-ca",
        KeyAlgorithm::EcdsaP256,
        T0,
        Duration::days(790),
        &mut rng,
    )
    .unwrap();
    let t1 = T0 + Duration::days(400);
    let new = CertificateAuthority::generate_root(
        "bench-ca",
        KeyAlgorithm::EcdsaP256,
        t1,
        Duration::days(790),
        &mut rng,
    )
    .unwrap();
    let bridge_a = cross_sign(&old.cert, &new, old.cert.not_after(), &mut rng).unwrap();
    let bridge_b = cross_sign(&new.cert, &old, old.cert.not_after(), &mut rng).unwrap();
    Rotation {
        old_leaves: leaves(&old, n, T0 + Duration::days(300), &mut rng),
        new_leaves: leaves(&new, n, t1, &mut rng),
        old_root: old.cert,
        new_root: new.cert,
        bridge_a,
        bridge_b,
        at: t1 + Duration::days(1),
    }
}

/// The signing CA of the issuance row.
pub fn issuing_ca() -> CertificateAuthority {
    CertificateAuthority::generate_root(
        "bench-ca",
        KeyAlgorithm::EcdsaP256,
        T0,
        Duration::days(790),
        &mut ChaCha20Rng::seed_from_u64(2),
    )
    .unwrap()
}

/// Row 1: `n` serving leaves, each with its own new P-256 key, with the
/// process's provider (ring by default: keys and signatures from the
/// operating system; the seeded RNG draws the serials).
pub fn issue_leaves(ca: &CertificateAuthority, n: usize, seed: u64) -> Vec<Certificate> {
    issue_with(ca, n, &mut ChaCha20Rng::seed_from_u64(seed))
}

fn issue_with<R: rand_core::CryptoRng + 'static>(
    ca: &CertificateAuthority,
    n: usize,
    rng: &mut R,
) -> Vec<Certificate> {
    (0..n)
        .map(|i| {
            let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, rng).unwrap();
            ca.issue(&leaf_params(i, T0), &key.public_key().unwrap(), rng)
                .unwrap()
        })
        .collect()
}

/// Row 1 as the CLI and the C ABI issue: through the operating system's
/// RNG (serials included).
pub fn issue_leaves_os(ca: &CertificateAuthority, n: usize) -> Vec<Certificate> {
    issue_with(ca, n, &mut pki_core::os_rng())
}

/// The DER of every certificate of a rotation: what a pre-flight loads.
pub struct RotationDer {
    pub old_root: Vec<u8>,
    pub new_root: Vec<u8>,
    pub bridge_a: Vec<u8>,
    pub bridge_b: Vec<u8>,
    pub old_leaves: Vec<Vec<u8>>,
    pub new_leaves: Vec<Vec<u8>>,
    pub at: OffsetDateTime,
}

impl Rotation {
    /// The DER of every certificate.
    pub fn to_der(&self) -> RotationDer {
        let der = |c: &Certificate| c.der().to_vec();
        RotationDer {
            old_root: der(&self.old_root),
            new_root: der(&self.new_root),
            bridge_a: der(&self.bridge_a),
            bridge_b: der(&self.bridge_b),
            old_leaves: self.old_leaves.iter().map(der).collect(),
            new_leaves: self.new_leaves.iter().map(der).collect(),
            at: self.at,
        }
    }
}

/// Row 2: the four cells (old/new serving chain × old/new bundle) for every
/// leaf, with the default API. Each run starts from DER, as a pre-flight
/// that loads the chains and bundles does: its certificates and bundles
/// are new, so no verification memoised by an earlier run (a
/// certificate's verifying key, a bundle's signature cache) counts (the Go
/// side parses the same DER in each run too).
/// Returns the number of chains that verified (all of them).
pub fn matrix(r: &RotationDer) -> usize {
    let parse = |der: &Vec<u8>| Certificate::from_der(der).unwrap();
    let opts = VerifyOptions::new(r.at, Purpose::ServerAuth);
    let old_bundle = Bundle::from_certs([parse(&r.old_root)]);
    let new_bundle = Bundle::from_certs([parse(&r.new_root), parse(&r.bridge_a)]);
    let bridge = [parse(&r.bridge_b)];
    let old_leaves: Vec<Certificate> = r.old_leaves.iter().map(parse).collect();
    let new_leaves: Vec<Certificate> = r.new_leaves.iter().map(parse).collect();
    let mut ok = 0;
    for bundle in [&old_bundle, &new_bundle] {
        for leaf in &old_leaves {
            ok += usize::from(verify_chain(leaf, &[], bundle, &opts).is_ok());
        }
        for leaf in &new_leaves {
            ok += usize::from(verify_chain(leaf, &bridge, bundle, &opts).is_ok());
        }
    }
    ok
}

/// The PEM text of row 3: the old leaves, one block each.
pub fn bundle_pem(r: &Rotation) -> String {
    r.old_leaves.iter().map(Certificate::to_pem).collect()
}

/// Row 3: parse the bundle. Returns its size.
pub fn parse(pem: &str) -> usize {
    Bundle::from_pem(pem.as_bytes()).unwrap().len()
}
