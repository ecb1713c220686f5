//! The directory store: the DIR layout of the CLI, committed atomically.
//!
//! ```text
//! DIR/.lock                  flock: exclusive while writing; holds the writer's pid
//! DIR/.data -> .gen-000000012
//! DIR/.gen-000000012/        one complete generation: every document's files
//!     .manifest.json         each key's revision, directories and root names; each shard's SHA-256
//!     .manifest/00.json …    which key owns which file, and its SHA-256 (by the path's hash)
//!     .manifest/00.ids …     each of those files' inode, size and modification time
//!     .index.json            each key's revision and summary, the published names: small,
//!                            bound to this generation and the manifest's SHA-256
//!     pki-state.json, signer/tls.crt, certs/web/tls.key, …
//! DIR/.spare/                the previous generation, kept up to date with the current one
//! DIR/signer -> .data/signer, DIR/ca-bundle.crt -> .data/ca-bundle.crt, …
//! ```
//!
//! Every write builds a complete new *generation directory* and makes it
//! current by replacing one symbolic link, `.data`, with `rename(2)`, which
//! is atomic. This is the technique of the Kubernetes kubelet's atomic
//! writer for Secret volumes. Each published file is whole, but the paths
//! consumers read are links through `.data` resolved anew at each open:
//! two files opened one after the other may come from two commits. A
//! consumer that needs a matching set reads one file that holds it (the
//! signer's `certs/NAME/tls.pem`: leaf, chain and key), or resolves `.data`
//! once (`readlink`) and reads every file under that `.gen-N`, starting over
//! if it disappears (a commit removed it).
//!
//! Several documents (keys) may share a directory, each owning its own
//! paths. Files of the other keys, and files of the written key that did not
//! change (same digest in the manifest), are hard links to the current
//! generation's: files are never changed once written, so sharing them is
//! safe. A generation of a thousand leaves still has a thousand leaf
//! directories, though, so rather than making them again at every commit,
//! the generation a commit replaces becomes the *spare*: renamed to `.spare`
//! once the switch is on disk (readers holding its old name start over, as
//! when it was deleted), then brought up to date with the live generation by
//! replacing only what that commit changed (it then holds no key the live
//! generation does not), put on disk, and only then marked with the
//! generation it mirrors (`.spare/.mirrors`). The next commit renames the
//! spare to its new generation's name. A commit of a whole document walks
//! it with the same checks as a committed generation, keeps each entry that
//! is the very file (same inode) the new generation needs, and removes,
//! links or writes only the rest. A commit of changes
//! ([`Store::put_changes`]: one leaf of ten thousand) trusts a spare marked
//! with the live generation and removes and writes only what changed,
//! without walking it (see `incremental`). One `syncfs` flushes the new
//! generation (elsewhere than Linux, each new file and directory is
//! flushed). A spare that an interrupted run left out of date is removed by
//! the next run holding the lock. Secret files and the store's bookkeeping
//! (the lock, the spare's mark) get mode 0600, other files 0644 and every
//! directory 0700, whatever the umask.
//!
//! Hardening, because a directory other local users can reach is attacked
//! through its paths:
//!
//! - **Ownership and modes.** Every operation refuses a store whose root,
//!   `.data`, generation or published links are owned by another user, or
//!   whose directories and files are writable by group or others
//!   ([`StoreError::UnsafeStore`](crate::StoreError::UnsafeStore), naming the path).
//! - **Committed files are checked.** The manifest records the SHA-256 of
//!   every file; a read finds each one a regular file with that content, or
//!   fails with [`StoreError::DamagedStore`](crate::StoreError::DamagedStore) naming the published path and
//!   what is there instead (missing, a directory, a link, other content).
//!   A published link at the root replaced by anything else is refused the
//!   same way; a missing one is recreated. A commit of a whole document
//!   checks every file first; a commit of changes checks what it reads, and
//!   takes the other files from a spare whose directories still carry the
//!   stamp pki gave them (see `stamp`: any file replaced, added or removed
//!   there changed a directory's time), else checks and links every file.
//!   [`Store::verify`] (what `status --check` runs) looks at every file
//!   with a `stat`: the identity its commit recorded (see `identity`), read
//!   and hashed only where it differs. The summary in `.index.json` is
//!   believed only when the index names the current generation and the
//!   SHA-256 of its manifest; the driver then confirms it against the
//!   document's head.
//! - **The lock** `DIR/.lock` is opened with `O_NOFOLLOW` (a link is
//!   refused, nothing is created at its target). Writers wait for it at
//!   most the lock timeout ([`DEFAULT_LOCK_TIMEOUT`]), then fail naming the
//!   holder, which records its pid and command line in the file. Readers
//!   never wait.
//! - **Every run that can take the lock finishes an interrupted one**:
//!   missing published links are recreated and every generation but the
//!   current one is removed (they hold private keys), reads and no-op runs
//!   included. Each such repair is a notice ([`FsStore::take_notices`],
//!   [`FsStore::set_notice_hook`]).
//! - **After the switch, a failure is not a failed commit**: when flushing
//!   the directory or creating a published link fails once `.data` points
//!   to the new generation, the commit succeeds with a warning notice that
//!   says the new generation is live and what may still be missing. A
//!   failed switch removes its temporary link and says the store is
//!   unchanged. The generation counter never wraps: at `u64::MAX` a write
//!   is refused.
//!
//! The store's revision of a key is the generation number that last wrote
//! it. Stores written before keys existed (one signer per directory, no
//! manifest) are read as the key [`LEGACY_KEY`]; the next write adds the
//! manifest.

