//! Writing a document: the attempt's shards first (invisible to readers),
//! then the head, replaced only if its resourceVersion is still the one
//! the writer read (the commit), then the shards the new head no longer
//! names removed. A whole write writes every bucket; a write of changes
//! (`changes.rs`) the buckets they touch. See the crate docs for why that
//! is safe.

use super::AsyncKubeStore;
use super::read::corrupt;
use crate::fail::{self, Doing, Fail};
use crate::layout::shard::{DATA_KEY, INDEX_KEY, SHARD_BUDGET, Shard, pack};
use crate::layout::{
    ANNOTATION_KEY, Bucket, DocumentNames, HEAD_DATA, HEAD_FORMAT, HEAD_TYPE, Head, LABEL_DOCUMENT,
    LABEL_GENERATION, LABEL_STORE, SHARD_TYPE, bucket, new_generation,
};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{ListParams, PostParams};
use pki_rotate::store::validate_key;
use pki_rotate::{Files, Result, Revision, RotateError, StoreError, Summary};
use std::collections::{BTreeMap, BTreeSet};

/// A write of changes sweeps abandoned shards when its head's sequence is
/// a multiple of this (a whole write always does).
const SWEEP_EVERY: u64 = 16;

/// Why a commit failed.
enum CommitFail {
    /// The server refused it, or it was never sent: nothing changed.
    Refused(RotateError),
    /// It was sent and its answer was lost: it may have landed.
    Unknown(Fail),
}

