//! Reading and writing some files of a format 2 document: the head, the
//! entries of the named paths and their blobs, never the rest of the
//! generation. A format 1 head, or a change too large for one commit in
//! place, goes through the whole read or write (`read.rs`, `write.rs`).

use super::client::AsyncEtcdStore;
use super::fail::Fail;
use super::read::{EntriesFail, ReadFail};
use super::write::{Attempt, Plan, Previous, head_compare, nonce, puts_before_commit};
use super::{GET_ATTEMPTS, PER_OP_OVERHEAD};
use crate::client::{GetOptions, Txn, TxnOp, TxnOpResponse};
use crate::layout::{
    AnyHead, Change, DocKeys, FileEntry, HEAD_FORMAT, Head, assemble_some, change, corrupt,
    decode_entry, decode_head,
};
use pki_rotate::store::{Changes, conflict, only_paths, validate_key};
use pki_rotate::{Files, Result, Revision, Summary, validate_path};
use std::collections::{BTreeMap, BTreeSet};

/// What one read of named files found.
enum PathsRead {
    Found(Option<(Files, Revision)>),
    /// A head that is not format 2: the document is read whole.
    Whole,
}

impl AsyncEtcdStore {
    /// [`pki_rotate::AsyncStore::get_paths`]: the head, the entries of
    /// `paths` and their blobs, at the revision of the head read, tried
    /// again when that revision was compacted away, as
    /// [`AsyncEtcdStore::get_document`] does.
    pub(super) async fn get_paths_document(
        &self,
        key: &str,
        paths: &BTreeSet<String>,
    ) -> Result<Option<(Files, Revision)>> {
        validate_key(key)?;
        let mut attempt = 1;
        loop {
            match self.read_paths(key, paths).await {
                Ok(PathsRead::Found(found)) => return Ok(found),
                Ok(PathsRead::Whole) => {
                    return Ok(self
                        .get_document(key)
                        .await?
                        .map(|(files, revision)| (only_paths(&files, paths), revision)));
                }
                Err(ReadFail::Error(e)) => return Err(e),
                Err(ReadFail::Compacted) if attempt < GET_ATTEMPTS => attempt += 1,
                Err(ReadFail::Compacted) => return Err(self.compacted_too_often(key)),
            }
        }
    }

    /// One consistent read of the files `paths` names: the head, then
    /// their entries and blobs at the revision of that answer, each file
    /// checked against its entry's SHA-256 as a whole read checks it.
    async fn read_paths(
        &self,
        key: &str,
        paths: &BTreeSet<String>,
    ) -> std::result::Result<PathsRead, ReadFail> {
        let keys = DocKeys::new(self.url.prefix(), key);
        let doing = format!("reading document \"{key}\"");
        let (at, head) = self.read_head(&keys, &doing).await?;
        let Some(head) = head else {
            return Ok(PathsRead::Found(None));
        };
        let revision = Revision::new(head.mod_revision().to_string());
        let location = self.doc_location(key);
        let head_location = format!("{location}: head {}", keys.head);
        let AnyHead::Current(head) = decode_head(&head_location, head.value())? else {
            return Ok(PathsRead::Whole);
        };
        let compacted = self.read_fail(&doing);
        // A path that is not valid names no file of any document.
        let named: BTreeSet<&str> = paths
            .iter()
            .map(String::as_str)
            .filter(|p| validate_path(p).is_ok())
            .collect();
        let entries = self
            .get_entries(&keys, &location, &head.generation, &named, Some(at), |i| {
                self.read_step(&format!("read named entries {i}"))
            })
            .await;
        let (entries, blobs) = self.with_blobs(&keys, entries, at, compacted).await?;
        let files = assemble_some(&location, &keys, &head, &entries, &blobs)?;
        Ok(PathsRead::Found(Some((files, revision))))
    }

