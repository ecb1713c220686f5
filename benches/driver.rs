//! The storage overhead of a controller step: `Driver::step` on a signer
//! with 1,000 leaves and nothing due (load, decode, plan, no write), side by
//! side with a bare `plan` on the already loaded document, so the ratio
//! between them is the cost of the store (reading and decoding files, or
//! an etcd round trip when `PKI_BENCH_ETCD` names a running server, e.g.
//! `PKI_BENCH_ETCD=etcd://127.0.0.1:2379/bench`).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use pki_rotate::{
    Document, Driver, Engine, FsStore, SignerEngine, SignerInput, SignerState, Store,
};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::hint::black_box;
use time::Duration;

#[path = "support/signer.rs"]
mod support;

use support::{T0, signer_with_leaves};

const LEAVES: usize = 1_000;

fn bench(c: &mut Criterion) {
    let doc = signer_with_leaves(LEAVES);
    // A month later: nothing is due (leaves refresh at 80% of a year).
    let now = T0 + Duration::days(30);
    let input = SignerInput::default();
    assert!(SignerEngine::plan(&doc, &input, now).unwrap().is_empty());

    let dir = tempfile::tempdir().unwrap();
    let fs = FsStore::open_or_create(dir.path()).unwrap();
    Driver::new(&fs)
        .create::<SignerEngine>("signer", &doc)
        .unwrap();

    let mut group = c.benchmark_group("controller step, 1,000 leaves, nothing due");
    group.sample_size(20);
    group.bench_function("bare plan on the loaded document", |b| {
        b.iter(|| black_box(SignerEngine::plan(&doc, &input, now).unwrap()))
    });
    // Where a step's time goes: reading the files, then decoding them.
    group.bench_function("FsStore get (read the files)", |b| {
        b.iter(|| black_box(fs.get("signer").unwrap().unwrap()))
    });
    let (files, _) = fs.get("signer").unwrap().unwrap();
    group.bench_function("decode the files into the document", |b| {
        b.iter(|| black_box(SignerState::from_files(black_box(&files)).unwrap()))
    });
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    group.bench_function("driver step over FsStore", |b| {
        b.iter(|| {
            let step = Driver::new(&fs)
                .step::<SignerEngine, _>("signer", &input, now, &mut rng)
                .unwrap();
            assert!(!step.changed);
            black_box(step)
        })
    });
    if let Ok(url) = std::env::var("PKI_BENCH_ETCD") {
        let etcd = pki_etcd::EtcdStore::from_url(&url).unwrap();
        if etcd.get("signer").unwrap().is_none() {
            Driver::new(&etcd)
                .create::<SignerEngine>("signer", &doc)
                .unwrap();
        }
        group.bench_function("EtcdStore get (one snapshot read)", |b| {
            b.iter(|| black_box(etcd.get("signer").unwrap().unwrap()))
        });
        group.bench_function("driver step over EtcdStore", |b| {
            b.iter(|| {
                let step = Driver::new(&etcd)
                    .step::<SignerEngine, _>("signer", &input, now, &mut rng)
                    .unwrap();
                assert!(!step.changed);
                black_box(step)
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
