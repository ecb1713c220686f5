//! Stores through the C ABI: where signer documents live between steps.
//!
//! A `pki_store` is one of pki-rotate's stores behind an opaque handle:
//!
//! - `pki_store_open` (`open.rs`): a directory (`FsStore`, the layout the CLI and
//!   consumers read, committed atomically), a store URL
//!   (`etcd://HOST:PORT/PREFIX`, the etcd store of pki-etcd: several
//!   controller replicas may step the same document at once; exactly one
//!   write wins, the others read again), or `memory:` (`MemoryStore`);
//! - `pki_store_new_callbacks`: the embedder's own Secret-shaped storage
//!   with compare-and-swap (a Kubernetes client with `resourceVersion`, a
//!   database row with a version column), reached through C function
//!   pointers. The documented Secret mapping of the document's kind (a
//!   signer, a CA set, a key ring, a credential: the kind the calling
//!   function works on) sits in between, as pki-rotate's `SecretStore`.
//!
//! # Callbacks
//!
//! A callback answers through a `pki_store_reply`, a write-only object the
//! library passes in and owns: the callback sets the data and its revision
//! with `pki_store_reply_set`, or a message with
//! `pki_store_reply_set_message`, and returns a
//! `pki_result` value. The reply lives only during the callback. Every
//! setter runs in its own panic boundary, so nothing unwinds through the
//! embedder's frames; a callback must not unwind either (no C++ exception,
//! no `longjmp` out of it, no Go panic: the Go package recovers them).

use crate::abi::{bytes_in, free, handle, handle_mut, into_handle, opt_str, os_rng};
use crate::error::{Failure, pki_result};
use crate::secret::pki_secret;
use pki_core::TokenAccess;
use pki_rotate::Engine;
use pki_rotate::request::StepResult;
use pki_rotate::{Document, Files, SecretData, Summary};
use pki_rotate::{
    Driver, FsStore, MemoryStore, Revision, RotateError, SecretBackend, SecretStore, Store,
};
use std::ffi::{c_char, c_void};
use std::sync::Arc;
use time::OffsetDateTime;

/// Where signer documents live, under keys (`"signer"`, `"tenants/a"`…),
/// each with a revision the store assigns: a directory, memory, or the
/// embedder's storage through callbacks.
///
/// Safe to use from several threads at once: steps on one key from several
/// threads (or processes, for a directory) race through compare-and-swap,
/// and exactly one wins each race. Free with `pki_store_free`.
pub struct pki_store {
    pub(crate) backing: Backing,
    /// Where the store is, as the CLI names it (an absolute directory, a
    /// store URL, `memory:`, a callback store's location): a signer's
    /// first token key's id derives from it.
    pub(crate) location: String,
    /// The PKCS#11 tokens the store was opened with (`pkcs11_module`),
    /// given to every driver over it.
    pub(crate) tokens: Option<Arc<dyn TokenAccess>>,
}

/// What `pki_store_open` names as an in-memory store.
const MEMORY_LOCATION: &str = "memory:";

/// Whether `pki_store_open` reads `location` as a store URL: any
/// `SCHEME://`.
pub(crate) fn is_url(location: &[u8]) -> bool {
    location.windows(3).any(|w| w == b"://")
}

/// The store `location` names (memory or a directory; a URL is
/// `crate::open`'s), its private material sealed with `keys`, its CA keys
/// in tokens reached through `tokens`.
pub(crate) fn open_with(
    location: &[u8],
    keys: pki_rotate::SealingKeys,
    tokens: Option<Arc<dyn TokenAccess>>,
) -> Result<pki_store, Failure> {
    if location.is_empty() {
        return Err(Failure::invalid("parameter `location` is empty"));
    }
    let (store, directory, named): (Box<dyn Store + Send + Sync>, bool, String) =
        if location == MEMORY_LOCATION.as_bytes() {
            (Box::new(MemoryStore::new()), false, MEMORY_LOCATION.into())
        } else {
            let path = std::path::Path::new(
                <std::ffi::OsStr as std::os::unix::ffi::OsStrExt>::from_bytes(location),
            );
            // Absolute as the CLI makes it (not resolved through links), so
            // that both derive the same first token key id for one store.
            let absolute = std::path::absolute(path).map_err(|e| {
                Failure::invalid(format!("parameter `location` {}: {e}", path.display()))
            })?;
            (
                Box::new(FsStore::open_or_create(path)?),
                true,
                absolute.display().to_string(),
            )
        };
    Ok(pki_store {
        location: named,
        tokens,
        backing: Backing::Files(Box::new(pki_rotate::SealedStore::new(
            store,
            keys,
            os_rng(),
            directory,
        ))),
    })
}

