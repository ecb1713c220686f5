//! pki: rotate X.509 certificate authorities without breaking trust.
//!
//! This crate is the command-line tool and a facade over the library
//! crates: [`pki_core`] (the certificate model) and [`pki_rotate`] (the
//! rotation engines and stores).

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
