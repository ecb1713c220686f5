//! The stores: where documents live, and the only I/O of the crate. Each
//! implements [`Store`] (and through [`ReadyStore`] or natively
//! [`AsyncStore`]) from the [`model`](crate::model):
//!
//! - [`FsStore`]: a crash-safe directory;
//! - [`MemoryStore`]: in memory, for tests and embedders;
//! - [`SecretStore`]: a document per Kubernetes-Secret-shaped map, over a
//!   [`SecretBackend`] the embedder provides;
//! - [`SealedStore`](sealing::SealedStore): any store, with private files
//!   sealed under a store key;
//! - [`input`]: files a caller names (a CA to import, an etcd client key).
//!
//! A store keeps documents under keys (`signer`, …), each as
//! [`Files`](crate::Files) with an opaque [`Revision`] that the store
//! assigns. Writing is a compare-and-swap: [`Store::put`] names the
//! revision the writer read, and fails with
//! [`StoreError::Conflict`](crate::StoreError::Conflict) when the document
//! changed since. The [`Driver`](crate::Driver) turns that into the load →
//! plan → apply → write loop with retries; nobody else writes it.

mod fs;
pub mod input;
mod memory;
pub mod sealing;
mod secret;

pub use crate::model::store::{
    AsyncStore, Changes, MAX_SUMMARY_LEN, ReadyStore, Revision, Store, Summary, conflict,
    only_paths, put_changes_whole, validate_key,
};
pub use fs::{DEFAULT_LOCK_TIMEOUT, FsStore, LEGACY_KEY, NoticeHook, WriteHook};
pub use memory::{MemoryStore, PutHook};
pub use secret::{SecretBackend, SecretStore};
