//! pki-etcd: the pki document [`Store`](pki_rotate::Store) on etcd v3, so
//! that several controller replicas can share one signer and race safely.
//!
//! ```no_run
//! use pki_etcd::EtcdStore;
//! use pki_rotate::{Driver, SignerEngine, SignerInput};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Every key of this store lives under `pki/prod/`.
//! let store = EtcdStore::from_url("etcd://127.0.0.1:2379/pki/prod")?;
//! let driver = Driver::new(&store);
//! let now = time::OffsetDateTime::now_utc();
//! let mut rng = rand_core::UnwrapErr(getrandom::SysRng);
//! let step = driver.step::<SignerEngine, _>("signer", &SignerInput::default(), now, &mut rng)?;
//! println!("changed: {}, step again at {}", step.changed, step.next_wake);
//! # Ok(())
//! # }
//! ```
//!
//! # Addresses
//!
//! A store is named by a URL, `etcd://HOST:PORT/PREFIX` ([`EtcdUrl`]); a
//! malformed one is a [`UrlError`], which a command line reports as bad
//! usage. A server that does not answer within the bounds of
//! [`EtcdOptions`] is a [`StoreError::Backend`](pki_rotate::StoreError::Backend)
//! error, never a hang.
//!
//! A URL may name several endpoints of one cluster
//! (`etcd://HOST:PORT,HOST:PORT/PREFIX`). Each has a channel of its own; a
//! request goes to the endpoint that answered last and, while the
//! connection to one cannot be made (nothing was sent), on to the next, so
//! a cluster with a member down is used through the others. Connecting to
//! each takes at most an equal share of the timeouts, so that a request
//! tries them all within its own. A request that may have reached a member
//! (no answer in time, a connection lost mid-request) is not sent again
//! elsewhere: its outcome is the store's to settle, as with one endpoint.
//!
//! # Layout
//!
//! etcd accepts at most 128 operations in one transaction and 1.5 MiB in
//! one request by default, and a signer with 10,000 leaves is 40,000 files
//! (each leaf's request, certificate, key, and the two in one), so a
//! document is neither one value nor one transaction of all its files; and
//! a controller that changes one leaf must not rewrite a listing of all of
//! them. A document at store key `KEY` occupies (format 2):
//!
//! ```text
//! PREFIX/KEY                           the head; its mod_revision is the document's revision
//! PREFIX/KEY/.files/GENERATION/PATH    one entry per file: its SHA-256 and its blobs
//! PREFIX/KEY/.blobs/ID                 one piece of one file, never changed once written
//! PREFIX/KEY/.attempts/NONCE           a write attempt whose cleanup is not done
//! ```
//!
//! The head is small whatever the document's size:
//!
//! ```json
//! {"format": 2, "generation": "9f0c2a7be41d3350", "commit": "51e0c9aa03b2d7f4",
//!  "files": 40001, "dirs": ["certs", "leaf-requests"]}
//! ```
//!
//! and the entry of `signer/tls.crt` is the value of
//! `PREFIX/KEY/.files/9f0c2a7be41d3350/signer/tls.crt`:
//!
//! ```json
//! {"sha256": "<hex>", "secret": false, "blob": "9f0c2a7be41d3350-0"}
//! ```
//!
//! A file over 64 KiB is cut into chunks where its content says (FastCDC,
//! 8 to 64 KiB, 16 KiB on average), and its entry lists them in order,
//! `"chunks": [{"sha256": "<hex>", "blob": "<id>"}, ...]`: a few bytes
//! inserted in the middle of a large file change one or two chunks. Blob ids are `<nonce>-<n>` in hex, the nonce drawn at random by
//! each write attempt, so concurrent writers never share a blob; a blob is
//! shared only by the versions of one path (a new version keeps the blob of
//! every chunk whose bytes it still has), never by two paths. The segments
//! start with a dot because no store key has such a segment: no document's
//! keys can fall under another's.
//!
//! A head may also carry the document's summary (`"summary": "<json>"`, a
//! few hundred bytes, see [`pki_rotate::Summary`]), written by the same
//! commit: a step with nothing to do (`pki rotate`, a controller's periodic
//! step) reads the head alone, whatever the document's size.
//!
//! A reader (`get`, and `pki export`) reads the head, notes the header
//! revision of that answer, reads the generation's entries and the blobs
//! at that revision (one snapshot, whatever commits happen meanwhile),
//! checks that there are as many entries as the head says and each file's
//! SHA-256. Format 1 (a head listing every file, written by the first
//! release) is still read; the next write replaces it with format 2 and
//! removes its blobs.
//!
//! A read of some files ([`Store::get_paths`](pki_rotate::Store::get_paths),
//! what a step that changes one leaf reads) reads the head, then only the
//! entries of the named paths (by key, in transactions of gets) and their
//! blobs, at the revision of the head read, and checks each file's SHA-256
//! as a whole read does; it cannot count the entries, which only a whole
//! read does. A path the document does not hold is left out.
//!
//! # Writing
//!
//! [`Store::put`](pki_rotate::Store::put) reads the head (a stale
//! `expected` is a conflict before anything is written) and the current
//! generation's entries, and compares them with the files to write:
//! unchanged files keep their entries and blobs.
//!
//! 1. **Before the commit**, invisible to readers: the blobs of the changed
//!    pieces, in transactions within etcd's limits. The first of them also
//!    creates the attempt's marker (comparing that it does not exist), and
//!    every later one compares the marker's create_revision, so an attempt
//!    whose marker a sweep removed can add nothing more.
//! 2. **The commit**, one transaction comparing the head's mod_revision
//!    with the one read (and the marker's create_revision). When the
//!    changed entries, the head and the marker fit one transaction (127
//!    operations and 1.5 MiB by default), it puts the changed entries and
//!    deletes the removed ones in the current generation, with the head
//!    (**in place**): a step that changes one leaf writes its three files'
//!    blobs, a chunk or two of the state, four entries and the head,
//!    whatever the document's size. Otherwise (a rotation re-issuing every
//!    leaf, a new document, a format 1 head) phase 1 also wrote every entry
//!    under a **new generation** named by the attempt's nonce, and the
//!    commit puts only the head naming it: any number of files, in as many
//!    transactions as phase 1 needs, made current at once.
//! 3. **Cleanup** after the commit: the blobs the replaced entries named and
//!    the new ones do not, the retired generation, then the attempt's own
//!    marker last. A losing attempt removes its marker, blobs and
//!    generation in one transaction.
//!
//! A **partial write** ([`Store::put_changes`](pki_rotate::Store::put_changes))
//! reads the head (a stale `expected` is a conflict before anything is
//! written) and only the entries of the paths it writes or removes, not the
//! generation's other entries; a changed large file keeps the blobs of the
//! chunks its previous entry names. It then follows the same three phases,
//! always in place: its commit puts the changed entries, deletes the
//! removed ones that exist, and puts the head with the declared dirs read,
//! the summary given, the attempt's nonce, and the file count read plus
//! the paths added less the paths removed. A step that changes one leaf of
//! ten thousand reads the head and four entries. When its changes do not
//! fit one transaction in place, or the head is format 1, it reads the
//! document whole and writes it as `put` does.
//!
//! A commit that gets no answer may have been applied: the writer reads the
//! head again, and it landed exactly when the head's `commit` is the
//! attempt's nonce, which no other writer knows. Otherwise the outcome is
//! unknown ([`StoreError::UnknownOutcome`](pki_rotate::StoreError::UnknownOutcome)).
//!
//! # Why it is safe
//!
//! - **Atomic**: readers see only what a head names; phase 1 writes keys
//!   no head names (new blob ids, a new generation), and the commit changes
//!   the head and any entries of the current generation in one
//!   transaction. A crash before the commit leaves the old document whole;
//!   after it, the new one.
//! - **Compare-and-swap**: every commit compares the head's mod_revision
//!   with the one its writer read, and every in-place change of an entry
//!   comes with a put of the head, so an entry never changes under a
//!   writer that could still commit: two writers never both win.
//! - **Cleanup never removes what a head may name.** A commit at revision
//!   R makes unreferenced the blobs of the entries it replaced; no later
//!   head names them again, because a later writer reads R's entries or
//!   newer ones (it keeps only blobs they name, for the same path, and adds
//!   blobs created after its read), and a writer that read before R can
//!   never commit (its compare names a mod_revision that R changed). The
//!   retired generation is named by no head after R for the same reason.
//!   A partial write reads only the entries of the paths it changes, and
//!   that is enough: a blob is named by the versions of one path only, so
//!   the blobs a replaced entry named and its new version does not are
//!   named by no other entry. (A whole write also checks them against every
//!   new entry, so that a store edited by hand to share a blob between two
//!   paths loses nothing; a partial write does not see the other paths'
//!   entries, so on such a store it may remove a blob another path names,
//!   which the next read then reports as missing.)
//! - **Crashes are found by their marker.** The marker exists from the
//!   attempt's first write until its cleanup is done. A writer whose commit
//!   at R finds a marker created before R (other than its own) knows that
//!   some attempt died: before its commit (what it wrote is garbage: that
//!   attempt read the head before R and can never commit), or after it
//!   (what its commit replaced was not removed). It then removes the stale
//!   markers and the generations they started (unless current), the
//!   generations without a marker other than the current one (each in a
//!   transaction comparing that the head is still R's and that the
//!   generation still has no marker, so a generation a later commit made
//!   current, or a live attempt's, is never touched), and every blob that
//!   R's entries do not name and that was created before R (by the
//!   argument above, no head will name it; after a partial write, R's
//!   entries are read at revision R before anything is removed, and when
//!   that read fails the stale markers stay for the next writer). A
//!   generation's first keys are
//!   written with its marker, and the generations are listed before the
//!   markers, so a generation without a marker in that listing belongs to
//!   an attempt that can write nothing more. Without a stale marker, the
//!   cleanup of a step is the targeted deletions and one listing of
//!   `.attempts/`.
//! - **Readers** read entries and blobs at the revision of their head read;
//!   everything that head names exists at that revision (cleanup deletes
//!   only after a commit that stops naming it).
//!
//! [`EtcdStore::set_write_hook`] and [`EtcdStore::set_read_hook`] name
//! every request of a write and of a read, so that tests can stop the
//! server or commit another document between any two of them.
//!
//! # TLS and authentication
//!
//! `etcds://HOST:PORT[,HOST:PORT…]/PREFIX` reaches the servers over TLS
//! (rustls): [`EtcdOptions::tls`] holds the CA bundle that verifies them
//! and, for an etcd started with `--client-cert-auth`, a client certificate
//! ([`EtcdTls`]). [`EtcdOptions::user`] logs in as an etcd user
//! ([`EtcdUser`]). Both can be given as bytes or read from files; the
//! library reads no environment variable.
//!
//! # Building
//!
//! The gRPC code generated from etcd's protobuf definitions is checked in
//! ([`proto`]; `regen-proto.sh` regenerates it), so building needs only a
//! Rust toolchain. The tests start a real etcd server (Debian: `apt-get
//! install etcd-server`).

pub mod client;
mod layout;
mod options;
pub mod proto;
mod store;
mod url;

pub use layout::{BLOBS_SEGMENT, MANIFEST_FORMAT};
pub use options::{ClientIdentity, EtcdTls, EtcdUser};
pub use store::{
    AsyncEtcdStore, DEFAULT_MAX_REQUEST_BYTES, DEFAULT_MAX_TXN_OPS, EtcdOptions, EtcdStore,
    OpenError,
};
pub use url::{DEFAULT_PORT, EtcdUrl, SCHEME, TLS_SCHEME, UrlError, is_etcd_url};
