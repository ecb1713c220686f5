//! Writing a document: the new generation's shards first (invisible to
//! readers), then the head, replaced only if its resourceVersion is still
//! the one the writer read (the commit), then the replaced generation's
//! shards removed. See the crate docs for why that is safe.

use super::AsyncKubeStore;
use super::read::corrupt;
use crate::fail::{self, Doing, Fail};
use crate::layout::shard::{DATA_KEY, INDEX_KEY, SHARD_BUDGET, Shard, pack};
use crate::layout::{
    ANNOTATION_KEY, DocumentNames, HEAD_DATA, HEAD_FORMAT, HEAD_TYPE, Head, LABEL_DOCUMENT,
    LABEL_GENERATION, LABEL_STORE, SHARD_TYPE, new_generation,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, PostParams};
use pki_rotate::store::validate_key;
use pki_rotate::{Files, Result, Revision, RotateError, StoreError, Summary};
use std::collections::BTreeMap;

/// Why a commit failed.
enum CommitFail {
    /// The server refused it, or it was never sent: nothing changed.
    Refused(RotateError),
    /// It was sent and its answer was lost: it may have landed.
    Unknown(Fail),
}

/// What a new generation is: its name, its shards and the head naming
/// them.
struct Generation {
    name: String,
    shards: Vec<Shard>,
    head: Vec<u8>,
}

impl AsyncKubeStore {
    /// [`pki_rotate::AsyncStore::put_with_summary`].
    pub(super) async fn write(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        validate_key(key)?;
        let names = DocumentNames::new(self.url.name(), key);
        // A stale `expected` is a conflict before anything is written.
        let current = self.read_head(key, &names).await?;
        let found = current.as_ref().map(|read| read.revision.clone());
        if found.as_ref() != expected {
            return Err(RotateError::Store(StoreError::Conflict {
                key: key.to_string(),
                expected: expected.cloned(),
                found,
            }));
        }
        let sequence = current.as_ref().map_or(1, |read| read.head.sequence + 1);
        let generation = self.generation(key, &names, files, summary, sequence)?;
        // 1. Before the commit: the shards, which no head names yet.
        let started = match self.create_shards(key, &names, &generation).await {
            Ok(started) => started,
            Err(e) => {
                self.remove_generation(&names, &generation.name, generation.shards.len())
                    .await;
                return Err(e);
            }
        };
        // 2. The commit.
        let committed = match self.commit(key, &names, expected, &generation).await {
            Ok(revision) => revision,
            Err(CommitFail::Refused(e)) => {
                self.remove_generation(&names, &generation.name, generation.shards.len())
                    .await;
                return Err(e);
            }
            Err(CommitFail::Unknown(fail)) => {
                self.resolve(key, &names, &generation.name, &fail).await?
            }
        };
        // After it: the objects consumers use (never failing the write).
        self.publish(key, &names, (sequence, &committed), files, expected)
            .await;
        // 3. The replaced generation, which no head names any more.
        if let Some(old) = current {
            self.remove_generation(&names, &old.head.generation, old.head.shards.len())
                .await;
        }
        if let Some(started) = started {
            self.sweep(&names, &generation.name, started).await;
        }
        Ok(committed)
    }

    /// The shards and head of a new generation of `files`.
    fn generation(
        &self,
        key: &str,
        names: &DocumentNames,
        files: &Files,
        summary: Option<&Summary>,
        sequence: u64,
    ) -> Result<Generation> {
        let location = format!("{}: secret {}", self.url, names.head);
        let name = new_generation()
            .map_err(|e| fail::backend(&self.url, format!("the OS's random numbers: {e}")))?;
        let shards = pack(files).map_err(|e| corrupt(&location, e))?;
        let head = Head {
            format: HEAD_FORMAT,
            key: key.to_string(),
            generation: name.clone(),
            sequence,
            shards: shards.iter().map(Shard::digest).collect(),
            files: files.len(),
            dirs: files.dirs().map(str::to_string).collect(),
            summary: summary.map(|s| s.as_str().to_string()),
        };
        let head = serde_json::to_vec(&head).map_err(|e| corrupt(&location, e.to_string()))?;
        if head.len() > SHARD_BUDGET {
            return Err(corrupt(
                location,
                format!("a head of {} bytes, over {SHARD_BUDGET}", head.len()),
            ));
        }
        Ok(Generation { name, shards, head })
    }

