//! C ABI for pki: rotate X.509 CAs without breaking trust, from C and Go.
//!
//! One surface for every engine (the signer, CA sets, key rings,
//! credentials):
//!
//! - **one request schema, a few generic functions**: `pki_document_create`,
//!   `pki_document_step` and `pki_document_read` take a document kind
//!   (`pki_kind`) and one JSON request of pki-rotate's schema
//!   (`pki_rotate::request`), run pki-rotate's driver over a `pki_store`,
//!   and return what a create or step did as one versioned JSON document
//!   in a `pki_buffer` (pki-rotate's `StepResult`): whether it wrote, the
//!   events, when to step again, the document's revision, the rounds it
//!   took, the status of the document now in the store, and after a
//!   credential advance the embedder's next action. A leaf reconciled
//!   outside the signer (`pki_leaf_reconcile`) and a consumer's snapshot
//!   (`pki_snapshot_load`) are JSON documents too;
//! - **one long-running call**: `pki_controller_run` runs the service-CA
//!   controller on a `kube://` store until a `pki_controller_stop` is
//!   requested from another thread;
//! - **one input style**: every request is one JSON value (pointer and
//!   length), read into the engine's input with unknown fields refused:
//!   creates, steps, leaf requests, a replacement CA to validate. Data
//!   (PEM, state bytes, claims, tokens) is pointer and length; reads take a
//!   `pki_<engine>_output` selector;
//! - **one preamble**: every fallible function is the `ffi!` preamble of
//!   `abi.rs` (panic boundary, output checked, arguments converted with
//!   NULL, length, UTF-8 and JSON checks, the output written on success
//!   only), every getter `abi::getter`, every free `abi::free`.
//!
//! Conventions (those of rustls-ffi): every symbol is `pki_<object>_<verb>`;
//! objects are opaque handles the caller frees once with
//! `pki_<object>_free` (NULL is accepted there); fallible functions return a
//! `pki_result` (`PKI_RESULT_OK` = 0, then numbered blocks per domain,
//! never reused); output parameters come last and are written only on
//! success; a panic returns `PKI_RESULT_PANIC`, a NULL pointer
//! `PKI_RESULT_NULL_PARAMETER`; the detail of a failure is a thread-local
//! message read with `pki_last_error` on the same thread; time is `int64_t`
//! Unix seconds; the library never reads the clock, and takes randomness
//! from the operating system.
//!
//! The header `include/pki.h` is generated from this crate by cbindgen
//! (`regen-header.sh`); the README shows C and Go examples.
//!
//! The calls a C program makes, here from Rust: open a directory store,
//! create a signer, read what the create did.
//!
//! ```
//! use pki_ffi::{
//!     pki_buffer_data, pki_buffer_free, pki_document_create, pki_kind, pki_result,
//!     pki_store_free, pki_store_open,
//! };
//! use std::ptr;
//!
//! let dir = tempfile::tempdir()?;
//! let location = dir.path().join("store");
//! let location = location.to_str().ok_or("a UTF-8 path")?;
//! let request = r#"{"common_name": "service-ca", "key_type": "p256"}"#;
//! let now = 1_767_225_600; // 2026-01-01T00:00:00Z: the library never reads the clock
//! let (mut store, mut result) = (ptr::null_mut(), ptr::null_mut());
//! // SAFETY: every pointer is valid for its length, the outputs are
//! // writable, and each handle is freed once below.
//! unsafe {
//!     let opened = pki_store_open(location.as_ptr().cast(), location.len(), ptr::null(), 0, &mut store);
//!     assert_eq!(opened, pki_result::PKI_RESULT_OK);
//!     let created = pki_document_create(
//!         store,
//!         pki_kind::PKI_KIND_SIGNER as u32,
//!         "signer".as_ptr().cast(),
//!         "signer".len(),
//!         request.as_ptr().cast(),
//!         request.len(),
//!         now,
//!         &mut result,
//!     );
//!     assert_eq!(created, pki_result::PKI_RESULT_OK);
//!     let bytes = pki_buffer_data(result);
//!     let json: serde_json::Value =
//!         serde_json::from_slice(std::slice::from_raw_parts(bytes.data, bytes.len))?;
//!     assert_eq!(json["changed"], true);
//!     pki_buffer_free(result);
//!     pki_store_free(store);
//! }
//! assert!(dir.path().join("store/ca-bundle.crt").is_file());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Handles are immutable unless a function says it changes one
//! (`pki_secret_set`): immutable handles may be shared between threads. A
//! `pki_store` is shared on purpose: steps from several threads race
//! through its compare-and-swap.

// The C names are the ABI: `pki_signer`, `PKI_RESULT_OK`.
#![allow(non_camel_case_types)]

#[macro_use]
mod abi;
mod buffer;
mod bundle;
mod controller;
mod cred;
mod document;
mod error;
#[cfg(test)]
mod go_gen;
mod keys;
mod leaf;
mod open;
mod secret;
mod set;
mod signer;
mod snapshot;
mod step;
mod store;
mod verify;

pub use buffer::{pki_buffer, pki_buffer_data, pki_buffer_free, pki_bytes};
pub use bundle::{
    pki_bundle, pki_bundle_export, pki_bundle_free, pki_bundle_from_pem, pki_bundle_len,
    pki_bundle_merge, pki_bundle_output, pki_bundle_prune_expired,
};
pub use controller::{
    pki_controller_notice, pki_controller_run, pki_controller_stop, pki_controller_stop_free,
    pki_controller_stop_new, pki_controller_stop_request,
};
pub use cred::pki_cred_output;
pub use document::{pki_document_create, pki_document_read, pki_document_step, pki_kind};
pub use error::{pki_last_error, pki_last_error_length, pki_result, pki_result_name};
pub use keys::{pki_keyring_output, pki_keyring_sign, pki_keyring_verify};
pub use leaf::{pki_leaf_reason, pki_leaf_reconcile};
pub use open::pki_store_open;
pub use secret::{
    pki_secret, pki_secret_entry, pki_secret_free, pki_secret_len, pki_secret_new, pki_secret_set,
};
pub use set::pki_set_output;
pub use signer::{
    pki_lineage, pki_lineage_rule, pki_signer, pki_signer_bundle, pki_signer_check_lineage,
    pki_signer_free, pki_signer_from_secret, pki_signer_from_state, pki_signer_load,
    pki_signer_output, pki_signer_to_secret, pki_signer_to_state, pki_signer_validate,
};
pub use snapshot::pki_snapshot_load;
pub use step::PKI_CRED_ADVANCE_MAX_STEPS;
pub use store::{
    pki_store, pki_store_callbacks, pki_store_free, pki_store_new_callbacks, pki_store_reply,
    pki_store_reply_set, pki_store_reply_set_message,
};
pub use verify::{pki_purpose, pki_verify_chain};

/// The version of this library (`"0.1.0"`), a static NUL-terminated string.
/// Do not free it.
#[unsafe(no_mangle)]
pub extern "C" fn pki_version() -> *const std::ffi::c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
