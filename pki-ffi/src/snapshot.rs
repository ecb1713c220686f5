//! What a consumer loads, in one consistent read: a leaf's chain and key
//! from the same generation and its trust bundle, with the bundle's token
//! for `pki_signer_step`'s `ack`.

use crate::abi::{free, getter, into_handle, str_in};
use crate::buffer::{CText, pki_bytes};
use crate::error::{Failure, pki_result};
use pki_reload::{CertFiles, ReloadError, Snapshot};
use std::ffi::c_char;
use std::path::PathBuf;

/// One consistent view of a consumer's files (see `pki_snapshot_load`).
/// Immutable: may be read from several threads at once. Free with
/// `pki_snapshot_free`, which zeroes the key.
pub struct pki_snapshot {
    chain: CText,
    key: CText,
    bundle: CText,
    fingerprint: CText,
}

impl From<ReloadError> for Failure {
    fn from(e: ReloadError) -> Self {
        let code = match &e {
            ReloadError::Mismatch { .. } => crate::error::pki_result::PKI_RESULT_KEY_MISMATCH,
            ReloadError::Invalid { .. } => crate::error::pki_result::PKI_RESULT_PEM,
            _ => crate::error::pki_result::PKI_RESULT_STORE,
        };
        Failure::new(code, e.to_string())
    }
}

/// Reads a leaf's chain (`cert_path`, leaf first) and key (`key_path`) and
/// the trust bundle (`bundle_path`) as one snapshot: every file's identity
/// (device, inode, size, modification time) unchanged across the reads and
/// the key matching the leaf's public key, reading again when not (a
/// directory store switches generations atomically, but two opens may
/// straddle a switch). A certificate is never returned with another
/// generation's key.
///
/// For a signer's directory store DIR: `DIR/certs/NAME/tls.crt`,
/// `DIR/certs/NAME/tls.key` and `DIR/ca-bundle.crt`; for a CA set target:
/// `DIR/targets/T/certs/NAME/…` and `DIR/targets/T/trust/CA.crt` (or
/// `client-ca/CA.crt`). Paths are UTF-8, borrowed for the call.
///
/// On success the caller owns `*out_snapshot` and frees it with
/// `pki_snapshot_free`. A consumer polls: load again, and swap when
/// `pki_snapshot_fingerprint` or the chain differs.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (a path that is not UTF-8),
/// `PKI_RESULT_STORE` (a file cannot be read), `PKI_RESULT_PEM` (a file
/// holds no certificate or an unusable key), `PKI_RESULT_KEY_MISMATCH`
/// (no matching pair in four reads: the files are changing, or wrong) or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// Each path must be NULL or valid for its length in bytes;
/// `out_snapshot` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_snapshot_load(
    cert_path: *const c_char,
    cert_path_len: usize,
    key_path: *const c_char,
    key_path_len: usize,
    bundle_path: *const c_char,
    bundle_path_len: usize,
    out_snapshot: *mut *mut pki_snapshot,
) -> pki_result {
    ffi!(out_snapshot => {
        cert = str_in(cert_path, cert_path_len, "cert_path");
        key = str_in(key_path, key_path_len, "key_path");
        bundle = str_in(bundle_path, bundle_path_len, "bundle_path");
    } {
        let files = CertFiles {
            cert: PathBuf::from(cert),
            key: PathBuf::from(key),
        };
        let s = Snapshot::read(&files, &[PathBuf::from(bundle)])?;
        Ok::<_, Failure>(into_handle(pki_snapshot {
            chain: CText::from_bytes(&s.chain_pem),
            key: CText::from_bytes(&s.key_pem),
            bundle: CText::from_bytes(&s.bundle_pem),
            fingerprint: CText::new(&s.fingerprint),
        }))
    })
}

/// The chain (PEM, leaf first) as read. Borrowed: valid until `snapshot`
/// is freed. NULL gives an empty view.
///
/// # Safety
///
/// `snapshot` must be NULL or a live `pki_snapshot`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_snapshot_chain_pem(snapshot: *const pki_snapshot) -> pki_bytes {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(snapshot, pki_bytes::EMPTY, |s| s.chain.view()) }
}

/// The leaf's private key (PEM) as read, matching the chain's leaf.
/// Borrowed: valid until `snapshot` is freed (which zeroes it). NULL gives
/// an empty view.
///
/// # Safety
///
/// `snapshot` must be NULL or a live `pki_snapshot`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_snapshot_key_pem(snapshot: *const pki_snapshot) -> pki_bytes {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(snapshot, pki_bytes::EMPTY, |s| s.key.view()) }
}

/// The trust bundle (PEM) as read. Borrowed: valid until `snapshot` is
/// freed. NULL gives an empty view.
///
/// # Safety
///
/// `snapshot` must be NULL or a live `pki_snapshot`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_snapshot_bundle_pem(snapshot: *const pki_snapshot) -> pki_bytes {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(snapshot, pki_bytes::EMPTY, |s| s.bundle.view()) }
}

/// The bundle's token as 64 lowercase hex characters: `pki fingerprint
/// --bundle` of the same certificates, and what `pki_signer_step`'s `ack`
/// takes. Borrowed: valid until `snapshot` is freed. NULL gives an empty
/// view.
///
/// # Safety
///
/// `snapshot` must be NULL or a live `pki_snapshot`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_snapshot_fingerprint(snapshot: *const pki_snapshot) -> pki_bytes {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(snapshot, pki_bytes::EMPTY, |s| s.fingerprint.view()) }
}

/// Frees a snapshot and zeroes its key. NULL is accepted (nothing
/// happens). Views read from it must not be used afterwards.
///
/// # Safety
///
/// `snapshot` must be NULL or a live `pki_snapshot` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_snapshot_free(snapshot: *mut pki_snapshot) {
    // SAFETY: NULL or a live handle freed once (contract).
    unsafe { free(snapshot) }
}
