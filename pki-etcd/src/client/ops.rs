//! Requests and answers of the KV service in the shape the store uses:
//! option builders ([`GetOptions`], [`DeleteOptions`]), transactions
//! ([`Txn`], [`Compare`], [`TxnOp`]) and answers with accessors.

use crate::proto::etcdserverpb::{
    self as pb, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, ResponseHeader,
    TxnRequest, compare, request_op, response_op,
};
use crate::proto::mvccpb::KeyValue;

/// The end of the range of every key starting with `prefix` (`"\0"`, all
/// keys, when no key is greater).
pub(crate) fn prefix_range_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

/// How a range is read: its end, a revision, a page size, keys only.
#[derive(Debug, Clone, Default)]
pub struct GetOptions {
    request: RangeRequest,
    prefix: bool,
    all_keys: bool,
}

impl GetOptions {
    /// A read of the one key given.
    pub fn new() -> Self {
        GetOptions::default()
    }

    /// Reads `[key, end)`.
    pub fn with_range(mut self, end: impl Into<Vec<u8>>) -> Self {
        self.request.range_end = end.into();
        self.prefix = false;
        self
    }

    /// Reads every key that starts with the key given.
    pub fn with_prefix(mut self) -> Self {
        self.prefix = true;
        self
    }

    /// Reads every key (the key given is ignored).
    pub fn with_all_keys(mut self) -> Self {
        self.all_keys = true;
        self
    }

    /// At most `limit` keys.
    pub fn with_limit(mut self, limit: i64) -> Self {
        self.request.limit = limit;
        self
    }

    /// As of `revision` (0: the latest).
    pub fn with_revision(mut self, revision: i64) -> Self {
        self.request.revision = revision;
        self
    }

    /// Keys without their values.
    pub fn with_keys_only(mut self) -> Self {
        self.request.keys_only = true;
        self
    }

    /// Only the number of keys.
    pub fn with_count_only(mut self) -> Self {
        self.request.count_only = true;
        self
    }

    /// Only the keys that existed at `revision` and were changed after it
    /// (etcd filters them; the count it answers is not filtered).
    pub fn changed_after(mut self, revision: i64) -> Self {
        self.request.max_create_revision = revision;
        self.request.min_mod_revision = revision.saturating_add(1);
        self
    }

    pub(crate) fn request(self, key: Vec<u8>) -> RangeRequest {
        let mut request = self.request;
        if self.all_keys {
            request.key = vec![0];
            request.range_end = vec![0];
        } else {
            if self.prefix {
                request.range_end = prefix_range_end(&key);
            }
            request.key = key;
        }
        request
    }
}

/// How keys are deleted: one, or every key with a prefix.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    prefix: bool,
}

impl DeleteOptions {
    /// Deletes the one key given.
    pub fn new() -> Self {
        DeleteOptions::default()
    }

    /// Deletes every key that starts with the key given.
    pub fn with_prefix(mut self) -> Self {
        self.prefix = true;
        self
    }

    pub(crate) fn request(self, key: Vec<u8>) -> DeleteRangeRequest {
        DeleteRangeRequest {
            range_end: if self.prefix {
                prefix_range_end(&key)
            } else {
                Vec::new()
            },
            key,
            ..DeleteRangeRequest::default()
        }
    }
}

/// How a key is written. etcd's leases and `prev_kv` are not used by pki,
/// so there is nothing to choose yet.
#[derive(Debug, Clone, Default)]
#[non_exhaustive]
pub struct PutOptions {}

pub(crate) fn put_request(
    key: Vec<u8>,
    value: Vec<u8>,
    _options: Option<PutOptions>,
) -> PutRequest {
    PutRequest {
        key,
        value,
        ..PutRequest::default()
    }
}

/// A comparison of a transaction's condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// `==`
    Equal,
    /// `!=`
    NotEqual,
    /// `>`
    Greater,
    /// `<`
    Less,
}

