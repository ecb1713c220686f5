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
//! with 10,000 leaves holds about 40,000 files and a state file of several
//! MiB, so a document cannot be one object. A document at store key `KEY`
//! of store `NAME` is, in namespace `NAMESPACE`:
//!
//! ```text
//! Secret NAME.KEY                   the head: the commit point; its resourceVersion is the document's Revision
//! Secret NAME.KEY.GENERATION.N      shard N of the generation the head names (immutable)
//! Secret NAME.KEY.leaf.LEAF         published: leaf LEAF as a Pod mounts it (kubernetes.io/tls)
//! ConfigMap NAME.KEY                published: the bundle (ca-bundle.crt), written last
//! ```
//!
//! (A key that is not a DNS label, such as `sets/etcd`, is named by its
//! hash: `NAME.x.HASH`.) The head, of type `pki.invalid/document-head`,
//! holds one small `head.json`, whatever the document's size:
//!
//! ```json
//! {"format": 1, "key": "signer", "generation": "9f0c2a7be41d3350", "sequence": 7,
//!  "shards": ["<sha256 of shard 0>", "<sha256 of shard 1>"],
//!  "files": 40001, "dirs": ["certs"], "summary": "<json>"}
//! ```
//!
//! A shard (type `pki.invalid/document-shard`, created immutable) holds
//! `index.json`, the pieces it carries (`{"path", "secret", "len",
//! "total"}`), and `data`, their bytes. Files go into shards in path order,
//! at most 768 KiB of index and data in each (a quarter below the 1 MiB
//! limit); a file larger than that is cut into pieces that follow each
//! other across shards. 10,000 leaves are about 40 shards.
//!
//! Every object carries the labels `app.kubernetes.io/managed-by: pki`,
//! `pki.invalid/store: NAME` and `pki.invalid/document: <the first 32 hex
//! digits of the key's SHA-256>` (shards also
//! `pki.invalid/generation: GENERATION`), and the annotation
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
//! [`Store::put`](pki_rotate::Store::put) reads the head (a stale
//! `expected` is a conflict before anything is written), then:
//!
//! 1. **Before the commit**, invisible to readers: the new generation's
//!    shards, under a generation drawn at random by this write attempt,
//!    so no two writers share a shard.
//! 2. **The commit**: the head replaced with the `resourceVersion` the
//!    writer read (created, for a new document). The API server refuses it
//!    with 409 when the head changed since: a
//!    [`StoreError::Conflict`](pki_rotate::StoreError::Conflict), on which
//!    the driver reads again and rebases. A writer whose commit gets no
//!    answer reads the head again: the commit landed exactly when the head
//!    names the attempt's generation, which no other writer knows;
//!    otherwise the outcome is unknown
//!    ([`StoreError::UnknownOutcome`](pki_rotate::StoreError::UnknownOutcome)).
//! 3. **After the commit**: the document is published (never failing the
//!    write: a failure is a notice), then the replaced generation's shards
//!    are deleted and abandoned attempts swept. A losing or failed attempt
//!    deletes its own shards and publishes nothing.
//!
//! A publication writes only what changed: the leaf Secrets whose digest
//! differs from what the document it replaced published, the deletions
//! of the leaves it dropped, and the ConfigMap, last, whose sequence
//! records that the publication completed. It compares with the document
//! the store last read or wrote at the revision it replaces, when that
//! publication is recorded complete (the driver reads before it writes, so
//! a one-leaf step writes one Secret and the ConfigMap); otherwise with
//! one list of the document's leaf Secrets' metadata. Each object is read,
//! then created, or replaced with its resourceVersion only when its
//! sequence is lower than the publication's (a 409 reads it again); a
//! deletion names the resourceVersion too.
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
//! A reader reads the head, then the shards it names, each checked against
//! the SHA-256 the head records, and checks the file count. A shard that
//! is gone was removed by a newer commit: the read starts over from the
//! new head. The summary is in the head: a step with nothing to do
//! ([`pki_rotate::Driver::step_unless_idle`]) reads one object.
//!
//! # Why it is safe
//!
//! - **Wholly old or wholly new.** Readers see only what a head names;
//!   step 1 creates objects no head names, and the commit is one update
//!   of one object. A crash before the commit leaves the old head and its
//!   shards untouched (the new shards are garbage); after it, the new head
//!   names shards that all exist. A rerun reads whichever head is there and
//!   converges, as on every store.
//! - **Compare-and-swap.** Every commit names the head's resourceVersion
//!   its writer read; the API server applies an update only to that
//!   version (optimistic concurrency), so two writers never both win.
//! - **Deletion never removes what a head may name.** A commit makes the
//!   generation it replaced unnamed; no later head names it again, because
//!   every attempt writes a generation of its own and a writer that read the
//!   replaced head can no longer commit. An attempt deletes its own shards
//!   only when its commit was refused or never sent; after a lost answer it
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
//!   shards and its commit leaves shards no head names. After each commit,
//!   the writer lists the document's shards (metadata only) and removes
//!   those of other generations created more than
//!   [`KubeOptions::abandoned_after`] (a minute) before its own first
//!   shard, by the server's clock. Such an attempt read the head before
//!   this commit replaced it, so its own commit can never succeed; a live
//!   attempt's shards, or those of a later commit, were created after this
//!   writer's and stay.
//!
//! [`KubeStore::set_write_hook`] names every request of a write, so that
//! tests can stop one at any point.

// Without the client, the layout's names and labels serve no store.
#![cfg_attr(not(feature = "client"), allow(dead_code))]

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

    /// A head Secret's `head.json`, read as a store reads it.
    pub fn head(bytes: &[u8]) -> Result<(), String> {
        serde_json::from_slice::<crate::layout::Head>(bytes)
            .map(drop)
            .map_err(|e| e.to_string())
    }
}