use crate::model::document::Files;
use crate::model::error::{Result, RotateError};
use crate::model::store::{Revision, Store, Summary, validate_key};
use std::fs::{self, DirBuilder};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

mod commit;
mod gc;
mod identity;
mod incremental;
mod lock;
mod manifest;
mod part;
mod publish;
mod read;
mod safety;
mod spare;
mod stamp;
mod verify;
mod write;

pub use lock::DEFAULT_LOCK_TIMEOUT;
use safety::{Entry, check_owner_and_mode, effective_uid};

const DATA_LINK: &str = ".data";
const LOCK_FILE: &str = ".lock";
const GEN_PREFIX: &str = ".gen-";
const MANIFEST: &str = ".manifest.json";
/// In each generation: each key's revision and summary and the published
/// names, for readers that need no more (see `manifest::Index`).
const INDEX: &str = ".index.json";
/// The generation before the current one, kept up to date with it (hard
/// links to the same files, so it holds no key the current one does not):
/// the next commit starts from it and touches only what changed, instead
/// of making a directory and links for every leaf again.
const SPARE: &str = ".spare";
/// Inside the spare: the number of the generation it was last brought up
/// to date with. A spare that says another number was left by an
/// interrupted run and may hold old keys.
const SPARE_MARK: &str = ".mirrors";
/// Format 2 added the SHA-256 of every file, format 3 moved the list of
/// files into shards (see `manifest`), format 4 added each shard's identity
/// records (see `identity`) and the directories' stamps (see `stamp`);
/// formats 1 to 3 are still read, and the next whole commit makes them 4.
const MANIFEST_FORMAT: u32 = 4;
/// The first format whose manifest is sharded.
const SHARDED_FORMAT: u32 = 3;

/// The key a directory written before keys existed is read as: it held one
/// signer.
pub const LEGACY_KEY: &str = "signer";

/// Called before each step that writes to disk, with a description of the
/// step; an error it returns aborts the operation at that point. Used to
/// prove that a failure at any write leaves the previous state intact.
pub type WriteHook = Box<dyn Fn(&str) -> std::io::Result<()> + Send + Sync>;

/// Called with each notice of the store: a repair it made ("repaired
/// DIR/signer (was missing)") or a warning about a commit that is live but
/// not wholly finished ("warning: …"). The CLI prints them on stderr.
pub type NoticeHook = Box<dyn Fn(&str) + Send + Sync>;

/// Documents in a directory, in the layout consumers read.
pub struct FsStore {
    root: PathBuf,
    hook: Option<WriteHook>,
    notice_hook: Option<NoticeHook>,
    notices: Mutex<Vec<String>>,
    lock_timeout: Duration,
    verified: Mutex<Verified>,
}

/// Files whose content this store value checked against the manifest,
/// as they were on disk then: a commit right after a read needs not read
/// them again to know they are intact, only see that each is still the
/// very same file, unmodified.
#[derive(Default)]
struct Verified {
    generation: String,
    files: std::collections::HashMap<String, Entry>,
}

impl std::fmt::Debug for FsStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsStore").field("root", &self.root).finish()
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RotateError + '_ {
    move |e| RotateError::io(path, e)
}

/// The OS error inside an I/O error, for sentences that name the path
/// themselves.
fn reason(e: &RotateError) -> String {
    match e {
        RotateError::Store(crate::StoreError::Io { source, .. }) => source.to_string(),
        other => other.to_string(),
    }
}

impl FsStore {
    fn at(root: PathBuf) -> Self {
        FsStore {
            root,
            hook: None,
            notice_hook: None,
            notices: Mutex::new(Vec::new()),
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            verified: Mutex::new(Verified::default()),
        }
    }

    /// Whether `root` holds a directory store (its `.data` link, whatever
    /// state it is in): what a command that must not create one asks first.
    pub fn is_store(root: impl AsRef<Path>) -> bool {
        fs::symlink_metadata(root.as_ref().join(DATA_LINK)).is_ok()
    }

