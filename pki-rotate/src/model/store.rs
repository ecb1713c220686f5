//! What a store is: the [`Store`] trait (and [`AsyncStore`]) every store
//! implements. The stores themselves (directory, memory, Secret-shaped,
//! sealed) are in [`crate::stores`].
//!
//! A store keeps documents under keys (`signer`, …), each as [`Files`]
//! with an opaque [`Revision`] that the store assigns. Writing is a
//! compare-and-swap: [`Store::put`] names the revision the writer read, and
//! fails with [`StoreError::Conflict`](crate::StoreError::Conflict) when the document changed since.
//! The [`Driver`](crate::Driver) turns that into the load → plan → apply →
//! write loop with retries; nobody else writes it.

use crate::model::document::Files;
use crate::model::error::{Result, RotateError};
use std::collections::BTreeSet;

mod changes;
pub use changes::{Changes, conflict, only_paths, put_changes_whole};

pub use crate::model::Revision;

/// Keyed documents with an opaque revision and compare-and-swap writes.
///
/// Implementations must make [`Store::put`] atomic: after it returns, a
/// reader sees either the whole previous document or the whole new one,
/// and when it fails the store is exactly as it was, with one exception
/// named for it: [`StoreError::UnknownOutcome`](crate::StoreError::UnknownOutcome), a write whose answer was
/// lost and that may have landed (a remote store that cannot tell).
pub trait Store {
    /// Where the store is, for messages: a directory, a URL.
    fn location(&self) -> String;

    /// The document at `key` and its revision, or None when there is none.
    ///
    /// # Errors
    ///
    /// What the store reports when it cannot read the document: the backend
    /// failing ([`StoreError::Io`](crate::StoreError::Io),
    /// [`StoreError::Backend`](crate::StoreError::Backend)), a store unsafe to
    /// use or damaged
    /// ([`StoreError::UnsafeStore`](crate::StoreError::UnsafeStore),
    /// [`StoreError::DamagedStore`](crate::StoreError::DamagedStore)), a sealed
    /// file it cannot open
    /// ([`StoreError::Sealing`](crate::StoreError::Sealing)), or a key it
    /// refuses ([`StoreError::InvalidKey`](crate::StoreError::InvalidKey)). No
    /// document is not an error: it is `None`.
    fn get(&self, key: &str) -> Result<Option<(Files, Revision)>>;

    /// Writes `files` as the document at `key` if its revision is still
    /// `expected` (`None`: only if no document exists, i.e. create), and
    /// returns the new revision. A changed document fails with
    /// [`StoreError::Conflict`](crate::StoreError::Conflict) and nothing is written. A write that was
    /// sent but whose outcome the store cannot establish fails with
    /// [`StoreError::UnknownOutcome`](crate::StoreError::UnknownOutcome), never with an error that promises
    /// nothing changed.
    ///
    /// # Errors
    ///
    /// [`StoreError::Conflict`](crate::StoreError::Conflict) when the revision
    /// is not `expected` (nothing written),
    /// [`StoreError::UnknownOutcome`](crate::StoreError::UnknownOutcome) when
    /// the answer was lost (the write may have landed), and otherwise what the
    /// store reports when it cannot write (as for [`Store::get`]); then nothing
    /// was written.
    fn put(&self, key: &str, expected: Option<&Revision>, files: &Files) -> Result<Revision>;

    /// The summary stored with the document at `key` by
    /// [`Store::put_with_summary`], and the document's revision; None when
    /// there is no document or it was written without one. A store that
    /// keeps no summaries returns None (the default), and callers then read
    /// the document itself.
    ///
    /// This is how a step with nothing to do costs the same whatever the
    /// document's size (see [`crate::Driver::step_unless_idle`]): the
    /// summary says until when nothing is due, in a few hundred bytes.
    ///
    /// # Errors
    ///
    /// What the store reports when it cannot read the summary (as for
    /// [`Store::get`]). The default never fails.
    fn get_summary(&self, key: &str) -> Result<Option<(Summary, Revision)>> {
        let _ = key;
        Ok(None)
    }

