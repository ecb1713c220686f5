//! The C functions that read this thread's last error message.

use super::boundary_value;
use super::last_error::with_last_error;
use super::pki_result::{self, *};

/// Length in bytes of this thread's last error message, without a
/// terminating NUL. 0 when the last `pki_` call on this thread succeeded.
#[unsafe(no_mangle)]
pub extern "C" fn pki_last_error_length() -> usize {
    boundary_value(0, || with_last_error(str::len))
}

/// Copies this thread's last error message into `buf` as a NUL-terminated
/// UTF-8 string, truncated (at a character boundary) to `len - 1` bytes.
///
/// Every fallible `pki_` function clears the message when it starts and
/// sets it when it fails, so read it on the same thread right after the
/// failing call. This function does not change the message.
///
/// Ownership: `buf` is borrowed for the call; the caller owns it.
///
/// Writes the number of bytes copied, without the NUL, to `*out_written`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER` (`buf` or
/// `out_written` NULL) or `PKI_RESULT_INVALID_ARGUMENT` (`len` is 0).
///
/// # Safety
///
/// `buf` must be NULL or valid for writes of `len` bytes; `out_written` must
/// be NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_last_error(
    buf: *mut std::ffi::c_char,
    len: usize,
    out_written: *mut usize,
) -> pki_result {
    let copy = || -> pki_result {
        if buf.is_null() || out_written.is_null() {
            return PKI_RESULT_NULL_PARAMETER;
        }
        if len == 0 || len > isize::MAX as usize {
            return PKI_RESULT_INVALID_ARGUMENT;
        }
        with_last_error(|message| {
            let mut n = message.len().min(len - 1);
            while !message.is_char_boundary(n) {
                n -= 1;
            }
            // SAFETY: `buf` is valid for `len` bytes (caller contract) and
            // `n < len`, so `n` bytes plus the NUL fit. The message is Rust
            // memory and cannot overlap the caller's buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(message.as_ptr(), buf.cast::<u8>(), n);
                *buf.add(n) = 0;
            }
            // SAFETY: checked non-NULL above; valid for a write (caller contract).
            unsafe { *out_written = n };
        });
        PKI_RESULT_OK
    };
    boundary_value(PKI_RESULT_PANIC, copy)
}
