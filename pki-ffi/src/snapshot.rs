//! What a consumer loads, in one consistent read: a leaf's chain and key
//! from the same generation and its trust bundle, with the bundle's token
//! for a signer step's `ack`.

use crate::abi::{into_handle, str_in};
use crate::buffer::pki_buffer;
use crate::error::{Failure, pki_result};
use pki_reload::{CertFiles, ReloadError, Snapshot};
use std::ffi::c_char;
use std::path::PathBuf;

/// One consistent view of a consumer's files (see `pki_snapshot_load`),
/// the JSON object its buffer holds.
#[derive(serde::Serialize)]
struct SnapshotJson<'a> {
    /// The schema version (`pki_rotate::request::REQUEST_VERSION`).
    version: u32,
    /// The chain (PEM, leaf first) as read.
    chain_pem: &'a str,
    /// The leaf's private key (PEM) as read, matching the chain's leaf.
    key_pem: &'a str,
    /// The trust bundle (PEM) as read.
    bundle_pem: &'a str,
    /// The bundle's token, 64 lowercase hex characters.
    fingerprint: &'a str,
}

/// A key file as text: UTF-8, or a failure naming it.
fn text<'a>(bytes: &'a [u8], what: &str) -> Result<&'a str, Failure> {
    std::str::from_utf8(bytes).map_err(|_| {
        Failure::new(
            pki_result::PKI_RESULT_PEM,
            format!("{what} is not UTF-8 text"),
        )
    })
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
/// `pki_buffer_free` (which zeroes it): one JSON object, `{"version": 1,
/// "chain_pem": PEM (leaf first), "key_pem": PEM (the leaf's key),
/// "bundle_pem": PEM, "fingerprint": "64 lowercase hex"}`; the
/// fingerprint is `pki fingerprint --bundle` of the same certificates, and
/// what a signer step's `ack` takes. A consumer polls: load again, and
/// swap when the fingerprint or the chain differs.
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
    out_snapshot: *mut *mut pki_buffer,
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
        let json = serde_json::to_vec(&SnapshotJson {
            version: pki_rotate::request::REQUEST_VERSION,
            // Text between PEM blocks is read as it comes (RFC 7468).
            chain_pem: &String::from_utf8_lossy(&s.chain_pem),
            key_pem: text(&s.key_pem, "the key")?,
            bundle_pem: &String::from_utf8_lossy(&s.bundle_pem),
            fingerprint: &s.fingerprint,
        })
        .map_err(|e| Failure::new(pki_result::PKI_RESULT_UNEXPECTED, e.to_string()))?;
        let json = zeroize::Zeroizing::new(json);
        Ok::<_, Failure>(into_handle(pki_buffer::new(&json)))
    })
}
