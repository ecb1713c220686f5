//! C ABI for pki: rotate X.509 CAs without breaking trust, from C and Go.
//!
//! Conventions (those of rustls-ffi):
//!
//! - every symbol is `pki_<object>_<verb>`; objects are opaque handles the
//!   caller frees once with `pki_<object>_free` (NULL is accepted there);
//! - fallible functions return a `pki_result` (`PKI_RESULT_OK` = 0, then
//!   numbered blocks per domain, never reused); output parameters come last
//!   and are written only on success;
//! - every body runs inside a panic boundary (a panic returns
//!   `PKI_RESULT_PANIC`) and checks every pointer for NULL
//!   (`PKI_RESULT_NULL_PARAMETER`);
//! - the detail of a failure is a thread-local message read with
//!   `pki_last_error` on the same thread;
//! - time is `int64_t` Unix seconds, durations `int64_t` seconds, text and
//!   PEM are pointer + length (no NUL needed); the library never reads the
//!   clock, and takes randomness from the operating system.
//!
//! The header `include/pki.h` is generated from this crate by cbindgen
//! (`regen-header.sh`); the README shows C and Go examples.
//!
//! Handles are immutable unless a function says it changes one
//! (`pki_secret_set`, the leaf builder): immutable handles may be shared
//! between threads; the others must be used by one thread at a time. A
//! `pki_store` is shared on purpose: steps from several threads race
//! through its compare-and-swap.
//!
//! A controller keeps its signer in a `pki_store` (a directory, memory, or
//! its own Secret-shaped storage through callbacks) and calls
//! `pki_signer_store_step` when `pki_step_next_check` says, which runs
//! pki-rotate's driver: load, decide, write only what changed, and retry
//! from a fresh read when another replica wrote first.

// The C names are the ABI: `pki_signer`, `PKI_RESULT_OK`.
#![allow(non_camel_case_types)]

mod abi;
mod buffer;
mod bundle;
mod cred;
mod error;
mod external;
mod keys;
mod leaf;
mod secret;
mod set;
mod signer;
mod step;
mod store;
mod verify;

pub use buffer::{pki_buffer, pki_buffer_data, pki_buffer_free, pki_bytes};
pub use bundle::{
    pki_bundle, pki_bundle_fingerprint, pki_bundle_free, pki_bundle_from_pem, pki_bundle_len,
    pki_bundle_merge, pki_bundle_prune_expired, pki_bundle_root_pin, pki_bundle_spki_pins,
    pki_bundle_to_pem, pki_sha256,
};
pub use cred::{
    PKI_CRED_ACTION_MINT, PKI_CRED_ACTION_REVOKE, PKI_CRED_ACTION_WAIT, pki_cred_action,
    pki_cred_action_attempt, pki_cred_action_credential, pki_cred_action_free,
    pki_cred_action_kind, pki_cred_action_rotation, pki_cred_action_wait_until, pki_cred_create,
    pki_cred_current, pki_cred_next, pki_cred_report_mint_failed, pki_cred_report_minted,
    pki_cred_report_revoke_failed, pki_cred_report_revoked, pki_cred_status_json,
};
pub use error::{pki_last_error, pki_last_error_length, pki_result, pki_result_name};
pub use external::{pki_signer_import, pki_signer_rotate_to, pki_signer_validate_replacement};
pub use keys::{
    pki_keyring, pki_keyring_export, pki_keyring_free, pki_keyring_from_state, pki_keyring_import,
    pki_keyring_new, pki_keyring_output, pki_keyring_policy, pki_keyring_policy_default,
    pki_keyring_rotate, pki_keyring_sign, pki_keyring_verify,
};
pub use leaf::{
    pki_leaf, pki_leaf_builder, pki_leaf_builder_add_dns_name, pki_leaf_builder_add_ip_address,
    pki_leaf_builder_build, pki_leaf_builder_free, pki_leaf_builder_new,
    pki_leaf_builder_set_lifetime, pki_leaf_chain_pem, pki_leaf_free, pki_leaf_key_pem,
    pki_leaf_kind, pki_leaf_not_after, pki_leaf_reason, pki_leaf_reason_code,
    pki_leaf_reason_message, pki_leaf_reconcile, pki_leaf_refresh_at, pki_leaf_request,
    pki_leaf_request_free,
};
pub use secret::{
    pki_secret, pki_secret_entry, pki_secret_free, pki_secret_get, pki_secret_len, pki_secret_new,
    pki_secret_set, pki_signer_from_secret, pki_signer_to_secret,
};
pub use set::{
    pki_set_abort, pki_set_ack, pki_set_advance, pki_set_create, pki_set_issue, pki_set_plan_json,
    pki_set_start, pki_set_status_json, pki_set_target,
};
pub use signer::{
    pki_event, pki_event_kind, pki_events, pki_events_free, pki_events_get, pki_events_len,
    pki_forced_rotation, pki_key_type, pki_lineage, pki_lineage_rule, pki_policy,
    pki_policy_default, pki_signer, pki_signer_bundle, pki_signer_check_lineage, pki_signer_free,
    pki_signer_from_state, pki_signer_generation, pki_signer_new, pki_signer_policy,
    pki_signer_reconcile, pki_signer_request_leaf, pki_signer_to_state,
};
pub use step::{
    pki_signer_store_create, pki_signer_store_load, pki_signer_store_step, pki_step,
    pki_step_attempts, pki_step_changed, pki_step_events, pki_step_free, pki_step_next_check,
    pki_step_revision, pki_step_signer,
};
pub use store::{
    pki_store, pki_store_callbacks, pki_store_free, pki_store_new_callbacks, pki_store_new_memory,
    pki_store_open_dir, pki_store_open_url, pki_store_reply, pki_store_reply_set_data,
    pki_store_reply_set_message, pki_store_reply_set_revision,
};
pub use verify::{pki_purpose, pki_verify_chain};

/// The version of this library (`"0.1.0"`), a static NUL-terminated string.
/// Do not free it.
#[unsafe(no_mangle)]
pub extern "C" fn pki_version() -> *const std::ffi::c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}
