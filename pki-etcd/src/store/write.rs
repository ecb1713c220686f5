//! Writing a document (format 2): what changed is written before the
//! commit where it is invisible, one transaction makes it current, then
//! what it replaced is removed (`sweep.rs`); and finding out whether a
//! commit that got no answer landed. The crate docs give the protocol and
//! the argument that it is crash-safe and compare-and-swap-safe.

use super::PER_OP_OVERHEAD;
use super::client::AsyncEtcdStore;
use super::fail::Fail;
use super::read::EntriesFail;
use crate::client::{Compare, CompareOp, Txn, TxnOp};
use crate::layout::{AnyHead, Change, DocKeys, FileEntry, HEAD_FORMAT, Head, change, decode_head};
use pki_rotate::store::validate_key;
use pki_rotate::{Files, Result, Revision, RotateError};
use std::collections::BTreeMap;

/// What the document held when the writer read it.
pub(super) enum Previous {
    /// No document: this write creates it.
    Nothing,
    /// A format 2 document: its generation and entries.
    Current {
        generation: String,
        entries: BTreeMap<String, FileEntry>,
    },
    /// A format 1 head, or one that does not decode: nothing of it is
    /// kept, and every blob it had becomes garbage.
    Replaced,
}

/// One write attempt, and what cleaning up after it needs.
pub(super) struct Attempt<'a> {
    pub keys: DocKeys,
    /// Drawn at random per attempt: its blob ids, its marker, the commit
    /// it writes in the head, and its generation when it starts one.
    pub nonce: String,
    pub previous: Previous,
    pub change: Change<'a>,
    /// The generation the commit makes current.
    pub generation: String,
    /// Whether the entries are changed in the commit itself (in the
    /// current generation) rather than written as a new generation.
    pub in_place: bool,
    /// The create_revision of this attempt's marker, once written.
    pub marker: Option<i64>,
    /// Whether `change.entries` is every entry of the document it commits.
    /// A partial write (`partial.rs`) knows only the entries it changed:
    /// a sweep then reads the others at the commit's revision.
    pub entries_complete: bool,
}

impl Attempt<'_> {
    /// The generation this attempt's commit retires, if it starts a new one.
    pub fn replaced_generation(&self) -> Option<&str> {
        match &self.previous {
            Previous::Current { generation, .. } if !self.in_place => Some(generation),
            _ => None,
        }
    }
}

/// One key written before the commit.
pub(super) struct Put<'a> {
    pub key: String,
    pub value: std::borrow::Cow<'a, [u8]>,
    /// The file it belongs to, for messages.
    pub path: &'a str,
}

/// What an attempt sends: the keys it writes before the commit, and the
/// commit.
pub(super) struct Plan<'a> {
    /// The commit's compare on the head: its mod_revision as read, or that
    /// it does not exist.
    pub compare: Compare,
    /// The head's mod_revision as read (None: there was no document).
    pub found: Option<i64>,
    pub head_value: Vec<u8>,
    /// The entries the commit puts and deletes itself (in place).
    pub commit_ops: Vec<TxnOp>,
    /// The blobs, and for a new generation its entries, written before.
    pub puts: Vec<Put<'a>>,
}

