//! A [`Store`] over storage that keeps each document as a Kubernetes
//! Secret's data: the embedder's own API calls (the API server, a vault…)
//! behind [`SecretBackend`], and the engine's documented Secret mapping in
//! between.

use crate::model::document::{Document, Files, SecretData};
use crate::model::error::Result;
use crate::model::store::{Revision, Store, validate_key};
use std::marker::PhantomData;

/// Storage of Secret-shaped documents with compare-and-swap, written by
/// the embedder: a Kubernetes client with `resourceVersion` is the model.
pub trait SecretBackend {
    /// Where the documents are, for messages.
    fn location(&self) -> String;

    /// The Secret data at `key` and its revision, or None.
    ///
    /// # Errors
    ///
    /// What the backend reports when it cannot read
    /// ([`StoreError::Backend`](crate::StoreError::Backend) with its error). No
    /// Secret is not an error: it is `None`.
    fn get(&self, key: &str) -> Result<Option<(SecretData, Revision)>>;

    /// Writes `data` at `key` if its revision is still `expected` (None:
    /// only if absent) and returns the new revision; a changed document is
    /// [`StoreError::Conflict`](crate::StoreError::Conflict) and nothing is written.
    ///
    /// # Errors
    ///
    /// [`StoreError::Conflict`](crate::StoreError::Conflict) when the revision
    /// is not `expected` (nothing written),
    /// [`StoreError::UnknownOutcome`](crate::StoreError::UnknownOutcome) when
    /// the answer was lost (it may have landed), and otherwise what the backend
    /// reports ([`StoreError::Backend`](crate::StoreError::Backend)); then
    /// nothing was written.
    fn put(&self, key: &str, expected: Option<&Revision>, data: &SecretData) -> Result<Revision>;
}

impl<B: SecretBackend + ?Sized> SecretBackend for &B {
    fn location(&self) -> String {
        (**self).location()
    }
    fn get(&self, key: &str) -> Result<Option<(SecretData, Revision)>> {
        (**self).get(key)
    }
    fn put(&self, key: &str, expected: Option<&Revision>, data: &SecretData) -> Result<Revision> {
        (**self).put(key, expected, data)
    }
}

/// Documents of kind `D` kept through a [`SecretBackend`], under `D`'s
/// documented Secret keys. The kind is the store's type, so nothing is
/// guessed from the data: one backend serves several kinds through one
/// `SecretStore` per kind (`SecretStore::<SetState, _>::new(&backend)`),
/// and a Secret holding another kind is refused when read
/// ([`DocumentError::Unsupported`](crate::DocumentError::Unsupported)).
pub struct SecretStore<D, B> {
    backend: B,
    kind: PhantomData<fn() -> D>,
}

impl<D, B> SecretStore<D, B> {
    /// A store for documents of kind `D` over `backend`.
    pub fn new(backend: B) -> Self {
        SecretStore {
            backend,
            kind: PhantomData,
        }
    }

    /// The backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }
}

impl<D, B: std::fmt::Debug> std::fmt::Debug for SecretStore<D, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretStore")
            .field("backend", &self.backend)
            .finish()
    }
}

impl<D: Document, B: SecretBackend> Store for SecretStore<D, B> {
    fn location(&self) -> String {
        self.backend.location()
    }

    fn get(&self, key: &str) -> Result<Option<(Files, Revision)>> {
        validate_key(key)?;
        match self.backend.get(key)? {
            None => Ok(None),
            Some((data, revision)) => {
                Ok(Some((D::files_from_secret_data_at(key, &data)?, revision)))
            }
        }
    }

    fn put(&self, key: &str, expected: Option<&Revision>, files: &Files) -> Result<Revision> {
        validate_key(key)?;
        let data = D::files_to_secret_data(files)?;
        self.backend.put(key, expected, &data)
    }
}
