//! [`AsyncKubeStore`] and [`KubeStore`]: the [`AsyncStore`] and [`Store`]
//! traits over the API server. Reading a document is in [`read`], writing
//! one in [`write`]; the requests both use are here.

mod changes;
mod publish;
mod read;
mod write;

pub use publish::NoticeHook;

use crate::fail::{self, Doing, Fail};
use crate::layout::{
    ANNOTATION_KEY, LABEL_GENERATION, LABEL_MANAGED_BY, LABEL_PUBLISHED, LABEL_STORE, MANAGED_BY,
};
use crate::options::{self, KubeOptions};
use crate::url::{KubeUrl, UrlError};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use pki_rotate::store::Changes;
use pki_rotate::{AsyncStore, Files, Result, Revision, RotateError, Store, Summary};
use std::collections::BTreeSet;
use std::future::Future;

/// Called before each request of a write with what it is about to do
/// (`create shard NAME`, `commit`, `delete shard NAME`); an error it
/// returns fails that request as if the server had been unreachable.
/// Tests use it to stop a write at every point.
pub type WriteHook = Box<dyn Fn(&str) -> std::io::Result<()> + Send + Sync>;

/// Why a [`KubeStore`] could not be opened: a malformed address (bad
/// usage) or a server that could not be reached (a failed operation).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The URL is malformed.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// The credentials could not be loaded or the server did not answer
    /// ([`StoreError::Backend`](pki_rotate::StoreError::Backend)).
    #[error(transparent)]
    Store(#[from] RotateError),
}

/// Documents in Kubernetes Secrets, for async code: every call is a
/// future on the caller's tokio runtime. See the crate docs for the
/// layout and why it is safe.
pub struct AsyncKubeStore {
    url: KubeUrl,
    options: KubeOptions,
    secrets: Api<Secret>,
    hook: Option<WriteHook>,
    publishing: publish::Publishing,
}

