//! The directory store: the DIR layout of the CLI, committed atomically.
//!
//! ```text
//! DIR/.lock                  flock: exclusive while writing, shared while reading
//! DIR/.data -> .gen-000000012
//! DIR/.gen-000000012/        one complete generation: every document's files
//!     .manifest.json         which key owns which file, and each key's revision
//!     pki-state.json, signer/tls.crt, certs/web/tls.key, …
//! DIR/signer -> .data/signer, DIR/ca-bundle.crt -> .data/ca-bundle.crt, …
//! ```
//!
//! Every write builds a complete new *generation directory* and makes it
//! current by replacing one symbolic link, `.data`, with `rename(2)`, which
//! is atomic. The paths consumers read are links through `.data`, so a
//! reader that resolves `.data` once sees either the whole old state or the
//! whole new one. This is the technique of the Kubernetes kubelet's atomic
//! writer for Secret volumes.
//!
//! Several documents (keys) may share a directory, each owning its own
//! paths. Files of the other keys, and files of the written key that did not
//! change, are hard links into the previous generation: files are never
//! changed once written, so sharing them is safe and a commit costs what
//! changed, not what exists. New files are written to their final name
//! inside a temporary directory and fsynced; the directories are fsynced
//! before and after the switch. Secret files get mode 0600 and every
//! directory 0700, whatever the umask.
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

const DATA_LINK: &str = ".data";
const LOCK_FILE: &str = ".lock";
const GEN_PREFIX: &str = ".gen-";
const MANIFEST: &str = ".manifest.json";
const MANIFEST_FORMAT: u32 = 1;

/// The key a directory written before keys existed is read as: it held one
/// signer.
pub const LEGACY_KEY: &str = "signer";

/// Called before each step that writes to disk, with a description of the
/// step; an error it returns aborts the operation at that point. Used to
/// prove that a failure at any write leaves the previous state intact.
pub type WriteHook = Box<dyn Fn(&str) -> std::io::Result<()> + Send + Sync>;

/// Documents in a directory, in the layout consumers read.
pub struct FsStore {
    root: PathBuf,
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
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    dirs: BTreeSet<String>,
}

/// The current generation: its number, directory and manifest.
struct Current {
    number: u64,
    dir: PathBuf,
    manifest: Manifest,
}

impl FsStore {
    /// Opens the store in `root`, which must hold one (`pki init` made it).
    pub fn open(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        if fs::symlink_metadata(root.join(DATA_LINK)).is_err() {
            return Err(RotateError::NotInitialized(root.display().to_string()));
        }
        Ok(FsStore { root, hook: None })
    }

    /// Opens the store in `root`, creating the directory (mode 0700) when it
    /// does not exist. A directory without a store is an empty store: its
    /// first `put` creates the layout.
    pub fn open_or_create(root: impl AsRef<Path>) -> Result<Self> {
        let root = root.as_ref().to_path_buf();
        if !root.is_dir() {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&root)
                .map_err(io(&root))?;
        }
        Ok(FsStore { root, hook: None })
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

    /// The keys that hold a document.
    pub fn keys(&self) -> Result<Vec<String>> {
        let _lock = self.lock(false)?;
        Ok(match self.current()? {
            Some(c) => c.manifest.keys.into_keys().collect(),
            None => Vec::new(),
        })
    }

    fn step(&self, what: &str) -> Result<()> {
        match &self.hook {
            Some(h) => h(what).map_err(|e| RotateError::io(self.root.join(what), e)),
            None => Ok(()),
        }
    }

    /// Takes the store's lock: shared to read, exclusive to write. Released
    /// when the returned file is dropped.
    fn lock(&self, exclusive: bool) -> Result<fs::File> {
        let path = self.root.join(LOCK_FILE);
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .mode(0o600)
            .open(&path)
            .map_err(io(&path))?;
        if exclusive {
            file.lock().map_err(io(&path))?;
        } else {
            file.lock_shared().map_err(io(&path))?;
        }
        Ok(file)
    }

    /// The shared lock if it can be taken without waiting.
    fn try_lock_shared(&self) -> Option<fs::File> {
        let file = OpenOptions::new()
            .read(true)
            .open(self.root.join(LOCK_FILE))
            .ok()?;
        file.try_lock_shared().ok()?;
        Some(file)
    }

