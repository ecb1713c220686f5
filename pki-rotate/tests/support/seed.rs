//! Deterministic keys: the seeded RNG every test draws keys and signatures
//! from, the day the tests' documents are made, and CAs made from a seed.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use pki_core::{CertificateAuthority, KeyAlgorithm};
use rand_chacha::ChaCha20Rng;
use rand_core::SeedableRng;
use time::{Duration, OffsetDateTime, macros::datetime};

/// 2026-01-01: the day the signers, sets and rings here are made.
pub const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

pub fn rng(seed: u64) -> ChaCha20Rng {
    // Keys and signatures from this stream: the same seed, the same output.
    pki_core::CryptoProvider::rust_crypto()
        .install_default()
        .expect("only the deterministic provider is installed in tests");
    ChaCha20Rng::seed_from_u64(seed)
}

/// A self-signed P-256 CA `cn`, valid from `T0` for `days`.
pub fn root(cn: &str, days: i64, seed: u64) -> CertificateAuthority {
    CertificateAuthority::generate_root(
        cn,
        KeyAlgorithm::EcdsaP256,
        T0,
        Duration::days(days),
        &mut rng(seed),
    )
    .unwrap()
}