/// Frees a store. NULL is accepted (nothing happens). A callback store
/// calls its `release` callback, once, with its `user_data`.
///
/// The caller owned `store`; it must not be used afterwards, and no call
/// on it may be running on another thread.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_store_free(store: *mut pki_store) {
    // SAFETY: NULL or a live handle freed once (contract).
    unsafe { free(store) }
}

/// What a store callback is answering; see `pki_store_callbacks`.
///
/// Owned by the library and valid only during the callback it is passed
/// to: do not keep it, free it, or use it from another thread.
pub struct pki_store_reply {
    op: Op,
    data: Option<SecretData>,
    revision: Option<Revision>,
    message: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Get,
    Put,
}

impl pki_store_reply {
    fn new(op: Op) -> Self {
        pki_store_reply {
            op,
            data: None,
            revision: None,
            message: None,
        }
    }
}

/// The longest revision a callback may report, in bytes.
const MAX_REVISION_LEN: usize = 1024;

/// The embedder's storage for `pki_store_new_callbacks`. Read during that
/// call only: the structure itself may be freed afterwards.
///
/// Each callback gets the store's `user_data` as it was given, may run on
/// any thread that uses the store (several at once), answers through the
/// `reply` it is given (valid only during the call) and returns a
/// `pki_result` value as `uint32_t`. Callbacks must not unwind: no C++
/// exception, no `longjmp` out of them.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pki_store_callbacks {
    /// Reads the document at `key` (required).
    ///
    /// `key` is `key_len` bytes of `[a-z0-9._/-]`, also NUL-terminated;
    /// borrowed for the call. When a document exists, set its Secret data
    /// and its revision with `pki_store_reply_set`, and return
    /// `PKI_RESULT_OK`. When
    /// there is none, return `PKI_RESULT_OK` without setting anything (or
    /// return `PKI_RESULT_NOT_FOUND`). Any other value is a failure of the
    /// backend (`PKI_RESULT_STORE` to the caller);
    /// `pki_store_reply_set_message` says why.
    pub get: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            key: *const c_char,
            key_len: usize,
            reply: *mut pki_store_reply,
        ) -> u32,
    >,
    /// Writes the document at `key` as a compare-and-swap (required).
    ///
    /// `key` is as for `get`. `expected` is the revision the writer read
    /// (`expected_len` bytes of UTF-8, also NUL-terminated), or NULL
    /// (`expected_len` 0) to create the document only if none exists.
    /// `data` is the document as Secret data, borrowed for the call (copy
    /// what you keep).
    ///
    /// Write `data` only if the stored revision still equals `expected`
    /// (for NULL: only if nothing is stored), then set the new revision
    /// with `pki_store_reply_set` (data NULL) and return `PKI_RESULT_OK`. When
    /// another writer got there first, write nothing and return
    /// `PKI_RESULT_CONFLICT` (optionally setting the revision found): the
    /// library reads again and decides again. Any other value is a failure
    /// of the backend, reported as `PKI_RESULT_STORE` and not retried.
    pub put: Option<
        unsafe extern "C" fn(
            user_data: *mut c_void,
            key: *const c_char,
            key_len: usize,
            expected: *const u8,
            expected_len: usize,
            data: *const pki_secret,
            reply: *mut pki_store_reply,
        ) -> u32,
    >,
    /// Called once with `user_data` when the store is freed (not when
    /// `pki_store_new_callbacks` fails); NULL is accepted.
    pub release: Option<unsafe extern "C" fn(user_data: *mut c_void)>,
    /// Where the documents are, for messages (`"secrets in namespace
    /// kube-system"`): `location_len` bytes of UTF-8, copied; NULL gives
    /// `"callback store"`.
    pub location: *const c_char,
    /// Length of `location` in bytes.
    pub location_len: usize,
}

