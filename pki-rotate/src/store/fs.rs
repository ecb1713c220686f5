//! The directory store: the DIR layout of the CLI, committed atomically.
//!
//! ```text
//! DIR/.lock                  flock: exclusive while writing; holds the writer's pid
//! DIR/.data -> .gen-000000012
//! DIR/.gen-000000012/        one complete generation: every document's files
//!     .manifest.json         which key owns which file (and its SHA-256), each key's revision
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
//! generation does not, and says which generation it mirrors in
//! `.spare/.mirrors`). The next commit renames the spare to its new
//! generation's name, walks it with the same checks as a committed
//! generation, keeps each entry that is the very file (same inode) the new
//! generation needs, and removes, links or writes only the rest; one
//! `syncfs` flushes it (elsewhere than Linux, each new file and directory is
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
//!   ([`RotateError::UnsafeStore`], naming the path).
//! - **Committed files are checked.** The manifest records the SHA-256 of
//!   every file; a read finds each one a regular file with that content, or
//!   fails with [`RotateError::DamagedStore`] naming the published path and
//!   what is there instead (missing, a directory, a link, other content).
//!   A published link at the root replaced by anything else is refused the
//!   same way; a missing one is recreated.
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

use crate::document::{File, Files};
use crate::error::{Result, RotateError};
use crate::store::{Revision, Store, validate_key};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, DirBuilder, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

mod lock;
mod safety;

pub use lock::DEFAULT_LOCK_TIMEOUT;
use safety::{
    DAMAGED_ADVICE, Entry, Kind, Tree, check_owner_and_mode, check_tree, describe, digest,
    effective_uid, read_regular,
};

const DATA_LINK: &str = ".data";
const LOCK_FILE: &str = ".lock";
const GEN_PREFIX: &str = ".gen-";
const MANIFEST: &str = ".manifest.json";
/// The generation before the current one, kept up to date with it (hard
/// links to the same files, so it holds no key the current one does not):
/// the next commit starts from it and touches only what changed, instead
/// of making a directory and links for every leaf again.
const SPARE: &str = ".spare";
/// Inside the spare: the number of the generation it was last brought up
/// to date with. A spare that says another number was left by an
/// interrupted run and may hold old keys.
const SPARE_MARK: &str = ".mirrors";
/// Format 2 added the SHA-256 of every file; format 1 is still read.
const MANIFEST_FORMAT: u32 = 2;

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
        RotateError::Io { source, .. } => source.to_string(),
        other => other.to_string(),
    }
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Manifest {
    format: u32,
    keys: BTreeMap<String, KeyEntry>,
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct KeyEntry {
    /// The generation that last wrote this key.
    revision: u64,
    /// Path → whether it is secret.
    files: BTreeMap<String, bool>,
    /// Path → SHA-256 (hex) of what was committed (format 2).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    sha256: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    dirs: BTreeSet<String>,
}

impl Manifest {
    /// The names at the root that are the store's links into `.data`.
    fn published_names(&self) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for entry in self.keys.values() {
            for p in entry.files.keys().chain(entry.dirs.iter()) {
                names.insert(p.split('/').next().unwrap_or(p).to_string());
            }
        }
        names
    }
}

/// The current generation: its number, directory and manifest.
struct Current {
    number: u64,
    dir: PathBuf,
    manifest: Manifest,
    /// Everything in the generation directory, as the safety walk found it.
    tree: Tree,
}

