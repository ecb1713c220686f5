//! Stores whose private material is sealed at rest: `pki_store_open_sealed`.

use crate::abi::{bytes_in, into_handle};
use crate::error::{Failure, pki_result};
use crate::store::pki_store;
use pki_rotate::{SealingKeys, StoreKey};
use std::ffi::c_char;

/// Opens the store `location` names, as `pki_store_open` does, with every
/// document's private keys and credentials sealed under the store key
/// `store_key` (`store_key_len` bytes: the contents of a key file made by
/// `pki store-key new`, which the embedder reads and keeps 0600) before
/// they reach the store, and opened when read. Certificates and bundles
/// stay in clear. In a directory store the files consumers read where
/// they are (leaf keys, `keys/active.key`, `creds/NAME/current`) stay in
/// clear (0600); etcd and memory stores seal everything private. Reading a
/// value sealed under another key fails with `PKI_RESULT_STORE` and a
/// one-line message, before anything is written.
///
/// On success the caller owns `*out_store` and frees it with
/// `pki_store_free`.
///
/// Returns what `pki_store_open` returns, and `PKI_RESULT_STORE` for a
/// store key that is not a pki store key file (the message says why).
///
/// # Safety
///
/// `location` must be NULL or valid for `location_len` bytes, `store_key`
/// NULL or valid for `store_key_len` bytes; `out_store` NULL or valid for
/// one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_store_open_sealed(
    location: *const c_char,
    location_len: usize,
    store_key: *const u8,
    store_key_len: usize,
    out_store: *mut *mut pki_store,
) -> pki_result {
    ffi!(out_store => {
        location = bytes_in(location.cast::<u8>(), location_len, "location");
        store_key = bytes_in(store_key, store_key_len, "store_key");
    } open_sealed(location, store_key).map(into_handle))
}

fn open_sealed(location: &[u8], key_file: &[u8]) -> Result<pki_store, Failure> {
    let key = StoreKey::from_file("parameter `store_key`", key_file)?;
    crate::store::open_with(location, SealingKeys::single(key))
}