    /// The entries of `paths` in `generation` (a path without one is left
    /// out), at revision `at` or the latest when None: by key, in
    /// transactions of gets within the server's limit on operations.
    /// `before` runs before each transaction with its number.
    pub(super) async fn get_entries(
        &self,
        keys: &DocKeys,
        location: &str,
        generation: &str,
        paths: &BTreeSet<&str>,
        at: Option<i64>,
        mut before: impl FnMut(usize) -> std::result::Result<(), Fail>,
    ) -> std::result::Result<BTreeMap<String, FileEntry>, EntriesFail> {
        let prefix = keys.generation(generation);
        let options = match at {
            Some(at) => GetOptions::new().with_revision(at),
            None => GetOptions::new(),
        };
        // Entry keys are at most a few kilobytes: bound the request too.
        let budget = self.request_budget();
        let max_ops = self.options.max_txn_ops.max(1);
        let mut batches: Vec<Vec<TxnOp>> = Vec::new();
        let (mut ops, mut bytes) = (max_ops, 0);
        for path in paths {
            let key = keys.entry(generation, path);
            let cost = key.len() + PER_OP_OVERHEAD;
            if ops == max_ops || bytes + cost > budget {
                batches.push(Vec::new());
                (ops, bytes) = (0, 0);
            }
            ops += 1;
            bytes += cost;
            if let Some(batch) = batches.last_mut() {
                batch.push(TxnOp::get(key, Some(options.clone())));
            }
        }
        let mut entries = BTreeMap::new();
        for (i, batch) in batches.into_iter().enumerate() {
            before(i + 1).map_err(EntriesFail::Fail)?;
            let mut kv = self.kv.clone();
            let answer = self
                .run(async move { kv.txn(Txn::new().and_then(batch)).await })
                .await
                .map_err(EntriesFail::Fail)?;
            for response in answer.op_responses() {
                let TxnOpResponse::Get(mut got) = response else {
                    continue;
                };
                for item in got.take_kvs() {
                    let path = item
                        .key()
                        .strip_prefix(prefix.as_bytes())
                        .and_then(|p| std::str::from_utf8(p).ok())
                        .ok_or_else(|| {
                            EntriesFail::Error(corrupt(
                                location,
                                format!("an entry key of generation {generation} is not UTF-8"),
                            ))
                        })?;
                    let entry =
                        decode_entry(location, path, item.value()).map_err(EntriesFail::Error)?;
                    entries.insert(path.to_string(), entry);
                }
            }
        }
        Ok(entries)
    }

    /// [`pki_rotate::AsyncStore::put_changes`]: reads the head (a stale
    /// `expected` is a conflict before anything is written) and the entries
    /// of the paths `changes` names, writes the new blobs, then commits the
    /// changed entries and the head in place in one transaction, and
    /// removes the blobs the replaced entries named. A change too large for
    /// one transaction, or a head that is not format 2, is written whole.
    pub(super) async fn put_changes_document(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        validate_key(key)?;
        let keys = DocKeys::new(self.url.prefix(), key);
        let doing = format!("writing document \"{key}\"");
        let fail = |f: Fail| self.backend(&doing, f);
        let found_revision = |r: i64| Revision::new(r.to_string());

        self.step("read head").map_err(fail)?;
        let (_, head) = self.get_head(&keys).await.map_err(fail)?;
        let found = head.as_ref().map(|h| h.mod_revision());
        let Some(compare) = head_compare(&keys, Some(expected), found) else {
            return Err(conflict(key, expected, found.map(found_revision)));
        };
        let head = match head.as_ref().map(|h| decode_head("", h.value())) {
            Some(Ok(AnyHead::Current(head))) => head,
            _ => {
                return self
                    .put_changes_whole(key, expected, changes, summary)
                    .await;
            }
        };

        let location = self.doc_location(key);
        let Some(previous) = self
            .touched_entries(&keys, &location, &head.generation, changes, &doing)
            .await?
        else {
            return self
                .put_changes_whole(key, expected, changes, summary)
                .await;
        };
        let mut written = Files::new();
        for (path, file) in changes.written() {
            written.insert(path, file.clone())?;
        }
        let nonce = nonce().map_err(fail)?;
        // The paths read are exactly the ones written or removed, so the
        // change's removed paths are the removed ones the document held, and
        // a file it writes keeps the blobs of the chunks its previous
        // version had.
        let change = change(&previous, &written, &nonce);
        let new_head = next_head(&head, &previous, &written, &change, summary, &nonce)
            .map_err(|reason| corrupt(&location, reason))?;
        let (head_value, cost) = self.head_value(&keys, &new_head).map_err(fail)?;
        let Some(commit_ops) = self
            .in_place_ops(&keys, &head.generation, &change, cost)
            .map_err(fail)?
        else {
            return self
                .put_changes_whole(key, expected, changes, summary)
                .await;
        };
        let puts =
            puts_before_commit(&keys, &change, &written, &head.generation, true).map_err(fail)?;
        let attempt = Attempt {
            keys: keys.clone(),
            nonce,
            previous: Previous::Current {
                generation: head.generation.clone(),
                entries: previous,
            },
            change,
            generation: head.generation,
            in_place: true,
            marker: None,
            entries_complete: false,
        };
        let plan = Plan {
            compare,
            found,
            head_value,
            commit_ops,
            puts,
        };
        self.run_attempt(key, Some(expected), attempt, plan).await
    }

