//! Reading a document: its head, then the shards of the buckets wanted
//! (all of them, or those of some paths), each checked against the SHA-256
//! the head records. A shard that is gone means a newer commit replaced
//! the head and removed it: the read starts over from the new head.

use super::AsyncKubeStore;
use crate::layout::shard::{DATA_KEY, INDEX_KEY, Shard, Unpacker};
use crate::layout::{ANNOTATION_KEY, DocumentNames, HEAD_DATA, HEAD_TYPE, Head, bucket};
use k8s_openapi::api::core::v1::Secret;
use pki_rotate::store::validate_key;
use pki_rotate::{DocumentError, Files, Result, Revision, RotateError, Summary, validate_path};
use std::collections::{BTreeMap, BTreeSet};

/// How often a read starts over when a shard its head named was removed
/// by a newer commit meanwhile.
const READ_ATTEMPTS: u32 = 5;

/// A head read: what it says, the resourceVersion that is the
/// document's revision, and whether it was written in format 1 (read as
/// one bucket; the next write converts it).
pub(super) struct HeadRead {
    pub head: Head,
    pub revision: Revision,
    pub converted: bool,
}

/// Why reading a head's shards stopped.
pub(super) enum ShardsFail {
    /// The shard is gone: a newer commit may have removed it.
    Missing(String),
    Error(RotateError),
}

pub(super) fn corrupt(location: impl Into<String>, reason: impl Into<String>) -> RotateError {
    RotateError::Document(DocumentError::Corrupt {
        location: location.into(),
        reason: reason.into(),
    })
}

/// The bytes of data key `key` of `secret`.
fn data<'a>(secret: &'a Secret, key: &str) -> Option<&'a [u8]> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|b| b.0.as_slice())
}

/// The head in `secret`, checked to be the head of `key`.
pub(super) fn decode_head(location: &str, key: &str, secret: &Secret) -> Result<HeadRead> {
    let bad = |reason: String| corrupt(location, reason);
    if secret.type_.as_deref() != Some(HEAD_TYPE) {
        return Err(bad(format!("not a pki document head (type {HEAD_TYPE})")));
    }
    let annotated = secret
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_KEY));
    let bytes = data(secret, HEAD_DATA).ok_or_else(|| bad(format!("no {HEAD_DATA}")))?;
    let (head, converted) = Head::parse(bytes).map_err(|e| bad(format!("{HEAD_DATA}: {e}")))?;
    if head.key != key || annotated.map(String::as_str) != Some(key) {
        return Err(bad(format!(
            "the head of another key (\"{}\")",
            head.key.escape_debug()
        )));
    }
    let revision = secret
        .metadata
        .resource_version
        .clone()
        .ok_or_else(|| bad("no resourceVersion".into()))?;
    Ok(HeadRead {
        head,
        revision: Revision::new(revision),
        converted,
    })
}

impl AsyncKubeStore {
    pub(super) fn head_location(&self, names: &DocumentNames) -> String {
        format!("{}: secret {}", self.url, names.head)
    }

    /// The head of the document at `key` (None: no document).
    pub(super) async fn read_head(
        &self,
        key: &str,
        names: &DocumentNames,
    ) -> Result<Option<HeadRead>> {
        let secret = self
            .get_secret(&names.head)
            .await
            .map_err(|f| self.error("get", &names.head, &f))?;
        secret
            .map(|s| decode_head(&self.head_location(names), key, &s))
            .transpose()
    }

    /// [`pki_rotate::AsyncStore::get`]: every bucket.
    pub(super) async fn read(&self, key: &str) -> Result<Option<(Files, Revision)>> {
        let Some((head, revision, buckets)) = self
            .read_some(key, |head| (0..head.buckets.len()).collect())
            .await?
        else {
            return Ok(None);
        };
        let mut files = Files::new();
        for (_, bucket) in buckets {
            for (path, file) in bucket.iter() {
                files.insert(path, file.clone())?;
            }
        }
        for dir in &head.dirs {
            files.insert_dir(dir.clone())?;
        }
        // A publication that a crash or failure left behind.
        let names = DocumentNames::new(self.url.name(), key);
        self.catch_up(key, &names, (head.sequence, &revision), &files)
            .await;
        Ok(Some((files, revision)))
    }

    /// [`pki_rotate::AsyncStore::get_paths`]: the head and the buckets of
    /// `paths` only (a path that is not valid names no file).
    pub(super) async fn read_paths(
        &self,
        key: &str,
        paths: &BTreeSet<String>,
    ) -> Result<Option<(Files, Revision)>> {
        let select = |head: &Head| {
            paths
                .iter()
                .filter(|p| validate_path(p).is_ok())
                .map(|p| bucket::of(p, head.buckets.len()))
                .collect()
        };
        let Some((head, revision, buckets)) = self.read_some(key, select).await? else {
            return Ok(None);
        };
        let mut files = Files::new();
        for (_, bucket) in buckets {
            for (path, file) in bucket.iter() {
                if paths.contains(path) {
                    files.insert(path, file.clone())?;
                }
            }
        }
        for dir in &head.dirs {
            files.insert_dir(dir.clone())?;
        }
        Ok(Some((files, revision)))
    }

