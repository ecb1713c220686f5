//! Owned byte buffers handed to C, and borrowed byte views.

use crate::abi::{free, getter};
use zeroize::Zeroizing;

/// Bytes returned by the library (PEM, state documents, pins). May hold
/// private keys: the memory is zeroed when the buffer is freed. A NUL byte
/// follows the data, so textual buffers can be used as C strings.
///
/// Read with `pki_buffer_data`; free once with `pki_buffer_free`.
pub struct pki_buffer {
    bytes: CText,
}

impl pki_buffer {
    pub(crate) fn new(bytes: &[u8]) -> Self {
        pki_buffer {
            bytes: CText::from_bytes(bytes),
        }
    }
}

/// A borrowed view of bytes owned by a library object. `data` is NULL and
/// `len` 0 when there is nothing to view. Textual data (PEM, messages) is
/// also NUL-terminated after `len` bytes, so `data` can be printed as a C
/// string; `len` excludes that NUL.
///
/// Borrowed: valid until the object it was read from is freed. Do not free it.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pki_bytes {
    /// First byte, or NULL.
    pub data: *const u8,
    /// Number of bytes.
    pub len: usize,
}

impl pki_bytes {
    pub(crate) const EMPTY: pki_bytes = pki_bytes {
        data: std::ptr::null(),
        len: 0,
    };

    /// A view of `bytes`; `bytes` must outlive every use of the view.
    pub(crate) fn of(bytes: &[u8]) -> pki_bytes {
        pki_bytes {
            data: bytes.as_ptr(),
            len: bytes.len(),
        }
    }

    /// A view of text stored with a trailing NUL (which the view excludes).
    pub(crate) fn of_nul_terminated(text_with_nul: &[u8]) -> pki_bytes {
        match text_with_nul.split_last() {
            Some((0, text)) => pki_bytes {
                data: text_with_nul.as_ptr(),
                len: text.len(),
            },
            _ => pki_bytes::of(text_with_nul),
        }
    }
}

/// Text kept with a trailing NUL, so that views of it are C strings too.
#[derive(Debug, Clone, Default)]
pub(crate) struct CText(Zeroizing<Vec<u8>>);

impl CText {
    pub(crate) fn new(text: &str) -> Self {
        Self::from_bytes(text.as_bytes())
    }

    pub(crate) fn from_bytes(bytes: &[u8]) -> Self {
        let mut v = Zeroizing::new(Vec::with_capacity(bytes.len() + 1));
        v.extend_from_slice(bytes);
        v.push(0);
        CText(v)
    }

    pub(crate) fn view(&self) -> pki_bytes {
        pki_bytes::of_nul_terminated(&self.0)
    }

    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.0.split_last().map(|(_, t)| t).unwrap_or(&[])
    }
}

/// The bytes of a buffer.
///
/// Borrowed: valid until `buffer` is freed. NULL is accepted and gives an
/// empty view (`data` NULL, `len` 0).
///
/// # Safety
///
/// `buffer` must be NULL or a live `pki_buffer`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_buffer_data(buffer: *const pki_buffer) -> pki_bytes {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(buffer, pki_bytes::EMPTY, |b| b.bytes.view()) }
}

/// Frees a buffer and zeroes its memory. NULL is accepted (nothing happens).
///
/// The caller owned `buffer`; it must not be used afterwards.
///
/// # Safety
///
/// `buffer` must be NULL or a live `pki_buffer` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_buffer_free(buffer: *mut pki_buffer) {
    // SAFETY: NULL or a live handle freed once (contract).
    unsafe { free(buffer) }
}
