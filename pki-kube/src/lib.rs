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
//! ```
//!
//! (A key that is not a DNS label, such as `sets/etcd`, is named by its
//! hash: `NAME.x.HASH`.) The head, of type `pki.invalid/document-head`,
//! holds one small `head.json`, whatever the document's size:
//!
//! ```json
//! {"format": 1, "key": "signer", "generation": "9f0c2a7be41d3350",
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
//! create, update, delete) is all a store needs, and an account without it
//! is refused on the first request, before anything is written.
//!
//! The objects consumers use as they are (each leaf a `kubernetes.io/tls`
//! Secret, the bundle a ConfigMap `ca-bundle.crt`) are not written yet.
//! They will be published after the commit, as the directory store's
//! published files are.
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
//! 3. **After the commit**: the replaced generation's shards are deleted.
//!    A losing or failed attempt deletes its own shards.
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