type GetFn = unsafe extern "C" fn(*mut c_void, *const c_char, usize, *mut pki_store_reply) -> u32;
type PutFn = unsafe extern "C" fn(
    *mut c_void,
    *const c_char,
    usize,
    *const u8,
    usize,
    *const pki_secret,
    *mut pki_store_reply,
) -> u32;
type ReleaseFn = unsafe extern "C" fn(*mut c_void);

/// The embedder's storage as a pki-rotate Secret backend.
pub(crate) struct CallbackBackend {
    get: GetFn,
    put: PutFn,
    release: Option<ReleaseFn>,
    user_data: *mut c_void,
    location: String,
}

// SAFETY: the pointers are only passed back to the embedder's callbacks,
// whose contract (documented on `pki_store_new_callbacks`) is to accept
// calls from any thread, concurrently. The library never dereferences
// `user_data`.
unsafe impl Send for CallbackBackend {}
// SAFETY: as above; `&CallbackBackend` only ever calls the callbacks.
unsafe impl Sync for CallbackBackend {}

impl Drop for CallbackBackend {
    fn drop(&mut self) {
        if let Some(release) = self.release {
            // SAFETY: the embedder's callback with its own user_data, called
            // once (the backend is dropped once, with its store).
            unsafe { release(self.user_data) };
        }
    }
}

impl std::fmt::Debug for CallbackBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallbackBackend")
            .field("location", &self.location)
            .finish()
    }
}

/// `text` followed by a NUL, for callbacks that want C strings.
fn nul_terminated(text: &str) -> Vec<u8> {
    let mut v = Vec::with_capacity(text.len() + 1);
    v.extend_from_slice(text.as_bytes());
    v.push(0);
    v
}

impl CallbackBackend {
    fn failed(&self, callback: &str, key: &str, code: u32, reply: &pki_store_reply) -> RotateError {
        let name = crate::error::result_name(code);
        let detail = match &reply.message {
            Some(m) => format!("{callback} callback for \"{key}\" returned {name}: {m}"),
            None => format!("{callback} callback for \"{key}\" returned {name}"),
        };
        self.broken(detail)
    }

    fn broken(&self, detail: String) -> RotateError {
        RotateError::Store(pki_rotate::StoreError::Backend {
            store: self.location.clone(),
            source: detail.into(),
        })
    }
}

impl SecretBackend for CallbackBackend {
    fn location(&self) -> String {
        self.location.clone()
    }

    fn get(&self, key: &str) -> pki_rotate::Result<Option<(SecretData, Revision)>> {
        let key_c = nul_terminated(key);
        let mut reply = pki_store_reply::new(Op::Get);
        // SAFETY: the embedder's callback with its user_data; the key is
        // valid for `key.len()` bytes plus a NUL, and the reply for the
        // duration of the call (a local).
        let code =
            unsafe { (self.get)(self.user_data, key_c.as_ptr().cast(), key.len(), &mut reply) };
        if code == pki_result::PKI_RESULT_NOT_FOUND as u32 {
            return Ok(None);
        }
        if code != pki_result::PKI_RESULT_OK as u32 {
            return Err(self.failed("get", key, code, &reply));
        }
        match (reply.data, reply.revision) {
            (None, None) => Ok(None),
            (Some(data), Some(revision)) => Ok(Some((data, revision))),
            (Some(_), None) => Err(self.broken(format!(
                "get callback for \"{key}\" set data without a revision"
            ))),
            (None, Some(_)) => Err(self.broken(format!(
                "get callback for \"{key}\" set a revision without data (pki_store_reply_set \
                 with data NULL)"
            ))),
        }
    }

