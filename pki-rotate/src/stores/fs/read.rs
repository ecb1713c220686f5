//! Reading: the reader's lock, the current generation after the safety
//! walk, and each committed file checked against its manifest digest.

use super::manifest::{
    Current, INDEX_FORMAT, Index, KeyEntry, Manifest, Top, add_shard, legacy_manifest,
    manifest_of_top, shard_path,
};
use super::safety::{
    DAMAGED_ADVICE, Entry, Kind, Tree, check_owner_and_mode, check_tree, check_tree_shallow,
    describe, digest, effective_uid, read_regular,
};
use super::{
    DATA_LINK, FsStore, GEN_PREFIX, INDEX, MANIFEST, MANIFEST_FORMAT, SHARDED_FORMAT, Verified,
    lock,
};
use crate::model::document::{File, Files};
use crate::model::error::{Result, RotateError};
use crate::model::store::{Revision, Summary};
use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

/// The bytes of a generation's manifest at `path`, never followed if it
/// is a link: a manifest is a regular file of the generation, the one the
/// walk (or the light check) put in `tree`. NotFound when there is none,
/// InvalidData when something else is there.
fn read_manifest(tree: &Tree, path: &Path) -> std::io::Result<Vec<u8>> {
    let walked = tree.get(MANIFEST);
    if walked.is_none() && fs::symlink_metadata(path).is_err() {
        return Err(std::io::ErrorKind::NotFound.into());
    }
    match read_regular(path) {
        Ok(Some((bytes, on_disk)))
            if walked.is_some_and(|w| w.kind == Kind::File && w.id == on_disk.id) =>
        {
            Ok(bytes.to_vec())
        }
        _ => Err(std::io::ErrorKind::InvalidData.into()),
    }
}

/// The number of the generation `.data` (at `link`) names, or an error
/// saying it names no generation.
fn generation_number(link: &Path, name: &str) -> Result<u64> {
    name.strip_prefix(GEN_PREFIX)
        .and_then(|n| n.parse::<u64>().ok())
        .filter(|_| !name.contains('/'))
        .ok_or_else(|| {
            RotateError::corrupt(
                link.display().to_string(),
                format!("points to \"{name}\", not a generation directory"),
            )
        })
}

impl FsStore {
    /// [`crate::Store::get_summary`]: the current generation's index,
    /// without walking the generation or parsing its manifest. Like every
    /// read it finishes an interrupted run when the lock is free (the
    /// index names the links to repair) and refuses a store whose root,
    /// `.data`, generation or index is unsafe. None when the generation has
    /// no index bound to its manifest (an older build wrote it, or it was
    /// damaged, edited or copied from elsewhere; the next write rewrites
    /// it, and a refused command must leave the store as it found it), the
    /// key has no
    /// summary, or the index cannot be read as it is (a writer removed the
    /// generation meanwhile): the caller then reads the document, which
    /// checks all.
    pub(super) fn read_summary(&self, key: &str) -> Result<Option<(Summary, Revision)>> {
        if self.never_written() {
            return Ok(None);
        }
        self.check_root()?;
        let held = self.lock_to_repair()?;
        let Some((number, index)) = self.current_index()? else {
            return Ok(None);
        };
        self.check_published_names(&index.published)?;
        if held.is_some() {
            self.tidy_published(Some((number, &index.published)));
        }
        Ok(index.keys.get(key).and_then(|entry| {
            let summary = Summary::new(entry.summary.clone()?)?;
            Some((summary, Revision::new(entry.revision.to_string())))
        }))
    }

    /// The lock, exclusively, when it is free: a reader holding it finishes
    /// what an interrupted run left. None when another run holds it or the
    /// store cannot be locked here (a read-only mount); an unsafe lock file
    /// is refused.
    pub(super) fn lock_to_repair(&self) -> Result<Option<lock::Lock>> {
        match lock::try_exclusive(&self.lock_path()) {
            Ok(held) => Ok(held),
            Err(e @ RotateError::Store(crate::StoreError::UnsafeStore { .. })) => Err(e),
            Err(_) => Ok(None),
        }
    }

