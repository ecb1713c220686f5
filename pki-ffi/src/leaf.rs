//! Serving and client certificates kept outside the signer: reconciliation
//! of one leaf against a signer.
//!
//! Each leaf lives outside the signer state (in Kubernetes, each serving
//! certificate is its own Secret): the caller passes the leaf it has (chain
//! and key PEM) and gets back what it should have, with the reason.

use crate::abi::{
    free, getter, handle, into_handle, json_in, opt_bytes, os_rng, time_in, time_out,
};
use crate::buffer::{CText, pki_bytes};
use crate::error::{Failure, pki_result};
use crate::signer::pki_signer;
use pki_core::{Certificate, PrivateKey};
use pki_rotate::IssuedLeaf;
use pki_rotate::LeafReason;
use pki_rotate::request::LeafRequestIn;
use pki_rotate::signer::reconcile_external;
use std::ffi::c_char;

/// Why `pki_leaf_reconcile` (re-)issued a leaf, or that it did not.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum pki_leaf_reason {
    /// The leaf given is up to date and is returned as it is.
    PKI_LEAF_UP_TO_DATE = 0,
    /// No leaf was given: a first one was issued.
    PKI_LEAF_NOT_YET_ISSUED = 1,
    /// The CA was rotated in the same step.
    PKI_LEAF_ISSUER_ROTATED = 2,
    /// The leaf was not issued by the current CA (AKI differs from its SKI).
    PKI_LEAF_WRONG_ISSUER = 3,
    /// Less than the refresh fraction of its lifetime remains.
    PKI_LEAF_NEAR_EXPIRY = 4,
    /// The requested names or kind changed.
    PKI_LEAF_REQUEST_CHANGED = 5,
}

/// The outcome of `pki_leaf_reconcile`: the leaf to serve, its key, and why
/// it changed. Immutable. Free with `pki_leaf_free`; the key is zeroed then.
pub struct pki_leaf {
    chain_pem: CText,
    key_pem: CText,
    reason: pki_leaf_reason,
    reason_message: CText,
    not_after: i64,
    refresh_at: i64,
}

fn reason_code(reason: &LeafReason) -> pki_leaf_reason {
    match reason {
        LeafReason::NotYetIssued => pki_leaf_reason::PKI_LEAF_NOT_YET_ISSUED,
        LeafReason::IssuerRotated => pki_leaf_reason::PKI_LEAF_ISSUER_ROTATED,
        LeafReason::WrongIssuer { .. } => pki_leaf_reason::PKI_LEAF_WRONG_ISSUER,
        LeafReason::NearExpiry { .. } => pki_leaf_reason::PKI_LEAF_NEAR_EXPIRY,
        LeafReason::RequestChanged => pki_leaf_reason::PKI_LEAF_REQUEST_CHANGED,
        // No life left is the end of the refresh window.
        LeafReason::Expired { .. } => pki_leaf_reason::PKI_LEAF_NEAR_EXPIRY,
        // A new kind is a changed request; `pki_leaf_reconcile` never renews
        // on request, and a renewal asked for is a changed request too.
        // A reason added later reads as a changed request until it has a
        // code of its own.
        LeafReason::KindChanged { .. } | LeafReason::Renewed | _ => {
            pki_leaf_reason::PKI_LEAF_REQUEST_CHANGED
        }
    }
}

/// Reconciles one leaf against the signer's current CA at `now` (Unix
/// seconds), the way `pki rotate` does for the leaves it keeps: the leaf is
/// re-issued (new key) when none is given, when it was not issued by the
/// current CA (AKI != SKI, e.g. after a rotation), when its names or kind no
/// longer match the request, or when less than the signer policy's refresh
/// fraction of its lifetime remains; otherwise it is returned as it is.
///
/// `request` is `request_len` bytes of JSON, the leaf request every leaf
/// function takes: `{"kind": "server", "dns_names": ["web.example"],
/// "ip_addresses": ["10.0.0.1"], "lifetime_seconds": 31536000}` (`kind`:
/// `"server"`, `"client"` or `"server+client"`; at least one name; the
/// first DNS name is also the subject's commonName; the lifetime, 365 days
/// by default, is cut at the CA's NotAfter).
///
/// `prev_chain_pem` (the serving chain, leaf first) and `prev_key_pem` are
/// the leaf the caller has now; pass both NULL (lengths ignored) when there
/// is none yet. They are borrowed for the call. An unreadable previous leaf
/// is an error, not a silent re-issue: pass NULL to replace it.
///
/// The result's chain is the leaf followed by bridge B when the leaf comes
/// from the current CA and a bridge exists (so clients that still trust only
/// the previous CA accept it); its key is PKCS#8 PEM.
///
/// On success the caller owns `*out_leaf` and frees it with `pki_leaf_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (a malformed request: unknown kind, an
/// empty DNS name, a bad IP address, no name, a lifetime that is not
/// positive; only one of the previous chain and key), `PKI_RESULT_PEM`,
/// `PKI_RESULT_UNEXPECTED_PEM_LABEL`, `PKI_RESULT_NO_PEM_BLOCK`,
/// `PKI_RESULT_CERTIFICATE_DECODE`, `PKI_RESULT_MALFORMED_EXTENSION`,
/// `PKI_RESULT_KEY_DECODE`, `PKI_RESULT_UNSUPPORTED_KEY`,
/// `PKI_RESULT_RSA_KEY_TOO_SMALL`, `PKI_RESULT_KEY_MISMATCH`,
/// `PKI_RESULT_TIME`, `PKI_RESULT_ISSUANCE` (e.g. the CA is not valid at
/// `now`), `PKI_RESULT_EXPIRED`, `PKI_RESULT_CRYPTO` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer`; `request` NULL or valid
/// for `request_len` bytes; `prev_chain_pem` NULL or valid for
/// `prev_chain_pem_len` bytes; `prev_key_pem` NULL or valid for
/// `prev_key_pem_len` bytes; `out_leaf` NULL or valid for one write.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pki_leaf_reconcile(
    signer: *const pki_signer,
    request: *const c_char,
    request_len: usize,
    now: i64,
    prev_chain_pem: *const u8,
    prev_chain_pem_len: usize,
    prev_key_pem: *const u8,
    prev_key_pem_len: usize,
    out_leaf: *mut *mut pki_leaf,
) -> pki_result {
    ffi!(out_leaf => {
        signer = handle(signer, "signer");
        request = json_in::<LeafRequestIn>(request, request_len, "request");
        chain = opt_bytes(prev_chain_pem, prev_chain_pem_len, "prev_chain_pem");
        key = opt_bytes(prev_key_pem, prev_key_pem_len, "prev_key_pem");
        now = time_in(now, "now");
    } reconcile(signer, &request, chain, key, now).map(into_handle))
}