    fn put(
        &self,
        key: &str,
        expected: Option<&Revision>,
        data: &SecretData,
    ) -> pki_rotate::Result<Revision> {
        let key_c = nul_terminated(key);
        let expected_c = expected.map(|r| nul_terminated(r.as_str()));
        let (expected_ptr, expected_len) = match (&expected_c, expected) {
            (Some(c), Some(r)) => (c.as_ptr(), r.as_str().len()),
            _ => (std::ptr::null(), 0),
        };
        let secret = pki_secret::from_data(data);
        let mut reply = pki_store_reply::new(Op::Put);
        // SAFETY: the embedder's callback with its user_data; key, expected
        // revision and secret are locals that outlive the call, and the
        // reply is valid for its duration.
        let code = unsafe {
            (self.put)(
                self.user_data,
                key_c.as_ptr().cast(),
                key.len(),
                expected_ptr,
                expected_len,
                &secret,
                &mut reply,
            )
        };
        if code == pki_result::PKI_RESULT_CONFLICT as u32 {
            return Err(RotateError::Store(pki_rotate::StoreError::Conflict {
                key: key.to_string(),
                expected: expected.cloned(),
                found: reply.revision,
            }));
        }
        if code != pki_result::PKI_RESULT_OK as u32 {
            return Err(self.failed("put", key, code, &reply));
        }
        reply.revision.ok_or_else(|| {
            self.broken(format!(
                "put callback for \"{key}\" returned PKI_RESULT_OK without setting the new revision"
            ))
        })
    }
}

/// What a `pki_store` keeps documents in.
pub(crate) enum Backing {
    /// A store of files: a directory, memory, etcd. It keeps any kind of
    /// document as its files.
    Files(Box<dyn Store + Send + Sync>),
    /// The embedder's Secret-shaped storage: each kind of document has its
    /// own documented Secret mapping, chosen by the kind the caller works
    /// on (a `pki_set_*` call reads and writes a CA set), never guessed
    /// from the data.
    Secrets(CallbackBackend),
}

/// A `pki_store` seen as a store of documents of kind `D`.
pub(crate) enum KindStore<'s, D> {
    Files(&'s (dyn Store + Send + Sync)),
    Secrets(SecretStore<D, &'s CallbackBackend>),
}

impl<D: Document> Store for KindStore<'_, D> {
    fn location(&self) -> String {
        match self {
            KindStore::Files(s) => s.location(),
            KindStore::Secrets(s) => s.location(),
        }
    }

    fn get(&self, key: &str) -> pki_rotate::Result<Option<(Files, Revision)>> {
        match self {
            KindStore::Files(s) => s.get(key),
            KindStore::Secrets(s) => s.get(key),
        }
    }

    fn put(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
    ) -> pki_rotate::Result<Revision> {
        match self {
            KindStore::Files(s) => s.put(key, expected, files),
            KindStore::Secrets(s) => s.put(key, expected, files),
        }
    }

    /// A directory's or etcd's summary; an embedder's Secrets keep none.
    fn get_summary(&self, key: &str) -> pki_rotate::Result<Option<(Summary, Revision)>> {
        match self {
            KindStore::Files(s) => s.get_summary(key),
            KindStore::Secrets(s) => s.get_summary(key),
        }
    }

    fn put_with_summary(
        &self,
        key: &str,
        expected: Option<&Revision>,
        files: &Files,
        summary: Option<&Summary>,
    ) -> pki_rotate::Result<Revision> {
        match self {
            KindStore::Files(s) => s.put_with_summary(key, expected, files, summary),
            KindStore::Secrets(s) => s.put_with_summary(key, expected, files, summary),
        }
    }

    fn get_paths(
        &self,
        key: &str,
        paths: &std::collections::BTreeSet<String>,
    ) -> pki_rotate::Result<Option<(Files, Revision)>> {
        match self {
            KindStore::Files(s) => s.get_paths(key, paths),
            KindStore::Secrets(s) => s.get_paths(key, paths),
        }
    }

    fn put_changes(
        &self,
        key: &str,
        expected: &Revision,
        changes: &pki_rotate::store::Changes,
        summary: Option<&Summary>,
    ) -> pki_rotate::Result<Revision> {
        match self {
            KindStore::Files(s) => s.put_changes(key, expected, changes, summary),
            KindStore::Secrets(s) => s.put_changes(key, expected, changes, summary),
        }
    }

    fn verify(&self, key: &str) -> pki_rotate::Result<Option<Revision>> {
        match self {
            KindStore::Files(s) => s.verify(key),
            KindStore::Secrets(s) => s.verify(key),
        }
    }
}