impl Current {
    fn name(&self) -> String {
        format!("{GEN_PREFIX}{:09}", self.number)
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

    /// Opens the store in `root`, which must hold one (`pki init` made it).
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        if fs::symlink_metadata(root.join(DATA_LINK)).is_err() {
            return Err(RotateError::NotInitialized(root.display().to_string()));
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

    /// A reader never waits: it takes the lock exclusively when it is free
    /// and then finishes what an interrupted run left (missing links, old
    /// generations); else it takes it shared, else it reads without it (a
    /// writer holds it, or the store cannot be written here, such as a
    /// read-only mount). A lock file that is unsafe is refused either way.
    ///
    /// With the exclusive lock, also returns the current generation it
    /// checked, for the read to use rather than walk it a second time.
    fn reader_lock(&self) -> Result<(Option<lock::Lock>, Option<Current>)> {
        let path = self.lock_path();
        // No lock file and no `.data`: no run ever wrote here (a writer
        // creates the lock before anything else), so there is nothing to
        // read or finish, and a read creates nothing either: a command
        // refused after it leaves the directory as it found it.
        if fs::symlink_metadata(&path).is_err()
            && fs::symlink_metadata(self.root.join(DATA_LINK)).is_err()
        {
            return Ok((None, None));
        }
        match lock::try_exclusive(&path) {
            Ok(Some(held)) => {
                let current = self.current()?;
                if let Some(c) = &current {
                    self.check_published(&c.manifest, std::iter::empty())?;
                }
                self.tidy(current.as_ref());
                Ok((Some(held), current))
            }
            Ok(None) => match lock::try_shared(&path) {
                Ok(held) => Ok((held, None)),
                Err(e @ RotateError::UnsafeStore { .. }) => Err(e),
                Err(_) => Ok((None, None)),
            },
            Err(e @ RotateError::UnsafeStore { .. }) => Err(e),
            Err(_) => Ok((None, None)),
        }
    }

    /// Refuses a root that others can write or another user owns.
    fn check_root(&self) -> Result<()> {
        let meta = fs::metadata(&self.root).map_err(io(&self.root))?;
        check_owner_and_mode(&self.root, &meta, effective_uid())
    }

    /// The current generation, after checking that the store is safe: the
    /// root, `.data` and everything in the generation are this user's and
    /// not writable by others.
    fn current(&self) -> Result<Option<Current>> {
        self.check_root()?;
        let link = self.root.join(DATA_LINK);
        let meta = match fs::symlink_metadata(&link) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(RotateError::io(&link, e)),
        };
        check_owner_and_mode(&link, &meta, effective_uid())?;
        let target = fs::read_link(&link).map_err(|_| {
            RotateError::corrupt(
                link.display().to_string(),
                format!(
                    "is {}, not a link to a generation directory",
                    describe(&link)
                ),
            )
        })?;
        let name = target.to_string_lossy().into_owned();
        let number = name
            .strip_prefix(GEN_PREFIX)
            .and_then(|n| n.parse::<u64>().ok())
            .filter(|_| !name.contains('/'))
            .ok_or_else(|| {
                RotateError::corrupt(
                    link.display().to_string(),
                    format!("points to \"{name}\", not a generation directory"),
                )
            })?;
        let dir = self.root.join(&name);
        let tree = check_tree(&dir)?;
        let manifest_path = dir.join(MANIFEST);
        let manifest = match fs::read(&manifest_path) {
            Ok(bytes) => {
                let m: Manifest = serde_json::from_slice(&bytes)
                    .map_err(|e| RotateError::json(manifest_path.display().to_string(), e))?;
                if m.format != MANIFEST_FORMAT && m.format != 1 {
                    return Err(RotateError::corrupt(
                        manifest_path.display().to_string(),
                        format!(
                            "store format {} is not supported (this build reads 1 to {MANIFEST_FORMAT})",
                            m.format
                        ),
                    ));
                }
                m
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => legacy_manifest(&dir, number)?,
            Err(e) => return Err(RotateError::io(&manifest_path, e)),
        };
        Ok(Some(Current {
            number,
            dir,
            manifest,
            tree,
        }))
    }

    /// Checks the root's published names: each must be the store's own
    /// link `NAME -> .data/NAME` (or missing, which a run holding the lock
    /// repairs). Anything else there is what consumers read instead of the
    /// committed files, so it is refused naming the path.
    fn check_published<'a>(
        &self,
        manifest: &Manifest,
        extra: impl Iterator<Item = &'a str>,
    ) -> Result<()> {
        let mut names = manifest.published_names();
        names.extend(extra.map(str::to_string));
        for name in names {
            let path = self.root.join(&name);
            let expected = Path::new(DATA_LINK).join(&name);
            match fs::symlink_metadata(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(RotateError::io(&path, e)),
                Ok(meta) => {
                    let ours = meta.file_type().is_symlink()
                        && fs::read_link(&path).is_ok_and(|t| t == expected);
                    if !ours {
                        return Err(RotateError::DamagedStore {
                            found: describe(&path),
                            path,
                            expected: format!("its link to {}", expected.display()),
                            advice: "this is not the store's link, and consumers read it instead \
                                of the committed files: move it away (the next pki command \
                                recreates the link)"
                                .into(),
                        });
                    }
                    check_owner_and_mode(&path, &meta, effective_uid())?;
                }
            }
        }
        Ok(())
    }

    /// Under the exclusive lock, finishes what an interrupted run left:
    /// removes the temporary link and every generation but the current one
    /// (they hold private keys), once the switch to the current one is on
    /// disk, removes a spare that an interrupted run left behind (it may
    /// hold old keys), and recreates missing published links. Failures are
    /// warnings: the committed document is intact either way.
    fn tidy(&self, current: Option<&Current>) {
        let tmp_link = self.root.join(format!("{DATA_LINK}.tmp"));
        if fs::symlink_metadata(&tmp_link).is_ok() {
            let _ = fs::remove_file(&tmp_link);
        }
        if self.spare_is_stale(current.map(|c| c.number)) {
            self.remove_spare(true);
        }
        let keep = current.map(Current::name).unwrap_or_default();
        let leftovers = self.old_generations(&keep);
        if let Some(c) = current {
            // Only a switch that is on disk makes the older generations
            // garbage; flushing costs a journal commit, so it is done only
            // when there is something to remove.
            if !leftovers.is_empty() {
                if let Err(e) = sync_dir(&self.root) {
                    self.notice(format!(
                        "warning: {}: flushing the directory failed ({}); old generations are kept until it succeeds",
                        self.root.display(),
                        reason(&e)
                    ));
                } else {
                    self.remove_generations(&leftovers, true);
                }
            }
            self.publish(&c.manifest, c.number, true);
        } else {
            // No committed generation: anything generation-like is a leftover.
            self.remove_generations(&leftovers, true);
        }
    }

    /// Whether a spare exists that is not a mirror of generation `current`.
    fn spare_is_stale(&self, current: Option<u64>) -> bool {
        let spare = self.root.join(SPARE);
        if fs::symlink_metadata(&spare).is_err() {
            return false;
        }
        let mark = read_regular(&spare.join(SPARE_MARK))
            .ok()
            .flatten()
            .and_then(|(bytes, _)| String::from_utf8(bytes.to_vec()).ok());
        match (mark, current) {
            (Some(mark), Some(n)) => mark.trim() != n.to_string(),
            _ => true,
        }
    }

    /// Removes the spare; `leftover`: an interrupted run left it, so the
    /// removal is reported.
    fn remove_spare(&self, leftover: bool) {
        let spare = self.root.join(SPARE);
        let gone = self.step(&format!("remove {SPARE}")).and_then(|()| {
            match fs::symlink_metadata(&spare) {
                Ok(m) if m.is_dir() => fs::remove_dir_all(&spare),
                Ok(_) => fs::remove_file(&spare),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e),
            }
            .map_err(io(&spare))
        });
        match gone {
            Ok(()) if leftover => self.notice(format!(
                "removed {} (left by an interrupted run)",
                spare.display()
            )),
            Ok(()) => {}
            Err(e) => self.notice(format!(
                "warning: {}: could not remove this out-of-date copy of the store ({}); it may \
                 still hold old private keys, and the next run retries",
                spare.display(),
                reason(&e)
            )),
        }
    }

