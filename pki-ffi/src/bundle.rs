//! CA bundles: parse, write, merge, prune, fingerprint and pins.

use crate::abi::{bytes_in, free_handle, getter, handle, into_handle, out_ptr, time_in, write_out};
use crate::buffer::pki_buffer;
use crate::error::{boundary, boundary_value, pki_result};
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

/// A SHA-256 digest (fingerprints and pins). Printed as lowercase hex it
/// matches `pki pin` and `openssl x509 -fingerprint -sha256` (without colons).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct pki_sha256 {
    /// The digest.
    pub bytes: [u8; 32],
}

/// Hands a new bundle to C.
///
/// # Safety
///
/// `out` must be non-NULL and valid for one write.
unsafe fn give_bundle(out: *mut *mut pki_bundle, bundle: Bundle) {
    // SAFETY: our caller's contract.
    unsafe { write_out(out, into_handle(pki_bundle::new(bundle))) }
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
    boundary(|| {
        // SAFETY: pointer and length from the caller (contract).
        let pem = unsafe { bytes_in(pem, pem_len, "pem") }?;
        out_ptr(out_bundle, "out_bundle")?;
        let bundle = Bundle::from_pem(pem)?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { give_bundle(out_bundle, bundle) };
        Ok(())
    })
}

/// Writes a bundle as PEM, one `CERTIFICATE` block per member, in order.
///
/// On success the caller owns `*out_pem` and frees it with `pki_buffer_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `bundle` must be NULL or a live `pki_bundle`; `out_pem` NULL or valid for
/// one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_bundle_to_pem(
    bundle: *const pki_bundle,
    out_pem: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let bundle = unsafe { handle(bundle, "bundle") }?;
        out_ptr(out_pem, "out_pem")?;
        let pem = bundle.bundle.to_pem();
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_pem, into_handle(pki_buffer::new(pem.as_bytes()))) };
        Ok(())
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
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let first = unsafe { handle(first, "first") }?;
        // SAFETY: NULL or a live handle (contract).
        let second = unsafe { handle(second, "second") }?;
        out_ptr(out_bundle, "out_bundle")?;
        let mut merged = first.bundle.clone();
        merged.merge(&second.bundle);
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { give_bundle(out_bundle, merged) };
        Ok(())
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
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let bundle = unsafe { handle(bundle, "bundle") }?;
        out_ptr(out_bundle, "out_bundle")?;
        out_ptr(out_removed, "out_removed")?;
        let now = time_in(now, "now")?;
        let mut kept = bundle.bundle.clone();
        let removed = kept.prune_expired(now).len();
        // SAFETY: both checked non-NULL; valid for a write (contract).
        unsafe {
            give_bundle(out_bundle, kept);
            write_out(out_removed, removed);
        }
        Ok(())
    })
}

/// The fingerprint of the set: SHA-256 over the sorted SHA-256 fingerprints
/// of the members, so the same set in any order gives the same value.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `bundle` must be NULL or a live `pki_bundle`; `out_fingerprint` NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_bundle_fingerprint(
    bundle: *const pki_bundle,
    out_fingerprint: *mut pki_sha256,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let bundle = unsafe { handle(bundle, "bundle") }?;
        out_ptr(out_fingerprint, "out_fingerprint")?;
        let bytes = bundle.bundle.fingerprint();
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_fingerprint, pki_sha256 { bytes }) };
        Ok(())
    })
}

/// The root pin: SHA-256 of the DER of the bundle's first self-signed root
/// (never of PEM text), as `pki pin` prints it in hex.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`, `PKI_RESULT_NO_ROOT`
/// or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `bundle` must be NULL or a live `pki_bundle`; `out_pin` NULL or valid for
/// one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_bundle_root_pin(
    bundle: *const pki_bundle,
    out_pin: *mut pki_sha256,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let bundle = unsafe { handle(bundle, "bundle") }?;
        out_ptr(out_pin, "out_pin")?;
        let bytes = bundle.bundle.root_pin_sha256()?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_pin, pki_sha256 { bytes }) };
        Ok(())
    })
}

/// The SPKI pins of a bundle: SHA-256 of each member's
/// SubjectPublicKeyInfo DER, deduplicated (bridges share keys with roots),
/// in bundle order, as consecutive 32-byte digests: `len / 32` pins.
///
/// On success the caller owns `*out_pins` and frees it with `pki_buffer_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `bundle` must be NULL or a live `pki_bundle`; `out_pins` NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_bundle_spki_pins(
    bundle: *const pki_bundle,
    out_pins: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let bundle = unsafe { handle(bundle, "bundle") }?;
        out_ptr(out_pins, "out_pins")?;
        let bytes = bundle.bundle.spki_pins_sha256().concat();
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_pins, into_handle(pki_buffer::new(&bytes))) };
        Ok(())
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
    boundary_value((), || unsafe { free_handle(bundle) })
}
