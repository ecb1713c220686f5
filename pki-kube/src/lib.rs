//! pki-kube: the pki document [`Store`](pki_rotate::Store) on the
//! Kubernetes API server (`kube://[CONTEXT@]NAMESPACE/NAME`), with
//! compare-and-swap on an object's `resourceVersion`, so that controller
//! replicas and `pki` runs can share one signer and race safely.
//!
//! ```no_run
//! use pki_kube::KubeStore;
//! use pki_rotate::{Driver, SignerEngine, SignerInput};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // The documents of store `service-ca` in namespace `pki-system`, with
//! // kubectl's credentials (KUBECONFIG or ~/.kube/config, else in-cluster).
//! let store = KubeStore::from_url("kube://pki-system/service-ca")?;
//! let driver = Driver::new(&store);
//! let now = time::OffsetDateTime::now_utc();
//! let mut rng = rand_core::UnwrapErr(getrandom::SysRng);
//! let step = driver.step::<SignerEngine, _>("signer", &SignerInput::default(), now, &mut rng)?;
//! println!("changed: {}, step again at {}", step.changed, step.next_wake);
//! # Ok(())
//! # }
//! ```
//!
//! # Addresses and credentials
//!
//! A store is named by a URL, `kube://[CONTEXT@]NAMESPACE/NAME`
//! ([`KubeUrl`]); a malformed one is a [`UrlError`], which a command line
//! reports as bad usage. Credentials come the way kubectl's do
//! ([`KubeOptions::kubeconfig`], else `KUBECONFIG` or `~/.kube/config`,
//! CONTEXT choosing a context; without a kubeconfig and without CONTEXT,
//! the in-cluster service account). Opening checks that the server answers
//! within [`KubeOptions::connect_timeout`]; every request is bounded by
//! [`KubeOptions::request_timeout`], and kube-rs never retries one on its
//! own: an unreachable server is a
//! [`StoreError::Backend`](pki_rotate::StoreError::Backend) error within
//! those bounds, never a hang.
//!
//! # Layout
//!
//! Kubernetes keeps no object over 1 MiB (a Secret's data), and a signer
//! with 10,000 leaves holds about 40,000 files, about 40 MiB, so a
//! document cannot be one object; and a step that changes one leaf must
//! not rewrite, or read, all of them. A document at store key `KEY` of
//! store `NAME` is, in namespace `NAMESPACE`:
//!
//! ```text
//! Secret NAME.KEY                   the head: the commit point; its resourceVersion is the document's Revision
//! Secret NAME.KEY.GENERATION.N      shard N written by write attempt GENERATION (immutable)
//! Secret NAME.KEY.leaf.LEAF         published: leaf LEAF as a Pod mounts it (kubernetes.io/tls)
//! ConfigMap NAME.KEY                published: the bundle (ca-bundle.crt), written last
//! ```
//!
//! (A key that is not a DNS label, such as `sets/etcd`, is named by its
//! hash: `NAME.x.HASH`.)
//!
//! **Buckets.** The files are split into B buckets by a stable function of
//! their path: a top-level file (`pki-state.json`, `ca-bundle.crt`) is in
//! bucket 0; any other file belongs to a member, the second component of
//! its path (`NAME` of `certs/NAME/tls.crt`, and of
//! `leaf-requests/NAME.json` once its last extension is dropped), and is in
//! bucket `1 + n mod (B - 1)`, `n` the first 8 bytes of the member name's
//! SHA-256. So one leaf's request and files are in one bucket, and a step
//! that issues, renews or removes it touches bucket 0 and that bucket,
//! whatever B. A whole write chooses B from the document's weight (its
//! bytes and index entries): one bucket up to 192 KiB, else one more than
//! the weight in 192 KiB (a quarter of a shard's budget, so a bucket that
//! doubled still fits one shard), at most 4,096. A write of changes that
//! brings the weight past twice 192 KiB per bucket writes the document
//! whole with B chosen again: B doubles at least, so the rewrites, spread
//! over the writes of changes between them, cost O(1) each.
//!
//! **Shards.** Each bucket's files are packed in path order into shards of
//! at most 768 KiB of index and data (a quarter below the 1 MiB limit); a
//! file larger than that is cut into pieces that follow each other across
//! the bucket's shards. A shard (type `pki.invalid/document-shard`,
//! created immutable) holds `index.json`, the pieces it carries (`{"path",
//! "secret", "len", "total"}`), and `data`, their bytes. An empty bucket
//! has no shard. A signer of 10,000 leaves is about 120 buckets of one
//! shard each.
//!
//! **The head** (type `pki.invalid/document-head`) holds one `head.json`
//! (format 2):
//!
//! ```json
//! {"format": 2, "key": "signer", "generation": "9f0c2a7be41d3350", "sequence": 7,
//!  "buckets": [{"generation": "9f0c2a7be41d3350", "first": 0, "shards": ["<sha256>"], "files": 2},
//!              {"generation": "31d0aa94c2e8f701", "first": 0, "shards": ["<sha256>"], "files": 212}],
//!  "files": 40001, "bytes": 41500000, "dirs": ["certs"], "summary": "<json>"}
//! ```
//!
//! `generation` is the attempt that made this commit; each bucket names
//! the attempt that last wrote it and its shards there (numbers `first`,
//! `first + 1`, …, one per SHA-256), so a head names shards of several
//! generations. `sequence` is the previous head's plus one (1 for a new
//! document); `bytes` is the buckets' weight. The head grows with B, not
//! with the files: about 140 bytes a bucket, under 340 KiB for 100,000
//! leaves. A head of format 1 (the release before buckets: one generation,
//! `"shards"` in path order) is read as one bucket, and the next write
//! converts it.
//!
//! Every object carries the labels `app.kubernetes.io/managed-by: pki`,
//! `pki.invalid/store: NAME` and `pki.invalid/document: <the first 32 hex
//! digits of the key's SHA-256>` (shards also
//! `pki.invalid/generation: GENERATION`, the attempt that wrote them), and the annotation
//! `pki.invalid/key: KEY`: `kubectl get secrets -l pki.invalid/store=NAME`
//! lists a store.
//!
//! **Why Secrets only, the head included.** The shards hold private keys
//! and credentials (sealed with `PKI_STORE_KEY_FILE` when the embedder
//! wraps this store in [`pki_rotate::SealedStore`], but Secrets even so:
//! they are what RBAC and encryption at rest treat as private). A
//! ConfigMap head would split one document across two resources, so an
//! account would need rights on both to read it and a 403 could come
//! half-way; with the head a Secret too, one rule on `secrets` (get,
//! create, update, delete, list) is all the document needs, and an account
//! without it is refused on the first request, before anything is
//! written. Publishing also needs `configmaps` (get, create, update); an
//! account without it reads and writes documents all the same, and each
//! write's notice says what it may not do.
//!
//! `sequence` numbers the commits of a document (the replaced head's + 1,
//! 1 for a new document): publications are ordered by it.
//!
//! **What consumers use as they are.** After each commit the document is
//! published, by the rule on paths of [`pki_rotate::Publication`] (the
//! signer's and the external CA's `ca-bundle.crt` and `certs/LEAF/`; a CA
//! set, a key ring and a credential publish no bundle and no leaf):
//!
//! - each leaf a Secret of type `kubernetes.io/tls`, `NAME.KEY.leaf.LEAF`
//!   (`NAME.KEY.leafx.HASH` for a leaf name that is not a DNS label),
//!   holding `tls.crt` (the serving chain, leaf first), `tls.key` and
//!   `ca.crt` (the bundle): a Pod mounts it unchanged;
//! - the bundle a ConfigMap `NAME.KEY` with `ca-bundle.crt` (for a
//!   document without a bundle, no data: it records the publication).
//!
//! They carry the labels above plus `pki.invalid/published: leaf|bundle`
//! (so `keys` never takes them for documents), and the annotations
//! `pki.invalid/key`, `pki.invalid/leaf`, `pki.invalid/sequence` (the
//! commit they were published from) and `pki.invalid/digest` (SHA-256 of
//! their content). No name can meet a head's (at most two dots) or a
//! shard's (`GENERATION` is 16 hex digits, never `leaf`). An object of such
//! a name that pki did not make (without this store's and document's
//! labels) is never replaced or deleted: the store's notice
//! ([`KubeStore::set_notice_hook`]; the CLI prints it) names it.
//!
//! A store sealed with `PKI_STORE_KEY_FILE` seals every private file
//! except leaf keys, which its leaf Secrets publish (the CLI and the C ABI
//! pass [`pki_rotate::SealedStore::clear_only`] with
//! [`pki_rotate::is_published_leaf_key`]): CA keys, key rings and
//! credentials are sealed in the shards, and a leaf's key is in clear only
//! in Secrets, its own and the shards beside it, as the directory store
//! leaves published leaf keys in clear (0600). A leaf whose key reaches
//! the store sealed is not published.
//!
//! # Writing
//!
//! [`Store::put`](pki_rotate::Store::put) writes every bucket;
//! [`Store::put_changes`](pki_rotate::Store::put_changes) (what the
//! driver's one-leaf steps call) only the buckets the changed paths fall
//! in, after reading those. Both read the head first (a stale `expected`
//! is a conflict before anything is written), then:
//!
//! 1. **Before the commit**, invisible to readers: the written buckets'
//!    new shards, under a generation drawn at random by this write
//!    attempt, so no two writers share a shard.
//! 2. **The commit**: the head replaced with the `resourceVersion` the
//!    writer read (created, for a new document), naming the new shards
//!    for the written buckets and, for every other bucket, the shards the
//!    head read named. The API server refuses it with 409 when the head
//!    changed since: a
//!    [`StoreError::Conflict`](pki_rotate::StoreError::Conflict), on which
//!    the driver reads again and rebases. A writer whose commit gets no
//!    answer reads the head again: the commit landed exactly when the
//!    head's `generation` is the attempt's, which no other writer knows;
//!    otherwise the outcome is unknown
//!    ([`StoreError::UnknownOutcome`](pki_rotate::StoreError::UnknownOutcome)).
//! 3. **After the commit**: the shards the replaced head named and the
//!    new one does not are deleted, and no other; then the document is
//!    published (never failing the write: a failure is a notice). A losing
//!    or failed attempt deletes its own shards and publishes nothing.
//!
//! A publication writes only what changed: the leaf Secrets whose digest
//! differs from what the document it replaced published, the deletions
//! of the leaves it dropped, and the ConfigMap, last, whose sequence
//! records that the publication completed. A write of changes publishes
//! the leaves whose files it changed (their buckets are at hand) with the
//! bundle the ConfigMap holds, when the ConfigMap shows the publication
//! before complete and the bundle did not change: a one-leaf step writes
//! one Secret and the ConfigMap. A whole write compares with the document
//! the store last read or wrote at the revision it replaces, when that
//! publication is recorded complete, otherwise with one list of the
//! document's leaf Secrets' metadata; anything else (a publication left
//! behind, a new bundle) reads the document whole and publishes it. Each
//! object is read, then created, or replaced with its resourceVersion
//! only when its sequence is lower than the publication's (a 409 reads it
//! again); a deletion names the resourceVersion too.
//!
//! A read of a head ([`Store::get`](pki_rotate::Store::get), and
//! [`Store::get_summary`](pki_rotate::Store::get_summary), the one read of a
//! no-op step) also reads the ConfigMap; when its sequence lags the head's
//! (a crash or failure between a commit and its publication), the store
//! reads the document and publishes it before answering. Best effort: a
//! failure to publish never fails the read. An account that may not write
//! ConfigMaps or Secrets (a read-only one) gets its answers as before; the
//! publication waits for the next read or write by an account that may.
//!
//! A reader reads the head, then the shards of the buckets it wants (all
//! for [`Store::get`](pki_rotate::Store::get), those of the named paths
//! for [`Store::get_paths`](pki_rotate::Store::get_paths)), each checked
//! against the SHA-256 the head records, each bucket's file count, and
//! that each file is in its bucket. A shard that is gone was removed by a
//! newer commit: the read starts over from the new head. The summary is in
//! the head: a step with nothing to do
//! ([`pki_rotate::Driver::step_unless_idle`]) reads the head and the
//! buckets of the document's own files (a signer's: at most four). A
//! one-leaf issue, renewal or removal reads the head and at most five
//! buckets, then writes: the head read again, the two buckets it changes
//! read, their new shards created, the commit, the two replaced shards
//! deleted: the API server counts at most 9 Secrets read and 5 written
//! for it, at 100 leaves as at 4,000 (tests/changes.rs).
//!
//! # Why it is safe
//!
//! - **Wholly old or wholly new.** Readers see only what a head names;
//!   step 1 creates objects no head names, and the commit is one update
//!   of one object. A crash before the commit leaves the old head and its
//!   shards untouched (the new shards are garbage); after it, the new head
//!   names shards that all exist: its own, just created, and the old
//!   head's for the buckets it did not write, which only a commit after
//!   it could remove. A rerun reads whichever head is there and
//!   converges, as on every store.
//! - **Compare-and-swap.** Every commit names the head's resourceVersion
//!   its writer read; the API server applies an update only to that
//!   version (optimistic concurrency), so two writers never both win, and
//!   every head is made from the one before it.
//! - **Deletion never removes what a head may name.** A head names only
//!   shards its predecessor named and shards its own attempt created. So
//!   a shard that a commit stopped naming is named by no later head, and
//!   the committer may delete it: no head names it again, because every
//!   attempt writes a generation of its own and a writer that read the
//!   replaced head can no longer commit. Shards of older generations that
//!   the new head still names stay. An attempt deletes its own shards only
//!   when its commit was refused or never sent; after a lost answer it
//!   deletes nothing (the commit may yet land).
//! - **Nothing written on any failure.** A refused account, a server that
//!   stops answering, or a hook failing before the commit leaves the head
//!   as it was; the attempt then deletes what it created.
//! - **Published objects never go back.** A publisher replaces or deletes
//!   only objects of a lower sequence, with their resourceVersion, so when
//!   two writers commit one after the other and publish in the opposite
//!   order, the later commit's objects stay. A late publisher may create a
//!   leaf Secret that a newer one just deleted; before it writes the
//!   ConfigMap it finds the newer sequence there and deletes what it
//!   created (unless changed since), and a newer publisher that finds the
//!   ConfigMap written by an older one since it started compares with the
//!   listed leaves again. Published objects are never read as the document:
//!   a crash during a publication cannot change what the store reads.
//! - **Publication converges.** A crash after the commit leaves the head
//!   new and the ConfigMap at the previous sequence (it is written last);
//!   the next read of the head, a no-op step's included, sees the lag and
//!   publishes, as does the next write. A crash before the commit
//!   publishes nothing: the objects stay those of the old head.
//! - **Abandoned attempts are swept.** An attempt killed between its
//!   shards and its commit leaves shards no head names. After a whole
//!   write, and after one write of changes in 16 (by `sequence`, so the
//!   listing's cost stays O(1) a write on average), the writer lists the
//!   document's shards (metadata only) and removes those that the head it
//!   just committed does not name and that were created more than
//!   [`KubeOptions::abandoned_after`] (a minute) before its own first
//!   shard, by the server's clock. Every later head is made from the one
//!   just committed, so it names only shards that head names or shards
//!   created after that commit, later than the writer's first shard: what
//!   is removed is named by no head, now or later. A live attempt's
//!   shards were created after the writer's first shard minus the grace
//!   and stay; an older attempt that did not commit read a head older than
//!   this commit, so it can never commit.
//!
//! [`KubeStore::set_write_hook`] names every request of a write, so that
//! tests can stop one at any point.