    /// The current generation's number and index, after the checks of
    /// [`FsStore::current`] on `.data`, the generation directory, the index
    /// and the manifest it is bound to (read and hashed, not parsed; nothing
    /// else in the generation is looked at).
    fn current_index(&self) -> Result<Option<(u64, Index)>> {
        let Some(link) = self.data_link()? else {
            return Ok(None);
        };
        let Ok(target) = fs::read_link(&link) else {
            return Ok(None);
        };
        let number = generation_number(&link, &target.to_string_lossy())?;
        let dir = self.root.join(&target);
        let Ok(dir_meta) = fs::symlink_metadata(&dir) else {
            return Ok(None);
        };
        if !dir_meta.is_dir() {
            return Ok(None);
        }
        check_owner_and_mode(&dir, &dir_meta, effective_uid())?;
        let (Some(index), Some(manifest)) = (
            self.read_checked(&dir.join(INDEX))?,
            self.read_checked(&dir.join(MANIFEST))?,
        ) else {
            return Ok(None);
        };
        match serde_json::from_slice::<Index>(&index) {
            Ok(index)
                if index.format == INDEX_FORMAT
                    && index.generation == number
                    && index.manifest_sha256 == digest(&manifest) =>
            {
                Ok(Some((number, index)))
            }
            _ => Ok(None),
        }
    }

    /// The contents of a generation's bookkeeping file at `path`, after
    /// checking its owner and mode; None when it is not a regular file.
    fn read_checked(&self, path: &Path) -> Result<Option<zeroize::Zeroizing<Vec<u8>>>> {
        let Ok(meta) = fs::symlink_metadata(path) else {
            return Ok(None);
        };
        check_owner_and_mode(path, &meta, effective_uid())?;
        Ok(read_regular(path)?
            .filter(|(_, on_disk)| on_disk.id == Entry::of(&meta).id)
            .map(|(bytes, _)| bytes))
    }

    /// No lock file and no `.data`: no run ever wrote here (a writer
    /// creates the lock before anything else), so there is nothing to read
    /// or finish, and a read creates nothing either: a command refused
    /// after it leaves the directory as it found it.
    pub(super) fn never_written(&self) -> bool {
        fs::symlink_metadata(self.lock_path()).is_err()
            && fs::symlink_metadata(self.root.join(DATA_LINK)).is_err()
    }

    /// A reader never waits: it takes the lock exclusively when it is free
    /// and then finishes what an interrupted run left (missing links, old
    /// generations); else it takes it shared, else it reads without it (a
    /// writer holds it, or the store cannot be written here, such as a
    /// read-only mount). A lock file that is unsafe is refused either way.
    ///
    /// With the exclusive lock, also returns the current generation it
    /// checked, for the read to use rather than walk it a second time.
    pub(super) fn reader_lock(&self) -> Result<(Option<lock::Lock>, Option<Current>)> {
        if self.never_written() {
            return Ok((None, None));
        }
        let path = self.lock_path();
        match lock::try_exclusive(&path) {
            Ok(Some(held)) => {
                let current = self.current()?;
                if let Some(c) = &current {
                    self.check_published(&c.top.published(), std::iter::empty())?;
                }
                self.tidy(current.as_ref());
                Ok((Some(held), current))
            }
            Ok(None) => match lock::try_shared(&path) {
                Ok(held) => Ok((held, None)),
                Err(e @ RotateError::Store(crate::StoreError::UnsafeStore { .. })) => Err(e),
                Err(_) => Ok((None, None)),
            },
            Err(e @ RotateError::Store(crate::StoreError::UnsafeStore { .. })) => Err(e),
            Err(_) => Ok((None, None)),
        }
    }

    /// The current generation, after checking that the store is safe: the
    /// root, `.data` and everything in the generation are this user's and
    /// not writable by others.
    pub(super) fn current(&self) -> Result<Option<Current>> {
        self.current_checked(true)
    }

    /// [`FsStore::current`]; without `walk`, only the generation directory
    /// and its manifest are checked, and the tree holds just them: the
    /// caller checks each path it reads ([`FsStore::check_paths`]). A
    /// generation without a manifest (written before manifests existed)
    /// is always walked.
    pub(super) fn current_checked(&self, walk: bool) -> Result<Option<Current>> {
        self.current_with(walk, None)
    }

