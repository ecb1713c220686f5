//! A key ring step as a controller runs it: the driver over a directory
//! store (load, plan, apply, compare-and-swap), one forced rotation (a new
//! P-256 active key, the old one accepted for the grace period) and one
//! step with nothing due.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use criterion::{Criterion, criterion_group, criterion_main};
use pki_rotate::{Driver, FsStore, KeyRing, KeyRingEngine, KeyRingInput, KeyRingPolicy, keyring};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::hint::black_box;
use time::{Duration, macros::datetime};

fn bench(c: &mut Criterion) {
    let t0 = datetime!(2026-01-01 00:00 UTC);
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let dir = tempfile::tempdir().unwrap();
    let store = FsStore::open_or_create(dir.path()).unwrap();
    let ring = KeyRing::new(KeyRingPolicy::default(), t0, &mut rng).unwrap();
    Driver::new(&store)
        .create::<KeyRingEngine>(&keyring::KEY, &ring)
        .unwrap();

    let mut group = c.benchmark_group("key ring step");
    group.sample_size(20);
    // Each forced rotation has a reason of its own, a day after the last,
    // so that the previous keys' grace ends and the ring stays small.
    let mut day = 0;
    group.bench_function("forced rotation over FsStore", |b| {
        b.iter(|| {
            day += 1;
            let input = KeyRingInput::forced(format!("drill {day}"));
            let now = t0 + Duration::days(day);
            let step = Driver::new(&store)
                .step::<KeyRingEngine, _>(&keyring::KEY, &input, now, &mut rng)
                .unwrap();
            assert!(step.changed);
            black_box(step)
        })
    });
    let now = t0 + Duration::days(day + 1);
    group.bench_function("nothing due over FsStore", |b| {
        b.iter(|| {
            let step = Driver::new(&store)
                .step::<KeyRingEngine, _>(&keyring::KEY, &KeyRingInput::default(), now, &mut rng)
                .unwrap();
            black_box(step)
        })
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
