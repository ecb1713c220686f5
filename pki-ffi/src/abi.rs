//! The one preamble of every `pki_` function, and the conversions it runs:
//! raw ABI arguments into Rust values (NULL, lengths, UTF-8, JSON checked),
//! results back into output pointers.
//!
//! Every fallible function is written as
//!
//! ```ignore
//! ffi!(out_leaf => {
//!     signer = handle(signer, "signer");
//!     request = json_in::<LeafRequestIn>(request, request_len, "request");
//!     now = time_in(now, "now");
//! } reconcile(signer, &request, now).map(into_handle))
//! ```
//!
//! which runs inside the panic boundary, converts every argument in
//! parameter order (a failure returns its code, and the message, naming
//! the parameter, goes to the thread's last error), checks the output
//! pointers, runs the body and writes its value to the output only when
//! everything succeeded. Getters go through
//! [`getter`], frees through [`free`].

use crate::error::Failure;
use pki_rotate::request;
use serde::de::DeserializeOwned;
use std::ffi::c_char;
use time::OffsetDateTime;

/// The preamble of a fallible ABI function; see the module documentation.
///
/// Forms: `ffi!({ args } body)` (no output; `body` is a
/// `Result<(), Failure>`), `ffi!(out => { args } body)` (`body` gives the
/// value written to `*out`), `ffi!(out, opt? => { args } body)` (`body`
/// gives a pair; the second goes to `*opt` when `opt` is not NULL) and
/// `ffi!(a, b => { args } body)` (two outputs, both required).
///
/// The conversions in `{ args }` are `name = expression;`, run in order
/// (a later one may use an earlier one's value): they dereference the
/// caller's pointers, which the function's documented contract makes NULL
/// or valid, and fail with the code and message of the first bad argument.
macro_rules! ffi {
    (@args { $($arg:ident = $conv:expr;)* }) => {
        $(
            #[allow(unused_unsafe)]
            // SAFETY: every pointer argument is NULL or valid for its
            // length, and every handle NULL or live, by the calling
            // function's documented contract; each conversion refuses NULL.
            let $arg = unsafe { $conv }?;
        )*
    };
    ({ $($args:tt)* } $body:expr) => {
        $crate::error::boundary(|| {
            ffi!(@args { $($args)* });
            $body
        })
    };
    ($out:ident => { $($args:tt)* } $body:expr) => {
        $crate::error::boundary(|| {
            ffi!(@args { $($args)* });
            $crate::abi::out_ptr($out, stringify!($out))?;
            let value = $body?;
            // SAFETY: checked non-NULL above; valid for one write (contract).
            unsafe { $crate::abi::write_out($out, value) };
            Ok(())
        })
    };
    ($out:ident, $opt:ident ? => { $($args:tt)* } $body:expr) => {
        $crate::error::boundary(|| {
            ffi!(@args { $($args)* });
            $crate::abi::out_ptr($out, stringify!($out))?;
            let (value, optional) = $body?;
            // SAFETY: `$out` checked non-NULL above, `$opt` NULL (skipped)
            // or valid; both valid for one write (contract).
            unsafe {
                $crate::abi::write_out($out, value);
                $crate::abi::write_opt($opt, optional);
            }
            Ok(())
        })
    };
    ($out:ident, $out2:ident => { $($args:tt)* } $body:expr) => {
        $crate::error::boundary(|| {
            ffi!(@args { $($args)* });
            $crate::abi::out_ptr($out, stringify!($out))?;
            $crate::abi::out_ptr($out2, stringify!($out2))?;
            let (value, value2) = $body?;
            // SAFETY: both checked non-NULL above; valid for one write (contract).
            unsafe {
                $crate::abi::write_out($out, value);
                $crate::abi::write_out($out2, value2);
            }
            Ok(())
        })
    };
}

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

/// Borrows optional bytes: NULL is None.
///
/// # Safety
///
/// `ptr` must be NULL or valid for reads of `len` bytes for `'a`.
pub(crate) unsafe fn opt_bytes<'a>(
    ptr: *const u8,
    len: usize,
    what: &str,
) -> Result<Option<&'a [u8]>, Failure> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and valid for `len` bytes (caller contract).
    unsafe { bytes_in(ptr, len, what) }.map(Some)
}

/// Borrows optional UTF-8 text: NULL is None.
///
/// # Safety
///
/// As for [`opt_bytes`].
pub(crate) unsafe fn opt_str<'a>(
    ptr: *const c_char,
    len: usize,
    what: &str,
) -> Result<Option<&'a str>, Failure> {
    if ptr.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL and valid for `len` bytes (caller contract).
    unsafe { str_in(ptr, len, what) }.map(Some)
}

/// The store key argument of the store functions (checked by the store).
///
/// # Safety
///
/// As for [`str_in`].
pub(crate) unsafe fn key_in<'a>(key: *const c_char, key_len: usize) -> Result<&'a str, Failure> {
    // SAFETY: same contract as ours.
    unsafe { str_in(key, key_len, "key") }
}

/// Reads a JSON request into `T` (pki-rotate's request schema: the
/// `version` checked, unknown fields refused); NULL is an error. Malformed
/// JSON, a field of the wrong type, an unknown field, a missing one or
/// another schema version is `PKI_RESULT_INVALID_ARGUMENT`, with a message
/// naming the parameter and the field.
///
/// # Safety
///
/// As for [`bytes_in`].
pub(crate) unsafe fn json_in<T: DeserializeOwned>(
    ptr: *const c_char,
    len: usize,
    what: &str,
) -> Result<T, Failure> {
    // SAFETY: same contract as ours.
    let bytes = unsafe { bytes_in(ptr.cast::<u8>(), len, what) }?;
    Ok(request::from_json(&format!("parameter `{what}`"), bytes)?)
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

/// Writes `value` to an optional output: NULL skips it (and drops `value`,
/// freeing a handle made for it).
///
/// # Safety
///
/// `ptr` must be NULL, or aligned and valid for one write of `T`.
pub(crate) unsafe fn write_opt<T: Dropped>(ptr: *mut T, value: T) {
    if ptr.is_null() {
        value.dropped();
    } else {
        // SAFETY: non-NULL; valid for a write (caller contract).
        unsafe { write_out(ptr, value) }
    }
}

/// What to do with the value of an optional output nobody asked for.
pub(crate) trait Dropped {
    /// Releases it.
    fn dropped(self);
}

impl<T> Dropped for *mut T {
    fn dropped(self) {
        // SAFETY: the value was made by `into_handle` for the output and
        // was never given to C.
        unsafe { free_handle(self) }
    }
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

/// The body of every `pki_<object>_free`: frees a handle inside the panic
/// boundary. NULL is accepted.
///
/// # Safety
///
/// As for [`free_handle`].
pub(crate) unsafe fn free<T>(ptr: *mut T) {
    // SAFETY: our caller's contract.
    crate::error::boundary_value((), || unsafe { free_handle(ptr) })
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

/// The operating system's RNG: keys and serials need real randomness.
/// Failing to read it panics, which the boundary turns into
/// `PKI_RESULT_PANIC`. pki-core's own type, so that P-256 keys are made and
/// signed with ring (see `pki_core::OsRng`).
pub(crate) fn os_rng() -> pki_core::OsRng {
    pki_core::os_rng()
}

/// The body of every getter: reads something from the object behind a
/// handle inside the panic boundary; NULL (or a panic) gives `fallback`.
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
