//! [`EtcdStore`] and [`AsyncEtcdStore`]: the [`Store`] and [`AsyncStore`]
//! traits over etcd v3. The connection and what every request shares live
//! in [`client`], reading a document in [`read`], writing one in
//! [`write`], reading and writing some of its files in [`partial`], removing what no head names any more in [`sweep`], the
//! meaning of a failed request in [`fail`].

mod client;
mod fail;
mod pages;
mod partial;
mod read;
mod sweep;
mod verify;
mod write;

pub use client::AsyncEtcdStore;

use crate::options::{EtcdTls, EtcdUser};
use crate::url::{EtcdUrl, UrlError};
use pki_rotate::store::{Changes, WriteHook};
use pki_rotate::{AsyncStore, Files, Result, Revision, RotateError, Store};
use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

/// etcd's default `--max-txn-ops`: operations in one transaction.
pub const DEFAULT_MAX_TXN_OPS: usize = 128;

/// etcd's default `--max-request-bytes`: 1.5 MiB per request.
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 1_572_864;

/// Room left in every request for its framing and the raft header that etcd
/// counts against `--max-request-bytes` with the request.
pub(crate) const REQUEST_MARGIN: usize = 16 * 1024;

/// Bytes counted per operation besides its key and value (protobuf tags,
/// lengths, the compare that goes with a blob's put).
pub(crate) const PER_OP_OVERHEAD: usize = 64;

/// Keys per page when reading a document's blobs or listing its garbage.
pub(crate) const PAGE_KEYS: i64 = 256;

/// How often `get` starts over when the revision it reads at was compacted
/// between its two requests.
pub(crate) const GET_ATTEMPTS: u32 = 3;

/// How an [`EtcdStore`] talks to etcd. The limits must match the server's
/// (`--max-txn-ops`, `--max-request-bytes`); the defaults are etcd's.
#[derive(Clone)]
pub struct EtcdOptions {
    /// How long connecting, and checking that the server answers, may take.
    pub connect_timeout: Duration,
    /// How long one request may take before it fails as a backend error.
    /// A commit that gets no answer within it is checked with one more
    /// request, bounded the same way (see [`StoreError::UnknownOutcome`](pki_rotate::StoreError::UnknownOutcome)),
    /// so a write that loses its answer fails within twice this.
    pub request_timeout: Duration,
    /// The most operations etcd accepts in one transaction.
    pub max_txn_ops: usize,
    /// The largest request etcd accepts, in bytes.
    pub max_request_bytes: usize,
    /// A user name and password when etcd has authentication enabled.
    pub user: Option<EtcdUser>,
    /// The CA bundle and client certificate of an `etcds://` store. Given
    /// for an `etcd://` store, opening fails: a plaintext URL never
    /// silently drops the TLS it was meant to have.
    pub tls: Option<EtcdTls>,
}

impl Default for EtcdOptions {
    fn default() -> Self {
        EtcdOptions {
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(5),
            max_txn_ops: DEFAULT_MAX_TXN_OPS,
            max_request_bytes: DEFAULT_MAX_REQUEST_BYTES,
            user: None,
            tls: None,
        }
    }
}

impl std::fmt::Debug for EtcdOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdOptions")
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("max_txn_ops", &self.max_txn_ops)
            .field("max_request_bytes", &self.max_request_bytes)
            .field("user", &self.user)
            .field("tls", &self.tls)
            .finish()
    }
}

/// Why an [`EtcdStore`] could not be opened: a malformed address (bad
/// usage) or a server that did not answer (a failed operation).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The URL, an endpoint or the prefix is malformed.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// The server could not be reached or refused the client
    /// ([`StoreError::Backend`](pki_rotate::StoreError::Backend)).
    #[error(transparent)]
    Store(#[from] RotateError),
}

/// Documents in etcd v3 behind the blocking [`Store`] trait: an
/// [`AsyncEtcdStore`] on a small tokio runtime of its own, which every call
/// blocks on. For the CLI, the C ABI and threads; from async code use
/// [`AsyncEtcdStore`] (calling this one from inside a tokio task would
/// block a worker thread). It is `Send + Sync`: share one store between
/// threads.
pub struct EtcdStore {
    store: AsyncEtcdStore,
    // Last, and an Option, so that Drop can shut it down without blocking.
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for EtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdStore")
            .field("url", &self.store.url().to_string())
            .field("options", self.store.options())
            .finish()
    }
}

impl Drop for EtcdStore {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            // Works even when the store is dropped inside another runtime.
            runtime.shutdown_background();
        }
    }
}

impl EtcdStore {
    /// Connects to etcd at `endpoints` (`HOST:PORT`), with every key under
    /// `prefix/`, and checks within `options.connect_timeout` that the
    /// server answers.
    ///
    /// # Errors
    ///
    /// [`OpenError::Url`] when an endpoint or `prefix` is malformed, and
    /// [`OpenError::Store`] with the errors of [`EtcdStore::open`].
    pub fn connect<E: AsRef<str>>(
        endpoints: &[E],
        prefix: &str,
        options: EtcdOptions,
    ) -> std::result::Result<Self, OpenError> {
        let url = EtcdUrl::new(endpoints, prefix)?;
        Ok(EtcdStore::open(&url, options)?)
    }