    /// The head and the buckets `select` picks from it, at one revision: a
    /// shard gone (removed by a newer commit) starts the read over from the
    /// new head.
    async fn read_some(
        &self,
        key: &str,
        select: impl Fn(&Head) -> BTreeSet<usize>,
    ) -> Result<Option<(Head, Revision, BTreeMap<usize, Files>)>> {
        validate_key(key)?;
        let names = DocumentNames::new(self.url.name(), key);
        let mut seen: Option<Revision> = None;
        for _ in 0..READ_ATTEMPTS {
            let Some(read) = self.read_head(key, &names).await? else {
                return Ok(None);
            };
            let which = select(&read.head);
            match self.read_buckets(&names, &read.head, &which).await {
                Ok(buckets) => return Ok(Some((read.head, read.revision, buckets))),
                Err(ShardsFail::Error(e)) => return Err(e),
                // The same head twice and still a shard missing: damage.
                Err(ShardsFail::Missing(name)) if seen.as_ref() == Some(&read.revision) => {
                    return Err(corrupt(
                        self.head_location(&names),
                        format!("its shard {name} is missing (deleted by hand?)"),
                    ));
                }
                Err(ShardsFail::Missing(_)) => seen = Some(read.revision),
            }
        }
        Err(corrupt(
            self.head_location(&names),
            format!("replaced during each of {READ_ATTEMPTS} reads in a row"),
        ))
    }

    /// The files of the buckets `which` of `head`, each checked.
    pub(super) async fn read_buckets(
        &self,
        names: &DocumentNames,
        head: &Head,
        which: &BTreeSet<usize>,
    ) -> std::result::Result<BTreeMap<usize, Files>, ShardsFail> {
        let mut out = BTreeMap::new();
        for &index in which {
            out.insert(index, self.read_bucket(names, head, index).await?);
        }
        Ok(out)
    }

    /// The files of bucket `index` of `head`: its shards, each checked
    /// against the SHA-256 the head records, its file count, and that
    /// each file belongs in it.
    async fn read_bucket(
        &self,
        names: &DocumentNames,
        head: &Head,
        index: usize,
    ) -> std::result::Result<Files, ShardsFail> {
        let location = self.head_location(names);
        let Some(bucket) = head.buckets.get(index) else {
            return Err(ShardsFail::Error(corrupt(
                location,
                format!("no bucket {index}"),
            )));
        };
        let mut unpacker = Unpacker::new();
        for (name, digest) in bucket.shard_names(names).into_iter().zip(&bucket.shards) {
            let secret = match self.get_secret(&name).await {
                Ok(Some(secret)) => secret,
                Ok(None) => return Err(ShardsFail::Missing(name)),
                Err(f) => return Err(ShardsFail::Error(self.error("get", &name, &f))),
            };
            let location = format!("{}: secret {name}", self.url);
            let shard = Shard {
                index: data(&secret, INDEX_KEY).unwrap_or_default().to_vec(),
                data: data(&secret, DATA_KEY).unwrap_or_default().to_vec(),
            };
            if shard.digest() != *digest {
                return Err(ShardsFail::Error(corrupt(
                    location,
                    "its content is not what the head committed",
                )));
            }
            unpacker
                .add(&shard)
                .map_err(|e| ShardsFail::Error(corrupt(location, e)))?;
        }
        let files = unpacker
            .finish()
            .map_err(|e| ShardsFail::Error(corrupt(&location, e)))?;
        let count = head.buckets.len();
        let misplaced = files
            .iter()
            .find(|(path, _)| bucket::of(path, count) != index);
        if let Some((path, _)) = misplaced {
            return Err(ShardsFail::Error(corrupt(
                location,
                format!(
                    "bucket {index} holds {}, a file of another bucket",
                    path.escape_debug()
                ),
            )));
        }
        if files.len() != bucket.files {
            return Err(ShardsFail::Error(corrupt(
                location,
                format!(
                    "bucket {index}: {} files where the head says {}",
                    files.len(),
                    bucket.files
                ),
            )));
        }
        Ok(files)
    }

    /// [`pki_rotate::AsyncStore::get_summary`]: the head alone.
    pub(super) async fn read_summary(&self, key: &str) -> Result<Option<(Summary, Revision)>> {
        validate_key(key)?;
        let names = DocumentNames::new(self.url.name(), key);
        let Some(read) = self.read_head(key, &names).await? else {
            return Ok(None);
        };
        // A publication that a crash or failure left behind: a whole read
        // publishes it (best effort; the summary is answered regardless).
        if self.publication_lags(&names, read.head.sequence).await {
            let _ = self.read(key).await;
        }
        Ok(read
            .head
            .summary
            .and_then(Summary::new)
            .map(|summary| (summary, read.revision)))
    }
}
