//! [`AsyncEtcdStore`]: the connection to etcd and the plumbing every
//! request shares (test hooks, time limits, paging, errors naming the
//! URL), and the [`AsyncStore`] impl, whose reads are in [`super::read`]
//! and whose writes, garbage collection included, are in [`super::write`].

use super::fail::{Fail, backend_error};
use super::{EtcdOptions, OpenError, PAGE_KEYS, REQUEST_MARGIN};
use crate::client::{Client, GetOptions, KeyValue, KvClient};
use crate::url::EtcdUrl;
use pki_rotate::store::{Changes, WriteHook, validate_key};
use pki_rotate::{AsyncStore, Files, Result, Revision, RotateError, Summary};
use std::collections::BTreeSet;
use std::future::Future;
use std::time::Duration;

/// Documents in etcd v3, for controller replicas that share them: every
/// write is a transaction that compares the document's `mod_revision`, so
/// of several replicas writing from the same read exactly one wins and the
/// others get [`StoreError::Conflict`](pki_rotate::StoreError::Conflict).
///
/// This is the store for async code: it runs on the caller's tokio runtime
/// (a kube-rs controller's), as an [`AsyncStore`] for
/// [`pki_rotate::AsyncDriver`]. [`crate::EtcdStore`] is the same store
/// behind the blocking [`pki_rotate::Store`] trait, on a small runtime of
/// its own. It is `Send + Sync`: share one store between tasks.
pub struct AsyncEtcdStore {
    pub(super) url: EtcdUrl,
    pub(super) options: EtcdOptions,
    pub(super) kv: KvClient,
    write_hook: Option<WriteHook>,
    read_hook: Option<WriteHook>,
}

impl std::fmt::Debug for AsyncEtcdStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncEtcdStore")
            .field("url", &self.url.to_string())
            .field("options", &self.options)
            .finish()
    }
}

impl AsyncEtcdStore {
    /// Connects to etcd at `endpoints` (`HOST:PORT`), with every key under
    /// `prefix/`, and checks within `options.connect_timeout` that the
    /// server answers.
    ///
    /// # Errors
    ///
    /// [`OpenError::Url`] when an endpoint or `prefix` is malformed, and
    /// [`OpenError::Store`] with the errors of [`AsyncEtcdStore::open`].
    pub async fn connect<E: AsRef<str>>(
        endpoints: &[E],
        prefix: &str,
        options: EtcdOptions,
    ) -> std::result::Result<Self, OpenError> {
        let url = EtcdUrl::new(endpoints, prefix)?;
        Ok(AsyncEtcdStore::open(&url, options).await?)
    }

    /// Connects to the store at `url` (`etcd://HOST:PORT/PREFIX`) with the
    /// default options.
    ///
    /// # Errors
    ///
    /// [`OpenError::Url`] when `url` is malformed, and [`OpenError::Store`]
    /// with the errors of [`AsyncEtcdStore::open`].
    pub async fn from_url(url: &str) -> std::result::Result<Self, OpenError> {
        let url = EtcdUrl::parse(url)?;
        Ok(AsyncEtcdStore::open(&url, EtcdOptions::default()).await?)
    }