impl pki_store {
    /// The store as a store of documents of kind `D`.
    pub(crate) fn of<D: Document>(&self) -> KindStore<'_, D> {
        match &self.backing {
            Backing::Files(s) => KindStore::Files(&**s),
            Backing::Secrets(b) => KindStore::Secrets(SecretStore::new(b)),
        }
    }

    /// Where a new document `key` of kind `D` (usually kept under `usual`)
    /// is created from, for its first token key's id
    /// (`pki_rotate::engines::token_keys::document_location`). When its key
    /// is to be made in a token (`in_token`), an existing document is
    /// refused first: creating would fail the same way after the token made
    /// a key no document would name.
    pub(crate) fn new_document_location<D: Document>(
        &self,
        key: &str,
        usual: &str,
        in_token: bool,
    ) -> Result<String, Failure> {
        let documents = self.of::<D>();
        if in_token && documents.get(key)?.is_some() {
            let at = if key == usual {
                documents.location()
            } else {
                format!("{} (document \"{key}\")", documents.location())
            };
            return Err(pki_rotate::RotateError::Store(
                pki_rotate::StoreError::AlreadyInitialized(at),
            )
            .into());
        }
        Ok(pki_rotate::engines::token_keys::document_location(
            &self.location,
            key,
            usual,
        ))
    }

    /// A driver over the documents of kind `D`, with the store's tokens.
    pub(crate) fn driver<D: Document>(&self) -> Driver<KindStore<'_, D>> {
        let driver = Driver::new(self.of::<D>());
        match &self.tokens {
            Some(tokens) => driver.with_token_access(Arc::clone(tokens)),
            None => driver,
        }
    }

    /// Stores `doc` as a new document at `key` (never over one) and says so
    /// as a step: changed, its revision, one round, no events, the status
    /// of `doc`, and when to step it: now when the engine has work due at
    /// once, the engine's wake-up time otherwise.
    pub(crate) fn create<E: Engine>(
        &self,
        key: &str,
        doc: &E::Document,
        now: OffsetDateTime,
        status: impl FnOnce(&E::Document, OffsetDateTime) -> String,
    ) -> Result<StepResult, Failure> {
        let revision = self.driver::<E::Document>().create_at::<E>(key, doc, now)?;
        let next_wake = match E::step(doc, &E::Input::default(), now, &mut os_rng()) {
            Ok(outcome) if !outcome.changed() => outcome.next_wake,
            _ => now,
        };
        Ok(StepResult::new(
            true,
            next_wake,
            1,
            &revision,
            Vec::new(),
            &status(doc, now),
        ))
    }
}

/// Creates a store over the embedder's Secret-shaped storage: documents are
/// kept as Secret data under the documented keys of their kind — a
/// signer's: `tls.crt`, `tls.key`, `ca-bundle.crt`, `intermediate-ca.crt`,
/// `pki-state.json`, `certs.NAME.tls.crt`…; a CA set's: every path with `/`
/// as `.` (`set.state.json`, `targets.T.trust.CA.crt`…); a key ring's:
/// `keys.key-ring.json`, `keys.active.key`, `keys.public.pem`,
/// `keys.jwks.json`; a credential's: `state.json`, `current`, `old`,
/// `stray-R-A`. The kind is the one the function called works on
/// (`pki_set_*` a set, `pki_keyring_*` a key ring…), never guessed from
/// the data. Each document has a revision the storage assigns, and is
/// written by compare-and-swap. This is what a Kubernetes client does with
/// a Secret's `resourceVersion`: `get` reads the Secret, `put` creates it
/// (`expected` NULL) or updates it with the `resourceVersion` read, and a
/// 409 Conflict is `PKI_RESULT_CONFLICT`.
///
/// `callbacks` is read during the call (see `pki_store_callbacks`).
/// `user_data` is passed to every callback as it is. On success the store
/// owns it: the callbacks may run from any thread that uses the store, at
/// the same time, until `pki_store_free` calls `release(user_data)` once.
/// On failure nothing is called and the caller keeps `user_data`.
///
/// On success the caller owns `*out_store` and frees it with
/// `pki_store_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER` (`callbacks`, `get`,
/// `put` or `out_store` NULL), `PKI_RESULT_INVALID_ARGUMENT` (`location` not
/// UTF-8) or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `callbacks` must be NULL or a valid `pki_store_callbacks` whose function
/// pointers are NULL or functions of the documented types that follow the
/// contracts above, and whose `location` is NULL or valid for
/// `location_len` bytes; `out_store` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_store_new_callbacks(
    callbacks: *const pki_store_callbacks,
    user_data: *mut c_void,
    out_store: *mut *mut pki_store,
) -> pki_result {
    ffi!(out_store => {
        callbacks = handle(callbacks, "callbacks");
        location = opt_str(callbacks.location, callbacks.location_len, "callbacks.location");
    } {
        let get = callbacks.get.ok_or_else(|| Failure::null("callbacks.get"))?;
        let put = callbacks.put.ok_or_else(|| Failure::null("callbacks.put"))?;
        let location = location.unwrap_or("callback store").to_string();
        let backend = CallbackBackend {
            get,
            put,
            release: callbacks.release,
            user_data,
            location: location.clone(),
        };
        Ok::<_, Failure>(into_handle(pki_store {
            backing: Backing::Secrets(backend),
            location,
            tokens: None,
        }))
    })
}

