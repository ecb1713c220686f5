//! [`SealedStore`]: any store, with every document's private files sealed
//! before they reach it.

use super::{Binding, StoreKey, is_sealed, open, parse_sealed, seal, sealing_error, witness};
use crate::model::document::{Document, File, Files};
use crate::model::error::Result;
use crate::model::store::{AsyncStore, Changes, Revision, Store, Summary};
use rand_core::CryptoRng;
use std::collections::BTreeSet;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

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

/// What the wrapper knows of a document from its store key: its kind (in
/// the associated data) and which of its secret files consumers read as
/// published (left clear in a directory store).
#[derive(Clone, Copy)]
struct KindOf {
    kind: &'static str,
    published_secret: fn(&str) -> bool,
}

fn kind_entry<D: Document>() -> KindOf {
    KindOf {
        kind: D::KIND,
        published_secret: D::published_secret,
    }
}

/// The kind a store key holds: each engine's document lives at its own
/// key (the key says which, as [`crate::DocumentKey`] does). A key of no
/// known kind is sealed whole, bound to the kind `""`.
fn kind_of(key: &str) -> Option<KindOf> {
    match key {
        crate::engines::signer::STORE_KEY => Some(kind_entry::<crate::SignerState>()),
        crate::engines::set::STORE_KEY => Some(kind_entry::<crate::SetState>()),
        crate::engines::keyring::STORE_KEY => Some(kind_entry::<crate::KeyRing>()),
        _ if key.starts_with(&crate::engines::credential::credential_key("")) => {
            Some(kind_entry::<crate::CredentialState>())
        }
        _ => None,
    }
}

