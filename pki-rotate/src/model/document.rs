//! Documents: the versioned envelope every engine keeps its state in, the
//! named-files form stores keep it in, and the mapping of those files to a
//! Kubernetes Secret's `data`.
//!
//! # The envelope
//!
//! Every engine's document is JSON with two fields first: `kind` (which
//! engine: `"signer"`, …) and `version` (that engine's format version).
//! Reading checks both before anything else: a document of another kind, or
//! of a version newer than this build reads, is a clear error
//! ([`DocumentError::Unsupported`](crate::DocumentError::Unsupported)) and is never reset or overwritten.
//! Older versions are migrated when read; the next write stores the current
//! version.
//!
//! # The files form
//!
//! A store keeps a document as [`Files`]: paths relative to the store root
//! (`pki-state.json`, `signer/tls.crt`, `certs/web/tls.key`…), each with its
//! bytes and whether it is secret. The document decides which files are
//! secret (private keys, credentials) when it encodes itself; a store only
//! honours the flag (mode 0600 on disk). These are the files consumers read:
//! the directory store publishes them as they are, and `pki export` writes
//! them out of any store.
//!
//! # The Secret form
//!
//! [`secret_data_key`] maps a path to a valid Kubernetes Secret data key
//! (`/` becomes `.`, after a per-document table of renames such as
//! `signer/tls.crt` → `tls.crt`). Reading a Secret back is done by the
//! document, which knows which paths it expects and looks each one up by
//! its key; no file suffix decides anything.

use crate::model::error::{Result, RotateError};
use std::collections::{BTreeMap, BTreeSet};
use zeroize::Zeroizing;

mod publication;
mod secret_data;

/// A document: an engine's whole state as plain data, and the forms stores
/// keep it in. The state types implement it ([`crate::SignerState`],
/// [`crate::SetState`], [`crate::KeyRing`], [`crate::CredentialState`]);
/// engines ([`crate::Engine`]) decide over them but know nothing of how
/// they are stored. Each engine has a document type of its own; the
/// external-CA and uptake engines' are views of the signer's
/// ([`crate::SignerView`]), one stored object with one codec.
///
/// The kind and version are the envelope's: reading checks them before
/// anything else, so a store holding another kind of document says so
/// ([`DocumentError::Unsupported`](crate::DocumentError::Unsupported)) instead of being read as this one.
pub trait Document: Clone + std::fmt::Debug + Sized {
    /// The kind in the envelope: `"signer"`, `"ca-set"`, `"key-ring"`,
    /// `"credential"`.
    const KIND: &'static str;
    /// The format version this build writes; older ones are migrated when
    /// read.
    const VERSION: u32;
    /// The versions whose state file has no `kind` (written before kinds
    /// existed) yet is of this kind. None by default.
    const KINDLESS_VERSIONS: &'static [u32] = &[];

    /// The document as the files a store keeps (and consumers read).
    ///
    /// # Errors
    ///
    /// A document that cannot be written out:
    /// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) for a path
    /// [`Files`] refuses, [`DocumentError::Json`](crate::DocumentError::Json)
    /// for a part that does not serialize, [`RotateError::Core`] for a private
    /// key that does not encode.
    fn to_files(&self) -> Result<Files>;

    /// Reads a document back from its files, migrating older versions. A
    /// missing or malformed file is an error naming it.
    ///
    /// # Errors
    ///
    /// A [`DocumentError`](crate::DocumentError) naming the file:
    /// [`DocumentError::Unsupported`](crate::DocumentError::Unsupported) for
    /// another kind or a newer version,
    /// [`DocumentError::Json`](crate::DocumentError::Json) for JSON that does
    /// not parse, [`DocumentError::Material`](crate::DocumentError::Material)
    /// for a certificate or key that does not decode,
    /// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) for a file
    /// missing or parts that contradict each other.
    fn from_files(files: &Files) -> Result<Self>;

