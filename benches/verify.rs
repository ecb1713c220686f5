//! Path validation costs: one chain; the 4-cell rotation matrix over 1,000
//! leaves with and without the signature cache (side by side, so the ratio
//! is meaningful on a noisy machine); bundle PEM parsing.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use pki_core::{
    Bundle, Certificate, CertificateAuthority, CertificateParams, KeyAlgorithm, Purpose,
    SignatureCache, VerifyOptions, cross_sign, verify_chain, verify_chain_cached,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::hint::black_box;
use time::{Duration, OffsetDateTime, macros::datetime};

// 2026-01-01: issuance of the old CA; the new one comes 400 days later.
const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

struct Rotation {
    old_bundle: Bundle,
    new_bundle: Bundle,
    bridge_b: Certificate,
    old_leaves: Vec<Certificate>,
    new_leaves: Vec<Certificate>,
    at: OffsetDateTime,
}

fn leaves(
    ca: &CertificateAuthority,
    n: usize,
    at: OffsetDateTime,
    rng: &mut ChaCha20Rng,
) -> Vec<Certificate> {
    // One key for all leaves: the bench measures verification, not key generation.
    let key = pki_core::PrivateKey::generate(KeyAlgorithm::EcdsaP256, rng).unwrap();
    let spki = key.public_key().unwrap();
    (0..n)
        .map(|i| {
            let mut p =
                CertificateParams::new(pki_core::Profile::Server, "svc", at, Duration::days(365))
                    .unwrap();
            p.dns_names = vec![format!("svc{i}.ns.svc")];
            ca.issue(&p, &spki, rng).unwrap()
        })
        .collect()
}

fn rotation(n: usize) -> Rotation {
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
        old_bundle: Bundle::from_certs([old.cert.clone()]),
        new_bundle: Bundle::from_certs([new.cert.clone(), bridge_a]),
        bridge_b,
        old_leaves: leaves(&old, n, T0 + Duration::days(300), &mut rng),
        new_leaves: leaves(&new, n, t1, &mut rng),
        at: t1 + Duration::days(1),
    }
}

fn matrix(r: &Rotation, cache: Option<&SignatureCache>) -> usize {
    let opts = VerifyOptions::new(r.at, Purpose::ServerAuth);
    let bridge = std::slice::from_ref(&r.bridge_b);
    let mut ok = 0;
    for bundle in [&r.old_bundle, &r.new_bundle] {
        for (leaf, chain) in r
            .old_leaves
            .iter()
            .map(|l| (l, &[][..]))
            .chain(r.new_leaves.iter().map(|l| (l, bridge)))
        {
            let result = match cache {
                Some(c) => verify_chain_cached(leaf, chain, bundle, &opts, c),
                None => verify_chain(leaf, chain, bundle, &opts),
            };
            ok += usize::from(result.is_ok());
        }
    }
    ok
}

fn bench(c: &mut Criterion) {
    let small = rotation(1);
    let opts = VerifyOptions::new(small.at, Purpose::ServerAuth);
    c.bench_function("verify one chain (leaf + bridge B -> old root)", |b| {
        b.iter(|| {
            verify_chain(
                black_box(&small.new_leaves[0]),
                std::slice::from_ref(&small.bridge_b),
                &small.old_bundle,
                &opts,
            )
            .unwrap()
        })
    });

    let big = rotation(1000);
    assert_eq!(matrix(&big, None), 4000, "every cell must verify");
    let mut group = c.benchmark_group("4-cell matrix over 1,000 leaves");
    group.sample_size(10);
    group.bench_function("without signature cache", |b| {
        b.iter(|| matrix(black_box(&big), None))
    });
    group.bench_function("with signature cache (fresh per run)", |b| {
        b.iter(|| matrix(black_box(&big), Some(&SignatureCache::new())))
    });
    group.finish();

    let pem: String = big
        .old_leaves
        .iter()
        .take(100)
        .map(Certificate::to_pem)
        .collect();
    c.bench_function("parse a 100-certificate PEM bundle", |b| {
        b.iter(|| Bundle::from_pem(black_box(pem.as_bytes())).unwrap().len())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