/// A store whose documents' private files (keys, credentials) are sealed
/// with a [`StoreKey`] before they leave the process, and opened when
/// read. Public files pass through untouched, so consumers of bundles and
/// certificates need no key.
///
/// With `published_in_clear` (a directory store, whose files consumers
/// read where they are), the secret files a document declares published
/// ([`Document::published_secret`]: leaf keys, the active signing key,
/// current credentials) are written in clear (mode 0600 as before);
/// everything else private is sealed.
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
            rng: Mutex::new(rng),
            neighbours: Vec::new(),
            witnesses: Vec::new(),
            public_reads: false,
            key_checked: AtomicBool::new(false),
        }
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

    fn stays_clear(&self, kind: Option<KindOf>, path: &str) -> bool {
        self.published_in_clear && kind.is_some_and(|k| (k.published_secret)(path))
    }

    /// The files as the store beneath keeps them.
    fn seal_files(&self, key: &str, files: &Files) -> Result<Files> {
        let Some(sealing_key) = &self.keys.seal_with else {
            return Ok(files.clone());
        };
        let kind = kind_of(key);
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        let mut out = Files::new();
        for dir in files.dirs() {
            out.insert_dir(dir)?;
        }
        for (path, file) in files.iter() {
            if !file.secret || self.stays_clear(kind, path) {
                out.insert(path, file.clone())?;
                continue;
            }
            let binding = Binding {
                kind: kind.map_or("", |k| k.kind),
                key,
                path,
            };
            let sealed = seal(sealing_key, binding, &file.contents, &mut *rng)?;
            out.insert(path, File::secret(sealed))?;
        }
        Ok(out)
    }

    /// The files as the document reads them.
    /// `changes` with the files it writes sealed as [`Self::seal_files`] seals them.
    fn seal_changes(&self, key: &str, changes: &Changes) -> Result<Changes> {
        let mut written = Files::new();
        for (path, file) in changes.written() {
            written.insert(path, file.clone())?;
        }
        let mut sealed = Changes::new();
        for (path, file) in self.seal_files(key, &written)?.iter() {
            sealed.write(path, file.clone())?;
        }
        for path in changes.removed() {
            sealed.remove(path)?;
        }
        Ok(sealed)
    }

    fn open_files(&self, key: &str, files: Files) -> Result<Files> {
        if !files.iter().any(|(_, f)| is_sealed(&f.contents)) {
            return Ok(files);
        }
        let kind = kind_of(key);
        let mut out = Files::new();
        for dir in files.dirs() {
            out.insert_dir(dir)?;
        }
        for (path, file) in files.iter() {
            if !is_sealed(&file.contents) {
                out.insert(path, file.clone())?;
                continue;
            }
            if !file.secret {
                return Err(sealing_error(
                    &format!("{path} in {key}"),
                    "is a sealed value in a public file".into(),
                ));
            }
            let binding = Binding {
                kind: kind.map_or("", |k| k.kind),
                key,
                path,
            };
            let contents = open(&self.keys.open_with, binding, &file.contents)?;
            out.insert(
                path,
                File {
                    contents,
                    secret: true,
                },
            )?;
        }
        Ok(out)
    }

    /// Whether the keys still have to be checked against the witnesses
    /// before a read (`write` false) or a write.
    fn key_check_due(&self, write: bool) -> bool {
        !self.witnesses.is_empty()
            && !self.key_checked.load(Ordering::Acquire)
            && (write || !self.public_reads || !self.keys.open_with.is_empty())
    }

    /// Opens the first sealed secret file of `files` (of the document at
    /// `key`) with the keys: whether there was one. A wrong or missing key
    /// is the error [`open`] gives.
    fn opens_a_witness(&self, key: &str, files: &Files) -> Result<bool> {
        let Some((path, file)) = files
            .iter()
            .find(|(_, f)| f.secret && is_sealed(&f.contents))
        else {
            return Ok(false);
        };
        let binding = Binding {
            kind: kind_of(key).map_or("", |k| k.kind),
            key,
            path,
        };
        open(&self.keys.open_with, binding, &file.contents)?;
        Ok(true)
    }

    /// The document at `key` as read, opened: a sealed value among its
    /// files that opens checks the keys.
    fn opened(
        &self,
        key: &str,
        read: Option<(Files, Revision)>,
    ) -> Result<Option<(Files, Revision)>> {
        let Some((files, revision)) = read else {
            return Ok(None);
        };
        let sealed = files.iter().any(|(_, f)| is_sealed(&f.contents));
        let files = self.open_files(key, files)?;
        if sealed {
            self.key_checked.store(true, Ordering::Release);
        }
        Ok(Some((files, revision)))
    }

    /// Whether the files as stored are exactly as this store would write
    /// them now: every private file sealed under the sealing key (or in
    /// clear where it stays clear), or everything clear without a key.
    fn is_current(&self, key: &str, stored: &Files) -> bool {
        let kind = kind_of(key);
        stored.iter().filter(|(_, f)| f.secret).all(|(path, f)| {
            match (&self.keys.seal_with, is_sealed(&f.contents)) {
                (None, sealed) => !sealed,
                (Some(_), false) => self.stays_clear(kind, path),
                (Some(k), true) => {
                    !self.stays_clear(kind, path)
                        && parse_sealed(&f.contents).is_ok_and(|(h, _)| h.key_id == k.id())
                }
            }
        })
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
            let mut paths = witness::next_paths(key, None);
            while !paths.is_empty() {
                let Some((files, _)) = self.inner.get_paths(key, &paths)? else {
                    break;
                };
                if self.opens_a_witness(key, &files)? {
                    break;
                }
                paths = witness::next_paths(key, Some(&files));
            }
        }
        self.key_checked.store(true, Ordering::Release);
        Ok(())
    }

    /// [`SealedStore::opened`], then the witnesses checked, but for `key`
    /// when the read of its `paths` (None: all) held every file that could
    /// tell ([`witness::told_all`]).
    fn read_checked(
        &self,
        key: &str,
        read: Option<(Files, Revision)>,
        paths: Option<&BTreeSet<String>>,
    ) -> Result<Option<(Files, Revision)>> {
        let read = self.opened(key, read)?;
        let skip = read
            .as_ref()
            .is_none_or(|(files, _)| witness::told_all(key, paths, files));
        self.check_key(skip.then_some(key), false)?;
        Ok(read)
    }

    /// Rewrites the document at `key` so that every private file is
    /// sealed under the sealing key (opening it with any key given),
    /// through the store's compare-and-swap; a conflict reads again.
    /// Returns whether anything was written. Rerunning after a crash
    /// converges: each document is rewritten whole or not at all, and one
    /// already current is left alone.
    pub fn reseal(&self, key: &str) -> Result<bool> {
        loop {
            let Some((stored, revision)) = self.inner.get(key)? else {
                return Ok(false);
            };
            if self.is_current(key, &stored) {
                return Ok(false);
            }
            let files = self.open_files(key, stored)?;
            match Store::put(self, key, Some(&revision), &files) {
                Ok(_) => return Ok(true),
                Err(e) if e.is_conflict() => continue,
                Err(e) => return Err(e),
            }
        }
    }
}