    /// Connects to the store at `url` on the current tokio runtime and
    /// checks that the server answers. Every failure is a
    /// [`StoreError::Backend`](pki_rotate::StoreError::Backend) naming the URL.
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`](pki_rotate::StoreError::Backend) naming the URL
    /// when the options do not fit the URL (TLS settings and the scheme),
    /// authentication fails, or no endpoint answers within
    /// `options.connect_timeout`; a failure etcd did not explain names what the
    /// TLS handshake found, when that tells more.
    pub async fn open(url: &EtcdUrl, options: EtcdOptions) -> Result<Self> {
        let limit = options.connect_timeout;
        let started = tokio::time::Instant::now();
        let tls = options.tls.clone();
        // A failure etcd did not explain (a broken pipe, an early end of
        // file) gets a second look at the TLS underneath, in the time left.
        let explain = async |fail: Fail| {
            let left = limit.saturating_sub(started.elapsed());
            let unexplained = matches!(&fail, Fail::Etcd(crate::client::Error::GRpcStatus(s))
                if !s.message().starts_with("etcdserver:"));
            let better = match unexplained {
                true => crate::client::diagnose(url, tls.as_ref(), left).await,
                false => None,
            };
            backend_error(url, "connecting", better.map_or(fail, Fail::Other))
        };
        let client = match tokio::time::timeout(limit, Client::connect(url, &options)).await {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => return Err(explain(Fail::Etcd(e)).await),
            Err(_) => return Err(backend_error(url, "connecting", Fail::Timeout(limit))),
        };
        // A page of blobs can be larger than tonic's default 4 MiB limit on
        // a decoded answer: allow a full page of the largest blobs etcd takes.
        let page_bytes = (PAGE_KEYS as usize).saturating_mul(options.max_request_bytes);
        let kv = client
            .max_decoding_message_size(page_bytes.saturating_add(4 << 20))
            .kv();
        let store = AsyncEtcdStore {
            url: url.clone(),
            options,
            kv,
            write_hook: None,
            read_hook: None,
        };
        // The client connects lazily: ask something cheap now, so that an
        // unreachable server is reported here and within the bound.
        let probe = format!("{}/", store.url.prefix());
        let mut kv = store.kv.clone();
        let answered = store
            .run_within(limit, async move {
                kv.get(probe, Some(GetOptions::new().with_count_only()))
                    .await
            })
            .await;
        match answered {
            Ok(_) => Ok(store),
            Err(fail) => Err(explain(fail).await),
        }
    }

    /// The store's address.
    pub fn url(&self) -> &EtcdUrl {
        &self.url
    }

    /// The options it was opened with.
    pub fn options(&self) -> &EtcdOptions {
        &self.options
    }

    /// Installs a hook called before each etcd request of a `put` or a
    /// `put_changes`, with the name of the step (`read head`, `read entries
    /// 1`, or `read named entries 1` for a `put_changes`, `write blobs
    /// 1/2`, `commit`, `list garbage`, `delete garbage 1/1`, `discard
    /// blobs`, and `check commit` when the commit got no answer). An error it returns fails the `put`
    /// at that point: as a backend error before the commit is sent, as
    /// [`StoreError::UnknownOutcome`](pki_rotate::StoreError::UnknownOutcome) at `check commit`. Tests use it to
    /// stop etcd, or lose its answers, before each step.
    pub fn set_write_hook(&mut self, hook: Option<WriteHook>) {
        self.write_hook = hook;
    }

    /// Installs a hook called before each etcd request of a `get` or a
    /// `get_paths`, with the name of the step (`read head`, `read entries
    /// 1`, or `read named entries 1` for a `get_paths`, `read blobs 1`,
    /// `read blobs 2`…). An
    /// error it returns fails the `get` as a backend error. Tests use it to
    /// commit another document between a read's requests.
    pub fn set_read_hook(&mut self, hook: Option<WriteHook>) {
        self.read_hook = hook;
    }

    pub(super) fn read_step(&self, name: &str) -> std::result::Result<(), Fail> {
        run_hook(self.read_hook.as_ref(), name)
    }

    /// The keys under the prefix that hold a document, in order (what
    /// `pki export` walks).
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`](pki_rotate::StoreError::Backend) naming the URL
    /// when a page of keys cannot be read (etcd refuses, cannot be reached, or
    /// does not answer in time).
    pub async fn keys(&self) -> Result<Vec<String>> {
        let root = format!("{}/", self.url.prefix());
        let mut keys = Vec::new();
        self.scan(
            &root,
            GetOptions::new().with_keys_only(),
            |_| Ok(()),
            |item| {
                // Blob keys have a segment starting with '.', store keys none.
                let key = item
                    .key()
                    .strip_prefix(root.as_bytes())
                    .and_then(|k| std::str::from_utf8(k).ok());
                if let Some(key) = key
                    && validate_key(key).is_ok()
                {
                    keys.push(key.to_string());
                }
            },
        )
        .await
        .map_err(|f| self.backend("listing documents", f))?;
        Ok(keys)
    }

    /// Compacts etcd's history up to its current revision and waits until
    /// the compacted values are removed from etcd's backend; returns that
    /// revision. From then on a read at an earlier revision fails as
    /// compacted, for every key.
    ///
    /// What `pki store-key rotate` runs once every document is re-sealed:
    /// until then, every revision before the re-seal still holds the
    /// private files as they were (in clear, or sealed under the old key),
    /// and anyone who may read the prefix may read them at those
    /// revisions. Compaction is global to the etcd cluster: it drops the
    /// history of every key, this store's and everyone else's (a watcher
    /// of another application resuming from an earlier revision is told it
    /// was compacted, as after etcd's own auto-compaction), and it reaches
    /// neither snapshots nor backups taken before it, nor the free pages of
    /// etcd's database file until `etcdctl defrag` rewrites it. With etcd
    /// authentication on, the user needs the right to compact. A history
    /// already compacted up to this revision counts as compacted.
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`](pki_rotate::StoreError::Backend) naming the URL
    /// (and the revision) when the revision cannot be read or etcd refuses the
    /// compaction (such as a user without the right to compact). A history
    /// already compacted up to that revision is not an error.
    pub async fn compact_history(&self) -> Result<i64> {
        let doing = "compacting etcd's history";
        let probe = format!("{}/", self.url.prefix());
        let mut kv = self.kv.clone();
        let answer = self
            .run(async move {
                kv.get(probe, Some(GetOptions::new().with_count_only()))
                    .await
            })
            .await
            .map_err(|f| self.backend(doing, f))?;
        let revision = answer.header().map_or(0, |h| h.revision());
        let mut kv = self.kv.clone();
        match self
            .run(async move { kv.compact(revision, true).await })
            .await
        {
            Ok(()) => Ok(revision),
            Err(fail) if fail.is_compacted() => Ok(revision),
            Err(fail) => Err(self.backend(format!("{doing} up to revision {revision}"), fail)),
        }
    }

    /// Visits every key-value whose key starts with `prefix`, a page of
    /// [`PAGE_KEYS`] at a time, each requested with `options` (the range
    /// and the limit are added here). `before` runs before each page's
    /// request, with the page's number.
    pub(super) async fn scan(
        &self,
        prefix: &str,
        options: GetOptions,
        before: impl FnMut(usize) -> std::result::Result<(), Fail>,
        each: impl FnMut(KeyValue),
    ) -> std::result::Result<(), Fail> {
        self.scan_large(prefix, options, PAGE_KEYS, before, each)
            .await
    }

    pub(super) fn step(&self, name: &str) -> std::result::Result<(), Fail> {
        run_hook(self.write_hook.as_ref(), name)
    }

    async fn run_within<T>(
        &self,
        limit: Duration,
        request: impl Future<Output = std::result::Result<T, crate::client::Error>>,
    ) -> std::result::Result<T, Fail> {
        match tokio::time::timeout(limit, request).await {
            Ok(r) => r.map_err(Fail::Etcd),
            Err(_) => Err(Fail::Timeout(limit)),
        }
    }

    /// Runs one request within the request timeout.
    pub(super) async fn run<T>(
        &self,
        request: impl Future<Output = std::result::Result<T, crate::client::Error>>,
    ) -> std::result::Result<T, Fail> {
        self.run_within(self.options.request_timeout, request).await
    }

    pub(super) fn backend(&self, doing: impl Into<String>, fail: Fail) -> RotateError {
        backend_error(&self.url, doing, fail)
    }

    /// Where a document's errors point: the URL and the key.
    pub(super) fn doc_location(&self, key: &str) -> String {
        format!("{} (document \"{key}\")", self.url)
    }

    /// Bytes one request may carry besides its framing.
    pub(super) fn request_budget(&self) -> usize {
        self.options
            .max_request_bytes
            .saturating_sub(REQUEST_MARGIN)
            .max(1)
    }
}