impl CompareOp {
    fn result(self) -> compare::CompareResult {
        match self {
            CompareOp::Equal => compare::CompareResult::Equal,
            CompareOp::NotEqual => compare::CompareResult::NotEqual,
            CompareOp::Greater => compare::CompareResult::Greater,
            CompareOp::Less => compare::CompareResult::Less,
        }
    }
}

/// One condition of a transaction.
#[derive(Debug, Clone)]
pub struct Compare(pb::Compare);

impl Compare {
    fn revision(
        key: impl Into<Vec<u8>>,
        op: CompareOp,
        target: compare::CompareTarget,
        union: compare::TargetUnion,
    ) -> Self {
        Compare(pb::Compare {
            result: op.result() as i32,
            target: target as i32,
            key: key.into(),
            range_end: Vec::new(),
            target_union: Some(union),
        })
    }

    /// Compares the revision at which `key` was created (0: it does not exist).
    pub fn create_revision(key: impl Into<Vec<u8>>, op: CompareOp, revision: i64) -> Self {
        let union = compare::TargetUnion::CreateRevision(revision);
        Compare::revision(key, op, compare::CompareTarget::Create, union)
    }

    /// Compares the revision at which `key` was last modified.
    pub fn mod_revision(key: impl Into<Vec<u8>>, op: CompareOp, revision: i64) -> Self {
        let union = compare::TargetUnion::ModRevision(revision);
        Compare::revision(key, op, compare::CompareTarget::Mod, union)
    }
}

/// One operation of a transaction.
#[derive(Debug, Clone)]
pub struct TxnOp(RequestOp);

impl TxnOp {
    fn of(request: request_op::Request) -> Self {
        TxnOp(RequestOp {
            request: Some(request),
        })
    }

    /// Writes `value` at `key`.
    pub fn put(
        key: impl Into<Vec<u8>>,
        value: impl Into<Vec<u8>>,
        options: Option<PutOptions>,
    ) -> Self {
        let put = put_request(key.into(), value.into(), options);
        TxnOp::of(request_op::Request::RequestPut(put))
    }

    /// Reads `key` (or a range, per `options`).
    pub fn get(key: impl Into<Vec<u8>>, options: Option<GetOptions>) -> Self {
        let range = options.unwrap_or_default().request(key.into());
        TxnOp::of(request_op::Request::RequestRange(range))
    }

    /// Deletes `key` (or a range, per `options`).
    pub fn delete(key: impl Into<Vec<u8>>, options: Option<DeleteOptions>) -> Self {
        let delete = options.unwrap_or_default().request(key.into());
        TxnOp::of(request_op::Request::RequestDeleteRange(delete))
    }
}

/// A transaction: if every comparison holds, the `and_then` operations,
/// else the `or_else` ones, applied at one revision.
#[derive(Debug, Clone, Default)]
pub struct Txn(TxnRequest);

impl Txn {
    /// An empty transaction.
    pub fn new() -> Self {
        Txn::default()
    }

    /// The conditions.
    pub fn when(mut self, compares: impl IntoIterator<Item = Compare>) -> Self {
        self.0.compare = compares.into_iter().map(|c| c.0).collect();
        self
    }

    /// What runs when every condition holds.
    pub fn and_then(mut self, ops: impl IntoIterator<Item = TxnOp>) -> Self {
        self.0.success = ops.into_iter().map(|o| o.0).collect();
        self
    }

    /// What runs otherwise.
    pub fn or_else(mut self, ops: impl IntoIterator<Item = TxnOp>) -> Self {
        self.0.failure = ops.into_iter().map(|o| o.0).collect();
        self
    }

    pub(crate) fn into_request(self) -> TxnRequest {
        self.0
    }
}

impl ResponseHeader {
    /// The store's revision when the request was applied.
    pub fn revision(&self) -> i64 {
        self.revision
    }
}

