//! Removing what no head will name again: what a commit replaced, what a
//! losing attempt wrote, and what dead attempts left (the argument that
//! none of it is still needed is in the crate docs, "Why it is safe").

use super::client::AsyncEtcdStore;
use super::fail::Fail;
use super::read::EntriesFail;
use super::write::{Attempt, Previous};
use crate::client::{Compare, CompareOp, DeleteOptions, GetOptions, Txn, TxnOp};
use crate::layout::{DocKeys, FileEntry};
use std::collections::{BTreeMap, BTreeSet};

impl AsyncEtcdStore {
    /// After the attempt's commit at `revision`: removes the blobs of the
    /// entries it replaced and the generation it retired, every blob of a
    /// format 1 head it replaced, what earlier attempts left when one of
    /// them died, and last its own marker.
    pub(super) async fn finish(
        &self,
        attempt: &Attempt<'_>,
        revision: i64,
    ) -> std::result::Result<(), Fail> {
        let keys = &attempt.keys;
        let mut ops: Vec<TxnOp> = attempt
            .change
            .garbage
            .iter()
            .map(|id| TxnOp::delete(keys.blob(id), None))
            .collect();
        if let Some(old) = attempt.replaced_generation() {
            ops.push(TxnOp::delete(
                keys.generation(old),
                Some(DeleteOptions::new().with_prefix()),
            ));
        }
        self.delete_in_batches(ops).await?;
        let recovered = self.recover(attempt, revision).await?;
        if !recovered && matches!(attempt.previous, Previous::Replaced) {
            // A write that replaced a format 1 head wrote every entry.
            let referenced = attempt
                .change
                .entries
                .values()
                .flat_map(FileEntry::blobs)
                .collect();
            self.sweep_blobs(keys, &referenced, revision).await?;
        }
        self.step("delete marker")?;
        let marker = keys.attempt(&attempt.nonce);
        let mut kv = self.kv.clone();
        self.run(async move { kv.delete(marker, None).await })
            .await?;
        Ok(())
    }

    /// Removes everything a losing attempt wrote: its marker first, then
    /// its blobs and the generation it started.
    pub(super) async fn discard(&self, attempt: &Attempt<'_>) -> std::result::Result<(), Fail> {
        let keys = &attempt.keys;
        let mut ops = vec![
            TxnOp::delete(keys.attempt(&attempt.nonce), None),
            TxnOp::delete(
                keys.attempt_blobs(&attempt.nonce),
                Some(DeleteOptions::new().with_prefix()),
            ),
        ];
        if !attempt.in_place {
            ops.push(TxnOp::delete(
                keys.generation(&attempt.nonce),
                Some(DeleteOptions::new().with_prefix()),
            ));
        }
        let mut kv = self.kv.clone();
        self.run(async move { kv.txn(Txn::new().and_then(ops)).await })
            .await?;
        Ok(())
    }

    /// Removes every blob that `referenced` (the blobs of the document
    /// committed at `revision`) does not name and that was created before
    /// `revision`: after replacing a format 1 head, whose blobs a format 2
    /// document never shares.
    async fn sweep_blobs(
        &self,
        keys: &crate::layout::DocKeys,
        referenced: &BTreeSet<&str>,
        revision: i64,
    ) -> std::result::Result<(), Fail> {
        let mut garbage: Vec<TxnOp> = Vec::new();
        self.step("list garbage")?;
        self.scan_large(
            &keys.blobs,
            GetOptions::new().with_keys_only(),
            super::pages::LARGE_PAGE,
            |_| Ok(()),
            |item| {
                let unreferenced = keys
                    .blob_id_of(item.key())
                    .is_none_or(|id| !referenced.contains(id));
                if unreferenced && item.create_revision() < revision {
                    garbage.push(TxnOp::delete(item.key().to_vec(), None));
                }
            },
        )
        .await?;
        self.delete_in_batches(garbage).await
    }

    /// The attempts' markers: each attempt's nonce and the create_revision
    /// of its marker.
    async fn markers(&self, keys: &DocKeys) -> std::result::Result<BTreeMap<String, i64>, Fail> {
        self.step("list attempts")?;
        let mut markers: BTreeMap<String, i64> = BTreeMap::new();
        self.scan(
            &keys.attempts,
            GetOptions::new().with_keys_only(),
            |_| Ok(()),
            |item| {
                let nonce = item
                    .key()
                    .strip_prefix(keys.attempts.as_bytes())
                    .and_then(|n| std::str::from_utf8(n).ok());
                if let Some(nonce) = nonce {
                    markers.insert(nonce.to_string(), item.create_revision());
                }
            },
        )
        .await?;
        Ok(markers)
    }

    /// Every entry of the document `attempt` committed at `revision`, for
    /// a partial write, which knows only the entries it changed: read at
    /// the commit's revision, where the generation holds exactly what that
    /// commit made current.
    async fn committed_entries(
        &self,
        attempt: &Attempt<'_>,
        revision: i64,
    ) -> std::result::Result<BTreeMap<String, FileEntry>, Fail> {
        let keys = &attempt.keys;
        self.read_entries(
            keys,
            &keys.head,
            &attempt.generation,
            Some(revision),
            |page| self.step(&format!("read entries {page}")),
        )
        .await
        .map_err(|e| match e {
            EntriesFail::Fail(f) => f,
            EntriesFail::Error(e) => Fail::Other(e.to_string()),
        })
    }