/// Runs a test hook between two requests. Hooks are blocking code (they
/// stop etcd, or step another store, which blocks on its own runtime): on
/// a multi-threaded runtime the thread leaves the runtime while the hook
/// runs, as tokio requires of blocking code.
fn run_hook(hook: Option<&WriteHook>, name: &str) -> std::result::Result<(), Fail> {
    let Some(hook) = hook else {
        return Ok(());
    };
    let multi_thread = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi_thread {
        tokio::task::block_in_place(|| hook(name)).map_err(Fail::Hook)
    } else {
        hook(name).map_err(Fail::Hook)
    }
}

impl AsyncStore for AsyncEtcdStore {
    fn location(&self) -> String {
        self.url.to_string()
    }

    async fn get(&self, key: &str) -> Result<Option<(Files, Revision)>> {
        self.get_document(key).await
    }

    /// Writes the document in three phases (see the crate docs):
    ///
    /// 1. the blobs of the files that changed since the head this writer
    ///    read, under ids no other writer uses, in transactions within
    ///    etcd's limits (unreferenced, so invisible to readers);
    /// 2. one transaction that puts the head if its `mod_revision` is still
    ///    `expected` (or, to create, if it does not exist);
    /// 3. garbage collection of the blobs no head references.
    async fn put(&self, key: &str, expected: Option<&Revision>, files: &Files) -> Result<Revision> {
        self.put_document(key, expected, files, None).await
    }

    /// One read of the head key: its summary and `mod_revision`.
    async fn get_summary(&self, key: &str) -> Result<Option<(Summary, Revision)>> {
        self.read_summary(key).await
    }

    /// [`AsyncStore::put`], with the summary in the head.
    async fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        self.put_document(key, expected, files, summary).await
    }

    /// The head, the entries of `paths` and their blobs, at the revision
    /// of the head read (see the crate docs).
    async fn get_paths(
        &self,
        key: &str,
        paths: &BTreeSet<String>,
    ) -> Result<Option<(Files, Revision)>> {
        self.get_paths_document(key, paths).await
    }

    /// Reads the entries of the paths `changes` names and commits the
    /// changed ones with the head, in place (see the crate docs, "Writing").
    async fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        self.put_changes_document(key, expected, changes, summary)
            .await
    }

    /// Checks the head's entries and blobs without reading their values
    /// (see `verify.rs`); a doubt is settled by a whole read.
    async fn verify(&self, key: &str) -> Result<Option<Revision>> {
        self.verify_document(key).await
    }
}
