//! Helpers the tests of the `pki` binary share: running it, OpenSSL making
//! and verifying CAs, real TLS handshakes, and a Redis server whose ACL
//! users the credential hooks mint and revoke.

#![allow(dead_code)]

// The book's command sequences run by the tests that start their server.
pub mod book;
pub mod cli;
// etcd started on 127.0.0.1 and a proxy that loses its answers: pki-etcd's
// own test support, shared by path (a support crate depending on pki-etcd
// would link a second copy of its types into pki-etcd's tests).
#[path = "../../pki-etcd/tests/support/etcd.rs"]
pub mod etcd;
#[path = "../../pki-etcd/tests/support/proxy.rs"]
pub mod proxy;
// Copying pki-rotate's store fixtures (tests/data), as its own tests do.
pub mod external;
// Go's crypto/x509 verifying a chain, built once per test process.
pub mod go_x509;
// A SoftHSM2 token of a test's own (pki-core's token tests make theirs so).
pub mod hsm;
// An OpenSSL root and CA keys made in that token, as an operator makes them.
pub mod hsm_operator;
pub mod maker;
pub mod openssl;
pub mod redis;
pub mod schema;
pub mod set;
pub mod set_engine;
#[path = "../../pki-core/tests/pkcs11/softhsm.rs"]
pub mod softhsm;
pub mod store;
#[path = "../../pki-rotate/tests/support/tree.rs"]
pub mod tree;
// The signer engine called as pki-rotate's own tests call it.
#[path = "../../pki-rotate/tests/support/engine.rs"]
pub mod signer_engine;

// The handshakes `pki demo` runs, from the crate's library.
#[allow(unused_imports)]
pub use pki::{mtls, tls};