    /// The entries of the paths `changes` writes or removes, at the latest
    /// revision: if the head changed since it was read, the commit's
    /// compare fails whatever they say (every in-place change of an entry
    /// comes with a put of the head). None when more paths change than one
    /// commit can change in place (a rotation that re-issues every leaf):
    /// the write goes whole then, without reading their entries twice. A
    /// change that writes unchanged files may have fit; it is only written
    /// the longer way.
    async fn touched_entries(
        &self,
        keys: &DocKeys,
        location: &str,
        generation: &str,
        changes: &Changes,
        doing: &str,
    ) -> Result<Option<BTreeMap<String, FileEntry>>> {
        let touched: BTreeSet<&str> = changes
            .written()
            .map(|(path, _)| path)
            .chain(changes.removed())
            .collect();
        if touched.len() + 2 > self.options.max_txn_ops.max(1) {
            return Ok(None);
        }
        self.get_entries(keys, location, generation, &touched, None, |i| {
            self.step(&format!("read named entries {i}"))
        })
        .await
        .map(Some)
        .map_err(|e| match e {
            EntriesFail::Fail(f) => self.backend(doing, f),
            EntriesFail::Error(e) => e,
        })
    }

    /// A partial write as a whole one: the document read whole (every
    /// file checked), changed, and written with [`Self::put_document`].
    async fn put_changes_whole(
        &self,
        key: &str,
        expected: &Revision,
        changes: &Changes,
        summary: Option<&Summary>,
    ) -> Result<Revision> {
        let mut files = match self.get_document(key).await? {
            Some((files, revision)) if revision == *expected => files,
            other => return Err(conflict(key, expected, other.map(|(_, r)| r))),
        };
        changes.apply_to(&mut files)?;
        self.put_document(key, Some(expected), &files, summary)
            .await
    }
}

/// The head a partial write commits: the generation and directories of
/// `head`, this attempt's commit, and its file count moved by the paths
/// added and removed. An error when `head` names fewer files than its
/// generation holds.
fn next_head(
    head: &Head,
    previous: &BTreeMap<String, FileEntry>,
    written: &Files,
    change: &Change<'_>,
    summary: Option<&Summary>,
    nonce: &str,
) -> std::result::Result<Head, String> {
    let added = written
        .iter()
        .filter(|(path, _)| !previous.contains_key(*path))
        .count() as u64;
    let files = (head.files + added)
        .checked_sub(change.removed.len() as u64)
        .ok_or_else(|| {
            format!(
                "the head names {} files and generation {} holds more",
                head.files, head.generation
            )
        })?;
    Ok(Head {
        format: HEAD_FORMAT,
        generation: head.generation.clone(),
        commit: nonce.to_string(),
        files,
        dirs: head.dirs.clone(),
        summary: summary.map(|s| s.as_str().to_string()),
    })
}
