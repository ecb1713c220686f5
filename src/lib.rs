//! pki: rotate X.509 certificate authorities without breaking trust.
//!
//! This crate is the command-line tool and a facade over the library
//! crates: [`pki_core`] (the certificate model) and [`pki_rotate`] (the
//! rotation engines and stores). The guides are in the book (`docs/book`
//! in the repository).
//!
//! A signer kept in a directory store, stepped at a time the caller
//! chooses: what `pki init` and `pki issue` do.
//!
//! ```
//! use pki::rotate::{
//!     Driver, FsStore, LeafRequest, SignerEngine, SignerInput, SignerPolicy, SignerState,
//! };
//! use rand_chacha::ChaCha20Rng;
//! use rand_core::SeedableRng;
//! use time::macros::datetime;
//!
//! let dir = tempfile::tempdir()?;
//! let store = FsStore::open_or_create(dir.path().join("store"))?;
//! let driver = Driver::new(&store);
//! let mut rng = ChaCha20Rng::seed_from_u64(1); // the OS RNG in production
//! let now = datetime!(2026-01-01 00:00 UTC);
//! let ca = SignerState::new("service-ca", SignerPolicy::default(), now, &mut rng)?;
//! driver.create::<SignerEngine>("signer", &ca)?;
//! let web = SignerInput::request("web", LeafRequest::server(vec!["web.ns.svc".into()]));
//! let step = driver.step::<SignerEngine, _>("signer", &web, now, &mut rng)?;
//! assert!(step.changed);
//! // What consumers read, in the directory layout.
//! assert!(dir.path().join("store/certs/web/tls.crt").is_file());
//! assert!(dir.path().join("store/ca-bundle.crt").is_file());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

pub use pki_core as core;
pub use pki_rotate as rotate;

// Real TLS handshakes over loopback (rustls), with and without client
// certificates: how `pki demo` and the tests prove that chains and bundles
// work together. Tools of this crate, not a stable API.
#[doc(hidden)]
pub mod mtls;
#[doc(hidden)]
pub mod tls;

/// The README's library example, compiled and run as a doctest.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;

/// The book's Rust chapter, its examples compiled and run as doctests.
#[doc = include_str!("../docs/book/src/library.md")]
#[cfg(doctest)]
pub struct BookLibraryDoctests;