// Without the client, the layout's names and labels serve no store.
#![cfg_attr(not(feature = "client"), allow(dead_code))]

#[cfg(feature = "client")]
pub mod controller;
#[cfg(feature = "client")]
mod fail;
pub mod layout;
#[cfg(feature = "client")]
mod options;
#[cfg(feature = "client")]
mod store;
mod url;

pub use layout::shard::{MAX_SECRET_DATA, SHARD_BUDGET};
#[cfg(feature = "client")]
pub use options::KubeOptions;
#[cfg(feature = "client")]
pub use store::{AsyncKubeStore, KubeStore, OpenError, WriteHook};
pub use url::{KubeUrl, MAX_NAME_LEN, SCHEME, UrlError, is_kube_url};

/// What the fuzz targets read, without a server; not a stable API.
#[doc(hidden)]
pub mod fuzzing {
    use crate::layout::bucket;
    use crate::layout::shard::{Shard, Unpacker};

    /// A shard's two data keys: its index and its data.
    pub type ShardData = (Vec<u8>, Vec<u8>);

    /// The files of the shards `(index, data)`, read as a store reads them.
    pub fn unpack(shards: &[ShardData]) -> Result<pki_rotate::Files, String> {
        let mut unpacker = Unpacker::new();
        for (index, data) in shards {
            unpacker.add(&Shard {
                index: index.clone(),
                data: data.clone(),
            })?;
        }
        unpacker.finish()
    }

