//! A signer with many issued leaves, shared by the root benches.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use pki_rotate::{Engine, LeafRequest, SignerEngine, SignerInput, SignerPolicy, SignerState};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use time::{OffsetDateTime, macros::datetime};

/// 2026-01-01: the signer is created and every leaf issued then.
pub const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

/// The name and DNS name of leaf `i`.
pub fn leaf_name(i: usize) -> (String, String) {
    (format!("svc{i}"), format!("svc{i}.ns.svc"))
}

/// A signer created at [`T0`] with `n` serving leaves issued then, each
/// with its own key (one engine step, as a controller's first run).
pub fn signer_with_leaves(n: usize) -> SignerState {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let mut s = SignerState::new("service-ca", SignerPolicy::default(), T0, &mut rng).unwrap();
    for i in 0..n {
        let (name, dns) = leaf_name(i);
        s.request_leaf(&name, LeafRequest::server(vec![dns]))
            .unwrap();
    }
    SignerEngine::step(&s, &SignerInput::default(), T0, &mut rng)
        .unwrap()
        .into_document()
}
