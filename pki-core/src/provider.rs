//! The crypto provider: which implementation makes keys, signs and verifies,
//! chosen on purpose rather than inferred from the type of an RNG.
//!
//! Like rustls's `CryptoProvider`, a process has one default provider,
//! installed once ([`CryptoProvider::install_default`]) or, when nothing is
//! installed, the build's default: ring when the `ring` feature is on (the
//! default: what `cargo add pki-core` gives), RustCrypto otherwise.
//!
//! - [`CryptoProvider::ring`] generates P-256 and P-384 keys and makes ECDSA
//!   signatures with ring, which draws the operating system's randomness
//!   itself: several times faster, and not repeatable. The RNG a caller
//!   passes still draws serial numbers and RSA keys.
//! - [`CryptoProvider::rust_crypto`] draws everything from the RNG the
//!   caller passes: the same seed gives the same keys, serials and
//!   certificates, which is what tests of determinism install.
//!
//! Verification takes no randomness: both providers accept exactly the same
//! keys and signatures (the RustCrypto parsers decide what a key and a
//! signature are; only the arithmetic differs).

use std::sync::OnceLock;

/// An implementation of the algorithms pki-core uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Backend {
    /// The RustCrypto crates: pure Rust, deterministic in the caller's RNG.
    RustCrypto,
    /// ring (feature `ring`).
    #[cfg(feature = "ring")]
    Ring,
}

/// Which implementation makes keys and signatures, and which verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CryptoProvider {
    signing: Backend,
    verification: Backend,
}

static DEFAULT: OnceLock<CryptoProvider> = OnceLock::new();

impl CryptoProvider {
    /// Everything with the RustCrypto crates, every random value from the
    /// caller's RNG: deterministic for a seeded RNG.
    pub const fn rust_crypto() -> Self {
        CryptoProvider {
            signing: Backend::RustCrypto,
            verification: Backend::RustCrypto,
        }
    }

    /// EC keys, ECDSA signatures and verification with ring; EC keys and
    /// signatures draw the operating system's randomness through ring.
    #[cfg(feature = "ring")]
    pub const fn ring() -> Self {
        CryptoProvider {
            signing: Backend::Ring,
            verification: Backend::Ring,
        }
    }

    /// The default of this build when nothing is installed: ring with the
    /// `ring` feature, RustCrypto without.
    pub const fn build_default() -> Self {
        #[cfg(feature = "ring")]
        {
            Self::ring()
        }
        #[cfg(not(feature = "ring"))]
        {
            Self::rust_crypto()
        }
    }

    /// Makes this provider the process default. Only the first call
    /// installs; a later one returns the provider it was given, as
    /// rustls's does. Install before the first key or signature.
    ///
    /// # Errors
    ///
    /// `Err` holds `self` when another provider was installed first. Installing
    /// the provider that is already installed again is `Ok`.
    pub fn install_default(self) -> Result<(), CryptoProvider> {
        match DEFAULT.set(self) {
            Ok(()) => Ok(()),
            Err(p) if DEFAULT.get() == Some(&p) => Ok(()),
            Err(p) => Err(p),
        }
    }

    /// The installed default, or [`CryptoProvider::build_default`].
    pub fn get_default() -> CryptoProvider {
        DEFAULT.get().copied().unwrap_or(Self::build_default())
    }

    /// What makes keys and signatures.
    pub fn signing(&self) -> Backend {
        self.signing
    }

    /// What verifies signatures.
    pub fn verification(&self) -> Backend {
        self.verification
    }
}