    /// [`FsStore::current_checked`], reading of a format 3 manifest only
    /// the shards `buckets` (None: all of them); the current generation's
    /// manifest then lists the files of those shards alone.
    pub(super) fn current_with(
        &self,
        walk: bool,
        buckets: Option<&BTreeSet<String>>,
    ) -> Result<Option<Current>> {
        self.current_of(walk, buckets, None)
    }

    /// [`FsStore::current_with`] without walking, its manifest listing
    /// only the files `paths` of the shards they fall in: what a read of
    /// those paths needs.
    pub(super) fn current_for_paths(&self, paths: &BTreeSet<String>) -> Result<Option<Current>> {
        let buckets = paths.iter().map(|p| super::manifest::bucket(p)).collect();
        self.current_of(false, Some(&buckets), Some(paths))
    }

    fn current_of(
        &self,
        walk: bool,
        buckets: Option<&BTreeSet<String>>,
        only: Option<&BTreeSet<String>>,
    ) -> Result<Option<Current>> {
        self.check_root()?;
        let Some((number, name)) = self.data_target()? else {
            return Ok(None);
        };
        let dir = self.root.join(&name);
        let manifest_path = dir.join(MANIFEST);
        let light = !walk && fs::symlink_metadata(&manifest_path).is_ok();
        let tree = if light {
            let mut tree = check_tree_shallow(&dir)?;
            self.check_paths(&dir, &mut tree, [MANIFEST])?;
            tree
        } else {
            check_tree(&dir)?
        };
        let read = read_manifest(&tree, &manifest_path);
        let mut tree = tree;
        let (manifest, top, whole) = match read {
            Ok(bytes) => self.parse_manifest(&dir, &bytes, &mut tree, light, (buckets, only))?,
            // Only a store written before manifests existed has none; one
            // with shards or an index lost its manifest.
            Err(e)
                if e.kind() == std::io::ErrorKind::NotFound
                    && !tree.contains_key(super::manifest::SHARDS_DIR)
                    && !tree.contains_key(INDEX) =>
            {
                let manifest = legacy_manifest(&dir, number)?;
                let top = Top::of(&manifest);
                (manifest, top, true)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::InvalidData | std::io::ErrorKind::NotFound
                ) =>
            {
                return Err(RotateError::Store(crate::StoreError::DamagedStore {
                    path: manifest_path.clone(),
                    found: describe(&manifest_path),
                    expected: format!("the regular file the store committed ({name})"),
                    advice: DAMAGED_ADVICE.into(),
                }));
            }
            Err(e) => return Err(RotateError::io(&manifest_path, e)),
        };
        Ok(Some(Current {
            number,
            dir,
            manifest,
            top,
            whole,
            tree,
        }))
    }