    fn read_key(&self, current: &Current, entry: &KeyEntry) -> Result<Files> {
        let mut files = Files::new();
        for d in &entry.dirs {
            self.expect_dir(current, d)?;
            files.insert_dir(d.clone())?;
        }
        let mut checked = Vec::with_capacity(entry.files.len());
        for (relative, &secret) in &entry.files {
            let (contents, on_disk) = self.read_committed(current, entry, relative)?;
            checked.push((relative.clone(), on_disk));
            files.insert(relative.clone(), File { contents, secret })?;
        }
        self.remember_verified(current, checked);
        Ok(files)
    }

    /// Checks that every file of `entry` is still what was committed, like
    /// [`FsStore::read_key`] but without keeping the contents; a file this
    /// store checked earlier and that is still the same, unmodified file
    /// (same inode, size, modification and change times) is not read again.
    fn verify_key(&self, current: &Current, entry: &KeyEntry) -> Result<()> {
        for d in &entry.dirs {
            self.expect_dir(current, d)?;
        }
        let mut checked = Vec::new();
        {
            let verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
            let same_generation = verified.generation == current.name();
            for relative in entry.files.keys() {
                let known = same_generation
                    && entry.sha256.contains_key(relative)
                    && current.tree.get(relative).is_some_and(|on_disk| {
                        on_disk.kind == Kind::File && verified.files.get(relative) == Some(on_disk)
                    });
                if !known {
                    checked.push(relative.clone());
                }
            }
        }
        let mut read = Vec::with_capacity(checked.len());
        for relative in checked {
            let (_, on_disk) = self.read_committed(current, entry, &relative)?;
            read.push((relative, on_disk));
        }
        self.remember_verified(current, read);
        Ok(())
    }

    /// Reads one committed file of `entry` and checks it: a regular file,
    /// the one the safety walk saw, with the committed SHA-256.
    fn read_committed(
        &self,
        current: &Current,
        entry: &KeyEntry,
        relative: &str,
    ) -> Result<(zeroize::Zeroizing<Vec<u8>>, Entry)> {
        if let Some((parent, _)) = relative.rsplit_once('/') {
            self.expect_dir(current, parent)?;
        }
        let path = current.dir.join(relative);
        let generation = current.name();
        let committed = entry.sha256.get(relative);
        let expected = match committed {
            Some(d) => format!(
                "a regular file with SHA-256 {}… ({generation})",
                d.get(..16).unwrap_or(d)
            ),
            None => format!("a regular file ({generation})"),
        };
        let damaged = |found: String| RotateError::DamagedStore {
            path: self.root.join(relative),
            found,
            expected: expected.clone(),
            advice: DAMAGED_ADVICE.into(),
        };
        let walked = current.tree.get(relative);
        if walked.is_none_or(|w| w.kind != Kind::File) {
            return Err(damaged(describe(&path)));
        }
        let Some((contents, on_disk)) = read_regular(&path)? else {
            return Err(damaged(describe(&path)));
        };
        if walked.map(|w| w.id) != Some(on_disk.id) {
            return Err(damaged(
                "another file than the one checked a moment before (replaced while being read)"
                    .into(),
            ));
        }
        if let Some(committed) = committed {
            let found = digest(&contents);
            if found != *committed {
                return Err(damaged(format!(
                    "a regular file with other content (SHA-256 {}…)",
                    &found[..16]
                )));
            }
        }
        Ok((contents, on_disk))
    }

    /// Records files whose content was checked against the manifest.
    fn remember_verified(&self, current: &Current, checked: Vec<(String, Entry)>) {
        let mut verified = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        let generation = current.name();
        if verified.generation != generation {
            *verified = Verified {
                generation,
                files: Default::default(),
            };
        }
        verified.files.extend(checked);
    }

    /// Each directory on the way to a committed file must be a real one: a
    /// link there would send reads outside the generation.
    fn expect_dir(&self, current: &Current, relative: &str) -> Result<()> {
        for (end, _) in relative
            .match_indices('/')
            .chain(std::iter::once((relative.len(), "")))
        {
            let walked = &relative[..end];
            if current.tree.get(walked).is_none_or(|e| e.kind != Kind::Dir) {
                let path = current.dir.join(walked);
                return Err(RotateError::DamagedStore {
                    path: self.root.join(walked),
                    found: describe(&path),
                    expected: format!("a directory ({})", current.name()),
                    advice: DAMAGED_ADVICE.into(),
                });
            }
        }
        Ok(())
    }