impl AsyncEtcdStore {
    /// [`pki_rotate::AsyncStore::put`]: read, write what changed, commit,
    /// clean up.
    pub(super) async fn put_document(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&pki_rotate::Summary>,
    ) -> Result<Revision> {
        validate_key(key)?;
        let keys = DocKeys::new(self.url.prefix(), key);
        let doing = format!("writing document \"{key}\"");
        let fail = |f: Fail| self.backend(&doing, f);
        let (compare, found, previous) =
            self.read_before_write(key, &keys, expected, &doing).await?;

        let nonce = nonce().map_err(fail)?;
        let empty = BTreeMap::new();
        let read_entries = match &previous {
            Previous::Current { entries, .. } => entries,
            _ => &empty,
        };
        let change = change(read_entries, files, &nonce);

        // In place when the current generation's changes and the head fit
        // one transaction; otherwise a new generation, written beforehand.
        let in_place_generation = match &previous {
            Previous::Current { generation, .. } => Some(generation.clone()),
            _ => None,
        };
        let mut head = Head {
            format: HEAD_FORMAT,
            generation: in_place_generation.clone().unwrap_or_else(|| nonce.clone()),
            commit: nonce.clone(),
            files: change.entries.len() as u64,
            dirs: files.dirs().map(str::to_string).collect(),
            summary: summary.map(|s| s.as_str().to_string()),
        };
        let (mut head_value, cost) = self.head_value(&keys, &head).map_err(fail)?;
        let in_place_ops = match &in_place_generation {
            Some(generation) => self
                .in_place_ops(&keys, generation, &change, cost)
                .map_err(fail)?,
            None => None,
        };
        let in_place = in_place_ops.is_some();
        if !in_place && in_place_generation.is_some() {
            head.generation = nonce.clone();
            head_value = self.head_value(&keys, &head).map_err(fail)?.0;
        }

        let puts =
            puts_before_commit(&keys, &change, files, &head.generation, in_place).map_err(fail)?;
        let attempt = Attempt {
            keys: keys.clone(),
            nonce: nonce.clone(),
            previous,
            change,
            generation: head.generation.clone(),
            in_place,
            marker: None,
            entries_complete: true,
        };
        let plan = Plan {
            compare,
            found,
            head_value,
            commit_ops: in_place_ops.unwrap_or_default(),
            puts,
        };
        self.run_attempt(key, expected, attempt, plan).await
    }

    /// Reads the head and, for a format 2 document, its entries: the
    /// commit's compare on the head, the head's mod_revision as read, and
    /// what the document held. A stale `expected` is a conflict before
    /// anything is written.
    async fn read_before_write(
        &self,
        key: &str,
        keys: &DocKeys,
        expected: Option<&Revision>,
        doing: &str,
    ) -> Result<(Compare, Option<i64>, Previous)> {
        let fail = |f: Fail| self.backend(doing, f);
        self.step("read head").map_err(fail)?;
        let mut kv = self.kv.clone();
        let head_key = keys.head.clone();
        let mut current = self
            .run(async move { kv.get(head_key, None).await })
            .await
            .map_err(fail)?;
        let head = current.take_kvs().into_iter().next();
        let found = head.as_ref().map(|h| h.mod_revision());
        let Some(compare) = head_compare(keys, expected, found) else {
            return Err(RotateError::Store(pki_rotate::StoreError::Conflict {
                key: key.to_string(),
                expected: expected.cloned(),
                found: found.map(|r| Revision::new(r.to_string())),
            }));
        };

        // The entries of the head read, at the latest revision: if the
        // head changed since, the commit's compare fails whatever they say.
        let location = self.doc_location(key);
        let previous = match head.as_ref().map(|h| decode_head("", h.value())) {
            None => Previous::Nothing,
            Some(Ok(AnyHead::Current(head))) => {
                let entries = self
                    .read_entries(keys, &location, &head.generation, None, |page| {
                        self.step(&format!("read entries {page}"))
                    })
                    .await
                    .map_err(|e| match e {
                        EntriesFail::Fail(f) => fail(f),
                        EntriesFail::Error(e) => e,
                    })?;
                Previous::Current {
                    generation: head.generation,
                    entries,
                }
            }
            Some(_) => Previous::Replaced,
        };
        Ok((compare, found, previous))
    }

    /// The head's value and what it costs in the commit; an error when it
    /// alone is more than one request may carry.
    pub(super) fn head_value(
        &self,
        keys: &DocKeys,
        head: &Head,
    ) -> std::result::Result<(Vec<u8>, usize), Fail> {
        let value = serde_json::to_vec(head).map_err(|e| Fail::Other(e.to_string()))?;
        let cost = 2 * keys.head.len() + value.len() + 3 * PER_OP_OVERHEAD;
        if cost > self.request_budget() {
            return Err(Fail::Other(format!(
                "the head with {} declared directories is {} bytes, more than one etcd request may carry ({} bytes)",
                head.dirs.len(),
                value.len(),
                self.options.max_request_bytes
            )));
        }
        Ok((value, cost))
    }

