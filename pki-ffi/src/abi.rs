//! Helpers that turn raw ABI arguments into Rust values, checking NULL,
//! lengths and UTF-8, and write outputs back.

use crate::error::Failure;
use std::ffi::c_char;
use time::OffsetDateTime;

/// Borrows `len` bytes at `ptr`. NULL is an error whatever `len` is.
///
/// # Safety
///
/// `ptr` must be NULL or valid for reads of `len` bytes for `'a`, and the
/// bytes must not be written to during `'a`.
pub(crate) unsafe fn bytes_in<'a>(
    ptr: *const u8,
    len: usize,
    what: &str,
) -> Result<&'a [u8], Failure> {
    if ptr.is_null() {
        return Err(Failure::null(what));
    }
    if len > isize::MAX as usize {
        return Err(Failure::invalid(format!(
            "parameter `{what}`: length {len} is too large"
        )));
    }
    // SAFETY: non-NULL, `len` fits in isize, and the caller guarantees the
    // memory is readable for `len` bytes and unchanged during `'a`.
    Ok(unsafe { std::slice::from_raw_parts(ptr, len) })
}

/// Borrows `len` bytes of UTF-8 text at `ptr` (no NUL terminator needed).
///
/// # Safety
///
/// As for [`bytes_in`].
pub(crate) unsafe fn str_in<'a>(
    ptr: *const c_char,
    len: usize,
    what: &str,
) -> Result<&'a str, Failure> {
    // SAFETY: same contract as ours.
    let bytes = unsafe { bytes_in(ptr.cast::<u8>(), len, what) }?;
    std::str::from_utf8(bytes).map_err(|e| {
        Failure::invalid(format!(
            "parameter `{what}` is not UTF-8 (byte {})",
            e.valid_up_to()
        ))
    })
}

/// Borrows the object behind a handle.
///
/// # Safety
///
/// `ptr` must be NULL or a live handle of type `T` created by this library
/// and not freed, not mutated by another thread during `'a`.
pub(crate) unsafe fn handle<'a, T>(ptr: *const T, what: &str) -> Result<&'a T, Failure> {
    // SAFETY: a live handle is a pointer from `Box::into_raw`, aligned and
    // initialised (caller contract); NULL is turned into `None`.
    unsafe { ptr.as_ref() }.ok_or_else(|| Failure::null(what))
}

/// Borrows the object behind a handle mutably.
///
/// # Safety
///
/// As for [`handle`], and no other reference to the object may exist
/// during `'a` (the caller does not use it from another thread meanwhile).
pub(crate) unsafe fn handle_mut<'a, T>(ptr: *mut T, what: &str) -> Result<&'a mut T, Failure> {
    // SAFETY: see above; exclusivity is the caller's contract.
    unsafe { ptr.as_mut() }.ok_or_else(|| Failure::null(what))
}

/// Fails when an output pointer is NULL. Called before any work, so that
/// outputs are only written once everything succeeded.
pub(crate) fn out_ptr<T>(ptr: *mut T, what: &str) -> Result<(), Failure> {
    if ptr.is_null() {
        Err(Failure::null(what))
    } else {
        Ok(())
    }
}

/// Writes `value` to an output pointer already checked by [`out_ptr`].
///
/// # Safety
///
/// `ptr` must be non-NULL, aligned and valid for one write of `T`.
pub(crate) unsafe fn write_out<T>(ptr: *mut T, value: T) {
    // SAFETY: caller contract. `write` does not drop the old contents,
    // which are uninitialised or plain data owned by the caller.
    unsafe { ptr.write(value) }
}

/// Moves `value` to the heap and gives C the pointer (a handle it frees later).
pub(crate) fn into_handle<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// Frees a handle made by [`into_handle`]. NULL is accepted.
///
/// # Safety
///
/// `ptr` must be NULL or a handle of type `T` from [`into_handle`] that was
/// not freed yet; it must not be used afterwards.
pub(crate) unsafe fn free_handle<T>(ptr: *mut T) {
    if !ptr.is_null() {
        // SAFETY: the pointer came from `Box::into_raw` and is freed once
        // (caller contract).
        drop(unsafe { Box::from_raw(ptr) });
    }
}

/// A Unix time (seconds) as an instant.
pub(crate) fn time_in(seconds: i64, what: &str) -> Result<OffsetDateTime, Failure> {
    OffsetDateTime::from_unix_timestamp(seconds).map_err(|e| {
        Failure::new(
            crate::pki_result::PKI_RESULT_TIME,
            format!("parameter `{what}`: {seconds} is not a usable Unix time ({e})"),
        )
    })
}

/// An instant as Unix seconds.
pub(crate) fn time_out(t: OffsetDateTime) -> i64 {
    t.unix_timestamp()
}

/// A duration in seconds.
pub(crate) fn seconds(seconds: i64) -> time::Duration {
    time::Duration::seconds(seconds)
}

/// The operating system's RNG: keys and serials need real randomness.
/// Failing to read it panics, which the boundary turns into
/// `PKI_RESULT_PANIC`. pki-core's own type, so that P-256 keys are made and
/// signed with ring (see `pki_core::OsRng`).
pub(crate) fn os_rng() -> pki_core::OsRng {
    pki_core::os_rng()
}

/// Reads something from the object behind a handle inside the panic
/// boundary; NULL (or a panic) gives `fallback`.
///
/// # Safety
///
/// `ptr` must be NULL or a live handle of type `T`.
pub(crate) unsafe fn getter<T, R: Copy>(
    ptr: *const T,
    fallback: R,
    read: impl FnOnce(&T) -> R,
) -> R {
    crate::error::boundary_value(fallback, || {
        // SAFETY: NULL or a live handle (our caller's contract).
        match unsafe { ptr.as_ref() } {
            Some(object) => read(object),
            None => fallback,
        }
    })
}
