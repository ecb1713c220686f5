//! Helpers the tests of the `pki` binary share: running it, OpenSSL making
//! and verifying CAs, real TLS handshakes, and a Redis server whose ACL
//! users the credential hooks mint and revoke.

#![allow(dead_code)]

pub mod cli;
pub mod external;
pub mod maker;
pub mod openssl;
pub mod redis;
pub mod set;
pub mod set_engine;
pub mod store;

// The binary's own handshake modules (src/main.rs declares `mod tls;` and
// `mod mtls;`, and `pki demo` runs them), included by path so that the
// tests shake hands exactly as the binary does. Serving them from
// src/lib.rs instead would need main.rs to use them from there.
#[path = "../../src/mtls.rs"]
pub mod mtls;
#[path = "../../src/tls.rs"]
pub mod tls;