    /// One read of `key` from the generation `.data` points to now, or from
    /// `checked` when the caller has just checked it under the lock; also
    /// returns which generation that was.
    fn read_once(
        &self,
        key: &str,
        checked: Option<Current>,
    ) -> (Option<String>, Result<Option<(Files, Revision)>>) {
        // Taken first: a writer may switch and remove the generation while
        // it is checked, and the caller then reads again from the new one.
        let before = self.current_target();
        let current = match checked {
            Some(c) => c,
            None => match self.current() {
                Ok(Some(c)) => c,
                Ok(None) => return (None, Ok(None)),
                Err(e) => return (before, Err(e)),
            },
        };
        let name = Some(current.name());
        if let Err(e) = self.check_published(&current.manifest, std::iter::empty()) {
            return (name, Err(e));
        }
        let Some(entry) = current.manifest.keys.get(key) else {
            return (name, Ok(None));
        };
        let result = self
            .read_key(&current, entry)
            .map(|files| Some((files, Revision::new(entry.revision.to_string()))));
        (name, result)
    }

    fn commit(&self, current: Option<&Current>, key: &str, files: &Files) -> Result<Revision> {
        let number = match current {
            None => 1,
            Some(c) => c.number.checked_add(1).ok_or_else(|| {
                RotateError::corrupt(
                    self.root.join(DATA_LINK).display().to_string(),
                    format!(
                        "points to generation {}, the last one this store can count: \
                         refusing to wrap to generation 0; copy the documents into a new store",
                        c.number
                    ),
                )
            })?,
        };
        let gen_name = format!("{GEN_PREFIX}{number:09}");
        let final_dir = self.root.join(&gen_name);

        let mut manifest = current
            .map(|c| c.manifest.clone())
            .unwrap_or_else(|| Manifest {
                format: MANIFEST_FORMAT,
                keys: BTreeMap::new(),
            });
        manifest.format = MANIFEST_FORMAT;
        check_disjoint(&manifest, key, files)?;
        // Stores of format 1 recorded no digests: take them from the files
        // as they are now (the next read checks them against this).
        if let Some(c) = current {
            for (other, entry) in manifest.keys.iter_mut() {
                if other == key {
                    continue;
                }
                for relative in entry.files.keys() {
                    if !entry.sha256.contains_key(relative) {
                        let path = c.dir.join(relative);
                        let (contents, _) =
                            read_regular(&path)?.ok_or_else(|| RotateError::DamagedStore {
                                path: self.root.join(relative),
                                found: describe(&path),
                                expected: format!("a regular file ({})", c.name()),
                                advice: DAMAGED_ADVICE.into(),
                            })?;
                        entry.sha256.insert(relative.clone(), digest(&contents));
                    }
                }
            }
        }
        let entry = KeyEntry {
            revision: number,
            files: files
                .iter()
                .map(|(p, f)| (p.to_string(), f.secret))
                .collect(),
            sha256: files
                .iter()
                .map(|(p, f)| (p.to_string(), digest(&f.contents)))
                .collect(),
            dirs: files.dirs().map(str::to_string).collect(),
        };
        let previous_entry = manifest.keys.insert(key.to_string(), entry);
        let target = Target::new(current, key, previous_entry.as_ref(), files, &manifest)?;

        let written = self.write_generation(&final_dir, current, &target);
        if let Err(e) = written {
            // The previous generation is untouched; leftovers of a crash
            // here are removed by the next run that holds the lock.
            let _ = fs::remove_dir_all(&final_dir);
            return Err(e);
        }
        self.switch_data_link(&gen_name, number, current)?;

        // From here on generation `number` is live: what fails now is
        // reported as a warning saying so, never as a failed commit.
        let previous = match current {
            Some(c) => format!("generation {}", c.number),
            None => "an empty store".to_string(),
        };
        let synced = self
            .step("sync directory")
            .and_then(|()| sync_dir(&self.root));
        match synced {
            Ok(()) => {
                let mut leftovers = self.old_generations(&gen_name);
                if let Some(c) = current {
                    // Retired or warned about: either way not removed again.
                    self.retire(c, &final_dir, number, &target);
                    leftovers.retain(|n| *n != c.name());
                }
                self.remove_generations(&leftovers, false);
            }
            Err(e) => self.notice(format!(
                "warning: {}: generation {number} is live, but flushing the directory to disk \
                 failed ({}): after a power loss the store may come back at {previous}, which \
                 is kept until the next run",
                self.root.display(),
                reason(&e)
            )),
        }
        // A store whose links were removed by hand gets them back.
        self.publish(&manifest, number, false);
        Ok(Revision::new(number.to_string()))
    }

    fn current_target(&self) -> Option<String> {
        fs::read_link(self.root.join(DATA_LINK))
            .ok()
            .map(|t| t.to_string_lossy().into_owned())
    }