/// What one write attempt commits: the shards it creates (by name),
/// under a generation of its own, and the head naming them.
pub(super) struct Attempt {
    /// Whether every bucket is written (a whole write).
    pub whole: bool,
    pub generation: String,
    pub shards: Vec<(String, Shard)>,
    pub head: Head,
    pub head_json: Vec<u8>,
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
        let previous = current.map(|read| read.head);
        let attempt = self.whole_attempt(key, &names, previous.as_ref(), files, summary)?;
        let sequence = attempt.head.sequence;
        let committed = self
            .run_attempt(key, &names, expected, previous, attempt)
            .await?;
        // After the commit: the objects consumers use (never failing the write).
        self.publish(key, &names, (sequence, &committed), files, expected)
            .await;
        Ok(committed)
    }

    /// A new head for `files`, every bucket written: the bucket count
    /// chosen for their weight ([`bucket::count_for`]).
    pub(super) fn whole_attempt(
        &self,
        key: &str,
        names: &DocumentNames,
        previous: Option<&Head>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> Result<Attempt> {
        let weight = bucket::total_weight(files);
        let count = bucket::count_for(weight);
        let buckets: BTreeMap<usize, Files> = bucket::split(files, count)?
            .into_iter()
            .enumerate()
            .collect();
        let head = Head {
            format: HEAD_FORMAT,
            key: key.to_string(),
            generation: String::new(),
            sequence: previous.map_or(1, |h| h.sequence.saturating_add(1)),
            buckets: Vec::with_capacity(count),
            files: files.len(),
            bytes: weight,
            dirs: files.dirs().map(str::to_string).collect(),
            summary: summary.map(|s| s.as_str().to_string()),
        };
        let mut attempt = self.attempt(names, head, &buckets)?;
        attempt.whole = true;
        Ok(attempt)
    }

    /// The attempt that writes `buckets` (by number) as new shards of a
    /// generation of its own, over `head`, whose other buckets stay.
    pub(super) fn attempt(
        &self,
        names: &DocumentNames,
        mut head: Head,
        buckets: &BTreeMap<usize, Files>,
    ) -> Result<Attempt> {
        let location = format!("{}: secret {}", self.url, names.head);
        let generation = new_generation()
            .map_err(|e| fail::backend(&self.url, format!("the OS's random numbers: {e}")))?;
        let mut shards = Vec::new();
        for (&index, files) in buckets {
            let packed = if files.is_empty() {
                Vec::new()
            } else {
                pack(files).map_err(|e| corrupt(&location, e))?
            };
            let written = Bucket {
                generation: generation.clone(),
                first: shards.len(),
                shards: packed.iter().map(Shard::digest).collect(),
                files: files.len(),
            };
            for shard in packed {
                shards.push((names.shard(&generation, shards.len()), shard));
            }
            match head.buckets.get_mut(index) {
                Some(slot) => *slot = written,
                None => head.buckets.push(written),
            }
        }
        head.generation = generation.clone();
        head.check().map_err(|e| corrupt(&location, e))?;
        let head_json = serde_json::to_vec(&head).map_err(|e| corrupt(&location, e.to_string()))?;
        if head_json.len() > SHARD_BUDGET {
            return Err(corrupt(
                location,
                format!("a head of {} bytes, over {SHARD_BUDGET}", head_json.len()),
            ));
        }
        Ok(Attempt {
            whole: false,
            generation,
            shards,
            head,
            head_json,
        })
    }

    /// Writes `attempt` over the head `previous` read at `expected`: its
    /// shards, the commit, then the shards `previous` named that the new
    /// head no longer names, and the sweep.
    pub(super) async fn run_attempt(
        &self,
        key: &str,
        names: &DocumentNames,
        expected: Option<&Revision>,
        previous: Option<Head>,
        attempt: Attempt,
    ) -> Result<Revision> {
        let own: Vec<String> = attempt.shards.iter().map(|(n, _)| n.clone()).collect();
        // 1. Before the commit: the shards, which no head names yet.
        let started = match self.create_shards(key, names, &attempt).await {
            Ok(started) => started,
            Err(e) => {
                self.remove_shards(own.iter()).await;
                return Err(e);
            }
        };
        // 2. The commit.
        let committed = match self.commit(key, names, expected, &attempt).await {
            Ok(revision) => revision,
            Err(CommitFail::Refused(e)) => {
                self.remove_shards(own.iter()).await;
                return Err(e);
            }
            Err(CommitFail::Unknown(fail)) => {
                self.resolve(key, names, &attempt.generation, &fail).await?
            }
        };
        // 3. After it: the shards the new head stopped naming.
        let named = attempt.head.shard_names(names);
        if let Some(old) = previous {
            let replaced = old.shard_names(names);
            self.remove_shards(replaced.difference(&named)).await;
        }
        // The sweep lists every shard of the document: a whole write sweeps,
        // a write of changes one time in SWEEP_EVERY, so that its cost
        // stays O(1) per write on average.
        let sweeps = attempt.whole || attempt.head.sequence.is_multiple_of(SWEEP_EVERY);
        if let Some(started) = started.filter(|_| sweeps) {
            self.sweep(names, &named, started).await;
        }
        Ok(committed)
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

    /// Creates every shard of `attempt`, immutable, and gives the
    /// server's creation time of the first (Unix seconds; None: the
    /// attempt has no shard).
    async fn create_shards(
        &self,
        key: &str,
        names: &DocumentNames,
        attempt: &Attempt,
    ) -> Result<Option<i64>> {
        let mut started = None;
        for (index, (name, shard)) in attempt.shards.iter().enumerate() {
            let labels = names.labels(self.url.name(), Some(&attempt.generation));
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
                .map_err(|f| self.error("create", name, &f))?;
            if index == 0 {
                started = created.metadata.creation_timestamp.map(|t| t.0.as_second());
            }
        }
        Ok(started)
    }

    /// Replaces the head if its resourceVersion is still `expected`
    /// (creates it when None), with the head of `attempt`.
    async fn commit(
        &self,
        key: &str,
        names: &DocumentNames,
        expected: Option<&Revision>,
        attempt: &Attempt,
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
                ByteString(attempt.head_json.clone()),
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

    /// Removes the shards `names`. Best effort: what fails to go is
    /// named by no head and only takes room.
    async fn remove_shards(&self, names: impl Iterator<Item = &String>) {
        for name in names {
            let _ = self.delete(name).await;
        }
    }

    /// Removes the shards of attempts that died before their commit: every
    /// shard of the document that `named` (the head this write just
    /// committed) does not name, created more than
    /// [`KubeOptions::abandoned_after`] before this write's first shard
    /// (`started`, both times the server's). Every later head is made from
    /// this one by compare-and-swap, so it names only shards this one names
    /// or shards created after this commit, hence after `started`: what is
    /// removed is named by no head, now or later (see the crate docs). Best
    /// effort, one listing of metadata.
    ///
    /// [`KubeOptions::abandoned_after`]: crate::KubeOptions::abandoned_after
    async fn sweep(&self, names: &DocumentNames, named: &BTreeSet<String>, started: i64) {
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
            let (Some(name), Some(created)) =
                (meta.name.as_ref(), meta.creation_timestamp.as_ref())
            else {
                continue;
            };
            let abandoned = created.0.as_second().saturating_add(grace) < started;
            if abandoned && !named.contains(name) {
                let _ = self.delete(name).await;
            }
        }
    }
}