    /// The puts and deletes of `change`'s entries in `generation`, when
    /// they fit one transaction with the head (`head_cost` bytes) and the
    /// marker; None when the commit cannot make them in place.
    pub(super) fn in_place_ops(
        &self,
        keys: &DocKeys,
        generation: &str,
        change: &Change<'_>,
        head_cost: usize,
    ) -> std::result::Result<Option<Vec<TxnOp>>, Fail> {
        // The head, the marker when phase 1 has nothing to write, the entries.
        let ops = 2 + change.changed.len() + change.removed.len();
        if ops > self.options.max_txn_ops.max(1) {
            return Ok(None);
        }
        let mut bytes = head_cost;
        let mut puts = Vec::with_capacity(ops);
        for path in &change.changed {
            let key = keys.entry(generation, path);
            let value = entry_json(change, path)?;
            bytes += key.len() + value.len() + PER_OP_OVERHEAD;
            puts.push(TxnOp::put(key, value, None));
        }
        for path in &change.removed {
            let key = keys.entry(generation, path);
            bytes += key.len() + PER_OP_OVERHEAD;
            puts.push(TxnOp::delete(key, None));
        }
        Ok((bytes <= self.request_budget()).then_some(puts))
    }

    /// Phases 1 to 3 of an attempt (see the crate docs): what it writes
    /// before the commit, the commit, the cleanup; a lost answer to the
    /// commit is resolved by reading the head again.
    pub(super) async fn run_attempt(
        &self,
        key: &str,
        expected: Option<&Revision>,
        mut attempt: Attempt<'_>,
        plan: Plan<'_>,
    ) -> Result<Revision> {
        let Plan {
            compare,
            found,
            head_value,
            mut commit_ops,
            puts,
        } = plan;
        let keys = attempt.keys.clone();
        let nonce = attempt.nonce.clone();
        let doing = format!("writing document \"{key}\"");
        let fail = |f: Fail| self.backend(&doing, f);
        let conflict = |found: Option<i64>| {
            RotateError::Store(pki_rotate::StoreError::Conflict {
                key: key.to_string(),
                expected: expected.cloned(),
                found: found.map(|r| Revision::new(r.to_string())),
            })
        };
        if !puts.is_empty() {
            attempt.marker = Some(self.write_before_commit(key, &attempt, puts).await?);
        }

        // Phase 2: the one transaction that makes the new document current.
        self.step("commit").map_err(fail)?;
        // The marker stays until the cleanup after the commit is done: a
        // writer that finds it older than its own commit knows that some
        // cleanup may be missing (see `sweep.rs`). Without phase 1, the
        // commit creates it.
        let mut ops = vec![TxnOp::put(keys.head.clone(), head_value, None)];
        let marker_compare = match attempt.marker {
            Some(marker) => {
                Compare::create_revision(keys.attempt(&nonce), CompareOp::Equal, marker)
            }
            None => {
                ops.push(TxnOp::put(keys.attempt(&nonce), Vec::new(), None));
                Compare::create_revision(keys.attempt(&nonce), CompareOp::Equal, 0)
            }
        };
        let compares = vec![compare, marker_compare];
        ops.append(&mut commit_ops);
        let txn = Txn::new()
            .when(compares)
            .and_then(ops)
            .or_else(vec![TxnOp::get(
                keys.head.clone(),
                Some(crate::client::GetOptions::new().with_keys_only()),
            )]);
        // When this request fails without an answer the transaction may or
        // may not have been applied (and one still in flight may be applied
        // later), so this is no plain backend error: `resolve_commit` reads
        // the head again to find out, and says the outcome is unknown when
        // it cannot. What this attempt wrote is left alone then: the head
        // may name it, now or once a delayed commit is applied. If it never
        // is, the next writer's sweep removes it (its marker is older than
        // that writer's commit).
        let mut kv = self.kv.clone();
        let response = match self.run(async move { kv.txn(txn).await }).await {
            Ok(response) => response,
            Err(f) if f.may_have_been_applied() => {
                return self.resolve_commit(key, &attempt, found, f).await;
            }
            Err(f) => return Err(fail(f)),
        };
        if !response.succeeded() {
            let found = response.op_responses().into_iter().find_map(|r| match r {
                crate::client::TxnOpResponse::Get(g) => {
                    Some(g.kvs().first().map(|kv| kv.mod_revision()))
                }
                _ => None,
            });
            // What this attempt wrote was never committed, and nobody
            // else knows the nonce: remove it.
            if attempt.marker.is_some() && self.step("discard attempt").is_ok() {
                let _ = self.discard(&attempt).await;
            }
            return Err(conflict(found.flatten()));
        }
        let Some(revision) = response.header().map(|h| h.revision()).filter(|r| *r > 0) else {
            // Applied, but of unknown revision: read it.
            let f = Fail::Other("etcd's answer to the commit has no revision".into());
            return self.resolve_commit(key, &attempt, found, f).await;
        };

        // Phase 3: what the commit replaced, and what dead attempts left.
        // Best effort: the document is committed whatever happens here.
        let _ = self.finish(&attempt, revision).await;
        Ok(Revision::new(revision.to_string()))
    }

