//! `.manifest.json`: which key owns which file of a generation (and its
//! SHA-256), each key's revision, and the manifest read from a store
//! written before manifests existed.

use super::GEN_PREFIX;
use super::safety::Tree;
use super::{LEGACY_KEY, MANIFEST_FORMAT, io};
use crate::document::Files;
use crate::error::{Result, RotateError};
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
    /// The summary written with the document ([`crate::store::Summary`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) summary: Option<String>,
}

/// `.index.json`: the few hundred bytes of a generation a reader needs
/// without walking it or reading its manifest, which grow with the
/// documents: each key's revision and summary, and the names the
/// generation publishes at the root (for the repairs every run makes).
/// Written with every commit from the manifest; a generation without one
/// (written by an older build) is read through its manifest.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct Index {
    pub(super) format: u32,
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

/// The format of `.index.json` this build writes and reads.
pub(super) const INDEX_FORMAT: u32 = 1;

impl Index {
    pub(super) fn of(manifest: &Manifest) -> Index {
        Index {
            format: INDEX_FORMAT,
            published: manifest.published_names(),
            keys: manifest
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
pub(super) struct Current {
    pub(super) number: u64,
    pub(super) dir: PathBuf,
    pub(super) manifest: Manifest,
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