    /// The files as a Kubernetes Secret's data, under this kind's
    /// documented keys (see [`secret_data_key`]).
    ///
    /// # Errors
    ///
    /// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when a path
    /// maps to no valid Secret data key or two paths map to the same one (see
    /// [`files_to_secret_data`]).
    fn files_to_secret_data(files: &Files) -> Result<SecretData>;

    /// The files back from Secret data: this kind decides which keys it
    /// expects and which of them are secret.
    ///
    /// # Errors
    ///
    /// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when a key
    /// names a file path [`Files`] refuses, or the data misses what this kind
    /// needs to be read.
    fn files_from_secret_data(data: &SecretData) -> Result<Files>;

    /// The files back from the Secret data of the document at store key
    /// `key`. The default ignores the key; a document whose Secret data
    /// names it only in a file that may be sealed (a credential's state)
    /// reads it from the key instead.
    ///
    /// # Errors
    ///
    /// Those of [`Document::files_from_secret_data`].
    fn files_from_secret_data_at(key: &str, data: &SecretData) -> Result<Files> {
        let _ = key;
        Self::files_from_secret_data(data)
    }

    /// Whether the secret file at `path` is one consumers read where it is
    /// published (a leaf's key, the active signing key, a current
    /// credential): a directory store sealing private material leaves it
    /// in clear (0600) so consumers keep working; everything else private
    /// is sealed. None by default.
    fn published_secret(path: &str) -> bool {
        let _ = path;
        false
    }

    /// The path of this kind's state file (the [`Envelope`] naming the
    /// kind) in a document of this kind that holds a file at `near`, or,
    /// with None, the path it has whatever the document holds. None when
    /// this kind keeps no file at `near`, or (with None) when its state
    /// file's path depends on the document (a credential's
    /// `creds/NAME/state.json`). A store that must know a document's kind
    /// (a sealing store) reads it from this file, never from the store key.
    /// None by default: the kind is not told by its files.
    fn state_file(near: Option<&str>) -> Option<String> {
        let _ = near;
        None
    }

    /// The paths a sealing store reads to learn which store key the store
    /// is sealed under: files of a document of this kind that hold a value
    /// sealed wherever a sealing store keeps it (never one of the
    /// [`Document::published_secret`] files), given what the last read of
    /// them held (None at first: the paths known without reading; the
    /// first read holds the state file too). Empty when there is nothing
    /// (more) to read; empty by default: the kind tells no store key.
    fn sealed_witness_paths(read: Option<&Files>) -> BTreeSet<String> {
        let _ = read;
        BTreeSet::new()
    }

    /// What the document says that does not hold, one sentence each: a
    /// store keeps its files intact, but any writer of the store can write
    /// a well-formed document whose parts do not belong together (a bridge
    /// certifying another CA). The driver refuses to decide over such a
    /// document ([`DocumentError::Inconsistent`](crate::DocumentError::Inconsistent)), so nothing is
    /// written from it; status reports it as broken. Empty by default.
    fn problems(&self) -> Vec<String> {
        Vec::new()
    }

    /// Until when a step of this document's engine with nothing asked of
    /// it (the engine's default input) changes nothing, decided at `now`,
    /// and what such a step reports. The driver stores it with every write
    /// as the document's [`Summary`](crate::model::Summary), so that a
    /// later step with nothing to do reads that instead of the whole
    /// document ([`crate::Driver::step_unless_idle`]). None (the default):
    /// no such promise, every step reads the document.
    fn idle(&self, now: time::OffsetDateTime) -> Option<Idle> {
        let _ = now;
        None
    }

    /// [`Document::idle`] for a document that a step at `now` just
    /// produced, whose outcome says to wake at `next_wake`: every engine
    /// leaves the document it writes at rest (a step with nothing asked at
    /// `now` changes nothing, and its next check is `next_wake`), so the
    /// promise comes from the outcome, without planning again. None (the
    /// default): no promise.
    fn idle_after_step(
        &self,
        now: time::OffsetDateTime,
        next_wake: time::OffsetDateTime,
    ) -> Option<Idle> {
        let _ = (now, next_wake);
        None
    }