    /// Connects to the store at `url` (`etcd://HOST:PORT/PREFIX`) with the
    /// default options.
    ///
    /// # Errors
    ///
    /// [`OpenError::Url`] when `url` is malformed, and [`OpenError::Store`]
    /// with the errors of [`EtcdStore::open`].
    pub fn from_url(url: &str) -> std::result::Result<Self, OpenError> {
        let url = EtcdUrl::parse(url)?;
        Ok(EtcdStore::open(&url, EtcdOptions::default())?)
    }

    /// Connects to the store at `url` and checks that the server answers.
    /// Every failure is a [`StoreError::Backend`](pki_rotate::StoreError::Backend) naming the URL.
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`](pki_rotate::StoreError::Backend) naming the URL,
    /// as listed above: the tokio runtime cannot be started, or the errors of
    /// [`AsyncEtcdStore::open`].
    pub fn open(url: &EtcdUrl, options: EtcdOptions) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("pki-etcd")
            .enable_all()
            .build()
            .map_err(|e| {
                fail::backend_error(
                    url,
                    "connecting",
                    fail::Fail::Other(format!("cannot start a tokio runtime: {e}")),
                )
            })?;
        let store = runtime.block_on(AsyncEtcdStore::open(url, options))?;
        Ok(EtcdStore {
            store,
            runtime: Some(runtime),
        })
    }

    /// The store for async code, on this store's own runtime's connection.
    pub fn as_async(&self) -> &AsyncEtcdStore {
        &self.store
    }

    /// The store's address.
    pub fn url(&self) -> &EtcdUrl {
        self.store.url()
    }

    /// The options it was opened with.
    pub fn options(&self) -> &EtcdOptions {
        self.store.options()
    }

    /// See [`AsyncEtcdStore::set_write_hook`].
    pub fn set_write_hook(&mut self, hook: Option<WriteHook>) {
        self.store.set_write_hook(hook);
    }

    /// See [`AsyncEtcdStore::set_read_hook`].
    pub fn set_read_hook(&mut self, hook: Option<WriteHook>) {
        self.store.set_read_hook(hook);
    }

    /// The keys under the prefix that hold a document, in order (what
    /// `pki export` walks).
    ///
    /// # Errors
    ///
    /// The errors of [`AsyncEtcdStore::keys`], and
    /// [`StoreError::Backend`](pki_rotate::StoreError::Backend) when the store
    /// is shut down.
    pub fn keys(&self) -> Result<Vec<String>> {
        self.block_on(self.store.keys())
    }

    /// See [`AsyncEtcdStore::compact_history`]: compacts the whole etcd
    /// cluster's history up to its current revision.
    ///
    /// # Errors
    ///
    /// The errors of [`AsyncEtcdStore::compact_history`], and
    /// [`StoreError::Backend`](pki_rotate::StoreError::Backend) when the store
    /// is shut down.
    pub fn compact_history(&self) -> Result<i64> {
        self.block_on(self.store.compact_history())
    }

    fn block_on<T>(&self, work: impl Future<Output = Result<T>>) -> Result<T> {
        match &self.runtime {
            Some(runtime) => runtime.block_on(work),
            None => Err(fail::backend_error(
                self.store.url(),
                "waiting for etcd",
                fail::Fail::Other("the store is shut down".into()),
            )),
        }
    }
}

impl Store for EtcdStore {
    fn keys(&self) -> Result<Vec<String>> {
        EtcdStore::keys(self)
    }

    fn location(&self) -> String {
        AsyncStore::location(&self.store)
    }

    fn get(&self, key: &str) -> Result<Option<(Files, Revision)>> {
        self.block_on(AsyncStore::get(&self.store, key))
    }

    fn put(&self, key: &str, expected: Option<&Revision>, files: &Files) -> Result<Revision> {
        self.block_on(AsyncStore::put(&self.store, key, expected, files))
    }

    fn get_summary(&self, key: &str) -> Result<Option<(pki_rotate::Summary, Revision)>> {
        self.block_on(AsyncStore::get_summary(&self.store, key))
    }

    fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&pki_rotate::Summary>,
    ) -> Result<Revision> {
        self.block_on(AsyncStore::put_with_summary(
            &self.store,
            key,
            expected,
            files,
            summary,
        ))
    }

    fn get_paths(&self, key: &str, paths: &BTreeSet<String>) -> Result<Option<(Files, Revision)>> {
        self.block_on(AsyncStore::get_paths(&self.store, key, paths))
    }

    fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&pki_rotate::Summary>,
    ) -> Result<Revision> {
        self.block_on(AsyncStore::put_changes(
            &self.store,
            key,
            expected,
            changes,
            summary,
        ))
    }
    fn verify(&self, key: &str) -> Result<Option<Revision>> {
        self.block_on(AsyncStore::verify(&self.store, key))
    }
}