impl std::fmt::Debug for AsyncKubeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncKubeStore")
            .field("url", &self.url.to_string())
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl AsyncKubeStore {
    /// Loads the credentials for `url` and checks within
    /// `options.connect_timeout` that the server answers. Every failure
    /// is a [`StoreError::Backend`](pki_rotate::StoreError::Backend) naming the URL.
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`](pki_rotate::StoreError::Backend), naming the
    /// URL, when the credentials (kubeconfig or in-cluster) cannot be loaded,
    /// or the server does not answer within `options.connect_timeout`.
    pub async fn open(url: &KubeUrl, options: KubeOptions) -> Result<Self> {
        let client = options::client(url, &options).await?;
        Ok(AsyncKubeStore {
            publishing: publish::Publishing::new(client.clone(), url.namespace()),
            secrets: Api::namespaced(client, url.namespace()),
            url: url.clone(),
            options,
            hook: None,
        })
    }

    /// The store's address.
    pub fn url(&self) -> &KubeUrl {
        &self.url
    }

    /// The options it was opened with.
    pub fn options(&self) -> &KubeOptions {
        &self.options
    }

    /// Installs (or removes) a hook called before each request of a write.
    pub fn set_write_hook(&mut self, hook: Option<WriteHook>) {
        self.hook = hook;
    }

    /// Runs the hook for `step`; its error is the request's.
    fn hook(&self, step: &str) -> std::result::Result<(), Fail> {
        match &self.hook {
            Some(hook) => hook(step).map_err(|e| Fail::Other(format!("hook: {e}"))),
            None => Ok(()),
        }
    }

    /// `request`, failing as [`Fail::Timeout`] after the request timeout.
    async fn call<T>(
        &self,
        request: impl Future<Output = kube::Result<T>>,
    ) -> std::result::Result<T, Fail> {
        let limit = self.options.request_timeout;
        match tokio::time::timeout(limit, request).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) => Err(Fail::Kube(e)),
            Err(_) => Err(Fail::Timeout(limit)),
        }
    }

    /// The Secret `name`, None when there is none.
    async fn get_secret(&self, name: &str) -> std::result::Result<Option<Secret>, Fail> {
        match self.call(self.secrets.get(name)).await {
            Ok(secret) => Ok(Some(secret)),
            Err(fail) if fail.is_not_found() => Ok(None),
            Err(fail) => Err(fail),
        }
    }

    /// The keys of the documents this store holds, in order (what `pki
    /// export` walks): the heads labelled as this store's (the Secrets
    /// without a generation label), by their key annotation. One list of
    /// metadata, whatever the documents' size.
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`](pki_rotate::StoreError::Backend) when the
    /// listing fails: the server does not answer within the request timeout,
    /// refuses it (a 403 names the namespace), or returns an error.
    pub async fn keys(&self) -> Result<Vec<String>> {
        let selector = format!(
            "{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_STORE}={},!{LABEL_GENERATION},!{LABEL_PUBLISHED}",
            self.url.name()
        );
        let params = ListParams::default().labels(&selector);
        let list = self
            .call(self.secrets.list_metadata(&params))
            .await
            .map_err(|fail| self.error("list", self.url.name(), &fail))?;
        let mut keys: Vec<String> = list
            .items
            .into_iter()
            .filter_map(|item| item.metadata.annotations?.remove(ANNOTATION_KEY))
            .collect();
        keys.sort();
        keys.dedup();
        Ok(keys)
    }

    /// Creates `secret` (after the hook for `step`).
    async fn create(&self, step: &str, secret: &Secret) -> std::result::Result<Secret, Fail> {
        self.hook(step)?;
        self.call(self.secrets.create(&PostParams::default(), secret))
            .await
    }

    /// Deletes Secret `name`; one already gone is not an error.
    async fn delete(&self, name: &str) -> std::result::Result<(), Fail> {
        self.hook(&format!("delete shard {name}"))?;
        match self
            .call(self.secrets.delete(name, &DeleteParams::default()))
            .await
        {
            Ok(_) => Ok(()),
            Err(fail) if fail.is_not_found() => Ok(()),
            Err(fail) => Err(fail),
        }
    }

    fn error(&self, verb: &'static str, name: &str, fail: &Fail) -> RotateError {
        fail::backend_error(&self.url, Doing { verb, name }, fail)
    }
}

impl AsyncStore for AsyncKubeStore {
    fn location(&self) -> String {
        self.url.to_string()
    }

    async fn get(&self, key: &str) -> Result<Option<(Files, Revision)>> {
        self.read(key).await
    }

    async fn put(&self, key: &str, expected: Option<&Revision>, files: &Files) -> Result<Revision> {
        self.write(key, expected, files, None).await
    }

    async fn get_summary(&self, key: &str) -> Result<Option<(Summary, Revision)>> {
        self.read_summary(key).await
    }

    async fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        self.write(key, expected, files, summary).await
    }

    async fn get_paths(
        &self,
        key: &str,
        paths: &BTreeSet<String>,
    ) -> Result<Option<(Files, Revision)>> {
        self.read_paths(key, paths).await
    }

    async fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        self.write_changes(key, expected, changes, summary).await
    }
}

/// Documents in Kubernetes Secrets behind the blocking [`Store`] trait: an
/// [`AsyncKubeStore`] on a small tokio runtime of its own, which every call
/// blocks on. For the CLI, the C ABI and threads; from async code use
/// [`AsyncKubeStore`] (calling this one from inside a tokio task would
/// block a worker thread). It is `Send + Sync`: share one store between
/// threads.
pub struct KubeStore {
    store: AsyncKubeStore,
    // Last, and an Option, so that Drop can shut it down without blocking.
    runtime: Option<tokio::runtime::Runtime>,
}

impl std::fmt::Debug for KubeStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeStore")
            .field("store", &self.store)
            .finish_non_exhaustive()
    }
}

impl Drop for KubeStore {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            // Works even when the store is dropped inside another runtime.
            runtime.shutdown_background();
        }
    }
}

impl KubeStore {
    /// Opens the store at `url` (`kube://[CONTEXT@]NAMESPACE/NAME`) with
    /// the default options: kubectl's credentials.
    ///
    /// # Errors
    ///
    /// [`OpenError::Url`] when `url` is malformed, and [`OpenError::Store`]
    /// with the errors of [`KubeStore::open`].
    pub fn from_url(url: &str) -> std::result::Result<Self, OpenError> {
        let url = KubeUrl::parse(url)?;
        Ok(KubeStore::open(&url, KubeOptions::default())?)
    }

    /// Opens the store at `url` and checks that the server answers.
    ///
    /// # Errors
    ///
    /// [`StoreError::Backend`](pki_rotate::StoreError::Backend) naming the URL:
    /// the tokio runtime cannot be started, or the errors of
    /// [`AsyncKubeStore::open`].
    pub fn open(url: &KubeUrl, options: KubeOptions) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("pki-kube")
            .enable_all()
            .build()
            .map_err(|e| fail::backend(url, format!("cannot start a tokio runtime: {e}")))?;
        let store = runtime.block_on(AsyncKubeStore::open(url, options))?;
        Ok(KubeStore {
            store,
            runtime: Some(runtime),
        })
    }

    /// The store for async code, on this store's own runtime's client.
    pub fn as_async(&self) -> &AsyncKubeStore {
        &self.store
    }

    /// The store's address.
    pub fn url(&self) -> &KubeUrl {
        self.store.url()
    }

    /// The keys of the documents this store holds, in order: see
    /// [`AsyncKubeStore::keys`].
    ///
    /// # Errors
    ///
    /// The errors of [`AsyncKubeStore::keys`], and
    /// [`StoreError::Backend`](pki_rotate::StoreError::Backend) when the store
    /// is shut down.
    pub fn keys(&self) -> Result<Vec<String>> {
        self.block_on(self.store.keys())
    }

    /// See [`AsyncKubeStore::set_write_hook`].
    pub fn set_write_hook(&mut self, hook: Option<WriteHook>) {
        self.store.set_write_hook(hook);
    }

    /// See [`AsyncKubeStore::set_notice_hook`].
    pub fn set_notice_hook(&mut self, hook: Option<NoticeHook>) {
        self.store.set_notice_hook(hook);
    }

    /// See [`AsyncKubeStore::take_notices`].
    pub fn take_notices(&self) -> Vec<String> {
        self.store.take_notices()
    }

    fn block_on<T>(&self, work: impl Future<Output = Result<T>>) -> Result<T> {
        match &self.runtime {
            Some(runtime) => runtime.block_on(work),
            None => Err(fail::backend(
                self.store.url(),
                "the store is shut down".into(),
            )),
        }
    }
}

impl Store for KubeStore {
    fn keys(&self) -> Result<Vec<String>> {
        KubeStore::keys(self)
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

    fn get_summary(&self, key: &str) -> Result<Option<(Summary, Revision)>> {
        self.block_on(AsyncStore::get_summary(&self.store, key))
    }

    fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
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
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        self.block_on(AsyncStore::put_changes(
            &self.store,
            key,
            expected,
            changes,
            summary,
        ))
    }
}