    fn current(&self) -> Result<Option<Current>> {
        let link = self.root.join(DATA_LINK);
        let target = match fs::read_link(&link) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(RotateError::io(&link, e)),
        };
        let name = target.to_string_lossy().into_owned();
        let number = name
            .strip_prefix(GEN_PREFIX)
            .and_then(|n| n.parse::<u64>().ok())
            .ok_or_else(|| {
                RotateError::corrupt(
                    link.display().to_string(),
                    format!("points to \"{name}\", not a generation directory"),
                )
            })?;
        let dir = self.root.join(&name);
        let manifest_path = dir.join(MANIFEST);
        let manifest = match fs::read(&manifest_path) {
            Ok(bytes) => {
                let m: Manifest = serde_json::from_slice(&bytes)
                    .map_err(|e| RotateError::json(manifest_path.display().to_string(), e))?;
                if m.format != MANIFEST_FORMAT {
                    return Err(RotateError::corrupt(
                        manifest_path.display().to_string(),
                        format!(
                            "store format {} is not supported (this build reads {MANIFEST_FORMAT})",
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
        }))
    }

    fn read_key(&self, current: &Current, entry: &KeyEntry) -> Result<Files> {
        let mut files = Files::new();
        for (relative, &secret) in &entry.files {
            let path = current.dir.join(relative);
            let contents = match fs::read(&path) {
                Ok(c) => c,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return Err(RotateError::corrupt(
                        format!("{}: {relative}", self.root.display()),
                        "missing (the store's manifest lists it)",
                    ));
                }
                Err(e) => return Err(RotateError::io(&path, e)),
            };
            files.insert(
                relative.clone(),
                File {
                    contents: zeroize::Zeroizing::new(contents),
                    secret,
                },
            )?;
        }
        for d in &entry.dirs {
            files.insert_dir(d.clone())?;
        }
        Ok(files)
    }

    fn commit(&self, current: Option<&Current>, key: &str, files: &Files) -> Result<Revision> {
        let number = current.map(|c| c.number).unwrap_or(0) + 1;
        let gen_name = format!("{GEN_PREFIX}{number:09}");
        let tmp = self.root.join(format!("{gen_name}.tmp"));
        let final_dir = self.root.join(&gen_name);

        let mut manifest = current
            .map(|c| c.manifest.clone())
            .unwrap_or_else(|| Manifest {
                format: MANIFEST_FORMAT,
                keys: BTreeMap::new(),
            });
        manifest.format = MANIFEST_FORMAT;
        check_disjoint(&manifest, key, files)?;
        let entry = KeyEntry {
            revision: number,
            files: files
                .iter()
                .map(|(p, f)| (p.to_string(), f.secret))
                .collect(),
            dirs: files.dirs().map(str::to_string).collect(),
        };
        let previous_entry = manifest.keys.insert(key.to_string(), entry);

        let result = self
            .write_generation(
                &tmp,
                &final_dir,
                current,
                key,
                previous_entry.as_ref(),
                files,
                &manifest,
            )
            .and_then(|()| self.switch_data_link(&gen_name));
        if result.is_err() {
            // Best effort: the previous generation is untouched either way,
            // and leftovers are removed by the next successful commit.
            let _ = fs::remove_dir_all(&tmp);
            if self.current_target().as_deref() != Some(gen_name.as_str()) {
                let _ = fs::remove_dir_all(&final_dir);
            }
            result?;
        }
        self.remove_stale_generations(&gen_name);
        // A store whose links were removed by hand gets them back.
        self.ensure_published(&manifest)?;
        Ok(Revision::new(number.to_string()))
    }

    fn current_target(&self) -> Option<String> {
        fs::read_link(self.root.join(DATA_LINK))
            .ok()
            .map(|t| t.to_string_lossy().into_owned())
    }

    #[allow(clippy::too_many_arguments)]
    fn write_generation(
        &self,
        tmp: &Path,
        final_dir: &Path,
        current: Option<&Current>,
        key: &str,
        previous_entry: Option<&KeyEntry>,
        files: &Files,
        manifest: &Manifest,
    ) -> Result<()> {
        for leftover in [tmp, final_dir] {
            if fs::symlink_metadata(leftover).is_ok() {
                fs::remove_dir_all(leftover).map_err(io(leftover))?;
            }
        }
        self.step("create generation directory")?;
        let mut dirs = BTreeSet::new();
        make_dir(tmp)?;
        dirs.insert(tmp.to_path_buf());

        // Files of the other keys: linked from the current generation.
        if let Some(current) = current {
            for (other, entry) in &current.manifest.keys {
                if other == key {
                    continue;
                }
                for relative in entry.files.keys() {
                    let to = tmp.join(relative);
                    make_parents(tmp, relative, &mut dirs)?;
                    self.step(&format!("link {relative}"))?;
                    link_or_copy(&current.dir.join(relative), &to)?;
                }
                for d in &entry.dirs {
                    make_parents(tmp, &format!("{d}/x"), &mut dirs)?;
                }
            }
        }
        // This key's files: unchanged ones linked, the others written.
        for (relative, file) in files.iter() {
            make_parents(tmp, relative, &mut dirs)?;
            let path = tmp.join(relative);
            let unchanged = match (current, previous_entry) {
                (Some(c), Some(prev)) if prev.files.get(relative) == Some(&file.secret) => {
                    same_contents(&c.dir.join(relative), &file.contents)
                }
                _ => false,
            };
            if unchanged {
                self.step(&format!("link {relative}"))?;
                if let Some(c) = current {
                    link_or_copy(&c.dir.join(relative), &path)?;
                }
            } else {
                self.step(&format!("write {relative}"))?;
                write_file(&path, file)?;
            }
        }
        for d in files.dirs() {
            make_parents(tmp, &format!("{d}/x"), &mut dirs)?;
        }
        self.step(&format!("write {MANIFEST}"))?;
        let manifest_json = serde_json::to_vec_pretty(manifest)
            .map_err(|e| RotateError::json(MANIFEST.to_string(), e))?;
        write_file(&tmp.join(MANIFEST), &File::public(manifest_json))?;
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

    /// Creates the root links (`signer -> .data/signer`, …) that are missing.
    fn ensure_published(&self, manifest: &Manifest) -> Result<()> {
        let mut names = BTreeSet::new();
        for entry in manifest.keys.values() {
            for p in entry.files.keys().chain(entry.dirs.iter()) {
                names.insert(p.split('/').next().unwrap_or(p).to_string());
            }
        }
        let mut created = false;
        for name in names {
            let link = self.root.join(&name);
            if fs::symlink_metadata(&link).is_err() {
                std::os::unix::fs::symlink(format!("{DATA_LINK}/{name}"), &link)
                    .map_err(io(&link))?;
                created = true;
            }
        }
        if created {
            sync_dir(&self.root)?;
        }
        Ok(())
    }

    /// Refuses to write a document whose published names are taken at the
    /// root by something other than the store's own links: consumers would
    /// keep reading that instead.
    fn check_published_names(&self, files: &Files) -> Result<()> {
        for name in files.top_level_names() {
            let path = self.root.join(name);
            match fs::read_link(&path) {
                Ok(target) if target == Path::new(DATA_LINK).join(name) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                _ => {
                    return Err(RotateError::corrupt(
                        path.display().to_string(),
                        format!(
                            "exists and is not the store's link to {DATA_LINK}/{name}; move it away"
                        ),
                    ));
                }
            }
        }
        Ok(())
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
}

impl Store for FsStore {
    fn location(&self) -> String {
        self.root.display().to_string()
    }

    fn get(&self, key: &str) -> Result<Option<(Files, Revision)>> {
        validate_key(key)?;
        // A shared lock keeps writers from removing the generation being
        // read. When it cannot be had at once (a writer holds it, or the
        // store is read-only to this user), read anyway: a generation only
        // disappears after `.data` moved past it, so a read that raced a
        // writer is simply done again from the new generation.
        let _lock = self.try_lock_shared();
        let mut attempts = 0;
        loop {
            attempts += 1;
            let Some(current) = self.current()? else {
                return Ok(None);
            };
            let Some(entry) = current.manifest.keys.get(key) else {
                return Ok(None);
            };
            match self.read_key(&current, entry) {
                Ok(files) => return Ok(Some((files, Revision::new(entry.revision.to_string())))),
                Err(e) => {
                    let moved = self.current_target().as_deref()
                        != current.dir.file_name().and_then(|n| n.to_str());
                    if !moved || attempts >= 3 {
                        return Err(e);
                    }
                }
            }
        }
    }

    fn put(&self, key: &str, expected: Option<&Revision>, files: &Files) -> Result<Revision> {
        validate_key(key)?;
        let _lock = self.lock(true)?;
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
        self.check_published_names(files)?;
        self.commit(current.as_ref(), key, files)
    }
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

/// Creates the missing parent directories of `relative` under `base`.
fn make_parents(base: &Path, relative: &str, made: &mut BTreeSet<PathBuf>) -> Result<()> {
    let mut dir = base.to_path_buf();
    let segments: Vec<&str> = relative.split('/').collect();
    for segment in &segments[..segments.len().saturating_sub(1)] {
        dir.push(segment);
        if !made.contains(&dir) {
            if fs::symlink_metadata(&dir).is_err() {
                make_dir(&dir)?;
            }
            made.insert(dir.clone());
        }
    }
    Ok(())
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

fn write_file(path: &Path, file: &File) -> Result<()> {
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
    fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| RotateError::io(dir, e))
}