    /// [`Store::put`], also storing `summary` with the document in the same
    /// atomic write (None: the document has none). Any write of the key
    /// replaces or removes its summary, so a summary is never older than
    /// its document. The default ignores the summary and calls
    /// [`Store::put`]: right for a store that keeps none.
    ///
    /// # Errors
    ///
    /// Those of [`Store::put`].
    fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        let _ = summary;
        self.put(key, expected, files)
    }

    /// The files of the document at `key` that `paths` names (a path it
    /// does not hold is left out), with all its declared directories, at
    /// one revision, each checked as [`Store::get`] checks it; None when
    /// there is no document. The default reads the whole document and keeps
    /// the named files. A store that can read files one at a time overrides
    /// it: a step that changes one leaf of ten thousand then reads that leaf
    /// and the document's head ([`crate::Driver::step_unless_idle`]).
    ///
    /// # Errors
    ///
    /// Those of [`Store::get`].
    fn get_paths(&self, key: &str, paths: &BTreeSet<String>) -> Result<Option<(Files, Revision)>> {
        Ok(self
            .get(key)?
            .map(|(files, revision)| (only_paths(&files, paths), revision)))
    }

    /// Makes `changes` to the document at `key` if its revision is still
    /// `expected`, storing `summary` with it as [`Store::put_with_summary`]
    /// does, atomically; the files it does not name stay as they are.
    /// Fails as [`Store::put`] does. The default reads the whole document
    /// and writes it whole ([`put_changes_whole`]); a store that can write
    /// files one at a time overrides it, so the write costs what changed.
    ///
    /// # Errors
    ///
    /// Those of [`Store::put`]:
    /// [`StoreError::Conflict`](crate::StoreError::Conflict) also when the
    /// document is gone or its revision is not `expected`. The default also
    /// fails as [`Store::get`] does, and with
    /// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when a change
    /// names an invalid path.
    fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        put_changes_whole(self, key, expected, changes, summary)
    }

    /// Checks that every file of the document at `key` is still what was
    /// committed, without returning the files, and gives the document's
    /// revision (None: no document). A damaged file fails as [`Store::get`]
    /// fails on it ([`StoreError::DamagedStore`](crate::StoreError::DamagedStore)).
    ///
    /// This is what `pki status --check` runs on top of the summary: it
    /// must notice damage to every file consumers read. The default reads
    /// the whole document; a store that can tell a file is unchanged
    /// without reading it overrides it (the directory store compares what
    /// each commit recorded of each file, its size and identity, and reads
    /// only the files that differ).
    ///
    /// # Errors
    ///
    /// Those of [`Store::get`]:
    /// [`StoreError::DamagedStore`](crate::StoreError::DamagedStore) for a
    /// damaged file.
    fn verify(&self, key: &str) -> Result<Option<Revision>> {
        Ok(self.get(key)?.map(|(_, revision)| revision))
    }

    /// The keys of the documents the store holds, in order: what `pki
    /// export` walks, and how the credentials of a store are found. The
    /// default: the store cannot list them, an error naming it (a store
    /// of the embedder's, reached by key only).
    ///
    /// # Errors
    ///
    /// The default: always [`StoreError::Backend`](crate::StoreError::Backend),
    /// saying the store cannot list its documents. A store that lists them
    /// fails as [`Store::get`] does.
    fn keys(&self) -> Result<Vec<String>> {
        Err(crate::model::error::RotateError::Store(
            crate::StoreError::Backend {
                store: self.location(),
                source: "this store cannot list the documents it holds".into(),
            },
        ))
    }
}

pub use crate::model::{MAX_SUMMARY_LEN, Summary};

/// A [`Store`] for async code: the same contract (keyed documents, opaque
/// revisions, an atomic compare-and-swap `put`), with futures a controller
/// awaits on its own runtime instead of calls that block a thread. The
/// etcd store implements both; [`crate::AsyncDriver`] runs engines over
/// this one.
pub trait AsyncStore: Send + Sync {
    /// Where the store is, for messages.
    fn location(&self) -> String;

