//! Writing a document in three phases (new blobs, the commit of the head,
//! garbage collection), with the argument that collecting garbage never
//! removes a blob a head references; and finding out whether a commit that
//! got no answer landed.

use super::PER_OP_OVERHEAD;
use super::client::AsyncEtcdStore;
use super::fail::Fail;
use crate::client::{Compare, CompareOp, DeleteOptions, GetOptions, Txn, TxnOp, TxnOpResponse};
use crate::layout::{DocKeys, Entry, MANIFEST_FORMAT, Manifest, blob_id, sha256_hex};
use pki_rotate::store::validate_key;
use pki_rotate::{File, Files, Result, Revision, RotateError};
use std::collections::{BTreeMap, BTreeSet, HashMap};

impl AsyncEtcdStore {
    /// [`pki_rotate::AsyncStore::put`]: the three phases, in order.
    pub(super) async fn put_document(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
    ) -> Result<Revision> {
        validate_key(key)?;
        let keys = DocKeys::new(self.url.prefix(), key);
        let doing = format!("writing document \"{key}\"");
        let fail = |f: Fail| self.backend(&doing, f);
        let conflict = |found: Option<i64>| {
            RotateError::Store(pki_rotate::StoreError::Conflict {
                key: key.to_string(),
                expected: expected.cloned(),
                found: found.map(|r| Revision::new(r.to_string())),
            })
        };

        // Read the head: a stale `expected` is a conflict before anything
        // is written, and the head's manifest says which blobs to keep.
        self.step("read head").map_err(fail)?;
        let mut kv = self.kv.clone();
        let head_key = keys.head.clone();
        let mut current = self
            .run(async move { kv.get(head_key, None).await })
            .await
            .map_err(fail)?;
        let head = current.take_kvs().into_iter().next();
        let found = head.as_ref().map(|h| h.mod_revision());
        // A revision that is not etcd's (another store's token) matches
        // nothing: a conflict, so the caller reads again.
        let compare = match (expected.map(parse_revision), found) {
            (None, None) => Compare::create_revision(keys.head.clone(), CompareOp::Equal, 0),
            (Some(Some(e)), Some(f)) if e == f => {
                Compare::mod_revision(keys.head.clone(), CompareOp::Equal, e)
            }
            _ => return Err(conflict(found)),
        };
        // A head that does not decode shares nothing: its blobs become
        // garbage once the new head is committed.
        let reusable: HashMap<String, String> = head
            .as_ref()
            .and_then(|h| Manifest::decode("", h.value()).ok())
            .map(|m| m.files.into_values().map(|e| (e.sha256, e.blob)).collect())
            .unwrap_or_default();

        // The new manifest: files whose bytes the read head already holds
        // keep their blob; the others get blobs of this attempt.
        let nonce = nonce().map_err(fail)?;
        let mut manifest = Manifest {
            format: MANIFEST_FORMAT,
            files: BTreeMap::new(),
            dirs: files.dirs().map(str::to_string).collect(),
        };
        let mut new_blobs: Vec<NewBlob> = Vec::new();
        let mut written: HashMap<String, String> = HashMap::new();
        for (path, file) in files.iter() {
            let sha256 = sha256_hex(&file.contents);
            let blob = match reusable.get(&sha256).or_else(|| written.get(&sha256)) {
                Some(id) => id.clone(),
                None => {
                    let id = blob_id(&nonce, new_blobs.len());
                    new_blobs.push(NewBlob {
                        id: id.clone(),
                        file,
                        path,
                    });
                    written.insert(sha256.clone(), id.clone());
                    id
                }
            };
            manifest.files.insert(
                path.to_string(),
                Entry {
                    sha256,
                    blob,
                    secret: file.secret,
                },
            );
        }
        let head_value =
            serde_json::to_vec(&manifest).map_err(|e| fail(Fail::Other(e.to_string())))?;
        if head_value.len() + keys.head.len() + PER_OP_OVERHEAD > self.request_budget() {
            return Err(fail(Fail::Other(format!(
                "the manifest of {} files is {} bytes, more than one etcd request may carry ({} bytes)",
                manifest.files.len(),
                head_value.len(),
                self.options.max_request_bytes
            ))));
        }

        // Phase 1: the blobs. Each batch also checks that none of its keys
        // exists, so a blob is never overwritten, whatever the odds of two
        // writers drawing the same nonce.
        let batches = self.batches(key, &keys, &new_blobs)?;
        for (i, batch) in batches.iter().enumerate() {
            self.step(&format!("write blobs {}/{}", i + 1, batches.len()))
                .map_err(fail)?;
            let compares: Vec<Compare> = batch
                .iter()
                .map(|b| Compare::create_revision(keys.blob(&b.id), CompareOp::Equal, 0))
                .collect();
            let puts: Vec<TxnOp> = batch
                .iter()
                .map(|b| TxnOp::put(keys.blob(&b.id), b.file.contents.to_vec(), None))
                .collect();
            let mut kv = self.kv.clone();
            let response = self
                .run(async move { kv.txn(Txn::new().when(compares).and_then(puts)).await })
                .await
                .map_err(fail)?;
            if !response.succeeded() {
                return Err(fail(Fail::Other(format!(
                    "blob ids of attempt {nonce} are already taken; nothing was committed"
                ))));
            }
        }

        // Phase 2: the one transaction that makes the new document current.
        self.step("commit").map_err(fail)?;
        let mut kv = self.kv.clone();
        let txn = Txn::new()
            .when(vec![compare])
            .and_then(vec![TxnOp::put(
                keys.head.clone(),
                head_value.clone(),
                None,
            )])
            .or_else(vec![TxnOp::get(
                keys.head.clone(),
                Some(GetOptions::new().with_keys_only()),
            )]);
        // When this request fails without an answer the transaction may or
        // may not have been applied (and one still in flight may be applied
        // later), so this is no plain backend error: `resolve_commit` reads
        // the head again to find out, and says the outcome is unknown when
        // it cannot. This attempt's blobs are left alone then: the head may
        // reference them, now or once a delayed commit is applied. If it
        // never is, they are garbage that the next successful write
        // collects (phase 3, second case: a commit comparing with a
        // mod_revision that another commit changed can never apply).
        let provable = !new_blobs.is_empty();
        let lost = |f: Fail| Lost {
            keys: &keys,
            manifest: &manifest,
            head_value: &head_value,
            read: found,
            provable,
            fail: f,
        };
        let response = match self.run(async move { kv.txn(txn).await }).await {
            Ok(response) => response,
            Err(f) if f.may_have_been_applied() => return self.resolve_commit(key, lost(f)).await,
            Err(f) => return Err(fail(f)),
        };
        if !response.succeeded() {
            let found = response.op_responses().into_iter().find_map(|r| match r {
                TxnOpResponse::Get(g) => Some(g.kvs().first().map(|kv| kv.mod_revision())),
                _ => None,
            });
            // The head this attempt's blobs were written for was never
            // committed, and nobody else knows the nonce: remove them.
            if !new_blobs.is_empty() && self.step("discard blobs").is_ok() {
                let mut kv = self.kv.clone();
                let from = keys.blob(&format!("{nonce}-"));
                let _ = self
                    .run(async move {
                        kv.delete(from, Some(DeleteOptions::new().with_prefix()))
                            .await
                    })
                    .await;
            }
            return Err(conflict(found.flatten()));
        }
        let Some(revision) = response.header().map(|h| h.revision()).filter(|r| *r > 0) else {
            // Applied, but of unknown revision: read it.
            let f = Fail::Other("etcd's answer to the commit has no revision".into());
            return self.resolve_commit(key, lost(f)).await;
        };

        // Phase 3: garbage. A blob is removed when the head just committed
        // (at `revision`) does not reference it and it was created before
        // that revision. This never removes a blob that a committed head, or
        // one that can still be committed, references:
        // - a head committed later than this one chains, through the
        //   mod_revision compares, onto this head or a successor of it. Its
        //   writer read that head at a revision >= `revision` and wrote its
        //   new blobs after that read, so they were created after
        //   `revision`; the blobs it kept are referenced by the head it
        //   read, and by induction along the chain were either referenced
        //   here or created after `revision`. In particular a writer that
        //   read this new head never loses a blob.
        // - a writer still in flight that read an older head can never
        //   commit: its compare names a mod_revision that is no longer the
        //   head's. Its blobs are garbage whatever happens, so removing
        //   them here is safe, and leaving them (created after the listing)
        //   is too: that writer discards them when it loses, or the next
        //   successful write collects them if it died.
        // - readers read blobs at the revision of their head read, at which
        //   every referenced blob still exists.
        // It is best effort: the document is committed whatever happens
        // here, and the next write collects what is left.
        let _ = self.collect_garbage(&keys, &manifest, revision).await;
        Ok(Revision::new(revision.to_string()))
    }