    /// The paths of the *part* of the document made of its head and the
    /// members `names` (the signer's: its leaves by name), when this kind
    /// can be read and written by parts; None (the default) when it cannot.
    /// A step that changes only those members, inside the document's
    /// [`Idle`] promise, reads and writes that part alone
    /// ([`crate::Driver::step_unless_idle`]).
    fn part_paths(names: &BTreeSet<String>) -> Option<BTreeSet<String>> {
        let _ = names;
        None
    }

    /// The part of the document that `files` holds (read at
    /// [`Document::part_paths`]`(names)`): the document as if it had only
    /// the members `names`. A kind read by parts keeps each member in files
    /// of its own, so the part's [`Document::to_files`] are exactly the
    /// files a whole write puts at the part's paths: written back, they
    /// leave the other members as they were.
    ///
    /// # Errors
    ///
    /// The default, for a kind not read by parts: always
    /// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt). A kind read
    /// by parts fails as [`Document::from_files`] does on the files of the
    /// part.
    fn from_part(files: &Files, names: &BTreeSet<String>) -> Result<Self> {
        let _ = (files, names);
        Err(RotateError::corrupt(
            Self::KIND,
            "this kind of document is not read by parts",
        ))
    }

    /// Gives the document the caller's access to the PKCS#11 tokens that
    /// hold its CA keys, right after it is read: its token keys sign, and
    /// its steps make and destroy key objects, through it and nothing
    /// else. Nothing by default: the kind keeps no key in a token.
    fn attach_tokens(&mut self, access: &std::sync::Arc<dyn pki_core::TokenAccess>) {
        let _ = access;
    }

    /// Makes the document's token keys a simulation for a forecast that
    /// steps copies of it in memory: new keys are made in memory, none is
    /// destroyed, the token only signs ([`crate::engines::token_keys`]).
    /// Nothing by default.
    fn simulate_tokens(&mut self) {}

    /// Whether the step that wrote this document has another round to
    /// make at once (see [`crate::engines::token_keys`]), and with what
    /// input. [`FollowUp::None`] by default.
    fn follow_up(&self) -> FollowUp {
        FollowUp::None
    }
}

/// What a document asks of the step that wrote it ([`Document::follow_up`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FollowUp {
    /// Nothing: the step is done.
    None,
    /// The same input again: the round recorded what it will make (a key
    /// in a token) and carries the input out in the next round.
    RepeatInput,
    /// A round that asks nothing (the engine's default input): the input
    /// is carried out, and what it left to tidy (keys retired, to be
    /// destroyed) is done.
    Upkeep,
}

/// A document's promise about the steps that ask nothing of it (see
/// [`Document::idle`]): from `since` up to, not including, `until`, such a
/// step changes nothing and reports `report`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Idle {
    /// The document's kind ([`Document::KIND`]): a summary is only taken
    /// for a document of the kind that wrote it.
    pub kind: String,
    /// When the promise was made. A step at an earlier time (a clock set
    /// back) reads the document.
    #[serde(with = "time::serde::rfc3339")]
    pub since: time::OffsetDateTime,
    /// The first time something may be due.
    #[serde(with = "time::serde::rfc3339")]
    pub until: time::OffsetDateTime,
    /// What a step with nothing to do reports, as the kind defines it (the
    /// signer's: [`crate::engines::signer::IdleReport`]).
    pub report: serde_json::Value,
}

impl Idle {
    /// Whether the promise covers a step at `now`.
    pub fn covers(&self, now: time::OffsetDateTime) -> bool {
        self.since <= now && now < self.until
    }