    /// The document at `key` and its revision, or None.
    fn get(
        &self,
        key: &str,
    ) -> impl std::future::Future<Output = Result<Option<(Files, Revision)>>> + Send;

    /// Writes `files` at `key` if its revision is still `expected` (None:
    /// create), as [`Store::put`].
    fn put(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
    ) -> impl std::future::Future<Output = Result<Revision>> + Send;

    /// [`Store::get_summary`]: None by default.
    fn get_summary(
        &self,
        key: &str,
    ) -> impl std::future::Future<Output = Result<Option<(Summary, Revision)>>> + Send {
        let _ = key;
        std::future::ready(Ok(None))
    }

    /// [`Store::put_with_summary`]: by default the summary is dropped.
    fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> impl std::future::Future<Output = Result<Revision>> + Send {
        let _ = summary;
        self.put(key, expected, files)
    }

    /// [`Store::get_paths`]: by default the whole document is read.
    fn get_paths(
        &self,
        key: &str,
        paths: &BTreeSet<String>,
    ) -> impl std::future::Future<Output = Result<Option<(Files, Revision)>>> + Send {
        async move {
            Ok(self
                .get(key)
                .await?
                .map(|(files, revision)| (only_paths(&files, paths), revision)))
        }
    }

    /// [`Store::put_changes`]: by default the whole document is read and
    /// written.
    fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> impl std::future::Future<Output = Result<Revision>> + Send {
        async move {
            let mut files = match self.get(key).await? {
                Some((files, revision)) if revision == *expected => files,
                other => return Err(conflict(key, expected, other.map(|(_, r)| r))),
            };
            changes.apply_to(&mut files)?;
            self.put_with_summary(key, Some(expected), &files, summary)
                .await
        }
    }

    /// [`Store::verify`]: by default the whole document is read.
    fn verify(
        &self,
        key: &str,
    ) -> impl std::future::Future<Output = Result<Option<Revision>>> + Send {
        async move { Ok(self.get(key).await?.map(|(_, revision)| revision)) }
    }
}

impl<S: AsyncStore + ?Sized> AsyncStore for &S {
    fn location(&self) -> String {
        (**self).location()
    }
    fn get(
        &self,
        key: &str,
    ) -> impl std::future::Future<Output = Result<Option<(Files, Revision)>>> + Send {
        (**self).get(key)
    }
    fn put(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
    ) -> impl std::future::Future<Output = Result<Revision>> + Send {
        (**self).put(key, expected, files)
    }
    fn get_summary(
        &self,
        key: &str,
    ) -> impl std::future::Future<Output = Result<Option<(Summary, Revision)>>> + Send {
        (**self).get_summary(key)
    }
    fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> impl std::future::Future<Output = Result<Revision>> + Send {
        (**self).put_with_summary(key, expected, files, summary)
    }
    fn get_paths(
        &self,
        key: &str,
        paths: &BTreeSet<String>,
    ) -> impl std::future::Future<Output = Result<Option<(Files, Revision)>>> + Send {
        (**self).get_paths(key, paths)
    }
    fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> impl std::future::Future<Output = Result<Revision>> + Send {
        (**self).put_changes(key, expected, changes, summary)
    }
    fn verify(
        &self,
        key: &str,
    ) -> impl std::future::Future<Output = Result<Option<Revision>>> + Send {
        (**self).verify(key)
    }
}

/// A [`Store`] whose calls never wait (memory), seen as an [`AsyncStore`]:
/// each future is ready at once. For tests of async controllers, and for
/// embedders whose own store answers from memory. A store that does I/O
/// (a directory) would block the runtime's thread: give it a thread of its
/// own instead.
#[derive(Debug, Clone, Copy)]
pub struct ReadyStore<S>(pub S);

