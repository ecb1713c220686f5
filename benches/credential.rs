//! A credential step as a controller runs it: the loop of `pki cred
//! reconcile` (and of an embedder of `pki_document_step` (with `PKI_KIND_CRED`)), that is
//! `driver::advance` through the driver over a directory store (load,
//! plan, apply, compare-and-swap, one commit per step), the action it asks
//! for, its result reported through the driver, and `advance` again until
//! it says to wait. Three steps, each at the time it is due:
//!
//! - a rotation: the expired credential is kept as old, the mint attempt
//!   recorded, the minted credential committed as current (three commits),
//!   then a wait for the grace period;
//! - the revocation of the old credential once the grace period is over
//!   (one commit), then a wait for the next expiry;
//! - a step with nothing due (no commit).
//!
//! The hooks are in-process functions: the mint returns a new token made
//! from the rotation and attempt numbers, the revoke does nothing. Their
//! cost is excluded, so the figures are pki's own. `pki cred reconcile`
//! adds to them what running its hooks costs: `sh -c CMD` in a process of
//! its own, the mint's output captured in a flushed file, the capture
//! directory's lock.
//!
//! Each commit of a directory store ends with a flush of its filesystem
//! (`syncfs` on Linux), whose cost is mostly the disk's and grows with what
//! other processes wrote to that filesystem meanwhile. The same steps over
//! a [`MemoryStore`] are timed beside them: pki's work without the disk.
//!
//! A rotation and a revocation change the store, so each timed iteration
//! starts from a store of its own, brought to the state before the step by
//! the untimed setup (`iter_batched_ref`, one input per iteration): every
//! iteration commits its steps, none finds them already done.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use criterion::measurement::WallTime;
use criterion::{BatchSize, BenchmarkGroup, Criterion, criterion_group, criterion_main};
use pki_rotate::credential::{
    self, Action, CredentialEngine, CredentialInput, CredentialPolicy, CredentialState, Event,
    Next, WaitReason,
};
use pki_rotate::driver::AdvanceOptions;
use pki_rotate::{CredentialSecret, Driver, FsStore, MemoryStore, Step, Store};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use std::hint::black_box;
use tempfile::TempDir;
use time::{Duration, OffsetDateTime, macros::datetime};

const NAME: &str = "db";
/// Who steps, as the CLI steps with its capture directory's owner.
const OWNER: &str = "bench-controller";

/// OpenShift's cloud-credential-operator: rotated after 30 days, the old
/// credential revoked 10 minutes after its successor's mint.
const POLICY: CredentialPolicy = CredentialPolicy {
    expire: Duration::days(30),
    grace: Duration::minutes(10),
};

/// A store holding the credential, and the directory of a directory
/// store (removed when dropped).
struct Fixture<S> {
    _dir: Option<TempDir>,
    store: S,
}

fn fs_store() -> Fixture<FsStore> {
    let dir = tempfile::tempdir().unwrap();
    let store = FsStore::open_or_create(dir.path()).unwrap();
    Fixture {
        _dir: Some(dir),
        store,
    }
}

fn memory_store() -> Fixture<MemoryStore> {
    Fixture {
        _dir: None,
        store: MemoryStore::new(),
    }
}

/// `empty` with the credential created and first minted at `t0`.
fn minted_at<S: Store>(
    empty: fn() -> Fixture<S>,
    t0: OffsetDateTime,
    rng: &mut ChaCha20Rng,
) -> Fixture<S> {
    let fixture = empty();
    let doc = CredentialState::new(NAME, POLICY, None).unwrap();
    Driver::new(&fixture.store)
        .create::<CredentialEngine>(&credential::key(NAME), &doc)
        .unwrap();
    reconcile(&fixture, t0, rng);
    fixture
}