    /// Opens the store in `root`, which must hold one (`pki init` made it).
    ///
    /// # Errors
    ///
    /// [`StoreError::NotInitialized`](crate::StoreError::NotInitialized) when
    /// `root` holds no store; [`StoreError::Io`](crate::StoreError::Io) when
    /// `root` cannot be examined;
    /// [`StoreError::UnsafeStore`](crate::StoreError::UnsafeStore) when it is
    /// not this user's or is writable by group or others.
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        if !FsStore::is_store(&root) {
            return Err(RotateError::Store(crate::StoreError::NotInitialized(
                root.display().to_string(),
            )));
        }
        let store = FsStore::at(root);
        store.check_root()?;
        Ok(store)
    }

    /// Opens the store in `root`, creating the directory (mode 0700) when it
    /// does not exist. A directory without a store is an empty store: its
    /// first `put` creates the layout.
    ///
    /// A `root` inside another directory store's files (reached through
    /// one of its published links, `.data`, a generation or the spare) is
    /// refused before anything is created: that store's next write
    /// replaces the directory, and this store would silently go with it.
    ///
    /// # Errors
    ///
    /// [`StoreError::UnsafeStore`](crate::StoreError::UnsafeStore) when `root`
    /// lies inside another directory store's files, or is not this user's or is
    /// writable by group or others; [`StoreError::Io`](crate::StoreError::Io)
    /// when it cannot be created or examined.
    pub fn open_or_create(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        check_not_inside_a_store(&root)?;
        if !root.is_dir() {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&root)
                .map_err(io(&root))?;
            // Exactly 0700, whatever the umask cleared.
            fs::set_permissions(&root, fs::Permissions::from_mode(0o700)).map_err(io(&root))?;
        }
        let store = FsStore::at(root);
        store.check_root()?;
        Ok(store)
    }

    /// Installs a hook called before each disk write (see [`WriteHook`]).
    pub fn set_write_hook(&mut self, hook: Option<WriteHook>) {
        self.hook = hook;
    }

    /// Installs a hook called with each notice (see [`NoticeHook`]).
    /// Notices are also kept for [`FsStore::take_notices`].
    pub fn set_notice_hook(&mut self, hook: Option<NoticeHook>) {
        self.notice_hook = hook;
    }

    /// The notices since the last call: repairs made and warnings about
    /// commits that are live but not wholly finished.
    pub fn take_notices(&self) -> Vec<String> {
        std::mem::take(&mut *self.notices.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// How long a write waits for another run holding the lock before it
    /// fails naming the holder ([`DEFAULT_LOCK_TIMEOUT`] unless set).
    pub fn set_lock_timeout(&mut self, timeout: Duration) {
        self.lock_timeout = timeout;
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Absolute path of a published file, such as `ca-bundle.crt`.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    /// The keys that hold a document. Never waits for the lock.
    ///
    /// # Errors
    ///
    /// What a read of the store reports:
    /// [`StoreError::UnsafeStore`](crate::StoreError::UnsafeStore) for a path
    /// or lock file another user could change,
    /// [`StoreError::DamagedStore`](crate::StoreError::DamagedStore) for a
    /// published file no longer as committed,
    /// [`StoreError::Io`](crate::StoreError::Io) for a file that cannot be
    /// read, and a [`DocumentError`](crate::DocumentError) for a manifest that
    /// does not read. An empty store is not an error: no keys.
    pub fn keys(&self) -> Result<Vec<String>> {
        let (_lock, checked) = self.reader_lock()?;
        let current = match checked {
            Some(c) => Some(c),
            None => self.current()?,
        };
        Ok(match current {
            Some(c) => c.manifest.keys.into_keys().collect(),
            None => Vec::new(),
        })
    }

    fn notice(&self, text: String) {
        if let Some(hook) = &self.notice_hook {
            hook(&text);
        }
        self.notices
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(text);
    }

    fn step(&self, what: &str) -> Result<()> {
        match &self.hook {
            Some(h) => h(what).map_err(|e| RotateError::io(self.root.join(what), e)),
            None => Ok(()),
        }
    }

    fn lock_path(&self) -> PathBuf {
        self.root.join(LOCK_FILE)
    }

    /// Refuses a root that others can write or another user owns.
    fn check_root(&self) -> Result<()> {
        let meta = fs::metadata(&self.root).map_err(io(&self.root))?;
        check_owner_and_mode(&self.root, &meta, effective_uid())
    }
}

impl Store for FsStore {
    fn keys(&self) -> Result<Vec<String>> {
        FsStore::keys(self)
    }

    fn location(&self) -> String {
        self.root.display().to_string()
    }

    fn get(&self, key: &str) -> Result<Option<(Files, Revision)>> {
        validate_key(key)?;
        // The lock, when it can be had without waiting, keeps writers from
        // removing the generation being read. Without it the read is still
        // sound: a generation only disappears after `.data` moved past it,
        // so a read that raced a writer is simply done again.
        let (_lock, mut checked) = self.reader_lock()?;
        let mut attempts = 0;
        loop {
            attempts += 1;
            let (generation, result) = self.read_once(key, checked.take());
            match result {
                Ok(found) => return Ok(found),
                Err(e) => {
                    let moved = self.current_target() != generation;
                    if !moved || attempts >= 5 {
                        return Err(e);
                    }
                }
            }
        }
    }

    fn put(&self, key: &str, expected: Option<&Revision>, files: &Files) -> Result<Revision> {
        self.put_with_summary(key, expected, files, None)
    }

    /// Looks at every file of the document without reading it: each must
    /// be the very file its commit recorded (see `verify`); one that is
    /// not is read and checked against its digest.
    fn verify(&self, key: &str) -> Result<Option<Revision>> {
        validate_key(key)?;
        self.verify_files(key)
    }

    /// Reads the generation's small index only: no walk of the generation,
    /// no manifest, no document file. What it skips is checked by every
    /// read of the document and before every commit.
    fn get_summary(&self, key: &str) -> Result<Option<(Summary, Revision)>> {
        validate_key(key)?;
        self.read_summary(key)
    }

    /// Checks what it reads (the root, `.data`, the generation directory,
    /// the manifest, and each directory and file on the paths named), not
    /// the whole generation.
    fn get_paths(
        &self,
        key: &str,
        paths: &std::collections::BTreeSet<String>,
    ) -> Result<Option<(Files, Revision)>> {
        validate_key(key)?;
        match self.read_paths(key, paths)? {
            None => Ok(None),
            Some(Ok(found)) => Ok(Some(found)),
            Some(Err(part::Legacy)) => Ok(self.get(key)?.map(|(files, revision)| {
                (crate::model::store::only_paths(&files, paths), revision)
            })),
        }
    }

    /// Writes the changed files: from the spare, reading only the shards
    /// of the manifest that list them; else linking the others, checked
    /// first, into a new generation (see `incremental`).
    fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &crate::model::store::Changes,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        validate_key(key)?;
        match self.write_changes(key, expected, changes, summary)? {
            Some(revision) => Ok(revision),
            None => crate::model::store::put_changes_whole(self, key, expected, changes, summary),
        }
    }

    fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        validate_key(key)?;
        if fs::symlink_metadata(self.root.join(DATA_LINK)).is_err() {
            // The first write: refuse what the commit would refuse before
            // the lock file is created, so a refused `init` leaves nothing.
            self.check_root()?;
            self.check_published(&Default::default(), files.top_level_names().into_iter())?;
        }
        let _lock = lock::exclusive(&self.lock_path(), self.lock_timeout)?;
        let current = self.current()?;
        let found = current
            .as_ref()
            .and_then(|c| c.manifest.keys.get(key))
            .map(|e| Revision::new(e.revision.to_string()));
        if found.as_ref() != expected {
            return Err(RotateError::Store(crate::StoreError::Conflict {
                key: key.to_string(),
                expected: expected.cloned(),
                found,
            }));
        }
        let published = current
            .as_ref()
            .map(|c| c.top.published())
            .unwrap_or_default();
        self.check_published(&published, files.top_level_names().into_iter())?;
        if let Some(c) = &current {
            self.verify_all(c)?;
        }
        self.tidy(current.as_ref());
        self.commit(current.as_ref(), key, files, summary)
    }
}