    /// When an attempt whose marker is older than `revision` (other than
    /// this one) is found, some cleanup may be missing: that attempt died
    /// before its commit (what it wrote is garbage), or after it (what its
    /// commit replaced is). Then everything the document committed at
    /// `revision` does not need goes: stale markers, the generations that
    /// are not current, the blobs its entries do not name. Usually there is
    /// no such marker and this is one request. Returns whether it swept.
    async fn recover(
        &self,
        attempt: &Attempt<'_>,
        revision: i64,
    ) -> std::result::Result<bool, Fail> {
        let keys = &attempt.keys;
        // Generations before markers: a generation's first keys are
        // written with its attempt's marker, so a generation listed here
        // whose marker the next listing does not show belongs to an
        // attempt that can write nothing more.
        let generations = self.generations(keys).await?;
        let markers = self.markers(keys).await?;
        let stale: Vec<(&String, &i64)> = markers
            .iter()
            .filter(|(nonce, created)| **nonce != attempt.nonce && **created < revision)
            .collect();
        if stale.is_empty() {
            return Ok(false);
        }
        // Every entry of the document committed at `revision`, before
        // anything is removed: if this read fails, the stale markers stay
        // and the next writer sweeps.
        let read;
        let entries = if attempt.entries_complete {
            &attempt.change.entries
        } else {
            read = self.committed_entries(attempt, revision).await?;
            &read
        };
        let referenced: BTreeSet<&str> = entries.values().flat_map(FileEntry::blobs).collect();
        self.step("sweep")?;
        // A stale attempt can never commit (its head read is older than
        // this commit), so its marker and its generation (unless that is
        // the current one: it committed, then died) go at once.
        for (nonce, created) in &stale {
            let marker = keys.attempt(nonce);
            let mut ops = vec![TxnOp::delete(marker.clone(), None)];
            if **nonce != attempt.generation {
                ops.push(TxnOp::delete(
                    keys.generation(nonce),
                    Some(DeleteOptions::new().with_prefix()),
                ));
            }
            let when = Compare::create_revision(marker, CompareOp::Equal, **created);
            let mut kv = self.kv.clone();
            self.run(async move { kv.txn(Txn::new().when(vec![when]).and_then(ops)).await })
                .await?;
        }
        // A generation without a marker belongs to a finished attempt; it
        // is removed only while this commit is still the head (a later
        // commit may have made it current) and while it still has no
        // marker. One with a live marker belongs to a writer that may
        // still commit it: left alone.
        for generation in generations {
            if generation == attempt.generation || markers.contains_key(&generation) {
                continue;
            }
            let when = vec![
                Compare::mod_revision(keys.head.clone(), CompareOp::Equal, revision),
                Compare::create_revision(keys.attempt(&generation), CompareOp::Equal, 0),
            ];
            let ops = vec![TxnOp::delete(
                keys.generation(&generation),
                Some(DeleteOptions::new().with_prefix()),
            )];
            let mut kv = self.kv.clone();
            self.run(async move { kv.txn(Txn::new().when(when).and_then(ops)).await })
                .await?;
        }
        self.sweep_blobs(keys, &referenced, revision).await?;
        Ok(true)
    }

    /// The generations that have entries, one request per generation.
    async fn generations(
        &self,
        keys: &crate::layout::DocKeys,
    ) -> std::result::Result<Vec<String>, Fail> {
        self.step("list generations")?;
        let end = crate::layout::prefix_end(&keys.files);
        let mut from = keys.files.as_bytes().to_vec();
        let mut found = Vec::new();
        loop {
            let mut kv = self.kv.clone();
            let options = GetOptions::new()
                .with_keys_only()
                .with_range(end.clone())
                .with_limit(1);
            let start = std::mem::take(&mut from);
            let answer = self
                .run(async move { kv.get(start, Some(options)).await })
                .await?;
            let Some(first) = answer.kvs().first() else {
                return Ok(found);
            };
            let generation = first
                .key()
                .strip_prefix(keys.files.as_bytes())
                .and_then(|rest| rest.split(|b| *b == b'/').next())
                .and_then(|g| std::str::from_utf8(g).ok())
                .map(str::to_string);
            let Some(generation) = generation else {
                return Ok(found);
            };
            // The next generation starts after every key of this one.
            from = crate::layout::prefix_end(&keys.generation(&generation));
            found.push(generation);
        }
    }

    /// Runs deletions in transactions of at most `max_txn_ops`.
    async fn delete_in_batches(&self, ops: Vec<TxnOp>) -> std::result::Result<(), Fail> {
        let size = self.options.max_txn_ops.max(1);
        let total = ops.len().div_ceil(size);
        let mut ops = ops.into_iter().peekable();
        let mut i = 0;
        while ops.peek().is_some() {
            i += 1;
            self.step(&format!("delete garbage {i}/{total}"))?;
            let batch: Vec<TxnOp> = ops.by_ref().take(size).collect();
            let mut kv = self.kv.clone();
            self.run(async move { kv.txn(Txn::new().and_then(batch)).await })
                .await?;
        }
        Ok(())
    }
}