    /// Removes every blob of `key` that `manifest` (just committed at
    /// `revision`) does not reference and that was created before it.
    async fn collect_garbage(
        &self,
        keys: &DocKeys,
        manifest: &Manifest,
        revision: i64,
    ) -> std::result::Result<(), Fail> {
        let referenced: BTreeSet<&str> = manifest.files.values().map(|e| e.blob.as_str()).collect();
        let mut garbage: Vec<Vec<u8>> = Vec::new();
        self.step("list garbage")?;
        self.scan(
            &keys.blobs,
            GetOptions::new().with_keys_only(),
            |_| Ok(()),
            |item| {
                let unreferenced = keys
                    .blob_id_of(item.key())
                    .is_none_or(|id| !referenced.contains(id));
                if unreferenced && item.create_revision() < revision {
                    garbage.push(item.key().to_vec());
                }
            },
        )
        .await?;
        let batches: Vec<&[Vec<u8>]> = garbage.chunks(self.options.max_txn_ops.max(1)).collect();
        for (i, batch) in batches.iter().enumerate() {
            self.step(&format!("delete garbage {}/{}", i + 1, batches.len()))?;
            let ops: Vec<TxnOp> = batch
                .iter()
                .map(|k| TxnOp::delete(k.clone(), None))
                .collect();
            let mut kv = self.kv.clone();
            self.run(async move { kv.txn(Txn::new().and_then(ops)).await })
                .await?;
        }
        Ok(())
    }

