//! [`SealedStore`]: any store, with every document's private files sealed
//! before they reach it.

use super::kind::Kind;
use super::{StoreKey, is_sealed, witness};
use crate::model::document::Files;
use crate::model::error::Result;
use crate::model::store::{AsyncStore, Changes, Revision, Store, Summary, only_paths};
use rand_core::CryptoRng;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

mod files;
use files::{KindSource, with_state_paths};

/// The keys a [`SealedStore`] works with: the one it seals with (None:
/// nothing is sealed, and a store holding sealed values is refused when
/// read) and every key it opens with (the sealing key, and during
/// `store-key rotate` the previous one).
#[derive(Debug, Clone, Default)]
pub struct SealingKeys {
    seal_with: Option<StoreKey>,
    open_with: Vec<StoreKey>,
}

impl SealingKeys {
    /// No key: values are written in clear, sealed values are refused.
    pub fn none() -> Self {
        SealingKeys::default()
    }

    /// Seal with `key` and open what it sealed.
    pub fn single(key: StoreKey) -> Self {
        SealingKeys {
            open_with: vec![key.clone()],
            seal_with: Some(key),
        }
    }

    /// Re-sealing: seal with `new`, open what `new` or `old` sealed.
    pub fn rotating(old: Option<StoreKey>, new: StoreKey) -> Self {
        let mut open_with = vec![new.clone()];
        open_with.extend(old);
        SealingKeys {
            seal_with: Some(new),
            open_with,
        }
    }

    /// The key values are sealed with, if any.
    pub fn sealing_key(&self) -> Option<&StoreKey> {
        self.seal_with.as_ref()
    }
}

/// A store whose documents' private files (keys, credentials) are sealed
/// with a [`StoreKey`] before they leave the process, and opened when
/// read. Public files pass through untouched, so consumers of bundles and
/// certificates need no key.
///
/// With `published_in_clear` (a directory store, whose files consumers
/// read where they are), the secret files a document declares published
/// ([`Document::published_secret`](crate::Document::published_secret):
/// leaf keys, the active signing key, current credentials) are written in
/// clear (mode 0600 as before); everything else private is sealed.
///
/// Which kind a document is, and so which files it publishes and the kind
/// each sealed value is bound to, is read from the document itself: the
/// state file each kind keeps ([`Document::state_file`](crate::Document::state_file), the envelope
/// naming its kind), whatever store key it lives at. A write of changes
/// that leaves the state file as it is reads it from the store, at the
/// revision the write expects; a read of some of a document's files reads
/// its state file with them. A document whose state file names no kind
/// this build knows is sealed whole, bound to the kind `""`. Values sealed
/// by builds that took the kind from the store key still open, and are
/// sealed again under the document's kind by the next write of them.
///
/// Reading a sealed value without its key fails with one line
/// ([`StoreError::Sealing`](crate::StoreError::Sealing)) before anything
/// is decided, so nothing is written. Clear private values are read as they
/// are (a store from before sealing) and sealed at the next write. With
/// [`SealedStore::check_key_against`], a wrong or missing key is refused
/// that way before anything else too, even where the document read holds
/// nothing sealed.
pub struct SealedStore<S, R> {
    inner: S,
    keys: SealingKeys,
    published_in_clear: bool,
    /// Of the published files, those left in clear (None: all of them).
    clear_only: Option<fn(&str) -> bool>,
    rng: Mutex<R>,
    neighbours: Vec<String>,
    /// The documents whose sealed values say which key the store is
    /// sealed under ([`SealedStore::check_key_against`]).
    witnesses: Vec<String>,
    /// Reads go on without a key ([`SealedStore::reading_public_without_key`]).
    public_reads: bool,
    /// The keys opened a sealed value of the store, or the witnesses hold
    /// none: nothing is left to check.
    key_checked: AtomicBool,
}

impl<S, R> std::fmt::Debug for SealedStore<S, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedStore")
            .field("keys", &self.keys)
            .field("published_in_clear", &self.published_in_clear)
            .finish_non_exhaustive()
    }
}

impl<S, R: CryptoRng> SealedStore<S, R> {
    /// `inner` sealed with `keys`; `rng` draws the nonces (the OS RNG in
    /// production). `published_in_clear`: leave the secret files consumers
    /// read in clear (a directory store).
    pub fn new(inner: S, keys: SealingKeys, rng: R, published_in_clear: bool) -> Self {
        SealedStore {
            inner,
            keys,
            published_in_clear,
            clear_only: None,
            rng: Mutex::new(rng),
            neighbours: Vec::new(),
            witnesses: Vec::new(),
            public_reads: false,
            key_checked: AtomicBool::new(false),
        }
    }

