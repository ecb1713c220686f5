//! Criterion benches for the pki-core rows of issue 8: issuing 1,000 P-256
//! serving leaves, the 4-cell rotation trust matrix over 1,000 leaves
//! (4,000 chains) with the default API, and parsing a 1,000-certificate
//! PEM bundle. `benches/go/compare.sh` at the repository root runs the same
//! work side by side with Go's crypto/x509.
//!
//! Run with `cargo bench -p pki-core --bench rows`: default features and
//! the default crypto provider (ring).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "support/fixtures.rs"]
mod fixtures;

use criterion::{Criterion, criterion_group, criterion_main};
use fixtures::LEAVES;
use std::hint::black_box;

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("issue-8");
    group.sample_size(10);

    let ca = fixtures::issuing_ca();
    let mut seed = 0;
    group.bench_function("issue 1,000 P-256 serving leaves", |b| {
        b.iter(|| {
            seed += 1;
            fixtures::issue_leaves(black_box(&ca), LEAVES, seed).len()
        })
    });

    let r = fixtures::rotation(LEAVES);
    let der = r.to_der();
    assert_eq!(fixtures::matrix(&der), 4 * LEAVES, "every cell must verify");
    group.bench_function("4-cell trust matrix over 1,000 leaves", |b| {
        b.iter(|| fixtures::matrix(black_box(&der)))
    });

    let pem = fixtures::bundle_pem(&r);
    group.bench_function("parse a 1,000-certificate PEM bundle", |b| {
        b.iter(|| fixtures::parse(black_box(&pem)))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