    /// The shards `(index, data)` a store writes for `files`.
    pub fn pack(files: &pki_rotate::Files) -> Result<Vec<ShardData>, String> {
        Ok(crate::layout::shard::pack(files)?
            .into_iter()
            .map(|shard| (shard.index, shard.data))
            .collect())
    }

    /// A shard's SHA-256 (hex), as a head records it.
    pub fn digest(index: &[u8], data: &[u8]) -> String {
        Shard {
            index: index.to_vec(),
            data: data.to_vec(),
        }
        .digest()
    }

    /// The files of each of `count` buckets (1 when 0), as a whole write
    /// splits them.
    pub fn buckets(
        files: &pki_rotate::Files,
        count: usize,
    ) -> Result<Vec<pki_rotate::Files>, String> {
        bucket::split(files, count).map_err(|e| e.to_string())
    }

    /// The bucket of the file at `path` in a document of `count` buckets.
    pub fn bucket_of(path: &str, count: usize) -> usize {
        bucket::of(path, count)
    }

    /// A head Secret's `head.json` (format 1 or 2), read and checked as a
    /// store reads it: the number of buckets it names.
    pub fn head(bytes: &[u8]) -> Result<usize, String> {
        crate::layout::Head::parse(bytes).map(|(head, _)| head.buckets.len())
    }
}
