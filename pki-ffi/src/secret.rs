//! The signer as named blobs shaped like a Kubernetes Secret's `data`.
//!
//! | key | contents |
//! |---|---|
//! | `tls.crt` | the current CA certificate (PEM) |
//! | `tls.key` | the current CA private key (PKCS#8 PEM) |
//! | `ca-bundle.crt` | the bundle clients trust (PEM) |
//! | `intermediate-ca.crt` | bridge B (PEM), only after a rotation while it is valid |
//! | `forced-rotation-reason` | reason of the last forced rotation, absent if none |
//! | `pki-state.json` | the versioned document without material (policy, history…) |
//! | `certs.NAME.tls.crt`, `certs.NAME.tls.key` | leaves kept in the signer state, if any |
//!
//! The mapping itself is pki-rotate's (`pki_rotate::signer::document`),
//! documented and tested there; this module only moves the bytes.

use crate::abi::{bytes_in, free, getter, handle, handle_mut, into_handle, str_in};
use crate::buffer::{CText, pki_bytes};
use crate::error::{Failure, pki_result};
use pki_rotate::{SecretData, is_secret_data_key};
use std::collections::BTreeMap;
use std::ffi::c_char;
use zeroize::Zeroizing;

/// Named blobs, like a Kubernetes Secret's `data`: keys are Secret data keys,
/// values arbitrary bytes. Entries are kept sorted by key. Values may hold
/// private keys and are zeroed when the secret is freed.
///
/// Not synchronised: do not change it from one thread while another uses it.
/// Free with `pki_secret_free`.
pub struct pki_secret {
    entries: BTreeMap<String, (CText, CText)>,
}

impl pki_secret {
    fn insert(&mut self, key: String, value: &[u8]) {
        let entry = (CText::new(&key), CText::from_bytes(value));
        self.entries.insert(key, entry);
    }

    /// A secret holding a copy of `data`.
    pub(crate) fn from_data(data: &SecretData) -> Self {
        let mut secret = pki_secret {
            entries: BTreeMap::new(),
        };
        for (key, value) in data {
            secret.insert(key.clone(), value);
        }
        secret
    }

    /// A copy of the entries as Secret data.
    pub(crate) fn to_data(&self) -> SecretData {
        self.entries
            .iter()
            .map(|(key, (_, value))| (key.clone(), Zeroizing::new(value.as_bytes().to_vec())))
            .collect()
    }
}

/// Creates an empty secret.
///
/// On success the caller owns `*out_secret` and frees it with `pki_secret_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `out_secret` must be NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_secret_new(out_secret: *mut *mut pki_secret) -> pki_result {
    ffi!(out_secret => {} Ok::<_, Failure>(into_handle(pki_secret {
        entries: BTreeMap::new(),
    })))
}

/// Sets entry `key` to a copy of `value`, replacing any previous value.
///
/// `key` is `key_len` bytes of `[-._a-zA-Z0-9]` (1 to 253, as Kubernetes
/// requires). `value` may be empty (`value_len` 0, `value` still not NULL).
/// Both are borrowed for the call; `secret` is changed in place.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (bad key) or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `secret` must be NULL or a live `pki_secret` not used by another thread
/// during the call; `key` NULL or valid for `key_len` bytes; `value` NULL or
/// valid for `value_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_secret_set(
    secret: *mut pki_secret,
    key: *const c_char,
    key_len: usize,
    value: *const u8,
    value_len: usize,
) -> pki_result {
    ffi!({
        secret = handle_mut(secret, "secret");
        key = str_in(key, key_len, "key");
        value = bytes_in(value, value_len, "value");
    } {
        if !is_secret_data_key(key) {
            return Err(Failure::invalid(format!(
                "\"{key}\" is not a Secret data key (1-253 of a-z, A-Z, 0-9, '-', '_', '.')"
            )));
        }
        secret.insert(key.to_string(), value);
        Ok(())
    })
}

/// Number of entries. NULL gives 0.
///
/// # Safety
///
/// `secret` must be NULL or a live `pki_secret`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_secret_len(secret: *const pki_secret) -> usize {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(secret, 0, |s| s.entries.len()) }
}

/// Reads entry `index` (from 0, in key order): its key and value.
///
/// Borrowed: both views are valid until the secret is freed or changed.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_NOT_FOUND` (index out of range) or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `secret` must be NULL or a live `pki_secret`; `out_key` and `out_value`
/// NULL or valid for one write each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_secret_entry(
    secret: *const pki_secret,
    index: usize,
    out_key: *mut pki_bytes,
    out_value: *mut pki_bytes,
) -> pki_result {
    ffi!(out_key, out_value => {
        secret = handle(secret, "secret");
    } {
        let (key, value) = secret.entries.values().nth(index).ok_or_else(|| {
            Failure::new(
                pki_result::PKI_RESULT_NOT_FOUND,
                format!("entry {index} of {}", secret.entries.len()),
            )
        })?;
        Ok::<_, Failure>((key.view(), value.view()))
    })
}

/// Frees a secret and zeroes its values. NULL is accepted (nothing happens).
///
/// # Safety
///
/// `secret` must be NULL or a live `pki_secret` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_secret_free(secret: *mut pki_secret) {
    // SAFETY: NULL or a live handle freed once (contract).
    unsafe { free(secret) }
}
