//! The operating system's randomness, as callers pass it.

/// The operating system's random number generator (`getrandom`), as the CLI
/// and the C ABI pass it to every function that takes an RNG.
///
/// pki-core never draws randomness of its own: every function takes an RNG
/// and its output is a function of the RNG's stream, so a seeded RNG gives
/// the same keys, serials and certificates every time. This RNG's stream
/// cannot be repeated, and with the `ring` feature EC keys generated and
/// certificates signed through it use ring, which draws on the same
/// operating-system randomness itself and computes several times faster
/// than RustCrypto. Without the feature, or with any other RNG, the
/// RustCrypto path is taken.
pub type OsRng = rand_core::UnwrapErr<getrandom::SysRng>;

/// The operating system's RNG.
pub fn os_rng() -> OsRng {
    rand_core::UnwrapErr(getrandom::SysRng)
}

/// Whether `R` is [`OsRng`].
#[cfg(feature = "ring")]
pub(crate) fn is_os_rng<R: ?Sized + 'static>() -> bool {
    std::any::TypeId::of::<R>() == std::any::TypeId::of::<OsRng>()
}