    /// With `published_in_clear`, leaves in clear only the published
    /// secret files `rule` accepts; the others are sealed. A store of
    /// Kubernetes objects publishes leaves' keys in their `kubernetes.io/tls`
    /// Secrets ([`crate::is_published_leaf_key`]) but no key ring or
    /// credential, which stay sealed there.
    pub fn clear_only(mut self, rule: fn(&str) -> bool) -> Self {
        self.clear_only = Some(rule);
        self
    }

    /// Documents whose sealed values tell which store key the store is
    /// sealed under. Before this store first acts, it opens one sealed
    /// value of each of them that exists (a CA key; the active signing key
    /// where it is sealed) and refuses, with one line and before anything
    /// is written, keys that do not open it, or none: so a command whose
    /// own document holds nothing sealed (a key ring in a directory store,
    /// whose one private file consumers read in clear) refuses a wrong or
    /// missing key as every other command does. A read of a document that
    /// holds sealed values opens them, which checks the key by itself.
    pub fn check_key_against(mut self, keys: impl IntoIterator<Item = String>) -> Self {
        self.witnesses = keys.into_iter().collect();
        self
    }

    /// Reads need no key: for a command that only reports on public
    /// material (a key ring's status), as consumers read public files
    /// without one. A key that is not the store's is still refused, and so
    /// is every write without the key and every sealed value read without it.
    pub fn reading_public_without_key(mut self) -> Self {
        self.public_reads = true;
        self
    }

    /// Documents a new one must agree with: before a document is created,
    /// each of these that exists is read, so a store holding sealed values
    /// refuses a create without its key (or with another) instead of
    /// gaining a document in clear or under a second key.
    pub fn check_creates_against(mut self, keys: impl IntoIterator<Item = String>) -> Self {
        self.neighbours = keys.into_iter().collect();
        self
    }

    /// The store beneath.
    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// Whether the keys still have to be checked against the witnesses
    /// before a read (`write` false) or a write.
    fn key_check_due(&self, write: bool) -> bool {
        !self.witnesses.is_empty()
            && !self.key_checked.load(Ordering::Acquire)
            && (write || !self.public_reads || !self.keys.open_with.is_empty())
    }

    /// The document at `key` as read (`files`), opened, and its kind: a
    /// sealed value among its files that opens checks the keys.
    fn opened(&self, key: &str, files: Files) -> Result<(Files, Option<Kind>)> {
        let kind = self.kind_in(key, &files)?;
        let sealed = files.iter().any(|(_, f)| is_sealed(&f.contents));
        let files = self.open_files(key, kind, files)?;
        if sealed {
            self.key_checked.store(true, Ordering::Release);
        }
        Ok((files, kind))
    }

    /// One read of the witness at `key`, whose kind its first read told
    /// (`kind`, set by it): the paths to read next, or None when a sealed
    /// value opened (or there is nothing more to read).
    fn witness_read(
        &self,
        key: &str,
        kind: &mut Option<Option<Kind>>,
        files: &Files,
    ) -> Result<Option<BTreeSet<String>>> {
        let kind = match *kind {
            Some(known) => known,
            None => *kind.insert(self.kind_in(key, files)?),
        };
        if self.opens_a_witness(key, kind, files)? {
            return Ok(None);
        }
        Ok(Some(witness::next_paths(kind, Some(files))))
    }

    /// The document read at `key` (of `wanted`, or whole when None),
    /// opened, and whether its witness check can be skipped
    /// ([`witness::told_all`]); `paths` (when not `wanted`) is what the
    /// caller asked for, the rest left out.
    fn read_opened(
        &self,
        key: &str,
        read: Option<(Files, Revision)>,
        wanted: Option<&BTreeSet<String>>,
        paths: Option<&BTreeSet<String>>,
    ) -> Result<(Option<(Files, Revision)>, bool)> {
        let Some((files, revision)) = read else {
            return Ok((None, true));
        };
        let (files, kind) = self.opened(key, files)?;
        let told_all = witness::told_all(kind, wanted, &files);
        let files = match paths {
            Some(paths) => only_paths(&files, paths),
            None => files,
        };
        Ok((Some((files, revision)), told_all))
    }
}