    /// Writes `puts` in transactions within etcd's limits, the attempt's
    /// marker with the first; returns the marker's create_revision.
    async fn write_before_commit(
        &self,
        key: &str,
        attempt: &Attempt<'_>,
        puts: Vec<Put<'_>>,
    ) -> Result<i64> {
        let doing = format!("writing document \"{key}\"");
        let fail = |f: Fail| self.backend(&doing, f);
        let marker_key = attempt.keys.attempt(&attempt.nonce);
        let budget = self.request_budget();
        let max_ops = self.options.max_txn_ops.max(1);
        // The marker's put and compare take one op and some bytes of the first batch.
        let marker_cost = 2 * marker_key.len() + 2 * PER_OP_OVERHEAD;
        let mut batches: Vec<Vec<Put>> = vec![Vec::new()];
        let (mut ops, mut bytes) = (1, marker_cost);
        for put in puts {
            let cost = put.key.len() + put.value.len() + PER_OP_OVERHEAD;
            if cost + marker_cost > budget {
                return Err(fail(Fail::Other(format!(
                    "a piece of file {} is {} bytes, more than one etcd request may carry ({} bytes)",
                    put.path,
                    put.value.len(),
                    self.options.max_request_bytes
                ))));
            }
            if ops == max_ops || bytes + cost > budget {
                batches.push(Vec::new());
                (ops, bytes) = (0, marker_cost);
            }
            ops += 1;
            bytes += cost;
            if let Some(batch) = batches.last_mut() {
                batch.push(put);
            }
        }
        let total = batches.len();
        let mut marker: Option<i64> = None;
        for (i, batch) in batches.into_iter().enumerate() {
            self.step(&format!("write blobs {}/{total}", i + 1))
                .map_err(fail)?;
            let compare =
                Compare::create_revision(marker_key.clone(), CompareOp::Equal, marker.unwrap_or(0));
            let mut ops: Vec<TxnOp> = Vec::with_capacity(batch.len() + 1);
            if marker.is_none() {
                ops.push(TxnOp::put(marker_key.clone(), Vec::new(), None));
            }
            ops.extend(
                batch
                    .into_iter()
                    .map(|p| TxnOp::put(p.key, p.value.into_owned(), None)),
            );
            let mut kv = self.kv.clone();
            let response = self
                .run(async move { kv.txn(Txn::new().when(vec![compare]).and_then(ops)).await })
                .await
                .map_err(fail)?;
            if !response.succeeded() {
                return Err(fail(Fail::Other(format!(
                    "the marker of write attempt {} was taken or removed; nothing was committed",
                    attempt.nonce
                ))));
            }
            if marker.is_none() {
                let Some(revision) = response.header().map(|h| h.revision()).filter(|r| *r > 0)
                else {
                    return Err(fail(Fail::Other(
                        "etcd's answer has no revision; nothing was committed".into(),
                    )));
                };
                marker = Some(revision);
            }
        }
        marker.ok_or_else(|| fail(Fail::Other("nothing was written before the commit".into())))
    }