    /// Finds out whether a commit that got no answer was applied, with one
    /// read of the head bounded by the request timeout. It was when the
    /// head holds, byte for byte, the manifest this attempt wrote and that
    /// manifest names blobs of this attempt (whose nonce no other writer
    /// knows): then the document's revision is the head's. In every other
    /// case the outcome is unknown, even when the head is still the one
    /// read: etcd may apply the transaction later (it is queued, or behind
    /// a leader change), so an unchanged head proves nothing.
    async fn resolve_commit(&self, key: &str, lost: Lost<'_>) -> Result<Revision> {
        let unknown = |found: String| {
            RotateError::Store(pki_rotate::StoreError::UnknownOutcome {
                store: self.url.to_string(),
                key: key.to_string(),
                detail: format!("no answer to the commit: {}; {found}", lost.fail.describe()),
            })
        };
        self.step("check commit")
            .map_err(|f| unknown(format!("the head was not read again: {}", f.describe())))?;
        let mut kv = self.kv.clone();
        let head_key = lost.keys.head.clone();
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
        if Some(revision) == lost.read {
            return Err(unknown(format!(
                "the head is still at revision {revision}, the one this write read, and the commit may still be applied"
            )));
        }
        if head.value() != lost.head_value {
            return Err(unknown(format!(
                "the head is now at revision {revision} with another manifest"
            )));
        }
        if !lost.provable {
            return Err(unknown(format!(
                "the head at revision {revision} holds the same manifest, but this write added no blob that would tell it from another writer's"
            )));
        }
        // Landed: the head is this attempt's, so phase 3 applies as after
        // an answered commit (see `put`), best effort likewise.
        let _ = self
            .collect_garbage(lost.keys, lost.manifest, revision)
            .await;
        Ok(Revision::new(revision.to_string()))
    }

    /// Groups the new blobs into transactions within etcd's limits.
    fn batches<'b, 'a>(
        &self,
        key: &str,
        keys: &DocKeys,
        blobs: &'b [NewBlob<'a>],
    ) -> Result<Vec<&'b [NewBlob<'a>]>> {
        let budget = self.request_budget();
        let max_ops = self.options.max_txn_ops.max(1);
        let mut batches = Vec::new();
        let (mut begin, mut bytes) = (0, 0);
        for (i, NewBlob { id, file, path }) in blobs.iter().enumerate() {
            let cost = 2 * keys.blob(id).len() + file.contents.len() + PER_OP_OVERHEAD;
            if cost > budget {
                return Err(self.backend(
                    format!("writing document \"{key}\""),
                    Fail::Other(format!(
                        "file {path} is {} bytes, more than one etcd request may carry ({} bytes)",
                        file.contents.len(),
                        self.options.max_request_bytes
                    )),
                ));
            }
            if i > begin && (bytes + cost > budget || i - begin == max_ops) {
                batches.push(&blobs[begin..i]);
                begin = i;
                bytes = 0;
            }
            bytes += cost;
        }
        if begin < blobs.len() {
            batches.push(&blobs[begin..]);
        }
        Ok(batches)
    }
}

/// A commit that got no answer, and what [`AsyncEtcdStore::resolve_commit`]
/// needs to find out whether it was applied.
struct Lost<'a> {
    keys: &'a DocKeys,
    manifest: &'a Manifest,
    /// The head's value the commit writes.
    head_value: &'a [u8],
    /// The head's mod_revision when this attempt read it (None: no head).
    read: Option<i64>,
    /// Whether the manifest names blobs of this attempt, so that the head
    /// holding it proves this commit was applied.
    provable: bool,
    /// How the commit failed.
    fail: Fail,
}

/// A blob a write attempt adds.
struct NewBlob<'a> {
    id: String,
    file: &'a File,
    /// The first path it holds the bytes of, for messages.
    path: &'a str,
}

fn nonce() -> std::result::Result<String, Fail> {
    let mut bytes = [0u8; 8];
    getrandom::fill(&mut bytes)
        .map_err(|e| Fail::Other(format!("no randomness for a blob id: {e}")))?;
    Ok(hex::encode(bytes))
}

fn parse_revision(revision: &Revision) -> Option<i64> {
    revision.as_str().parse::<i64>().ok().filter(|r| *r > 0)
}
