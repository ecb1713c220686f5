//! CA bundles: parse, merge, prune, and export (PEM, fingerprint, pins).

use crate::abi::{bytes_in, free, getter, handle, into_handle, time_in};
use crate::buffer::pki_buffer;
use crate::error::{Failure, pki_result};
use pki_core::Bundle;

/// An ordered set of CA certificates, deduplicated by DER. Immutable:
/// operations return new bundles, so one handle may be read from several
/// threads at once. Free with `pki_bundle_free`.
pub struct pki_bundle {
    pub(crate) bundle: Bundle,
}

impl pki_bundle {
    pub(crate) fn new(bundle: Bundle) -> Self {
        pki_bundle { bundle }
    }
}

/// Which form of a bundle `pki_bundle_export` writes.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum pki_bundle_output {
    /// PEM, one `CERTIFICATE` block per member, in order.
    PKI_BUNDLE_PEM = 0,
    /// The fingerprint of the set (32 bytes): SHA-256 over the sorted
    /// SHA-256 fingerprints of the members, so the same set in any order
    /// gives the same value (`pki fingerprint --bundle`, in hex).
    PKI_BUNDLE_FINGERPRINT = 1,
    /// The root pin (32 bytes): SHA-256 of the DER of the bundle's first
    /// self-signed root (never of PEM text), as `pki pin` prints it in hex.
    PKI_BUNDLE_ROOT_PIN = 2,
    /// The SPKI pins: SHA-256 of each member's SubjectPublicKeyInfo DER,
    /// deduplicated (bridges share keys with roots), in bundle order, as
    /// consecutive 32-byte digests: `len / 32` pins.
    PKI_BUNDLE_SPKI_PINS = 3,
}

/// Parses a PEM bundle. Every block must be a `CERTIFICATE`; text between
/// blocks and CRLF line endings are accepted; duplicates are dropped.
///
/// `pem` is borrowed for the call. On success the caller owns `*out_bundle`
/// and frees it with `pki_bundle_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_NO_PEM_BLOCK` (also for zero length), `PKI_RESULT_PEM`
/// (truncated or bad base64), `PKI_RESULT_UNEXPECTED_PEM_LABEL`,
/// `PKI_RESULT_CERTIFICATE_DECODE`, `PKI_RESULT_MALFORMED_EXTENSION` or
/// `PKI_RESULT_PANIC`. The message names the failing block.
///
/// # Safety
///
/// `pem` must be NULL or valid for `pem_len` bytes; `out_bundle` NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_bundle_from_pem(
    pem: *const u8,
    pem_len: usize,
    out_bundle: *mut *mut pki_bundle,
) -> pki_result {
    ffi!(out_bundle => {
        pem = bytes_in(pem, pem_len, "pem");
    } Bundle::from_pem(pem).map(|b| into_handle(pki_bundle::new(b))))
}

/// Writes one form of a bundle (see `pki_bundle_output`: its PEM, its
/// fingerprint, its root pin, its SPKI pins) to a new buffer.
///
/// On success the caller owns `*out_buffer` and frees it with
/// `pki_buffer_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (an unknown output), `PKI_RESULT_NO_ROOT`
/// (`PKI_BUNDLE_ROOT_PIN` of a bundle without a self-signed root) or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `bundle` must be NULL or a live `pki_bundle`; `out_buffer` NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_bundle_export(
    bundle: *const pki_bundle,
    output: u32,
    out_buffer: *mut *mut pki_buffer,
) -> pki_result {
    ffi!(out_buffer => {
        bundle = handle(bundle, "bundle");
    } {
        let b = &bundle.bundle;
        let bytes = match output {
            0 => b.to_pem().into_bytes(),
            1 => b.fingerprint().to_vec(),
            2 => b.root_pin_sha256()?.to_vec(),
            3 => b.spki_pins_sha256().concat(),
            other => {
                return Err(Failure::invalid(format!(
                    "output {other} is not a pki_bundle_output (0-3)"
                )));
            }
        };
        Ok::<_, Failure>(into_handle(pki_buffer::new(&bytes)))
    })
}

/// Number of certificates in a bundle. NULL gives 0.
///
/// # Safety
///
/// `bundle` must be NULL or a live `pki_bundle`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_bundle_len(bundle: *const pki_bundle) -> usize {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(bundle, 0, |b| b.bundle.len()) }
}

/// Merges two bundles into a new one: the members of `first`, then those of
/// `second` not already present. Both are borrowed and unchanged.
///
/// On success the caller owns `*out_bundle` and frees it with `pki_bundle_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `first` and `second` must be NULL or live `pki_bundle`s; `out_bundle`
/// NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_bundle_merge(
    first: *const pki_bundle,
    second: *const pki_bundle,
    out_bundle: *mut *mut pki_bundle,
) -> pki_result {
    ffi!(out_bundle => {
        first = handle(first, "first");
        second = handle(second, "second");
    } {
        let mut merged = first.bundle.clone();
        merged.merge(&second.bundle);
        Ok::<_, Failure>(into_handle(pki_bundle::new(merged)))
    })
}

/// Makes a new bundle without the members whose NotAfter is before `now`
/// (Unix seconds), and writes how many were removed to `*out_removed`. The
/// result may be empty. `bundle` is borrowed and unchanged.
///
/// On success the caller owns `*out_bundle` and frees it with `pki_bundle_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`, `PKI_RESULT_TIME`
/// or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `bundle` must be NULL or a live `pki_bundle`; `out_bundle` and
/// `out_removed` NULL or valid for one write each.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_bundle_prune_expired(
    bundle: *const pki_bundle,
    now: i64,
    out_bundle: *mut *mut pki_bundle,
    out_removed: *mut usize,
) -> pki_result {
    ffi!(out_bundle, out_removed => {
        bundle = handle(bundle, "bundle");
        now = time_in(now, "now");
    } {
        let mut kept = bundle.bundle.clone();
        let removed = kept.prune_expired(now).len();
        Ok::<_, Failure>((into_handle(pki_bundle::new(kept)), removed))
    })
}

/// Frees a bundle. NULL is accepted (nothing happens).
///
/// # Safety
///
/// `bundle` must be NULL or a live `pki_bundle` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_bundle_free(bundle: *mut pki_bundle) {
    // SAFETY: NULL or a live handle freed once (contract).
    unsafe { free(bundle) }
}