impl<S: Store + Send + Sync> AsyncStore for ReadyStore<S> {
    fn location(&self) -> String {
        self.0.location()
    }
    async fn get(&self, key: &str) -> Result<Option<(Files, Revision)>> {
        self.0.get(key)
    }
    async fn put(&self, key: &str, expected: Option<&Revision>, files: &Files) -> Result<Revision> {
        self.0.put(key, expected, files)
    }
    async fn get_summary(&self, key: &str) -> Result<Option<(Summary, Revision)>> {
        self.0.get_summary(key)
    }
    async fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        self.0.put_with_summary(key, expected, files, summary)
    }
    async fn get_paths(
        &self,
        key: &str,
        paths: &BTreeSet<String>,
    ) -> Result<Option<(Files, Revision)>> {
        self.0.get_paths(key, paths)
    }
    async fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        self.0.put_changes(key, expected, changes, summary)
    }
    async fn verify(&self, key: &str) -> Result<Option<Revision>> {
        self.0.verify(key)
    }
}

impl<S: Store + ?Sized> Store for &S {
    fn location(&self) -> String {
        (**self).location()
    }
    fn get(&self, key: &str) -> Result<Option<(Files, Revision)>> {
        (**self).get(key)
    }
    fn put(&self, key: &str, expected: Option<&Revision>, files: &Files) -> Result<Revision> {
        (**self).put(key, expected, files)
    }
    fn get_summary(&self, key: &str) -> Result<Option<(Summary, Revision)>> {
        (**self).get_summary(key)
    }
    fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        (**self).put_with_summary(key, expected, files, summary)
    }
    fn get_paths(&self, key: &str, paths: &BTreeSet<String>) -> Result<Option<(Files, Revision)>> {
        (**self).get_paths(key, paths)
    }
    fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        (**self).put_changes(key, expected, changes, summary)
    }
    fn verify(&self, key: &str) -> Result<Option<Revision>> {
        (**self).verify(key)
    }

    fn keys(&self) -> Result<Vec<String>> {
        (**self).keys()
    }
}

impl<S: Store + ?Sized> Store for Box<S> {
    fn location(&self) -> String {
        (**self).location()
    }
    fn get(&self, key: &str) -> Result<Option<(Files, Revision)>> {
        (**self).get(key)
    }
    fn put(&self, key: &str, expected: Option<&Revision>, files: &Files) -> Result<Revision> {
        (**self).put(key, expected, files)
    }
    fn get_summary(&self, key: &str) -> Result<Option<(Summary, Revision)>> {
        (**self).get_summary(key)
    }
    fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        (**self).put_with_summary(key, expected, files, summary)
    }
    fn get_paths(&self, key: &str, paths: &BTreeSet<String>) -> Result<Option<(Files, Revision)>> {
        (**self).get_paths(key, paths)
    }
    fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        (**self).put_changes(key, expected, changes, summary)
    }
    fn verify(&self, key: &str) -> Result<Option<Revision>> {
        (**self).verify(key)
    }

    fn keys(&self) -> Result<Vec<String>> {
        (**self).keys()
    }
}

/// Checks a store key: 1-200 bytes of `/`-separated segments of
/// `[a-z0-9._-]`, none empty and none starting with `.`. Keys become
/// directory names and etcd key segments, so they stay boring.
///
/// # Errors
///
/// [`StoreError::InvalidKey`](crate::StoreError::InvalidKey) saying what is
/// wrong with `key`.
pub fn validate_key(key: &str) -> Result<()> {
    let bad = |reason| {
        Err(RotateError::Store(crate::StoreError::InvalidKey {
            key: key.to_string(),
            reason,
        }))
    };
    if key.is_empty() || key.len() > 200 {
        return bad("must be 1 to 200 bytes");
    }
    for segment in key.split('/') {
        if segment.is_empty() || segment.starts_with('.') {
            return bad("segments must not be empty or start with '.'");
        }
        if !segment.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
        }) {
            return bad("may only hold a-z, 0-9, '-', '_', '.' and '/'");
        }
    }
    Ok(())
}
