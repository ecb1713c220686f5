//! Criterion benches of the performance rows that need the engines, the
//! store or the CLI (pki-core's rows: `cargo bench -p pki-core --bench
//! rows`; the side-by-side ratios to Go and the memory row:
//! `benches/go/compare.sh`).
//!
//! - a no-op reconcile (plan and apply, nothing due) of 10,000 leaves;
//! - `pki rotate` with nothing to do on a directory store of 1,000 leaves;
//! - `pki issue` of one more leaf into a directory store of 1,000 leaves.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

#[path = "support/signer.rs"]
mod support;

use criterion::{Criterion, criterion_group, criterion_main};
use pki_rotate::{Driver, Engine, FsStore, SignerEngine, SignerInput};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::hint::black_box;
use std::process::{Command, Stdio};
use support::{T0, signer_with_leaves};
use time::Duration;

/// The `pki` binary this bench was built with.
const PKI: &str = env!("CARGO_BIN_EXE_pki");

fn reconcile(c: &mut Criterion) {
    let doc = signer_with_leaves(10_000);
    // A month after issuance: nothing is due.
    let now = T0 + Duration::days(30);
    let input = SignerInput::default();
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let mut group = c.benchmark_group("reconcile");
    group.sample_size(20);
    group.bench_function("no-op reconcile, 10,000 leaves", |b| {
        b.iter(|| {
            let outcome = SignerEngine::step(&doc, &input, now, &mut rng).unwrap();
            assert!(!outcome.changed());
            black_box(outcome.next_wake)
        })
    });
    group.finish();
}

fn pki(args: &[&str]) {
    let status = Command::new(PKI)
        .args(args)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "pki {args:?}: {status}");
}

fn cli(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let store_arg = store.to_str().unwrap();
    let s = FsStore::open_or_create(&store).unwrap();
    // With the summary `pki init` keeps, as a store the CLI made has.
    Driver::new(&s)
        .create_at::<SignerEngine>("signer", &signer_with_leaves(1_000), T0)
        .unwrap();
    let now = "2026-02-01T00:00:00Z";

    let mut group = c.benchmark_group("cli");
    group.sample_size(20);
    group.bench_function("pki rotate, nothing to do, 1,000 leaves", |b| {
        b.iter(|| pki(&["rotate", store_arg, "--now", now, "--quiet"]))
    });
    let mut next = 0u32;
    group.bench_function("pki issue of one more leaf, 1,000 leaves", |b| {
        b.iter(|| {
            next += 1;
            let name = format!("extra{next}");
            let dns = format!("{name}.ns.svc");
            pki(&["issue", store_arg, &name, "--dns", &dns, "--now", now]);
        })
    });
    group.finish();
}

criterion_group!(benches, reconcile, cli);
criterion_main!(benches);
