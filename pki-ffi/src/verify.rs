//! Path validation of a serving or client chain against a bundle.

use crate::abi::{bytes_in, handle, into_handle, opt_str, time_in};
use crate::buffer::pki_buffer;
use crate::bundle::pki_bundle;
use crate::error::{Failure, pki_result};
use pki_core::{Certificate, ExpectedName, Purpose, VerifyOptions, verify_chain};
use std::ffi::c_char;

/// What the leaf of a chain is verified for.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum pki_purpose {
    /// TLS server authentication (extendedKeyUsage serverAuth).
    PKI_PURPOSE_SERVER_AUTH = 0,
    /// TLS client authentication (clientAuth).
    PKI_PURPOSE_CLIENT_AUTH = 1,
}

/// Verifies a chain against a bundle at time `at` (Unix seconds) by RFC 5280
/// path validation: every path from the leaf through the other certificates
/// of `chain_pem` (untrusted intermediates, such as bridge B) to any member
/// of `bundle` is tried; signatures, validity at `at`, CA constraints, key
/// usage, extended key usage for `purpose` (a `pki_purpose`) and, when
/// `name` is not NULL, the name (a DNS name or an IP address literal,
/// matched against the leaf's subjectAltNames) are checked.
///
/// `chain_pem` holds the leaf first, then any intermediates. `bundle`,
/// `chain_pem` and `name` are borrowed for the call; `name` NULL (length
/// ignored) skips the name check.
///
/// On success (the chain verifies) the caller owns `*out_path`, the PEM of
/// the path found (leaf first, trust anchor last), and frees it with
/// `pki_buffer_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (purpose, UTF-8), `PKI_RESULT_TIME`, the
/// parse codes of `pki_bundle_from_pem` for `chain_pem`, one of the
/// `PKI_RESULT_VERIFY_*` codes (500-599) saying why the chain does not
/// verify, or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `bundle` must be NULL or a live `pki_bundle`; `chain_pem` NULL or valid
/// for `chain_pem_len` bytes; `name` NULL or valid for `name_len` bytes;
/// `out_path` NULL or valid for one write.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pki_verify_chain(
    bundle: *const pki_bundle,
    chain_pem: *const u8,
    chain_pem_len: usize,
    at: i64,
    purpose: u32,
    name: *const c_char,
    name_len: usize,
    out_path: *mut *mut pki_buffer,
) -> pki_result {
    ffi!(out_path => {
        bundle = handle(bundle, "bundle");
        pem = bytes_in(chain_pem, chain_pem_len, "chain_pem");
        name = opt_str(name, name_len, "name");
        at = time_in(at, "at");
    } {
        let purpose = match purpose {
            0 => Purpose::ServerAuth,
            1 => Purpose::ClientAuth,
            other => {
                return Err(Failure::invalid(format!(
                    "purpose {other} is not a pki_purpose (0 server, 1 client)"
                )));
            }
        };
        let mut chain = Certificate::all_from_pem(pem)?;
        if chain.is_empty() {
            return Err(pki_core::Error::NoPemBlock { what: "chain" }.into());
        }
        let leaf = chain.remove(0);
        let mut opts = VerifyOptions::new(at, purpose);
        opts.name = name.map(|n| ExpectedName::Dns(n.to_string()));
        let path = verify_chain(&leaf, &chain, &bundle.bundle, &opts)?;
        let pem: String = path.certs.iter().map(Certificate::to_pem).collect();
        Ok::<_, Failure>(into_handle(pki_buffer::new(pem.as_bytes())))
    })
}