    /// The path of `.data`, after checking its owner and mode; None when
    /// there is no `.data` yet.
    fn data_link(&self) -> Result<Option<PathBuf>> {
        let link = self.root.join(DATA_LINK);
        let meta = match fs::symlink_metadata(&link) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(RotateError::io(&link, e)),
        };
        check_owner_and_mode(&link, &meta, effective_uid())?;
        Ok(Some(link))
    }

    /// The generation `.data` names, after checking the link: its number
    /// and directory name; None when there is no `.data` yet.
    fn data_target(&self) -> Result<Option<(u64, String)>> {
        let Some(link) = self.data_link()? else {
            return Ok(None);
        };
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
        Ok(Some((generation_number(&link, &name)?, name)))
    }

    /// The manifest of the generation `dir` from its `.manifest.json`: of
    /// format 3, its top and the shards `buckets` (None: all), each checked
    /// against the digest the top records; of formats 1 and 2, the whole
    /// list it holds.
    fn parse_manifest(
        &self,
        dir: &Path,
        bytes: &[u8],
        tree: &mut Tree,
        light: bool,
        (buckets, only): (Option<&BTreeSet<String>>, Option<&BTreeSet<String>>),
    ) -> Result<(Manifest, Top, bool)> {
        /// Only the format: what follows depends on it.
        #[derive(serde::Deserialize)]
        struct Format {
            format: u32,
        }
        let path = dir.join(MANIFEST);
        let json = |e| RotateError::json(path.display().to_string(), e);
        match serde_json::from_slice::<Format>(bytes)
            .map_err(json)?
            .format
        {
            1 | 2 => {
                let manifest: Manifest = serde_json::from_slice(bytes).map_err(json)?;
                let top = Top::of(&manifest);
                Ok((manifest, top, true))
            }
            SHARDED_FORMAT..=MANIFEST_FORMAT => {
                let top = Top::parse(bytes, &path)?;
                let mut manifest = manifest_of_top(&top);
                for (bucket, expected) in &top.shards {
                    if buckets.is_some_and(|wanted| !wanted.contains(bucket)) {
                        continue;
                    }
                    let relative = shard_path(bucket);
                    if light {
                        self.check_paths(dir, tree, [relative.as_str()])?;
                    }
                    let shard = dir.join(&relative);
                    let damaged = |found: String| {
                        RotateError::Store(crate::StoreError::DamagedStore {
                            path: shard.clone(),
                            found,
                            expected: format!(
                                "a regular file with SHA-256 {}…",
                                expected.get(..16).unwrap_or(expected)
                            ),
                            advice: DAMAGED_ADVICE.into(),
                        })
                    };
                    let walked = tree.get(relative.as_str()).copied();
                    let Some((contents, on_disk)) = read_regular(&shard)? else {
                        return Err(damaged(describe(&shard)));
                    };
                    if walked.map(|w| w.id) != Some(on_disk.id) {
                        return Err(damaged(
                            "another file than the one checked a moment before".into(),
                        ));
                    }
                    let found = digest(&contents);
                    if found != *expected {
                        return Err(damaged(format!(
                            "a regular file with other content (SHA-256 {}…)",
                            &found[..16]
                        )));
                    }
                    add_shard(&mut manifest, &contents, &shard, only)?;
                }
                Ok((manifest, top, buckets.is_none() && only.is_none()))
            }
            other => Err(RotateError::corrupt(
                path.display().to_string(),
                format!(
                    "store format {other} is not supported (this build reads 1 to {MANIFEST_FORMAT})"
                ),
            )),
        }
    }

    /// One read of `key` from the generation `.data` points to now, or from
    /// `checked` when the caller has just checked it under the lock; also
    /// returns which generation that was.
    pub(super) fn read_once(
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
        if let Err(e) = self.check_published(&current.top.published(), std::iter::empty()) {
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

    pub(super) fn current_target(&self) -> Option<String> {
        fs::read_link(self.root.join(DATA_LINK))
            .ok()
            .map(|t| t.to_string_lossy().into_owned())
    }

    pub(super) fn read_key(&self, current: &Current, entry: &KeyEntry) -> Result<Files> {
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

    /// Verifies every document's files before a commit links them into the
    /// next generation: damage is refused, never carried forward unnoticed.
    pub(super) fn verify_all(&self, current: &Current) -> Result<()> {
        debug_assert!(
            current.whole,
            "every file is verified from the whole manifest"
        );
        for entry in current.manifest.keys.values() {
            self.verify_key(current, entry)?;
        }
        Ok(())
    }

    /// Checks that every file of `entry` is still what was committed, like
    /// [`FsStore::read_key`] but without keeping the contents; a file this
    /// store checked earlier and that is still the same, unmodified file
    /// (same inode, size, modification and change times) is not read again.
    pub(super) fn verify_key(&self, current: &Current, entry: &KeyEntry) -> Result<()> {
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
    pub(super) fn read_committed(
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
        let damaged = |found: String| {
            RotateError::Store(crate::StoreError::DamagedStore {
                path: self.root.join(relative),
                found,
                expected: expected.clone(),
                advice: DAMAGED_ADVICE.into(),
            })
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
    pub(super) fn remember_verified(&self, current: &Current, checked: Vec<(String, Entry)>) {
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
    pub(super) fn expect_dir(&self, current: &Current, relative: &str) -> Result<()> {
        for (end, _) in relative
            .match_indices('/')
            .chain(std::iter::once((relative.len(), "")))
        {
            let walked = &relative[..end];
            if current.tree.get(walked).is_none_or(|e| e.kind != Kind::Dir) {
                let path = current.dir.join(walked);
                return Err(RotateError::Store(crate::StoreError::DamagedStore {
                    path: self.root.join(walked),
                    found: describe(&path),
                    expected: format!("a directory ({})", current.name()),
                    advice: DAMAGED_ADVICE.into(),
                }));
            }
        }
        Ok(())
    }
}