    /// Builds the generation `target` describes in `tmp`, its final name:
    /// nothing reads a generation before `.data` points to it, and one left
    /// half-built by a crash is removed by the next run like any generation
    /// `.data` does not point to. It starts from the spare when there is one
    /// (the previous generation kept up to date): entries that are already
    /// the right file stay, and only what differs is removed, linked or
    /// written. Everything is on disk when it returns.
    fn write_generation(
        &self,
        tmp: &Path,
        current: Option<&Current>,
        target: &Target<'_>,
    ) -> Result<()> {
        if fs::symlink_metadata(tmp).is_ok() {
            fs::remove_dir_all(tmp).map_err(io(tmp))?;
        }
        self.step("create generation directory")?;
        let spare = self.root.join(SPARE);
        let reused = match current {
            Some(_) if fs::symlink_metadata(&spare).is_ok_and(|m| m.is_dir()) => {
                fs::rename(&spare, tmp).map_err(io(tmp))?;
                true
            }
            _ => {
                make_dir(tmp)?;
                false
            }
        };
        // What is in the directory being built: the spare's entries (they
        // become the new generation's, so they pass the same checks), or
        // nothing.
        let mut existing = if reused {
            check_tree(tmp)?
        } else {
            Tree::new()
        };
        let mut touched = BTreeSet::from([tmp.to_path_buf()]);
        let mut written = Vec::new();
        let parent_of = |relative: &str| match relative.rsplit_once('/') {
            Some((parent, _)) => tmp.join(parent),
            None => tmp.to_path_buf(),
        };

        // Whatever the target does not have, deepest first.
        let mut extra: Vec<(&String, &Entry)> = existing
            .iter()
            .filter(|(relative, e)| match e.kind {
                Kind::Dir => !target.dirs.contains(relative.as_str()),
                Kind::File => !target.files.contains_key(relative.as_str()),
                Kind::Other => true,
            })
            .collect();
        extra.sort_by(|a, b| b.0.cmp(a.0));
        let mut removed = Vec::new();
        for (relative, e) in extra {
            if removed.iter().any(|r: &String| is_under(relative, r)) {
                continue;
            }
            self.step(&format!("unlink {relative}"))?;
            let path = tmp.join(relative);
            match e.kind {
                Kind::Dir => fs::remove_dir_all(&path),
                _ => fs::remove_file(&path),
            }
            .map_err(io(&path))?;
            touched.insert(parent_of(relative));
            removed.push(relative.clone());
        }
        for relative in &removed {
            existing.retain(|r, _| r != relative && !is_under(r, relative));
        }

        for dir in &target.dirs {
            if existing.get(dir).is_none_or(|e| e.kind != Kind::Dir) {
                make_dir(&tmp.join(dir))?;
                touched.insert(parent_of(dir));
                touched.insert(tmp.join(dir));
            }
        }
        for (relative, source) in &target.files {
            let path = tmp.join(relative);
            let present = existing.get(relative.as_str());
            match source {
                Source::Link => {
                    let Some(c) = current else { continue };
                    let wanted = c.tree.get(relative.as_str()).map(|e| e.id);
                    if present.is_some_and(|e| e.kind == Kind::File && Some(e.id) == wanted) {
                        continue;
                    }
                    self.step(&format!("link {relative}"))?;
                    if present.is_some() {
                        fs::remove_file(&path).map_err(io(&path))?;
                    }
                    link_or_copy(&c.dir.join(relative), &path)?;
                }
                Source::Write(file) => {
                    self.step(&format!("write {relative}"))?;
                    if present.is_some() {
                        fs::remove_file(&path).map_err(io(&path))?;
                    }
                    write_unsynced(&path, file)?;
                    written.push(path);
                }
            }
            touched.insert(parent_of(relative));
        }
        self.step("flush generation")?;
        flush(&self.root, &written, &touched)
    }

    /// Once generation `number` is live and on disk, the previous one is no
    /// longer needed, but it holds private keys the new one replaced. It
    /// becomes the spare: renamed away (readers holding its name start over,
    /// as when it was deleted), then brought up to date with the new one by
    /// replacing only what this commit changed, so that it holds no key the
    /// live generation does not. Anything failing here deletes it instead.
    fn retire(&self, previous: &Current, live: &Path, number: u64, target: &Target<'_>) {
        let name = previous.name();
        let spare = self.root.join(SPARE);
        if fs::symlink_metadata(&spare).is_ok() {
            self.remove_spare(false);
        }
        let renamed = self
            .step(&format!("remove {name}"))
            .and_then(|()| fs::rename(&previous.dir, &spare).map_err(io(&spare)));
        if let Err(e) = renamed {
            self.notice(format!(
                "warning: {}: could not remove this old generation ({}); it still holds \
                 private keys, and the next run retries",
                previous.dir.display(),
                reason(&e)
            ));
            return;
        }
        if let Err(e) = self.mirror(&spare, previous, live, number, target) {
            self.notice(format!(
                "warning: {}: could not bring this copy of the store up to date ({}); \
                 removing it",
                spare.display(),
                reason(&e)
            ));
            self.remove_spare(false);
        }
    }