    /// Finds out whether a commit that got no answer was applied, with one
    /// read of the head bounded by the request timeout. It was when the
    /// head names this attempt's nonce as its commit (no other writer
    /// knows it): then the document's revision is the head's. In every
    /// other case the outcome is unknown, even when the head is still the
    /// one read: etcd may apply the transaction later (it is queued, or
    /// behind a leader change), so an unchanged head proves nothing.
    async fn resolve_commit(
        &self,
        key: &str,
        attempt: &Attempt<'_>,
        read: Option<i64>,
        fail: Fail,
    ) -> Result<Revision> {
        let unknown = |found: String| {
            RotateError::Store(pki_rotate::StoreError::UnknownOutcome {
                store: self.url.to_string(),
                key: key.to_string(),
                detail: format!("no answer to the commit: {}; {found}", fail.describe()),
            })
        };
        self.step("check commit")
            .map_err(|f| unknown(format!("the head was not read again: {}", f.describe())))?;
        let mut kv = self.kv.clone();
        let head_key = attempt.keys.head.clone();
        let mut answer = self
            .run(async move { kv.get(head_key, None).await })
            .await
            .map_err(|f| {
                unknown(format!(
                    "reading the head again failed too: {}",
                    f.describe()
                ))
            })?;
        let Some(head) = answer.take_kvs().into_iter().next() else {
            return Err(unknown(
                "there is no head yet, and the commit may still be applied".into(),
            ));
        };
        let revision = head.mod_revision();
        let committed = matches!(
            decode_head("", head.value()),
            Ok(AnyHead::Current(h)) if h.commit == attempt.nonce
        );
        if committed {
            // Landed: phase 3 applies as after an answered commit.
            let _ = self.finish(attempt, revision).await;
            return Ok(Revision::new(revision.to_string()));
        }
        if Some(revision) == read {
            return Err(unknown(format!(
                "the head is still at revision {revision}, the one this write read, and the commit may still be applied"
            )));
        }
        Err(unknown(format!(
            "the head is now at revision {revision}, committed by another write"
        )))
    }
}

/// The value of the entry of `path` in `change`.
/// The commit's compare on the head: that it does not exist (no revision
/// expected), or that its mod_revision is the one expected; None when the
/// head read does not match `expected`: a conflict. A revision that is not
/// etcd's (another store's token) matches nothing, so the caller reads
/// again.
pub(super) fn head_compare(
    keys: &DocKeys,
    expected: Option<&Revision>,
    found: Option<i64>,
) -> Option<Compare> {
    match (expected.map(parse_revision), found) {
        (None, None) => Some(Compare::create_revision(
            keys.head.clone(),
            CompareOp::Equal,
            0,
        )),
        (Some(Some(e)), Some(f)) if e == f => Some(Compare::mod_revision(
            keys.head.clone(),
            CompareOp::Equal,
            e,
        )),
        _ => None,
    }
}

/// Phase 1: the new blobs and, for a new generation (not `in_place`),
/// every entry of it, under keys no reader looks at yet. The attempt's
/// marker goes first (`run_attempt`); each later request checks that it
/// is still there, so an attempt that a sweep declared dead adds nothing
/// after the sweep.
pub(super) fn puts_before_commit<'a>(
    keys: &DocKeys,
    change: &Change<'a>,
    files: &'a Files,
    generation: &str,
    in_place: bool,
) -> std::result::Result<Vec<Put<'a>>, Fail> {
    let mut puts: Vec<Put> = Vec::new();
    for blob in &change.new_blobs {
        puts.push(Put {
            key: keys.blob(&blob.id),
            value: std::borrow::Cow::Borrowed(blob.bytes),
            path: blob.path,
        });
    }
    if !in_place {
        for (path, _) in files.iter() {
            puts.push(Put {
                key: keys.entry(generation, path),
                value: std::borrow::Cow::Owned(entry_json(change, path)?),
                path,
            });
        }
    }
    Ok(puts)
}

fn entry_json(change: &Change<'_>, path: &str) -> std::result::Result<Vec<u8>, Fail> {
    let entry = change
        .entries
        .get(path)
        .ok_or_else(|| Fail::Other(format!("no entry for {path}")))?;
    serde_json::to_vec(entry).map_err(|e| Fail::Other(e.to_string()))
}

pub(super) fn nonce() -> std::result::Result<String, Fail> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|e| Fail::Other(format!("no randomness for a write attempt: {e}")))?;
    Ok(hex::encode(bytes))
}

pub(super) fn parse_revision(revision: &Revision) -> Option<i64> {
    revision.as_str().parse::<i64>().ok().filter(|r| *r > 0)
}
