//! Writing changes to a document ([`pki_rotate::AsyncStore::put_changes`]):
//! the head, the buckets the changed paths fall in, and new shards for
//! those buckets only; the head then names them and, for every other
//! bucket, the shards it named before. A head of format 1, or a document
//! that outgrew its bucket count, is written whole.

use super::AsyncKubeStore;
use super::read::{HeadRead, ShardsFail, corrupt};
use crate::layout::{DocumentNames, Head, bucket};
use pki_rotate::store::{Changes, conflict, validate_key};
use pki_rotate::{Files, Result, Revision, Summary};
use std::collections::{BTreeMap, BTreeSet};

impl AsyncKubeStore {
    /// [`pki_rotate::AsyncStore::put_changes`]: a stale `expected` is a
    /// conflict before anything is written.
    pub(super) async fn write_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        validate_key(key)?;
        let names = DocumentNames::new(self.url.name(), key);
        let read = match self.read_head(key, &names).await? {
            Some(read) if read.revision == *expected => read,
            other => return Err(conflict(key, expected, other.map(|r| r.revision))),
        };
        let count = read.head.buckets.len();
        let touched: BTreeSet<usize> = if read.converted {
            // Format 1: one bucket, read whole and written in format 2.
            (0..count).collect()
        } else {
            changes
                .written()
                .map(|(path, _)| path)
                .chain(changes.removed())
                .map(|path| bucket::of(path, count))
                .collect()
        };
        let mut buckets = self.buckets_for_write(key, &names, &read, &touched).await?;
        let before: u64 = buckets.values().map(bucket::total_weight).sum();
        let files_before: usize = buckets.values().map(Files::len).sum();
        for path in changes.removed() {
            if let Some(files) = buckets.get_mut(&bucket::of(path, count)) {
                files.remove(path);
            }
        }
        for (path, file) in changes.written() {
            if let Some(files) = buckets.get_mut(&bucket::of(path, count)) {
                files.insert(path, file.clone())?;
            }
        }
        let after: u64 = buckets.values().map(bucket::total_weight).sum();
        let weight = read.head.bytes.saturating_sub(before).saturating_add(after);
        if read.converted || bucket::outgrown(count, weight) {
            return self
                .rewrite_whole(key, &names, read, buckets, summary)
                .await;
        }
        let files_after: usize = buckets.values().map(Files::len).sum();
        let head = Head {
            sequence: read.head.sequence.saturating_add(1),
            files: (read.head.files + files_after).saturating_sub(files_before),
            bytes: weight,
            summary: summary.map(|s| s.as_str().to_string()),
            ..read.head.clone()
        };
        let sequence = head.sequence;
        let attempt = self.attempt(&names, head, &buckets)?;
        let committed = self
            .run_attempt(key, &names, Some(expected), Some(read.head), attempt)
            .await?;
        // After the commit: the leaves it changed, for consumers.
        self.publish_changes(
            key,
            &names,
            (sequence, &committed),
            expected,
            changes,
            &buckets,
        )
        .await;
        Ok(committed)
    }

    /// The buckets `which` of the head `read`, for a write: a shard gone
    /// means the head changed since (a conflict), or damage.
    async fn buckets_for_write(
        &self,
        key: &str,
        names: &DocumentNames,
        read: &HeadRead,
        which: &BTreeSet<usize>,
    ) -> Result<BTreeMap<usize, Files>> {
        match self.read_buckets(names, &read.head, which).await {
            Ok(buckets) => Ok(buckets),
            Err(ShardsFail::Error(e)) => Err(e),
            Err(ShardsFail::Missing(name)) => {
                let now = self.read_head(key, names).await?.map(|r| r.revision);
                if now.as_ref() == Some(&read.revision) {
                    Err(corrupt(
                        self.head_location(names),
                        format!("its shard {name} is missing (deleted by hand?)"),
                    ))
                } else {
                    Err(conflict(key, &read.revision, now))
                }
            }
        }
    }

    /// Changes that outgrew the bucket count (or a head of format 1),
    /// written as a whole write: `changed` (the buckets read and changed)
    /// and every other bucket of `read`, under a bucket count chosen anew.
    async fn rewrite_whole(
        &self,
        key: &str,
        names: &DocumentNames,
        read: HeadRead,
        changed: BTreeMap<usize, Files>,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        let rest: BTreeSet<usize> = (0..read.head.buckets.len())
            .filter(|i| !changed.contains_key(i))
            .collect();
        let others = self.buckets_for_write(key, names, &read, &rest).await?;
        let mut files = Files::new();
        for bucket in changed.values().chain(others.values()) {
            for (path, file) in bucket.iter() {
                files.insert(path, file.clone())?;
            }
        }
        for dir in &read.head.dirs {
            files.insert_dir(dir.clone())?;
        }
        let attempt = self.whole_attempt(key, names, Some(&read.head), &files, summary)?;
        let sequence = attempt.head.sequence;
        let replaced = read.revision.clone();
        let committed = self
            .run_attempt(key, names, Some(&replaced), Some(read.head), attempt)
            .await?;
        self.publish(key, names, (sequence, &committed), &files, Some(&replaced))
            .await;
        Ok(committed)
    }
}