impl<S: Store, R: CryptoRng> SealedStore<S, R> {
    /// Refuses keys that do not open a sealed value of each witness but
    /// `skip` (the document just read), when a check is still due.
    fn check_key(&self, skip: Option<&str>, write: bool) -> Result<()> {
        if !self.key_check_due(write) {
            return Ok(());
        }
        for key in self.witnesses.iter().filter(|k| Some(k.as_str()) != skip) {
            let mut kind = None;
            let mut paths = witness::next_paths(None, None);
            while !paths.is_empty() {
                let Some((files, _)) = self.inner.get_paths(key, &paths)? else {
                    break;
                };
                match self.witness_read(key, &mut kind, &files)? {
                    Some(next) => paths = next,
                    None => break,
                }
            }
        }
        self.key_checked.store(true, Ordering::Release);
        Ok(())
    }

    /// [`SealedStore::read_opened`], then the witnesses checked, but for
    /// `key` when the read held every file that could tell.
    fn read_checked(
        &self,
        key: &str,
        read: Option<(Files, Revision)>,
        wanted: Option<&BTreeSet<String>>,
        paths: Option<&BTreeSet<String>>,
    ) -> Result<Option<(Files, Revision)>> {
        let (read, skip) = self.read_opened(key, read, wanted, paths)?;
        self.check_key(skip.then_some(key), false)?;
        Ok(read)
    }

    /// The kind of the document `changes` change at `key` (at revision
    /// `expected`).
    fn kind_of_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
    ) -> Result<Option<Kind>> {
        match KindSource::of(changes)? {
            KindSource::Written(files) => self.kind_in(key, &files),
            KindSource::Stored(paths) => {
                self.kind_stored(key, expected, self.inner.get_paths(key, &paths)?)
            }
        }
    }

    /// Rewrites the document at `key` so that every private file is
    /// sealed under the sealing key and bound to the document's kind
    /// (opening it with any key given), through the driver's
    /// compare-and-swap loop ([`Driver::rewrite`](crate::Driver::rewrite)):
    /// a conflict reads again, up to the driver's attempts. Returns whether
    /// anything was written. Rerunning after a crash converges: each
    /// document is rewritten whole or not at all, and one already current
    /// is left alone.
    ///
    /// # Errors
    ///
    /// Those of [`Driver::rewrite`](crate::Driver::rewrite) over the store
    /// below: what it reports on reading or writing,
    /// [`StoreError::TooManyConflicts`](crate::StoreError::TooManyConflicts)
    /// and [`StoreError::UnknownOutcome`](crate::StoreError::UnknownOutcome);
    /// [`StoreError::Sealing`](crate::StoreError::Sealing) when a sealed file
    /// does not open with the keys given, or the keys do not open the store's
    /// other documents.
    pub fn reseal(&self, key: &str) -> Result<bool> {
        crate::Driver::new(&self.inner).rewrite(key, |stored| {
            if self.is_current(key, stored)? {
                return Ok(None);
            }
            let (files, _) = self.opened(key, stored.clone())?;
            self.check_key(None, true)?;
            let kind = self.kind_in(key, &files)?;
            self.seal_files(key, kind, &files).map(Some)
        })
    }
}

impl<S: Store, R: CryptoRng> Store for SealedStore<S, R> {
    /// The keys need nothing opened: the inner store's.
    fn keys(&self) -> Result<Vec<String>> {
        self.inner.keys()
    }

    fn location(&self) -> String {
        self.inner.location()
    }

    fn get(&self, key: &str) -> Result<Option<(Files, Revision)>> {
        let read = self.inner.get(key)?;
        self.read_checked(key, read, None, None)
    }

    fn put(&self, key: &str, expected: Option<&Revision>, files: &Files) -> Result<Revision> {
        self.put_with_summary(key, expected, files, None)
    }

    /// A summary holds no private material (dates, ids): kept in clear.
    fn get_summary(&self, key: &str) -> Result<Option<(Summary, Revision)>> {
        self.inner.get_summary(key)
    }

    fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        self.check_key(None, true)?;
        if expected.is_none() {
            for other in self.neighbours.iter().filter(|k| *k != key) {
                if let Some((stored, _)) = self.inner.get(other)? {
                    let kind = self.kind_in(other, &stored)?;
                    self.open_files(other, kind, stored)?;
                }
            }
        }
        let kind = self.kind_in(key, files)?;
        let sealed = self.seal_files(key, kind, files)?;
        self.inner.put_with_summary(key, expected, &sealed, summary)
    }

    /// Reads the document's state file with `paths` when they name none
    /// (its kind decides how the files open), and returns `paths` only.
    fn get_paths(&self, key: &str, paths: &BTreeSet<String>) -> Result<Option<(Files, Revision)>> {
        match with_state_paths(paths) {
            None => {
                let read = self.inner.get_paths(key, paths)?;
                self.read_checked(key, read, Some(paths), None)
            }
            Some(wanted) => {
                let read = self.inner.get_paths(key, &wanted)?;
                self.read_checked(key, read, Some(&wanted), Some(paths))
            }
        }
    }

    fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        self.check_key(None, true)?;
        let kind = self.kind_of_changes(key, expected, changes)?;
        let sealed = self.seal_changes(key, kind, changes)?;
        self.inner.put_changes(key, expected, &sealed, summary)
    }

    /// Checks the files as stored: nothing is opened (a no-op step and
    /// `status --check` open the document's head, which holds what is
    /// sealed, through [`Store::get_paths`]).
    fn verify(&self, key: &str) -> Result<Option<Revision>> {
        self.inner.verify(key)
    }
}

impl<S: AsyncStore, R: CryptoRng + Send> SealedStore<S, R> {
    /// [`SealedStore::check_key`] over an asynchronous store.
    async fn check_key_async(&self, skip: Option<&str>, write: bool) -> Result<()> {
        if !self.key_check_due(write) {
            return Ok(());
        }
        for key in self.witnesses.iter().filter(|k| Some(k.as_str()) != skip) {
            let mut kind = None;
            let mut paths = witness::next_paths(None, None);
            while !paths.is_empty() {
                let Some((files, _)) = self.inner.get_paths(key, &paths).await? else {
                    break;
                };
                match self.witness_read(key, &mut kind, &files)? {
                    Some(next) => paths = next,
                    None => break,
                }
            }
        }
        self.key_checked.store(true, Ordering::Release);
        Ok(())
    }

    /// [`SealedStore::read_checked`] over an asynchronous store.
    async fn read_checked_async(
        &self,
        key: &str,
        read: Option<(Files, Revision)>,
        wanted: Option<&BTreeSet<String>>,
        paths: Option<&BTreeSet<String>>,
    ) -> Result<Option<(Files, Revision)>> {
        let (read, skip) = self.read_opened(key, read, wanted, paths)?;
        self.check_key_async(skip.then_some(key), false).await?;
        Ok(read)
    }

    /// [`SealedStore::kind_of_changes`] over an asynchronous store.
    async fn kind_of_changes_async(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
    ) -> Result<Option<Kind>> {
        match KindSource::of(changes)? {
            KindSource::Written(files) => self.kind_in(key, &files),
            KindSource::Stored(paths) => {
                let read = self.inner.get_paths(key, &paths).await?;
                self.kind_stored(key, expected, read)
            }
        }
    }
}

impl<S: AsyncStore, R: CryptoRng + Send> AsyncStore for SealedStore<S, R> {
    fn location(&self) -> String {
        self.inner.location()
    }

    async fn get(&self, key: &str) -> Result<Option<(Files, Revision)>> {
        let read = self.inner.get(key).await?;
        self.read_checked_async(key, read, None, None).await
    }

    async fn put(&self, key: &str, expected: Option<&Revision>, files: &Files) -> Result<Revision> {
        self.check_key_async(None, true).await?;
        let kind = self.kind_in(key, files)?;
        let sealed = self.seal_files(key, kind, files)?;
        self.inner.put(key, expected, &sealed).await
    }

    async fn get_summary(&self, key: &str) -> Result<Option<(Summary, Revision)>> {
        self.inner.get_summary(key).await
    }

    async fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        self.check_key_async(None, true).await?;
        let kind = self.kind_in(key, files)?;
        let sealed = self.seal_files(key, kind, files)?;
        self.inner
            .put_with_summary(key, expected, &sealed, summary)
            .await
    }

    async fn get_paths(
        &self,
        key: &str,
        paths: &BTreeSet<String>,
    ) -> Result<Option<(Files, Revision)>> {
        match with_state_paths(paths) {
            None => {
                let read = self.inner.get_paths(key, paths).await?;
                self.read_checked_async(key, read, Some(paths), None).await
            }
            Some(wanted) => {
                let read = self.inner.get_paths(key, &wanted).await?;
                self.read_checked_async(key, read, Some(&wanted), Some(paths))
                    .await
            }
        }
    }

    async fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        self.check_key_async(None, true).await?;
        let kind = self.kind_of_changes_async(key, expected, changes).await?;
        let sealed = self.seal_changes(key, kind, changes)?;
        self.inner
            .put_changes(key, expected, &sealed, summary)
            .await
    }

    async fn verify(&self, key: &str) -> Result<Option<Revision>> {
        self.inner.verify(key).await
    }
}