    /// The promise as a store keeps it; None when it cannot be one (too
    /// large).
    pub fn to_summary(&self) -> Option<crate::model::Summary> {
        crate::model::Summary::new(serde_json::to_string(self).ok()?)
    }

    /// The promise a store kept, when it is one for documents of `kind`.
    pub fn from_summary(summary: &crate::model::Summary, kind: &str) -> Option<Idle> {
        serde_json::from_str::<Idle>(summary.as_str())
            .ok()
            .filter(|idle| idle.kind == kind)
    }
}

/// The key of a document of kind `D` in a store: a [`crate::Driver`] given
/// one reads and writes that kind only, so a key cannot be stepped by the
/// engine of another kind (the CA set's document lives at `"set"`, and its
/// kind is `"ca-set"`: the key says which). Each engine names its key
/// (`signer::KEY`, `set::KEY`, `keyring::KEY`, `credential::key(name)`);
/// a plain `&str` still works where the caller knows the kind.
///
/// ```
/// use pki_rotate::{Driver, MemoryStore, SignerEngine, SignerPolicy, SignerState, signer};
/// # use rand_core::SeedableRng;
/// # let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
/// # let now = time::macros::datetime!(2026-01-01 00:00 UTC);
/// let driver = Driver::new(MemoryStore::new());
/// let state = SignerState::new("service-ca", SignerPolicy::default(), now, &mut rng)?;
/// driver.create::<SignerEngine>(&signer::KEY, &state)?;
/// # Ok::<(), pki_rotate::RotateError>(())
/// ```
///
/// A key of one kind given to the engine of another does not compile:
///
/// ```compile_fail
/// use pki_rotate::{Driver, MemoryStore, SetEngine, signer};
/// let driver = Driver::new(MemoryStore::new());
/// let _ = driver.load::<SetEngine>(&signer::KEY);
/// ```
pub struct DocumentKey<D> {
    name: std::borrow::Cow<'static, str>,
    kind: std::marker::PhantomData<fn() -> D>,
}

impl<D> DocumentKey<D> {
    /// The key `name` for documents of kind `D`.
    pub const fn new(name: &'static str) -> Self {
        DocumentKey {
            name: std::borrow::Cow::Borrowed(name),
            kind: std::marker::PhantomData,
        }
    }

    /// A key made at run time (a credential's, named by the caller).
    pub fn owned(name: String) -> Self {
        DocumentKey {
            name: std::borrow::Cow::Owned(name),
            kind: std::marker::PhantomData,
        }
    }

    /// The key as the store takes it.
    pub fn as_str(&self) -> &str {
        &self.name
    }
}

impl<D> Clone for DocumentKey<D> {
    fn clone(&self) -> Self {
        DocumentKey {
            name: self.name.clone(),
            kind: std::marker::PhantomData,
        }
    }
}

impl<D> std::fmt::Debug for DocumentKey<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("DocumentKey").field(&self.name).finish()
    }
}

impl<D> std::fmt::Display for DocumentKey<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name)
    }
}

/// Reads a document of kind `D` from its files, refusing it as the driver
/// refuses to decide over it: when it does not decode, and when its parts
/// do not belong together ([`Document::problems`],
/// [`DocumentError::Inconsistent`](crate::DocumentError::Inconsistent)).
/// `location` names the store and document in the error. What publishes
/// a store's files elsewhere (`pki export`) checks each document with it
/// first, so that it publishes nothing the other commands refuse.
///
/// # Errors
///
/// Those of [`Document::from_files`], prefixed with `location`, and
/// [`DocumentError::Inconsistent`](crate::DocumentError::Inconsistent) when the
/// document has problems.
pub fn read_checked<D: Document>(location: &str, files: &Files) -> Result<D> {
    let doc = D::from_files(files).map_err(|e| e.within(location))?;
    refuse_problems(&doc, location)?;
    Ok(doc)
}

