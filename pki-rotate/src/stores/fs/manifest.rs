//! `.manifest.json`: which key owns which file of a generation (and its
//! SHA-256), each key's revision, and the manifest read from a store
//! written before manifests existed.
//!
//! Format 3 keeps the list of files out of `.manifest.json`, in 256
//! *shards* (`.manifest/00.json` … `ff.json`, a path in the shard named by
//! the first byte of its path's SHA-256), each checked against the digest
//! `.manifest.json` records for it. A step that changes one leaf of ten
//! thousand reads and rewrites the few shards its paths fall in, not a
//! list of forty thousand files. Formats 1 and 2 (one list in
//! `.manifest.json`) are read; the next whole write makes it format 3.

use super::GEN_PREFIX;
use super::safety::Tree;
use super::{LEGACY_KEY, MANIFEST_FORMAT, io};
use crate::model::document::{File, Files};
use crate::model::error::{Result, RotateError};
use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Manifest {
    pub(super) format: u32,
    pub(super) keys: BTreeMap<String, KeyEntry>,
}

#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct KeyEntry {
    /// The generation that last wrote this key.
    pub(super) revision: u64,
    /// Path → whether it is secret.
    pub(super) files: BTreeMap<String, bool>,
    /// Path → SHA-256 (hex) of what was committed (format 2).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(super) sha256: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub(super) dirs: BTreeSet<String>,
    /// The summary written with the document ([`crate::model::store::Summary`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) summary: Option<String>,
}

/// `.manifest.json` of format 3: each key's revision, summary, declared
/// directories and top-level names, and the digest of every shard.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Top {
    pub(super) format: u32,
    pub(super) keys: BTreeMap<String, TopEntry>,
    /// Bucket (two hex digits) → SHA-256 (hex) of its shard, for every
    /// shard that lists a file.
    pub(super) shards: BTreeMap<String, String>,
}

/// One key in [`Top`].
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct TopEntry {
    pub(super) revision: u64,
    #[serde(default, skip_serializing_if = "BTreeSet::is_empty")]
    pub(super) dirs: BTreeSet<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) summary: Option<String>,
    /// The first component of each of its files and directories: the names
    /// it publishes at the root.
    pub(super) roots: BTreeSet<String>,
}

/// One shard: key → path → the file's entry.
type Shard = BTreeMap<String, BTreeMap<String, ShardFile>>;

/// A file in a shard.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardFile {
    secret: bool,
    sha256: String,
}

/// The directory of the shards in a generation of format 3.
pub(super) const SHARDS_DIR: &str = ".manifest";

/// The shard that lists `path`: the first byte of its SHA-256, in hex.
pub(super) fn bucket(path: &str) -> String {
    use sha2::Digest;
    hex::encode(&sha2::Sha256::digest(path.as_bytes())[..1])
}

/// The path of shard `bucket` in a generation.
pub(super) fn shard_path(bucket: &str) -> String {
    format!("{SHARDS_DIR}/{bucket}.json")
}

/// The first component of `path`.
pub(super) fn root_of(path: &str) -> &str {
    path.split('/').next().unwrap_or(path)
}

impl Top {
    /// The names the generation publishes at the root.
    pub(super) fn published(&self) -> BTreeSet<String> {
        self.keys
            .values()
            .flat_map(|e| e.roots.iter().cloned())
            .collect()
    }

    /// The top of `manifest` (whatever its format), with no shard digests.
    pub(super) fn of(manifest: &Manifest) -> Top {
        let keys = manifest
            .keys
            .iter()
            .map(|(key, entry)| {
                let roots = entry.roots();
                let top = TopEntry {
                    revision: entry.revision,
                    dirs: entry.dirs.clone(),
                    summary: entry.summary.clone(),
                    roots,
                };
                (key.clone(), top)
            })
            .collect();
        Top {
            format: super::MANIFEST_FORMAT,
            keys,
            shards: BTreeMap::new(),
        }
    }

    /// The `.manifest.json` and `.index.json` of generation `generation`
    /// from this top: the index is bound to that generation and to the
    /// manifest's digest.
    pub(super) fn files(&self, generation: u64) -> Result<[(&'static str, File); 2]> {
        let manifest = serde_json::to_vec_pretty(self)
            .map_err(|e| RotateError::json(super::MANIFEST.to_string(), e))?;
        let index = serde_json::to_vec(&Index::of(self, generation, &manifest))
            .map_err(|e| RotateError::json(super::INDEX.to_string(), e))?;
        Ok([
            (super::MANIFEST, File::public(manifest)),
            (super::INDEX, File::public(index)),
        ])
    }

    /// Parses a format 3 `.manifest.json`.
    pub(super) fn parse(bytes: &[u8], location: &Path) -> Result<Top> {
        serde_json::from_slice(bytes)
            .map_err(|e| RotateError::json(location.display().to_string(), e))
    }
}

/// The shards of `manifest`, each as written: bucket → JSON.
pub(super) fn shards_of(manifest: &Manifest) -> Result<BTreeMap<String, Vec<u8>>> {
    let mut shards: BTreeMap<String, Shard> = BTreeMap::new();
    for (key, entry) in &manifest.keys {
        for (path, &secret) in &entry.files {
            let sha256 = entry.sha256.get(path).cloned().unwrap_or_default();
            shards
                .entry(bucket(path))
                .or_default()
                .entry(key.clone())
                .or_default()
                .insert(path.clone(), ShardFile { secret, sha256 });
        }
    }
    shards
        .into_iter()
        .map(|(b, shard)| {
            let json =
                serde_json::to_vec(&shard).map_err(|e| RotateError::json(shard_path(&b), e))?;
            Ok((b, json))
        })
        .collect()
}

/// A shard as parsed, its strings borrowed from the JSON where they can be
/// (they can always, for the paths and digests pki writes).
type ShardRef<'a> = BTreeMap<Cow<'a, str>, BTreeMap<Cow<'a, str>, ShardFileRef<'a>>>;

#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ShardFileRef<'a> {
    secret: bool,
    #[serde(borrow)]
    sha256: Cow<'a, str>,
}

