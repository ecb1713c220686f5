//! The filesystem store: the DIR layout of the CLI, committed atomically.
//!
//! Each state is written as a complete *generation directory*
//! (`.gen-000007/`), then made current by replacing one symbolic link,
//! `.data`, with `rename(2)`, which is atomic. The paths users read
//! (`signer/`, `certs/`, `ca-bundle.crt`, `pki-state.json`) are links
//! through `.data`, so a reader sees either the whole old state or the whole
//! new one, never a certificate from one and a key from the other. This is
//! the technique of the Kubernetes kubelet's atomic writer for Secret volumes.
//!
//! Every file is written to its final name inside a temporary directory,
//! fsynced, and the directories are fsynced before and after the switch.
//! Keys are created with mode 0600. An exclusive `flock` on `.lock` is held
//! from [`FsStore::open`] until the store is dropped, so two runs on the same
//! directory cannot interleave.

use super::Store;
use crate::error::{Result, RotateError};
use crate::signer::SignerState;
use crate::state::{STATE_FILE, StateFile, StateFiles, document_generation};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

const DATA_LINK: &str = ".data";
const LOCK_FILE: &str = ".lock";
const GEN_PREFIX: &str = ".gen-";
/// The entries of the root that point into the current generation.
const PUBLISHED: [&str; 4] = ["signer", "certs", "ca-bundle.crt", STATE_FILE];

/// Called before each step that writes to disk, with a description of the
/// step; an error it returns aborts the operation at that point. Used to
/// prove that a failure at any write leaves the previous state intact.
pub type WriteHook = Box<dyn Fn(&str) -> std::io::Result<()> + Send + Sync>;

/// A signer state in a directory, locked for the lifetime of this value.
pub struct FsStore {
    root: PathBuf,
    _lock: File,
    hook: Option<WriteHook>,
}

impl std::fmt::Debug for FsStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FsStore").field("root", &self.root).finish()
    }
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> RotateError + '_ {
    move |e| RotateError::io(path, e)
}