/// Refuses a document whose parts do not belong together
/// ([`Document::problems`]), naming where it was read: nothing is decided
/// over it.
pub(crate) fn refuse_problems<D: Document>(doc: &D, location: &str) -> Result<()> {
    let problems = doc.problems();
    if problems.is_empty() {
        return Ok(());
    }
    Err(RotateError::Document(crate::DocumentError::Inconsistent {
        location: location.to_string(),
        problems,
    }))
}

/// What a driver accepts as the key of a document of kind `D`: a
/// [`DocumentKey<D>`] (checked by the compiler), or a plain store key.
pub trait KeyOf<D> {
    /// The key as the store takes it.
    fn key(&self) -> &str;
}

impl<D> KeyOf<D> for DocumentKey<D> {
    fn key(&self) -> &str {
        self.as_str()
    }
}

impl<D> KeyOf<D> for &DocumentKey<D> {
    fn key(&self) -> &str {
        self.as_str()
    }
}

impl<D> KeyOf<D> for &str {
    fn key(&self) -> &str {
        self
    }
}

impl<D> KeyOf<D> for &String {
    fn key(&self) -> &str {
        self
    }
}

/// One file of a document.
#[derive(Clone, PartialEq, Eq)]
pub struct File {
    /// The bytes; zeroized on drop since keys are among them.
    pub contents: Zeroizing<Vec<u8>>,
    /// Private key or credential: stores write it readable by the owner only.
    pub secret: bool,
}

impl File {
    /// A public file.
    pub fn public(contents: impl Into<Vec<u8>>) -> Self {
        File {
            contents: Zeroizing::new(contents.into()),
            secret: false,
        }
    }

    /// A secret file (a private key, a credential).
    pub fn secret(contents: impl Into<Vec<u8>>) -> Self {
        File {
            contents: Zeroizing::new(contents.into()),
            secret: true,
        }
    }
}

impl std::fmt::Debug for File {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print the bytes: they may be a private key.
        write!(
            f,
            "File({} bytes, secret: {})",
            self.contents.len(),
            self.secret
        )
    }
}

/// A document as named files, by path relative to the store root.
///
/// Paths are `/`-separated segments of `[A-Za-z0-9._-]`, none empty, none
/// starting with `.` (stores keep their own bookkeeping under names that
/// start with `.`). `dirs` lists directories that exist even when empty
/// (`certs/` before the first leaf), so consumers can list them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Files {
    files: BTreeMap<String, File>,
    dirs: BTreeSet<String>,
}

impl Files {
    /// No files.
    pub fn new() -> Self {
        Files::default()
    }

    /// Adds or replaces the file at `path`.
    ///
    /// # Errors
    ///
    /// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when `path` is
    /// not a valid file path (see [`validate_path`]); nothing is inserted then.
    pub fn insert(&mut self, path: impl Into<String>, file: File) -> Result<()> {
        let path = path.into();
        validate_path(&path)?;
        self.files.insert(path, file);
        Ok(())
    }

    /// Declares a directory that exists even when it holds no file.
    ///
    /// # Errors
    ///
    /// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) when `path` is
    /// not a valid path (see [`validate_path`]); nothing is declared then.
    pub fn insert_dir(&mut self, path: impl Into<String>) -> Result<()> {
        let path = path.into();
        validate_path(&path)?;
        self.dirs.insert(path);
        Ok(())
    }

    /// Removes the file at `path`, returning it.
    pub fn remove(&mut self, path: &str) -> Option<File> {
        self.files.remove(path)
    }

    /// The bytes of the file at `path`.
    pub fn get(&self, path: &str) -> Option<&[u8]> {
        self.files.get(path).map(|f| f.contents.as_slice())
    }

    /// The file at `path`.
    pub fn file(&self, path: &str) -> Option<&File> {
        self.files.get(path)
    }

