//! The operating system's randomness, as callers pass it.

/// The operating system's random number generator (`getrandom`), as the CLI
/// and the C ABI pass it to every function that takes an RNG.
///
/// pki-core never draws randomness of its own: every function takes an RNG.
/// Under the RustCrypto provider its output is a function of the RNG's
/// stream, so a seeded RNG gives the same keys, serials and certificates
/// every time; under the ring provider (the default with the `ring`
/// feature) EC keys and signatures draw the operating system's randomness
/// through ring instead (see [`crate::CryptoProvider`]).
pub type OsRng = rand_core::UnwrapErr<getrandom::SysRng>;

/// The operating system's RNG.
pub fn os_rng() -> OsRng {
    rand_core::UnwrapErr(getrandom::SysRng)
}