/// What the CLI's reconcile does for one credential, with in-process
/// hooks: advance, run the action and report its result, until a wait.
/// Returns the last advance (its action is the wait) and how many commits
/// the reconcile made.
fn reconcile<S: Store>(
    fixture: &Fixture<S>,
    now: OffsetDateTime,
    rng: &mut ChaCha20Rng,
) -> (Step<CredentialState, Event>, u32) {
    let driver = Driver::new(&fixture.store);
    let options = AdvanceOptions {
        owner: Some(OWNER),
        max_steps: None,
    };
    let mut commits = 0;
    loop {
        let advanced = pki_rotate::driver::advance(&driver, NAME, options, now, rng).unwrap();
        let ended = advanced
            .advance
            .as_ref()
            .expect("an advance says how it ended");
        commits += ended.steps;
        let report = match &ended.next {
            Next::Act(Action::Wait { .. }) => return (advanced, commits),
            Next::Act(Action::Mint { rotation, attempt }) => CredentialInput::Minted {
                rotation: *rotation,
                attempt: *attempt,
                value: mint_hook(*rotation, *attempt),
            },
            Next::Act(Action::Revoke { rotation, value }) => {
                revoke_hook(value);
                CredentialInput::Revoked {
                    rotation: *rotation,
                }
            }
            other => panic!("unexpected next step {other:?}"),
        };
        let step = driver
            .step::<CredentialEngine, _>(&credential::key(NAME), &report, now, rng)
            .unwrap();
        assert!(step.changed);
        commits += 1;
    }
}

/// The cheapest mint: a token no earlier rotation used.
fn mint_hook(rotation: u64, attempt: u32) -> CredentialSecret {
    CredentialSecret::new(format!("token-{rotation}-{attempt}"))
}

/// The cheapest revoke: nothing to do.
fn revoke_hook(value: &CredentialSecret) {
    black_box(value);
}

/// Checks that a reconcile made `commits` commits and ended waiting for
/// `reason`: the timed iteration did the whole step.
fn check(done: &(Step<CredentialState, Event>, u32), commits: u32, reason: WaitReason) {
    assert_eq!(done.1, commits);
    match done.0.action() {
        Some(Action::Wait { reason: r, .. }) => assert_eq!(*r, reason),
        other => panic!("expected a wait {reason:?}, got {other:?}"),
    }
}

/// The three steps over the stores `empty` makes, named after `store`.
fn steps<S: Store>(
    group: &mut BenchmarkGroup<'_, WallTime>,
    store: &str,
    empty: fn() -> Fixture<S>,
) {
    let t0 = datetime!(2026-01-01 00:00 UTC);
    let expired = t0 + POLICY.expire;
    let grace_over = expired + POLICY.grace;
    let mut rng = ChaCha20Rng::seed_from_u64(1);

    group.bench_function(format!("rotation with mint over {store}"), |b| {
        b.iter_batched_ref(
            || minted_at(empty, t0, &mut ChaCha20Rng::seed_from_u64(2)),
            |fixture| {
                let done = reconcile(fixture, expired, &mut rng);
                check(&done, 3, WaitReason::Grace);
                black_box(done)
            },
            BatchSize::PerIteration,
        )
    });
    group.bench_function(format!("revoke after grace over {store}"), |b| {
        b.iter_batched_ref(
            || {
                let mut rng = ChaCha20Rng::seed_from_u64(3);
                let fixture = minted_at(empty, t0, &mut rng);
                reconcile(&fixture, expired, &mut rng);
                fixture
            },
            |fixture| {
                let done = reconcile(fixture, grace_over, &mut rng);
                check(&done, 1, WaitReason::Expiry);
                assert!(done.0.document.old.is_none());
                black_box(done)
            },
            BatchSize::PerIteration,
        )
    });
    // Nothing changes the store here: one store serves every iteration,
    // and each still loads and checks the document (from disk for a
    // directory store).
    let fixture = minted_at(empty, t0, &mut rng);
    reconcile(&fixture, expired, &mut rng);
    reconcile(&fixture, grace_over, &mut rng);
    let quiet = grace_over + Duration::days(1);
    group.bench_function(format!("nothing due over {store}"), |b| {
        b.iter(|| {
            let done = reconcile(&fixture, quiet, &mut rng);
            check(&done, 0, WaitReason::Expiry);
            black_box(done)
        })
    });
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("credential step");
    group.sample_size(20);
    steps(&mut group, "FsStore", fs_store);
    steps(&mut group, "MemoryStore", memory_store);
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