/// Answers a callback: for `get`, the document's Secret data (`data`, a
/// copy is taken, so free your `pki_secret` when you like) and its
/// revision; for a successful `put`, `data` NULL and the new revision; for
/// a `put` that returns `PKI_RESULT_CONFLICT`, `data` NULL and the revision
/// found (optional). A `get` that finds no document does not call it.
///
/// The revision is opaque to the library and only compared for equality:
/// `revision_len` bytes (1 to 1024) of UTF-8 text without NUL, such as a
/// `resourceVersion` or a number in decimal. It is copied.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER` (`reply` or
/// `revision` NULL), `PKI_RESULT_INVALID_ARGUMENT` (a revision empty, too
/// long, not UTF-8 or holding a NUL; data given to a `put` callback's
/// reply) or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `reply` must be NULL or the reply passed to the running callback;
/// `data` NULL or a live `pki_secret`; `revision` NULL or valid for
/// `revision_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_store_reply_set(
    reply: *mut pki_store_reply,
    data: *const pki_secret,
    revision: *const u8,
    revision_len: usize,
) -> pki_result {
    ffi!({
        reply = handle_mut(reply, "reply");
        bytes = bytes_in(revision, revision_len, "revision");
    } {
        if bytes.is_empty() || bytes.len() > MAX_REVISION_LEN || bytes.contains(&0) {
            return Err(Failure::invalid(format!(
                "a revision is 1 to {MAX_REVISION_LEN} bytes of UTF-8 without NUL, got {} bytes",
                bytes.len()
            )));
        }
        let text = std::str::from_utf8(bytes).map_err(|e| {
            Failure::invalid(format!(
                "a revision must be UTF-8 text (encode binary versions in hex or decimal): \
                 invalid at byte {}",
                e.valid_up_to()
            ))
        })?;
        // SAFETY: NULL or a live handle (contract).
        let data = unsafe { data.as_ref() };
        if data.is_some() && reply.op != Op::Get {
            return Err(Failure::invalid(
                "only a get callback answers with data; a put callback sets the new revision",
            ));
        }
        reply.data = data.map(pki_secret::to_data);
        reply.revision = Some(Revision::new(text));
        Ok(())
    })
}

/// Explains a failure of the callback, for the caller's last error
/// (`message_len` bytes; invalid UTF-8 is replaced). Copied.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `reply` must be NULL or the reply passed to the running callback;
/// `message` NULL or valid for `message_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_store_reply_set_message(
    reply: *mut pki_store_reply,
    message: *const c_char,
    message_len: usize,
) -> pki_result {
    ffi!({
        reply = handle_mut(reply, "reply");
        bytes = bytes_in(message.cast::<u8>(), message_len, "message");
    } {
        reply.message = Some(String::from_utf8_lossy(bytes).into_owned());
        Ok(())
    })
}
