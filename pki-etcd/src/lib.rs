//! pki-etcd: the pki document [`Store`](pki_rotate::Store) on etcd v3, so
//! that several controller replicas can share one signer and race safely.
//!
//! ```no_run
//! use pki_etcd::EtcdStore;
//! use pki_rotate::{Driver, SignerEngine, SignerInput};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Every key of this store lives under `pki/prod/`.
//! let store = EtcdStore::from_url("etcd://127.0.0.1:2379/pki/prod")?;
//! let driver = Driver::new(&store);
//! let now = time::OffsetDateTime::now_utc();
//! let mut rng = rand_core::UnwrapErr(getrandom::SysRng);
//! let step = driver.step::<SignerEngine, _>("signer", &SignerInput::default(), now, &mut rng)?;
//! println!("changed: {}, step again at {}", step.changed, step.next_wake);
//! # Ok(())
//! # }
//! ```
//!
//! # Addresses
//!
//! A store is named by a URL, `etcd://HOST:PORT/PREFIX` ([`EtcdUrl`]); a
//! malformed one is a [`UrlError`], which a command line reports as bad
//! usage. A server that does not answer within the bounds of
//! [`EtcdOptions`] is a [`StoreError::Backend`](pki_rotate::StoreError::Backend)
//! error, never a hang.
//!
//! # Layout
//!
//! etcd accepts at most 128 operations in one transaction and 1.5 MiB in
//! one request by default, and a signer with 1,000 leaves is 2,000 files
//! (about 1.7 MB), so a document is neither one value nor one transaction
//! of all its files. A document at store key `KEY` occupies:
//!
//! ```text
//! PREFIX/KEY                  the head: a JSON manifest, its mod_revision is the
//!                             document's revision
//! PREFIX/KEY/.blobs/ID        one file's bytes, never changed once written
//! ```
//!
//! The head is
//!
//! ```json
//! {"format": 1,
//!  "files": {"signer/tls.crt": {"sha256": "<hex>", "blob": "9f0c2a7be41d3350-0", "secret": false},
//!            "signer/tls.key": {"sha256": "<hex>", "blob": "9f0c2a7be41d3350-1", "secret": true}},
//!  "dirs": ["certs"]}
//! ```
//!
//! and the bytes of `signer/tls.crt` are the value of
//! `PREFIX/KEY/.blobs/9f0c2a7be41d3350-0`. A reader that exports the files
//! (as `pki export` does) reads the head, notes the header revision of
//! that answer, reads every blob at that revision, and checks each one's
//! SHA-256. Blob ids are `<nonce>-<n>` in hex: the nonce is drawn at random
//! by each write attempt, so concurrent writers never share a blob.
//! `.blobs` starts with a dot because no store key has such a segment: no
//! document's keys can fall under another's blobs.
//!
//! # Writing
//!
//! [`Store::put`](pki_rotate::Store::put) reads the head, writes blobs for
//! the files whose bytes the head does not already hold (a commit costs what
//! changed), then commits the head in one transaction that compares its
//! `mod_revision` with the revision the writer read. Blobs are invisible
//! until a head references them, so a writer that dies or loses leaves the
//! document as it was. After a commit the writer removes the blobs that
//! the new head does not reference and that were created before it (a
//! writer that read the new head only adds blobs after that, so none of
//! its blobs is removed); a loser removes the blobs of its own attempt.
//! A reader reads the blobs at the revision at which it read the head, so
//! it sees the whole old document or the whole new one, whatever commits
//! and removals happen meanwhile.
//!
//! [`EtcdStore::set_write_hook`] and [`EtcdStore::set_read_hook`] name
//! every request of a write and of a read, so that tests can stop the
//! server or commit another document between any two of them.
//!
//! # TLS and authentication
//!
//! `etcds://HOST:PORT[,HOST:PORT…]/PREFIX` reaches the servers over TLS
//! (rustls): [`EtcdOptions::tls`] holds the CA bundle that verifies them
//! and, for an etcd started with `--client-cert-auth`, a client certificate
//! ([`EtcdTls`]). [`EtcdOptions::user`] logs in as an etcd user
//! ([`EtcdUser`]). Both can be given as bytes or read from files; the
//! library reads no environment variable.
//!
//! # Building
//!
//! The gRPC code generated from etcd's protobuf definitions is checked in
//! ([`proto`]; `regen-proto.sh` regenerates it), so building needs only a
//! Rust toolchain. The tests start a real etcd server (Debian: `apt-get
//! install etcd-server`).

pub mod client;
mod layout;
mod options;
pub mod proto;
mod store;
mod url;

pub use layout::{BLOBS_SEGMENT, MANIFEST_FORMAT};
pub use options::{ClientIdentity, EtcdTls, EtcdUser};
pub use store::{
    AsyncEtcdStore, DEFAULT_MAX_REQUEST_BYTES, DEFAULT_MAX_TXN_OPS, EtcdOptions, EtcdStore,
    OpenError,
};
pub use url::{DEFAULT_PORT, EtcdUrl, SCHEME, TLS_SCHEME, UrlError, is_etcd_url};