    fn metadata(
        &self,
        key: &str,
        name: String,
        labels: BTreeMap<String, String>,
        resource_version: Option<&Revision>,
    ) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.url.namespace().to_string()),
            labels: Some(labels),
            annotations: Some(BTreeMap::from([(
                ANNOTATION_KEY.to_string(),
                key.to_string(),
            )])),
            resource_version: resource_version.map(|r| r.as_str().to_string()),
            ..ObjectMeta::default()
        }
    }

    /// Creates every shard of `generation`, immutable, and gives the
    /// server's creation time of the first (Unix seconds).
    async fn create_shards(
        &self,
        key: &str,
        names: &DocumentNames,
        generation: &Generation,
    ) -> Result<Option<i64>> {
        let mut started = None;
        for (index, shard) in generation.shards.iter().enumerate() {
            let name = names.shard(&generation.name, index);
            let labels = names.labels(self.url.name(), Some(&generation.name));
            let secret = Secret {
                metadata: self.metadata(key, name.clone(), labels, None),
                type_: Some(SHARD_TYPE.to_string()),
                immutable: Some(true),
                data: Some(BTreeMap::from([
                    (INDEX_KEY.to_string(), ByteString(shard.index.clone())),
                    (DATA_KEY.to_string(), ByteString(shard.data.clone())),
                ])),
                ..Secret::default()
            };
            let created = self
                .create(&format!("create shard {name}"), &secret)
                .await
                .map_err(|f| self.error("create", &name, &f))?;
            if index == 0 {
                started = created.metadata.creation_timestamp.map(|t| t.0.as_second());
            }
        }
        Ok(started)
    }

    /// Replaces the head if its resourceVersion is still `expected`
    /// (creates it when None), naming `generation`.
    async fn commit(
        &self,
        key: &str,
        names: &DocumentNames,
        expected: Option<&Revision>,
        generation: &Generation,
    ) -> std::result::Result<Revision, CommitFail> {
        let secret = Secret {
            metadata: self.metadata(
                key,
                names.head.clone(),
                names.labels(self.url.name(), None),
                expected,
            ),
            type_: Some(HEAD_TYPE.to_string()),
            data: Some(BTreeMap::from([(
                HEAD_DATA.to_string(),
                ByteString(generation.head.clone()),
            )])),
            ..Secret::default()
        };
        let (verb, sent) = match expected {
            None => ("create", self.create("commit", &secret).await),
            Some(_) => ("update", self.replace_head(&names.head, &secret).await),
        };
        match sent {
            Ok(written) => written
                .metadata
                .resource_version
                .map(Revision::new)
                .ok_or_else(|| {
                    CommitFail::Unknown(Fail::Other("the answer has no resourceVersion".into()))
                }),
            Err(fail) if fail.is_conflict() => Err(CommitFail::Refused(RotateError::Store(
                StoreError::Conflict {
                    key: key.to_string(),
                    expected: expected.cloned(),
                    found: None,
                },
            ))),
            Err(fail) if fail.may_have_been_applied() => Err(CommitFail::Unknown(fail)),
            Err(fail) => Err(CommitFail::Refused(fail::backend_error(
                &self.url,
                Doing {
                    verb,
                    name: &names.head,
                },
                &fail,
            ))),
        }
    }

    async fn replace_head(&self, name: &str, secret: &Secret) -> std::result::Result<Secret, Fail> {
        self.hook("commit")?;
        self.call(self.secrets.replace(name, &PostParams::default(), secret))
            .await
    }

    /// A commit whose answer was lost: it landed exactly when the head now
    /// names `generation`, which no other writer knows. Otherwise (another
    /// head, or no answer again) the outcome is unknown: the request may
    /// still be applied.
    async fn resolve(
        &self,
        key: &str,
        names: &DocumentNames,
        generation: &str,
        fail: &Fail,
    ) -> Result<Revision> {
        let found = match self.read_head(key, names).await {
            Ok(Some(read)) if read.head.generation == generation => return Ok(read.revision),
            Ok(Some(read)) => format!("the head is at revision {}, another write", read.revision),
            Ok(None) => "there is no head".to_string(),
            Err(e) => format!("reading the head again failed: {e}"),
        };
        Err(RotateError::Store(StoreError::UnknownOutcome {
            store: self.url.to_string(),
            key: key.to_string(),
            detail: format!("the commit got no answer ({}); {found}", fail.describe()),
        }))
    }

    /// Removes the shards of `generation` (`count` of them). Best effort:
    /// what fails to go is named by no head and only takes room.
    async fn remove_generation(&self, names: &DocumentNames, generation: &str, count: usize) {
        for index in 0..count {
            let _ = self.delete(&names.shard(generation, index)).await;
        }
    }

    /// Removes the shards of attempts that died before their commit: every
    /// shard of the document outside generation `current` (this write's,
    /// just committed) created more than [`KubeOptions::abandoned_after`]
    /// before this write's first shard (`started`, both times the
    /// server's). Such an attempt read the head before this write's commit
    /// replaced it, so its commit, which names the version it read, can
    /// never succeed: no head will name its shards. Best effort, one
    /// listing of metadata.
    ///
    /// [`KubeOptions::abandoned_after`]: crate::KubeOptions::abandoned_after
    async fn sweep(&self, names: &DocumentNames, current: &str, started: i64) {
        let selector = format!(
            "{LABEL_STORE}={},{LABEL_DOCUMENT}={},{LABEL_GENERATION}",
            self.url.name(),
            names.document
        );
        let params = ListParams::default().labels(&selector);
        let Ok(list) = self.call(self.secrets.list_metadata(&params)).await else {
            return;
        };
        let grace = i64::try_from(self.options.abandoned_after.as_secs()).unwrap_or(i64::MAX);
        for item in list.items {
            let meta = item.metadata;
            let generation = meta.labels.as_ref().and_then(|l| l.get(LABEL_GENERATION));
            let (Some(name), Some(created), Some(generation)) = (
                meta.name.as_ref(),
                meta.creation_timestamp.as_ref(),
                generation,
            ) else {
                continue;
            };
            let abandoned = created.0.as_second().saturating_add(grace) < started;
            if generation != current && abandoned {
                let _ = self.delete(name).await;
            }
        }
    }
}