    /// Brings `spare` (a copy of `previous`) up to date with `live`.
    fn mirror(
        &self,
        spare: &Path,
        previous: &Current,
        live: &Path,
        number: u64,
        target: &Target<'_>,
    ) -> Result<()> {
        self.step("update spare")?;
        let mut gone: Vec<&String> = previous
            .tree
            .iter()
            .filter(|(relative, e)| match e.kind {
                Kind::Dir => !target.dirs.contains(relative.as_str()),
                _ => !target.files.contains_key(relative.as_str()),
            })
            .map(|(relative, _)| relative)
            .collect();
        gone.sort_by(|a, b| b.cmp(a));
        for relative in gone {
            let path = spare.join(relative);
            match fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => fs::remove_dir_all(&path),
                Ok(_) => fs::remove_file(&path),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e),
            }
            .map_err(io(&path))?;
        }
        for dir in &target.dirs {
            if previous.tree.get(dir).is_none_or(|e| e.kind != Kind::Dir) {
                let path = spare.join(dir);
                if fs::symlink_metadata(&path).is_err() {
                    make_dir(&path)?;
                }
            }
        }
        for (relative, source) in &target.files {
            let unchanged = matches!(source, Source::Link)
                && previous
                    .tree
                    .get(relative.as_str())
                    .is_some_and(|e| e.kind == Kind::File);
            if unchanged {
                continue;
            }
            let path = spare.join(relative);
            if fs::symlink_metadata(&path).is_ok() {
                fs::remove_file(&path).map_err(io(&path))?;
            }
            link_or_copy(&live.join(relative), &path)?;
        }
        // Not flushed: the mark only spares the next run a removal, and a
        // spare is walked and checked before it is used again. Its mode is
        // set, not left to the umask: the walk refuses a file others can
        // write, and would refuse the store's own mark.
        let mark = spare.join(SPARE_MARK);
        let _ = fs::remove_file(&mark);
        write_unsynced(&mark, &File::secret(number.to_string())).map(drop)
    }

    /// Makes `gen_name` current by renaming a new link over `.data`. On
    /// failure the temporary link and the new generation are removed and
    /// the error says the store is unchanged; if the rename took effect
    /// although it reported an error, that is a warning, not a failure.
    fn switch_data_link(
        &self,
        gen_name: &str,
        number: u64,
        current: Option<&Current>,
    ) -> Result<()> {
        let tmp_link = self.root.join(format!("{DATA_LINK}.tmp"));
        let data = self.root.join(DATA_LINK);
        let _ = fs::remove_file(&tmp_link);
        let switched = self
            .step("create data link")
            .and_then(|()| std::os::unix::fs::symlink(gen_name, &tmp_link).map_err(io(&tmp_link)))
            .and_then(|()| self.step("switch data link"))
            .and_then(|()| fs::rename(&tmp_link, &data).map_err(io(&data)));
        let Err(e) = switched else {
            return Ok(());
        };
        let _ = fs::remove_file(&tmp_link);
        if self.current_target().as_deref() == Some(gen_name) {
            self.notice(format!(
                "warning: {}: switching to generation {number} reported an error ({}), but it is live",
                data.display(),
                reason(&e)
            ));
            return Ok(());
        }
        let _ = fs::remove_dir_all(self.root.join(gen_name));
        let unchanged = match current {
            Some(c) => format!("the store is unchanged at generation {}", c.number),
            None => "the store is unchanged (still empty)".to_string(),
        };
        let kind = match &e {
            RotateError::Io { source, .. } => source.kind(),
            _ => std::io::ErrorKind::Other,
        };
        Err(RotateError::Io {
            path: data,
            source: std::io::Error::new(
                kind,
                format!(
                    "switching to generation {number} failed ({}); {unchanged}",
                    reason(&e)
                ),
            ),
        })
    }

    /// Creates the root links (`signer -> .data/signer`, …) that are
    /// missing. `repair`: they were found missing before a commit (a crash
    /// or a hand), so each is reported.
    fn publish(&self, manifest: &Manifest, number: u64, repair: bool) {
        let mut created = false;
        for name in manifest.published_names() {
            let link = self.root.join(&name);
            if fs::symlink_metadata(&link).is_ok() {
                continue;
            }
            let made = self.step(&format!("publish {name}")).and_then(|()| {
                std::os::unix::fs::symlink(format!("{DATA_LINK}/{name}"), &link).map_err(io(&link))
            });
            match made {
                Ok(()) => {
                    created = true;
                    if repair {
                        self.notice(format!("repaired {} (was missing)", link.display()));
                    }
                }
                Err(e) => self.notice(format!(
                    "warning: {}: generation {number} is live, but this link to it could not be \
                     created ({}): consumers do not see it until the next pki command repairs it",
                    link.display(),
                    reason(&e)
                )),
            }
        }
        if created && let Err(e) = sync_dir(&self.root) {
            self.notice(format!(
                "warning: {}: flushing the directory after publishing failed ({})",
                self.root.display(),
                reason(&e)
            ));
        }
    }

    /// Every generation directory (and temporary one) but `keep`.
    fn old_generations(&self, keep: &str) -> Vec<String> {
        let Ok(entries) = fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with(GEN_PREFIX) && name != keep)
            .collect();
        names.sort();
        names
    }

    /// Removes the generation directories `names`: old generations hold
    /// private keys. `leftover`: they were found before a commit, so each
    /// removal is reported.
    fn remove_generations(&self, names: &[String], leftover: bool) {
        let mut removed = false;
        for name in names {
            let path = self.root.join(name);
            let gone = self.step(&format!("remove {name}")).and_then(|()| {
                match fs::symlink_metadata(&path) {
                    Ok(m) if m.is_dir() => fs::remove_dir_all(&path),
                    _ => fs::remove_file(&path),
                }
                .map_err(io(&path))
            });
            match gone {
                Ok(()) => {
                    removed = true;
                    if leftover {
                        self.notice(format!(
                            "removed {} (left by an interrupted run)",
                            path.display()
                        ));
                    }
                }
                Err(e) => self.notice(format!(
                    "warning: {}: could not remove this old generation ({}); it still holds \
                     private keys, and the next run retries",
                    path.display(),
                    reason(&e)
                )),
            }
        }
        if removed {
            let _ = sync_dir(&self.root);
        }
    }

    /// Verifies every document's files before a commit links them into the
    /// next generation: damage is refused, never carried forward unnoticed.
    fn verify_all(&self, current: &Current) -> Result<()> {
        for entry in current.manifest.keys.values() {
            self.verify_key(current, entry)?;
        }
        Ok(())
    }
}

