//! Reading many keys without making etcd count them again for every page.
//!
//! etcd answers a range request with a limit by visiting every key of the
//! range to count them, so reading N keys in pages of P costs N²/P: with
//! 300,000 entries, pages of 256 are over a thousand visits of the whole
//! range. Entries and key listings are small, so they are read in large
//! pages; blobs (up to 64 KiB each) are fetched by key, many in one
//! transaction, which counts nothing.

use super::client::AsyncEtcdStore;
use super::fail::Fail;
use crate::client::{GetOptions, KeyValue, Txn, TxnOp, TxnOpResponse};
use crate::layout::{DocKeys, prefix_end};
use futures_util::stream::{self, StreamExt, TryStreamExt};
use std::collections::{BTreeSet, HashMap};
use zeroize::Zeroizing;

/// Keys per page of entries (a few hundred bytes each) or of key listings.
pub(super) const LARGE_PAGE: i64 = 2048;

/// Blobs fetched in one transaction: etcd's default limit of operations
/// per transaction (the store's `max_txn_ops` lowers it). Blobs are at
/// most 64 KiB, so an answer is at most 8 MiB, which the store's client
/// accepts (it allows a page of the largest values etcd takes).
const BLOBS_PER_TXN: usize = 128;

/// Blob transactions in flight at once on the one connection: their
/// answers (8 MiB at most each, a few KiB for a leaf's files) are held
/// until all are in.
const BLOB_TXNS_IN_FLIGHT: usize = 4;

impl AsyncEtcdStore {
    /// Visits every key-value whose key starts with `prefix`, in pages of
    /// `limit`, each requested with `options`; `before` runs before each
    /// page's request with its number.
    pub(super) async fn scan_large(
        &self,
        prefix: &str,
        options: GetOptions,
        limit: i64,
        mut before: impl FnMut(usize) -> std::result::Result<(), Fail>,
        mut each: impl FnMut(KeyValue),
    ) -> std::result::Result<(), Fail> {
        let end = prefix_end(prefix);
        let mut start = prefix.as_bytes().to_vec();
        for page in 1.. {
            before(page)?;
            let mut kv = self.kv.clone();
            let options = options.clone().with_range(end.clone()).with_limit(limit);
            let from = std::mem::take(&mut start);
            let mut answer = self
                .run(async move { kv.get(from, Some(options)).await })
                .await?;
            let more = answer.more();
            let kvs = answer.take_kvs();
            let Some(last) = kvs.last().map(|kv| kv.key().to_vec()) else {
                break;
            };
            kvs.into_iter().for_each(&mut each);
            if !more {
                break;
            }
            // The next page starts just after the last key of this one.
            start = last;
            start.push(0);
        }
        Ok(())
    }

    /// The blobs named `wanted`, read at revision `at` by key, in
    /// transactions of gets, several in flight at once: every answer is of
    /// the same revision, so their order does not matter, and a whole read
    /// of 10,000 leaves (40,000 blobs) is some 300 transactions, which one
    /// after the other would wait out as many round trips. A blob that does not exist is
    /// left out (the caller names the file that misses it).
    pub(super) async fn get_blobs(
        &self,
        keys: &DocKeys,
        wanted: &BTreeSet<&str>,
        at: i64,
    ) -> std::result::Result<HashMap<String, Zeroizing<Vec<u8>>>, Fail> {
        let ids: Vec<&str> = wanted.iter().copied().collect();
        let per_txn = BLOBS_PER_TXN.min(self.options.max_txn_ops.max(1));
        let batches: Vec<&[&str]> = ids.chunks(per_txn).collect();
        let answers: Vec<_> = stream::iter(0..batches.len())
            .map(|i| {
                let batch = batches[i];
                async move {
                    self.read_step(&format!("read blobs {}", i + 1))?;
                    let ops: Vec<TxnOp> = batch
                        .iter()
                        .map(|id| {
                            TxnOp::get(keys.blob(id), Some(GetOptions::new().with_revision(at)))
                        })
                        .collect();
                    let mut kv = self.kv.clone();
                    self.run(async move { kv.txn(Txn::new().and_then(ops)).await })
                        .await
                }
            })
            .buffered(BLOB_TXNS_IN_FLIGHT)
            .try_collect()
            .await?;
        let mut blobs: HashMap<String, Zeroizing<Vec<u8>>> = HashMap::new();
        for answer in answers {
            for response in answer.op_responses() {
                let TxnOpResponse::Get(mut got) = response else {
                    continue;
                };
                for item in got.take_kvs() {
                    let (k, v) = item.into_key_value();
                    let v = Zeroizing::new(v);
                    if let Some(id) = keys.blob_id_of(&k) {
                        blobs.insert(id.to_string(), v);
                    }
                }
            }
        }
        Ok(blobs)
    }
}