impl FsStore {
    /// Opens an existing store and takes its lock (waiting for another
    /// holder to finish).
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        if !root.join(DATA_LINK).exists() {
            return Err(RotateError::NotInitialized(root));
        }
        let lock = lock(&root)?;
        Ok(FsStore {
            root,
            _lock: lock,
            hook: None,
        })
    }

    /// Creates a store at `root` (which may exist and be empty of pki
    /// files) holding `state` as generation 1.
    pub fn create(root: impl AsRef<Path>, state: &SignerState) -> Result<Self> {
        Self::create_with_hook(root, state, None)
    }

    /// [`FsStore::create`] with a write hook installed from the start.
    pub fn create_with_hook(
        root: impl AsRef<Path>,
        state: &SignerState,
        hook: Option<WriteHook>,
    ) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        fs::create_dir_all(&root).map_err(io(&root))?;
        let lock = lock(&root)?;
        let store = FsStore {
            root,
            _lock: lock,
            hook,
        };
        if fs::symlink_metadata(store.root.join(DATA_LINK)).is_ok() {
            return Err(RotateError::AlreadyInitialized(store.root.clone()));
        }
        for name in PUBLISHED {
            if fs::symlink_metadata(store.root.join(name)).is_ok() {
                return Err(RotateError::AlreadyInitialized(store.root.clone()));
            }
        }
        store.commit(1, state)?;
        // The published links are fixed; only `.data` ever changes. Should
        // creating them fail, the store is still complete and `open` works;
        // the next commit creates the missing links.
        store.ensure_published()?;
        Ok(store)
    }

    /// Installs a hook called before each disk write (see [`WriteHook`]).
    pub fn set_write_hook(&mut self, hook: Option<WriteHook>) {
        self.hook = hook;
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Absolute path of a published file, such as `ca-bundle.crt`.
    pub fn path(&self, relative: &str) -> PathBuf {
        self.root.join(relative)
    }

    fn step(&self, what: &str) -> Result<()> {
        match &self.hook {
            Some(h) => h(what).map_err(|e| RotateError::io(self.root.join(what), e)),
            None => Ok(()),
        }
    }

    fn current_generation_dir(&self) -> Result<PathBuf> {
        let link = self.root.join(DATA_LINK);
        let target = fs::read_link(&link).map_err(io(&link))?;
        Ok(self.root.join(target))
    }

    fn read_generation(&self) -> Result<u64> {
        let path = self.current_generation_dir()?.join(STATE_FILE);
        let bytes = fs::read(&path).map_err(io(&path))?;
        document_generation(&path.display().to_string(), &bytes)
    }

    fn commit(&self, generation: u64, state: &SignerState) -> Result<()> {
        let files = state.to_files(generation)?;
        let gen_name = format!("{GEN_PREFIX}{generation:09}");
        let tmp = self.root.join(format!("{gen_name}.tmp"));
        let final_dir = self.root.join(&gen_name);
        let result = self
            .write_generation(&tmp, &final_dir, &files)
            .and_then(|()| self.switch_data_link(&gen_name));
        if result.is_err() {
            // Best effort: the previous generation is untouched either way,
            // and leftovers are removed by the next successful commit.
            let _ = fs::remove_dir_all(&tmp);
            if self.current_generation_dir().ok().as_deref() != Some(final_dir.as_path()) {
                let _ = fs::remove_dir_all(&final_dir);
            }
            return result;
        }
        self.remove_stale_generations(&gen_name);
        Ok(())
    }

    fn write_generation(&self, tmp: &Path, final_dir: &Path, files: &StateFiles) -> Result<()> {
        if tmp.exists() {
            fs::remove_dir_all(tmp).map_err(io(tmp))?;
        }
        if final_dir.exists() {
            fs::remove_dir_all(final_dir).map_err(io(final_dir))?;
        }
        self.step("create generation directory")?;
        fs::create_dir(tmp).map_err(io(tmp))?;
        // Every generation has a certs/ directory so the published link resolves.
        fs::create_dir_all(tmp.join("certs")).map_err(io(tmp))?;
        let mut dirs = vec![tmp.to_path_buf(), tmp.join("certs")];
        for (relative, file) in files {
            let path = tmp.join(relative);
            if let Some(parent) = path.parent()
                && !parent.exists()
            {
                fs::create_dir_all(parent).map_err(io(parent))?;
                dirs.push(parent.to_path_buf());
            }
            self.step(&format!("write {relative}"))?;
            write_file(&path, file)?;
        }
        dirs.sort();
        dirs.dedup();
        for d in dirs.iter().rev() {
            sync_dir(d)?;
        }
        self.step("rename generation directory")?;
        fs::rename(tmp, final_dir).map_err(io(final_dir))?;
        sync_dir(&self.root)
    }

    fn switch_data_link(&self, gen_name: &str) -> Result<()> {
        let tmp_link = self.root.join(format!("{DATA_LINK}.tmp"));
        let _ = fs::remove_file(&tmp_link);
        self.step("create data link")?;
        std::os::unix::fs::symlink(gen_name, &tmp_link).map_err(io(&tmp_link))?;
        self.step("switch data link")?;
        fs::rename(&tmp_link, self.root.join(DATA_LINK)).map_err(io(&tmp_link))?;
        sync_dir(&self.root)
    }

    fn ensure_published(&self) -> Result<()> {
        for name in PUBLISHED {
            let link = self.root.join(name);
            if fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(format!("{DATA_LINK}/{name}"), &link)
                    .map_err(io(&link))?;
            }
        }
        sync_dir(&self.root)
    }

    fn remove_stale_generations(&self, current: &str) {
        let Ok(entries) = fs::read_dir(&self.root) else {
            return;
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            if name.starts_with(GEN_PREFIX) && name != current {
                let _ = fs::remove_dir_all(entry.path());
            }
        }
        let _ = sync_dir(&self.root);
    }

    /// Reads every file of the current generation.
    pub fn read_files(&self) -> Result<StateFiles> {
        let dir = self.current_generation_dir()?;
        let mut files = StateFiles::new();
        collect(&dir, &dir, &mut files)?;
        Ok(files)
    }
}

impl Store for FsStore {
    fn load(&self) -> Result<(SignerState, u64)> {
        let files = self.read_files()?;
        SignerState::from_files(&files).map_err(|e| match e {
            RotateError::CorruptState { location, reason } => RotateError::CorruptState {
                location: format!("{}: {location}", self.root.display()),
                reason,
            },
            other => other,
        })
    }

    fn compare_and_swap(&self, expected: u64, state: &SignerState) -> Result<u64> {
        let found = self.read_generation()?;
        if found != expected {
            return Err(RotateError::Conflict { expected, found });
        }
        let next = expected + 1;
        self.commit(next, state)?;
        // A store whose links were removed by hand gets them back.
        self.ensure_published()?;
        Ok(next)
    }
}

fn lock(root: &Path) -> Result<File> {
    let path = root.join(LOCK_FILE);
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(&path)
        .map_err(io(&path))?;
    file.lock().map_err(io(&path))?;
    Ok(file)
}

fn write_file(path: &Path, file: &StateFile) -> Result<()> {
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
    f.sync_all().map_err(io(path))
}

fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| RotateError::io(dir, e))
}

fn collect(base: &Path, dir: &Path, out: &mut StateFiles) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let path = entry.path();
        let meta = fs::symlink_metadata(&path).map_err(io(&path))?;
        if meta.is_dir() {
            collect(base, &path, out)?;
        } else if meta.is_file() {
            let relative = path
                .strip_prefix(base)
                .map_err(|e| RotateError::corrupt(path.display().to_string(), e))?
                .to_string_lossy()
                .replace('\\', "/");
            let contents = fs::read(&path).map_err(io(&path))?;
            let secret = meta.permissions().mode() & 0o077 == 0;
            out.insert(
                relative,
                StateFile {
                    contents: zeroize::Zeroizing::new(contents),
                    secret,
                },
            );
        }
    }
    Ok(())
}