impl Store for FsStore {
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
        validate_key(key)?;
        if fs::symlink_metadata(self.root.join(DATA_LINK)).is_err() {
            // The first write: refuse what the commit would refuse before
            // the lock file is created, so a refused `init` leaves nothing.
            self.check_root()?;
            self.check_published(&Manifest::default(), files.top_level_names().into_iter())?;
        }
        let _lock = lock::exclusive(&self.lock_path(), self.lock_timeout)?;
        let current = self.current()?;
        let found = current
            .as_ref()
            .and_then(|c| c.manifest.keys.get(key))
            .map(|e| Revision::new(e.revision.to_string()));
        if found.as_ref() != expected {
            return Err(RotateError::Conflict {
                key: key.to_string(),
                expected: expected.cloned(),
                found,
            });
        }
        let empty = Manifest::default();
        let manifest = current.as_ref().map(|c| &c.manifest).unwrap_or(&empty);
        self.check_published(manifest, files.top_level_names().into_iter())?;
        if let Some(c) = &current {
            self.verify_all(c)?;
        }
        self.tidy(current.as_ref());
        self.commit(current.as_ref(), key, files)
    }
}

/// Where a file of the next generation comes from.
enum Source<'a> {
    /// Unchanged: the current generation's file, hard-linked.
    Link,
    /// New or changed: written.
    Write(std::borrow::Cow<'a, File>),
}

/// What the next generation holds: every file with where it comes from,
/// and every directory (parents included).
#[derive(Default)]
struct Target<'a> {
    files: BTreeMap<String, Source<'a>>,
    dirs: BTreeSet<String>,
}

impl<'a> Target<'a> {
    /// The next generation: the other keys' files as they are, this key's
    /// `files` (those whose committed digest and secrecy did not change are
    /// linked, not rewritten) and the new manifest.
    fn new(
        current: Option<&Current>,
        key: &str,
        previous_entry: Option<&KeyEntry>,
        files: &'a Files,
        manifest: &Manifest,
    ) -> Result<Target<'a>> {
        let mut target = Target::default();
        if let Some(c) = current {
            for (other, entry) in &c.manifest.keys {
                if other == key {
                    continue;
                }
                for relative in entry.files.keys() {
                    target.add_file(relative, Source::Link);
                }
                for d in &entry.dirs {
                    target.add_dir(d);
                }
            }
        }
        let new_digests = manifest.keys.get(key).map(|e| &e.sha256);
        for (relative, file) in files.iter() {
            let unchanged = match (current, previous_entry) {
                (Some(c), Some(prev)) if prev.files.get(relative) == Some(&file.secret) => {
                    match (
                        prev.sha256.get(relative),
                        new_digests.and_then(|d| d.get(relative)),
                    ) {
                        (Some(old), Some(new)) => old == new,
                        // A store of format 1 has no digest: compare bytes.
                        _ => same_contents(&c.dir.join(relative), &file.contents),
                    }
                }
                _ => false,
            };
            let source = if unchanged {
                Source::Link
            } else {
                Source::Write(std::borrow::Cow::Borrowed(file))
            };
            target.add_file(relative, source);
        }
        for d in files.dirs() {
            target.add_dir(d);
        }
        let manifest_json = serde_json::to_vec_pretty(manifest)
            .map_err(|e| RotateError::json(MANIFEST.to_string(), e))?;
        target.add_file(
            MANIFEST,
            Source::Write(std::borrow::Cow::Owned(File::public(manifest_json))),
        );
        Ok(target)
    }

    fn add_file(&mut self, relative: &str, source: Source<'a>) {
        if let Some((parent, _)) = relative.rsplit_once('/') {
            self.add_dir(parent);
        }
        self.files.insert(relative.to_string(), source);
    }

    fn add_dir(&mut self, relative: &str) {
        for (end, _) in relative
            .match_indices('/')
            .chain(std::iter::once((relative.len(), "")))
        {
            self.dirs.insert(relative[..end].to_string());
        }
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
            return Err(RotateError::UnsafeStore {
                path: root.to_path_buf(),
                reason: format!(
                    "lies inside the directory store {} (in {name}, which its next write \
                     replaces, removing what is there): choose a directory outside its \
                     published files",
                    store.display()
                ),
            });
        }
    }
    Ok(())
}

/// Whether `path` lies inside the directory `dir` (both relative).
fn is_under(path: &str, dir: &str) -> bool {
    path.len() > dir.len() && path.starts_with(dir) && path.as_bytes()[dir.len()] == b'/'
}