/// Adds the files a shard's JSON lists to `manifest`, whose keys come from
/// the top (a file of a key the top does not have is refused); with
/// `only`, just the files it names (a read of a few paths of a shard of a
/// hundred and more).
pub(super) fn add_shard(
    manifest: &mut Manifest,
    bytes: &[u8],
    location: &Path,
    only: Option<&BTreeSet<String>>,
) -> Result<()> {
    let shard: ShardRef<'_> = serde_json::from_slice(bytes)
        .map_err(|e| RotateError::json(location.display().to_string(), e))?;
    for (key, files) in shard {
        let Some(entry) = manifest.keys.get_mut(key.as_ref()) else {
            return Err(RotateError::corrupt(
                location.display().to_string(),
                format!("lists files of \"{key}\", which the manifest does not have"),
            ));
        };
        for (path, file) in files {
            if only.is_some_and(|wanted| !wanted.contains(path.as_ref())) {
                continue;
            }
            entry.files.insert(path.to_string(), file.secret);
            entry
                .sha256
                .insert(path.into_owned(), file.sha256.into_owned());
        }
    }
    Ok(())
}

/// The manifest that `top` starts: every key with its revision, summary
/// and directories, and no files yet ([`add_shard`] adds them).
pub(super) fn manifest_of_top(top: &Top) -> Manifest {
    Manifest {
        format: top.format,
        keys: top
            .keys
            .iter()
            .map(|(key, e)| {
                let entry = KeyEntry {
                    revision: e.revision,
                    dirs: e.dirs.clone(),
                    summary: e.summary.clone(),
                    ..KeyEntry::default()
                };
                (key.clone(), entry)
            })
            .collect(),
    }
}

/// `.index.json`: the few hundred bytes of a generation a reader needs
/// without walking it or parsing its manifest, which grow with the
/// documents: each key's revision and summary, and the names the
/// generation publishes at the root (for the repairs every run makes).
/// Written with every commit from the manifest, and bound to it: it names
/// its generation and the SHA-256 of the generation's `.manifest.json`, so
/// an index edited, left from another generation or copied from another
/// store is not believed (the reader reads the document instead). A
/// generation without a bound index (written by an older build) is read
/// through its manifest.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Index {
    pub(super) format: u32,
    /// The generation it was written for.
    pub(super) generation: u64,
    /// SHA-256 (hex) of that generation's `.manifest.json`.
    pub(super) manifest_sha256: String,
    pub(super) published: BTreeSet<String>,
    pub(super) keys: BTreeMap<String, IndexEntry>,
}

/// One key of the index.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct IndexEntry {
    pub(super) revision: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) summary: Option<String>,
}

/// The format of `.index.json` this build writes and reads (format 1 had
/// no binding to its manifest: not believed).
pub(super) const INDEX_FORMAT: u32 = 2;

impl Index {
    /// The index of generation `generation`, whose `.manifest.json` holds
    /// `manifest` (the bytes of `top`).
    pub(super) fn of(top: &Top, generation: u64, manifest: &[u8]) -> Index {
        Index {
            format: INDEX_FORMAT,
            generation,
            manifest_sha256: super::safety::digest(manifest),
            published: top.published(),
            keys: top
                .keys
                .iter()
                .map(|(key, entry)| {
                    let indexed = IndexEntry {
                        revision: entry.revision,
                        summary: entry.summary.clone(),
                    };
                    (key.clone(), indexed)
                })
                .collect(),
        }
    }
}

/// The directory name of generation `number`.
pub(super) fn generation_name(number: u64) -> String {
    format!("{GEN_PREFIX}{number:09}")
}

impl Manifest {
    /// The names at the root that are the store's links into `.data`.
    pub(super) fn published_names(&self) -> BTreeSet<String> {
        self.keys.values().flat_map(KeyEntry::roots).collect()
    }
}

impl KeyEntry {
    /// The first component of each of its files and directories.
    fn roots(&self) -> BTreeSet<String> {
        self.files
            .keys()
            .chain(self.dirs.iter())
            .map(|p| root_of(p).to_string())
            .collect()
    }
}

/// The current generation: its number, directory and manifest.
pub(super) struct Current {
    pub(super) number: u64,
    pub(super) dir: PathBuf,
    /// Every file of every key; or, read for some paths, the files of the
    /// shards those fall in ([`Current::whole`] says which).
    pub(super) manifest: Manifest,
    /// The manifest's top: as read (format 3), or made from the whole
    /// manifest of an older format (no shard digests).
    pub(super) top: Top,
    /// Whether `manifest` lists every file.
    pub(super) whole: bool,
    /// Everything in the generation directory, as the safety walk found it.
    pub(super) tree: Tree,
}

impl Current {
    pub(super) fn name(&self) -> String {
        generation_name(self.number)
    }
}

/// A generation written before manifests existed: one signer owning every
/// file, at the revision of the generation's number.
pub(super) fn legacy_manifest(dir: &Path, number: u64) -> Result<Manifest> {
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

pub(super) fn collect_legacy(base: &Path, dir: &Path, entry: &mut KeyEntry) -> Result<()> {
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
pub(super) fn check_disjoint(manifest: &Manifest, key: &str, files: &Files) -> Result<()> {
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