/// Refuses `root` when it lies in a generation directory (or the spare) of
/// another store: the nearest existing ancestor, links resolved, has a
/// `.gen-N` or `.spare` component whose parent holds a `.data` link.
fn check_not_inside_a_store(root: &Path) -> Result<()> {
    let mut existing = root;
    while fs::symlink_metadata(existing).is_err() {
        existing = match existing.parent() {
            Some(p) if p.as_os_str().is_empty() => Path::new("."),
            Some(p) => p,
            // Nothing exists up to `/`: creating fails on its own.
            None => return Ok(()),
        };
    }
    // Unresolvable: the operations that follow fail with their own error.
    let Ok(resolved) = fs::canonicalize(existing) else {
        return Ok(());
    };
    for ancestor in resolved.ancestors() {
        let Some(name) = ancestor.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let generation = name == SPARE
            || name
                .strip_prefix(GEN_PREFIX)
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        if let Some(store) = ancestor.parent()
            && generation
            && fs::symlink_metadata(store.join(DATA_LINK)).is_ok()
        {
            return Err(RotateError::Store(crate::StoreError::UnsafeStore {
                path: root.to_path_buf(),
                reason: format!(
                    "lies inside the directory store {} (in {name}, which its next write \
                     replaces, removing what is there): choose a directory outside its \
                     published files",
                    store.display()
                ),
            }));
        }
    }
    Ok(())
}