/// A generation written before manifests existed: one signer owning every
/// file, at the revision of the generation's number.
fn legacy_manifest(dir: &Path, number: u64) -> Result<Manifest> {
    let mut entry = KeyEntry {
        revision: number,
        ..KeyEntry::default()
    };
    collect_legacy(dir, dir, &mut entry)?;
    let mut keys = BTreeMap::new();
    keys.insert(LEGACY_KEY.to_string(), entry);
    Ok(Manifest {
        format: MANIFEST_FORMAT,
        keys,
    })
}

fn collect_legacy(base: &Path, dir: &Path, entry: &mut KeyEntry) -> Result<()> {
    for item in fs::read_dir(dir).map_err(io(dir))? {
        let item = item.map_err(io(dir))?;
        let path = item.path();
        let meta = fs::symlink_metadata(&path).map_err(io(&path))?;
        let relative = path
            .strip_prefix(base)
            .map_err(|e| RotateError::corrupt(path.display().to_string(), e))?
            .to_string_lossy()
            .into_owned();
        if meta.is_dir() {
            entry.dirs.insert(relative);
            collect_legacy(base, &path, entry)?;
        } else if meta.is_file() {
            entry
                .files
                .insert(relative, meta.permissions().mode() & 0o077 == 0);
        }
    }
    Ok(())
}

/// Refuses a document that would take over a path another key owns.
fn check_disjoint(manifest: &Manifest, key: &str, files: &Files) -> Result<()> {
    let mut taken_files = BTreeMap::new();
    let mut taken_dirs = BTreeMap::new();
    for (other, entry) in &manifest.keys {
        if other == key {
            continue;
        }
        for p in entry.files.keys() {
            taken_files.insert(p.as_str(), other.as_str());
            for (i, _) in p.match_indices('/') {
                taken_dirs.insert(&p[..i], other.as_str());
            }
        }
        for d in &entry.dirs {
            taken_dirs.insert(d.as_str(), other.as_str());
        }
    }
    for (path, _) in files.iter() {
        let clash = taken_files
            .get(path)
            .or_else(|| taken_dirs.get(path))
            .or_else(|| {
                path.match_indices('/')
                    .find_map(|(i, _)| taken_files.get(&path[..i]))
            });
        if let Some(other) = clash {
            return Err(RotateError::corrupt(
                path,
                format!("is already owned by the document \"{other}\" in this store"),
            ));
        }
    }
    Ok(())
}

fn make_dir(path: &Path) -> Result<()> {
    DirBuilder::new()
        .mode(0o700)
        .create(path)
        .map_err(io(path))?;
    // The umask may have cleared bits but never adds any; set the mode
    // anyway so the directory is exactly 0700.
    fs::set_permissions(path, fs::Permissions::from_mode(0o700)).map_err(io(path))
}

fn same_contents(path: &Path, contents: &[u8]) -> bool {
    match fs::metadata(path) {
        Ok(meta) if meta.len() == contents.len() as u64 => fs::read(path)
            .map(|old| zeroize::Zeroizing::new(old).as_slice() == contents)
            .unwrap_or(false),
        _ => false,
    }
}

fn link_or_copy(from: &Path, to: &Path) -> Result<()> {
    match fs::hard_link(from, to) {
        Ok(()) => Ok(()),
        Err(_) => {
            // A filesystem without hard links: copy, keeping the mode.
            let contents = zeroize::Zeroizing::new(fs::read(from).map_err(io(from))?);
            let meta = fs::metadata(from).map_err(io(from))?;
            let secret = meta.mode() & 0o077 == 0;
            write_file(to, &File { contents, secret })
        }
    }
}

/// Writes a new file (it must not exist) with its mode, and flushes it.
fn write_file(path: &Path, file: &File) -> Result<()> {
    let f = write_unsynced(path, file)?;
    f.sync_all().map_err(io(path))
}

/// Writes a new file (it must not exist) with its mode; the caller flushes.
fn write_unsynced(path: &Path, file: &File) -> Result<fs::File> {
    let mode = if file.secret { 0o600 } else { 0o644 };
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
        .map_err(io(path))?;
    // The umask may have cleared bits but never adds any; set the mode
    // explicitly so a permissive umask cannot widen a key's access.
    f.set_permissions(fs::Permissions::from_mode(mode))
        .map_err(io(path))?;
    f.write_all(&file.contents).map_err(io(path))?;
    Ok(f)
}

/// Puts the files `written` and the entries of the directories `touched`
/// on disk. On Linux that is one `syncfs` of the store's filesystem: a
/// flush per file and per directory costs a disk cache flush each, and a
/// commit of one leaf touches a handful of each. Elsewhere each is flushed.
fn flush(root: &Path, written: &[PathBuf], touched: &BTreeSet<PathBuf>) -> Result<()> {
    #[cfg(target_os = "linux")]
    {
        let _ = (written, touched);
        let dir = fs::File::open(root).map_err(io(root))?;
        rustix::fs::syncfs(&dir).map_err(|e| RotateError::io(root, e.into()))
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = root;
        for path in written {
            fs::File::open(path)
                .and_then(|f| f.sync_all())
                .map_err(io(path))?;
        }
        for d in touched.iter().rev() {
            sync_dir(d)?;
        }
        Ok(())
    }
}

fn sync_dir(dir: &Path) -> Result<()> {
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| RotateError::io(dir, e))
}