impl KeyValue {
    /// The key.
    pub fn key(&self) -> &[u8] {
        &self.key
    }

    /// The key as UTF-8, if it is.
    ///
    /// # Errors
    ///
    /// The [`Utf8Error`](std::str::Utf8Error) when the key is not UTF-8.
    pub fn key_str(&self) -> Result<&str, std::str::Utf8Error> {
        std::str::from_utf8(&self.key)
    }

    /// The value.
    pub fn value(&self) -> &[u8] {
        &self.value
    }

    /// The revision of the key's creation.
    pub fn create_revision(&self) -> i64 {
        self.create_revision
    }

    /// The revision of the key's last change.
    pub fn mod_revision(&self) -> i64 {
        self.mod_revision
    }

    /// The key and the value, moved out.
    pub fn into_key_value(self) -> (Vec<u8>, Vec<u8>) {
        (self.key, self.value)
    }
}

/// The answer to a read.
#[derive(Debug, Clone)]
pub struct GetResponse(pub(crate) pb::RangeResponse);

impl GetResponse {
    /// The header (the store's revision at the time of the read).
    pub fn header(&self) -> Option<&ResponseHeader> {
        self.0.header.as_ref()
    }

    /// The keys read.
    pub fn kvs(&self) -> &[KeyValue] {
        &self.0.kvs
    }

    /// The keys read, moved out.
    pub fn take_kvs(&mut self) -> Vec<KeyValue> {
        std::mem::take(&mut self.0.kvs)
    }

    /// Whether more keys than the limit are in the range.
    pub fn more(&self) -> bool {
        self.0.more
    }

    /// How many keys are in the range.
    pub fn count(&self) -> i64 {
        self.0.count
    }
}

/// The answer to a write.
#[derive(Debug, Clone)]
pub struct PutResponse(pub(crate) pb::PutResponse);

impl PutResponse {
    /// The header (the revision of the write).
    pub fn header(&self) -> Option<&ResponseHeader> {
        self.0.header.as_ref()
    }
}

/// The answer to a deletion.
#[derive(Debug, Clone)]
pub struct DeleteResponse(pub(crate) pb::DeleteRangeResponse);

impl DeleteResponse {
    /// The header (the revision of the deletion).
    pub fn header(&self) -> Option<&ResponseHeader> {
        self.0.header.as_ref()
    }

    /// How many keys were deleted.
    pub fn deleted(&self) -> i64 {
        self.0.deleted
    }
}

/// The answer to a transaction.
#[derive(Debug, Clone)]
pub struct TxnResponse(pub(crate) pb::TxnResponse);

impl TxnResponse {
    /// The header (the revision at which the transaction was applied).
    pub fn header(&self) -> Option<&ResponseHeader> {
        self.0.header.as_ref()
    }

    /// Whether every comparison held (the `and_then` branch ran).
    pub fn succeeded(&self) -> bool {
        self.0.succeeded
    }

    /// The answers of the branch that ran, in order.
    pub fn op_responses(&self) -> Vec<TxnOpResponse> {
        self.0
            .responses
            .iter()
            .filter_map(|r| r.response.clone())
            .map(|r| match r {
                response_op::Response::ResponseRange(r) => TxnOpResponse::Get(GetResponse(r)),
                response_op::Response::ResponsePut(r) => TxnOpResponse::Put(PutResponse(r)),
                response_op::Response::ResponseDeleteRange(r) => {
                    TxnOpResponse::Delete(DeleteResponse(r))
                }
                response_op::Response::ResponseTxn(r) => TxnOpResponse::Txn(TxnResponse(r)),
            })
            .collect()
    }
}

/// The answer to one operation of a transaction.
#[derive(Debug, Clone)]
pub enum TxnOpResponse {
    /// A read's.
    Get(GetResponse),
    /// A write's.
    Put(PutResponse),
    /// A deletion's.
    Delete(DeleteResponse),
    /// A nested transaction's.
    Txn(TxnResponse),
}
