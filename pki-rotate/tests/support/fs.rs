//! A signer in a directory store, the way the store's hardening and
//! recovery tests drive it: created, stepped once, rotated, and its
//! generation directories listed.

#![allow(dead_code, clippy::unwrap_used)]

use pki_rotate::{
    Driver, FsStore, LeafRequest, RotateError, SignerEngine, SignerInput, SignerPolicy, SignerState,
};
use std::path::Path;
use time::{Duration, OffsetDateTime};

pub use super::seed::{T0, rng};

pub const KEY: &str = "signer";

pub fn initial(seed: u64) -> SignerState {
    let mut s =
        SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng(seed)).unwrap();
    s.request_leaf("web", LeafRequest::server(vec!["web.ns.svc".into()]))
        .unwrap();
    let plan = pki_rotate::signer::plan(&s, &SignerInput::default(), T0).unwrap();
    pki_rotate::signer::apply(&s, plan, &mut rng(seed + 1))
        .unwrap()
        .into_document()
}

pub fn create(dir: &Path, s: &SignerState) -> FsStore {
    let store = FsStore::open_or_create(dir).unwrap();
    Driver::new(&store).create::<SignerEngine>(KEY, s).unwrap();
    store
}

pub fn rotation_time(s: &SignerState) -> OffsetDateTime {
    s.rotation_due_at(&s.policy) + Duration::days(1)
}

pub fn step(
    store: &FsStore,
    input: &SignerInput,
    now: OffsetDateTime,
    seed: u64,
) -> Result<pki_rotate::Step<SignerState, pki_rotate::Event>, RotateError> {
    Driver::new(store)
        .with_max_attempts(1)
        .step::<SignerEngine, _>(KEY, input, now, &mut rng(seed))
}

/// A store after one rotation: bridge B is on every serving chain.
pub fn rotated(dir: &Path, seed: u64) -> (FsStore, SignerState, OffsetDateTime) {
    let s = initial(seed);
    let store = create(dir, &s);
    let now = rotation_time(&s);
    let after = step(&store, &SignerInput::default(), now, seed + 2)
        .unwrap()
        .document;
    assert!(after.bridge.is_some());
    (store, after, now)
}

pub fn generations(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(".gen-") || n.starts_with(".data.tmp"))
        .collect();
    names.sort();
    names
}