    /// Every file, in path order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &File)> {
        self.files.iter().map(|(p, f)| (p.as_str(), f))
    }

    /// The declared directories, in order.
    pub fn dirs(&self) -> impl Iterator<Item = &str> {
        self.dirs.iter().map(String::as_str)
    }

    /// Number of files.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    /// Whether there are no files.
    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// The first segment of every path and directory: what a directory store
    /// links at its root.
    pub fn top_level_names(&self) -> BTreeSet<&str> {
        self.files
            .keys()
            .chain(self.dirs.iter())
            .map(|p| p.split('/').next().unwrap_or(p.as_str()))
            .collect()
    }
}

/// Checks that `path` is a store-relative file path (see [`Files`]).
///
/// # Errors
///
/// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) naming the path
/// when it is empty or longer than 1024 bytes, has an empty segment or one
/// starting with `.`, or holds a byte other than `A-Z`, `a-z`, `0-9`, `-`, `_`,
/// `.` and `/`.
pub fn validate_path(path: &str) -> Result<()> {
    let bad = |reason: &str| {
        RotateError::corrupt(
            format!("file path \"{}\"", path.escape_debug()),
            reason.to_string(),
        )
    };
    if path.is_empty() || path.len() > 1024 {
        return Err(bad("must be 1 to 1024 bytes"));
    }
    for segment in path.split('/') {
        if segment.is_empty() {
            return Err(bad("has an empty segment"));
        }
        if segment.starts_with('.') {
            return Err(bad("has a segment starting with '.'"));
        }
        if !segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return Err(bad("may only hold A-Z, a-z, 0-9, '-', '_', '.' and '/'"));
        }
    }
    Ok(())
}

/// The two fields every document starts with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Envelope {
    /// The engine the document belongs to; None in documents written before
    /// kinds existed (the signer's version 1).
    pub kind: Option<String>,
    /// The format version.
    pub version: u32,
}

impl Envelope {
    /// Reads `kind` and `version` without decoding the rest.
    ///
    /// # Errors
    ///
    /// [`DocumentError::Json`](crate::DocumentError::Json) at `location` when
    /// `bytes` is not a JSON object with a numeric `version` (and a string
    /// `kind`, if any).
    pub fn probe(location: &str, bytes: &[u8]) -> Result<Self> {
        #[derive(serde::Deserialize)]
        struct Probe {
            #[serde(default)]
            kind: Option<String>,
            version: u32,
        }
        let p: Probe = serde_json::from_slice(bytes).map_err(|e| RotateError::json(location, e))?;
        Ok(Envelope {
            kind: p.kind,
            version: p.version,
        })
    }

    /// Refuses a document of another kind or of a version outside
    /// `1..=supported`. A document without a kind is accepted as
    /// `expected_kind` only when `legacy_kindless` allows its version.
    ///
    /// # Errors
    ///
    /// [`DocumentError::Unsupported`](crate::DocumentError::Unsupported) at
    /// `location` when the kind is another one, the kind is missing and
    /// `legacy_kindless` refuses the version, or the version is 0 or newer than
    /// `supported`.
    pub fn check(
        &self,
        location: &str,
        expected_kind: &'static str,
        supported: u32,
        legacy_kindless: impl Fn(u32) -> bool,
    ) -> Result<()> {
        let kind_ok = match self.kind.as_deref() {
            Some(k) => k == expected_kind,
            None => legacy_kindless(self.version),
        };
        if !kind_ok || self.version == 0 || self.version > supported {
            return Err(RotateError::Document(crate::DocumentError::Unsupported {
                location: location.to_string(),
                kind: self.kind.clone(),
                version: self.version,
                expected_kind,
                supported,
            }));
        }
        Ok(())
    }
}

pub use publication::{
    PUBLISHED_BUNDLE, PUBLISHED_LEAVES_DIR, Publication, PublishedLeaf, is_published_leaf_key,
    published_leaf_file,
};

pub use secret_data::{
    SecretData, files_from_secret_data, files_to_secret_data, is_secret_data_key, secret_data_key,
};

#[cfg(test)]
mod tests;