impl<S: Store, R: CryptoRng> Store for SealedStore<S, R> {
    fn location(&self) -> String {
        self.inner.location()
    }

    fn get(&self, key: &str) -> Result<Option<(Files, Revision)>> {
        let read = self.inner.get(key)?;
        self.read_checked(key, read, None)
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
                    self.open_files(other, stored)?;
                }
            }
        }
        let sealed = self.seal_files(key, files)?;
        self.inner.put_with_summary(key, expected, &sealed, summary)
    }
    fn get_paths(&self, key: &str, paths: &BTreeSet<String>) -> Result<Option<(Files, Revision)>> {
        let read = self.inner.get_paths(key, paths)?;
        self.read_checked(key, read, Some(paths))
    }

    fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        self.check_key(None, true)?;
        let sealed = self.seal_changes(key, changes)?;
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
            let mut paths = witness::next_paths(key, None);
            while !paths.is_empty() {
                let Some((files, _)) = self.inner.get_paths(key, &paths).await? else {
                    break;
                };
                if self.opens_a_witness(key, &files)? {
                    break;
                }
                paths = witness::next_paths(key, Some(&files));
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
        paths: Option<&BTreeSet<String>>,
    ) -> Result<Option<(Files, Revision)>> {
        let read = self.opened(key, read)?;
        let skip = read
            .as_ref()
            .is_none_or(|(files, _)| witness::told_all(key, paths, files));
        self.check_key_async(skip.then_some(key), false).await?;
        Ok(read)
    }
}

impl<S: AsyncStore, R: CryptoRng + Send> AsyncStore for SealedStore<S, R> {
    fn location(&self) -> String {
        self.inner.location()
    }

    async fn get(&self, key: &str) -> Result<Option<(Files, Revision)>> {
        let read = self.inner.get(key).await?;
        self.read_checked_async(key, read, None).await
    }

    async fn put(&self, key: &str, expected: Option<&Revision>, files: &Files) -> Result<Revision> {
        self.check_key_async(None, true).await?;
        let sealed = self.seal_files(key, files)?;
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
        let sealed = self.seal_files(key, files)?;
        self.inner
            .put_with_summary(key, expected, &sealed, summary)
            .await
    }

    async fn get_paths(
        &self,
        key: &str,
        paths: &BTreeSet<String>,
    ) -> Result<Option<(Files, Revision)>> {
        let read = self.inner.get_paths(key, paths).await?;
        self.read_checked_async(key, read, Some(paths)).await
    }

    async fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        self.check_key_async(None, true).await?;
        let sealed = self.seal_changes(key, changes)?;
        self.inner
            .put_changes(key, expected, &sealed, summary)
            .await
    }

    async fn verify(&self, key: &str) -> Result<Option<Revision>> {
        self.inner.verify(key).await
    }
}