fn reconcile(
    signer: &pki_signer,
    request: &LeafRequestIn,
    chain: Option<&[u8]>,
    key: Option<&[u8]>,
    now: time::OffsetDateTime,
) -> Result<pki_leaf, Failure> {
    let request = request.request()?;
    let previous = match (chain, key) {
        (None, None) => None,
        (Some(chain), Some(key)) => Some(previous_leaf(chain, key)?),
        _ => {
            return Err(Failure::invalid(
                "give both prev_chain_pem and prev_key_pem, or neither",
            ));
        }
    };
    let outcome = reconcile_external(&signer.state, &request, previous, now, &mut os_rng())?;
    let (reason, message) = match &outcome.reason {
        Some(r) => (reason_code(r), r.to_string()),
        None => (
            pki_leaf_reason::PKI_LEAF_UP_TO_DATE,
            "up to date".to_string(),
        ),
    };
    let issued = &outcome.issued;
    let chain: String = outcome.chain.iter().map(Certificate::to_pem).collect();
    let key = issued.key.to_pkcs8_pem()?;
    Ok(pki_leaf {
        chain_pem: CText::new(&chain),
        key_pem: CText::new(&key),
        reason,
        reason_message: CText::new(&message),
        not_after: time_out(issued.cert.not_after()),
        refresh_at: time_out(outcome.refresh_at),
    })
}

fn previous_leaf(chain_pem: &[u8], key_pem: &[u8]) -> Result<IssuedLeaf, Failure> {
    let cert = crate::signer::first_certificate(chain_pem)?;
    let key = PrivateKey::from_pem(key_pem)?;
    if !key.matches(cert.public_key()) {
        return Err(pki_core::Error::KeyMismatch {
            certificate: cert.id(),
        }
        .into());
    }
    Ok(IssuedLeaf { cert, key })
}

/// The serving chain (leaf first, then bridge B when needed) as PEM.
/// Borrowed: valid until `leaf` is freed. NULL gives an empty view.
///
/// # Safety
///
/// `leaf` must be NULL or a live `pki_leaf`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_leaf_chain_pem(leaf: *const pki_leaf) -> pki_bytes {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(leaf, pki_bytes::EMPTY, |l| l.chain_pem.view()) }
}

/// The leaf's private key as PKCS#8 PEM. Borrowed: valid until `leaf` is
/// freed (which zeroes it). NULL gives an empty view.
///
/// # Safety
///
/// `leaf` must be NULL or a live `pki_leaf`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_leaf_key_pem(leaf: *const pki_leaf) -> pki_bytes {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(leaf, pki_bytes::EMPTY, |l| l.key_pem.view()) }
}

/// Why the leaf was (re-)issued; `PKI_LEAF_UP_TO_DATE` when it was not.
/// NULL gives `PKI_LEAF_UP_TO_DATE`.
///
/// # Safety
///
/// `leaf` must be NULL or a live `pki_leaf`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_leaf_reason_code(leaf: *const pki_leaf) -> pki_leaf_reason {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(leaf, pki_leaf_reason::PKI_LEAF_UP_TO_DATE, |l| l.reason) }
}

/// The reason as one line of text (`"up to date"`, `"expires soon (…)"`…).
/// Borrowed: valid until `leaf` is freed. NULL gives an empty view.
///
/// # Safety
///
/// `leaf` must be NULL or a live `pki_leaf`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_leaf_reason_message(leaf: *const pki_leaf) -> pki_bytes {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(leaf, pki_bytes::EMPTY, |l| l.reason_message.view()) }
}

/// The leaf's NotAfter (Unix seconds). NULL gives 0.
///
/// # Safety
///
/// `leaf` must be NULL or a live `pki_leaf`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_leaf_not_after(leaf: *const pki_leaf) -> i64 {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(leaf, 0, |l| l.not_after) }
}

/// When the leaf becomes due for re-issue (Unix seconds): NotAfter minus
/// the refresh fraction of its lifetime. NULL gives 0.
///
/// # Safety
///
/// `leaf` must be NULL or a live `pki_leaf`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_leaf_refresh_at(leaf: *const pki_leaf) -> i64 {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(leaf, 0, |l| l.refresh_at) }
}

/// Frees a leaf and zeroes its key. NULL is accepted (nothing happens).
/// Views read from it must not be used afterwards.
///
/// # Safety
///
/// `leaf` must be NULL or a live `pki_leaf` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_leaf_free(leaf: *mut pki_leaf) {
    // SAFETY: NULL or a live handle freed once (contract).
    unsafe { free(leaf) }
}
