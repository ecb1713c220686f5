//! Serving and client certificates kept outside the signer: reconciliation
//! of one leaf against a signer.
//!
//! Each leaf lives outside the signer state (in Kubernetes, each serving
//! certificate is its own Secret): the caller passes the leaf it has (chain
//! and key PEM) and gets back what it should have, with the reason.

use crate::abi::{handle, into_handle, json_in, opt_bytes, os_rng, time_in, time_out};
use crate::buffer::pki_buffer;
use crate::error::{Failure, pki_result};
use crate::signer::pki_signer;
use pki_core::{Certificate, PrivateKey};
use pki_rotate::IssuedLeaf;
use pki_rotate::LeafReason;
use pki_rotate::request::LeafRequestIn;
use pki_rotate::signer::reconcile_external;
use std::ffi::c_char;
use zeroize::Zeroizing;

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

/// The outcome of `pki_leaf_reconcile`, the JSON object its buffer holds:
/// the leaf to serve, its key, and why it changed.
#[derive(serde::Serialize)]
struct LeafResult<'a> {
    /// The schema version (`pki_rotate::request::REQUEST_VERSION`).
    version: u32,
    /// The serving chain (leaf first, then bridge B when needed), PEM.
    chain_pem: &'a str,
    /// The leaf's private key, PKCS#8 PEM.
    key_pem: &'a str,
    /// The leaf's NotAfter (Unix seconds).
    not_after: i64,
    /// When the leaf becomes due for re-issue (Unix seconds).
    refresh_at: i64,
    /// A `pki_leaf_reason`.
    reason_code: u32,
    /// The reason as one line of text.
    reason_message: &'a str,
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
/// On success the caller owns `*out_leaf` and frees it with
/// `pki_buffer_free` (which zeroes it): one JSON object,
///
/// ```json
/// {"version": 1, "chain_pem": "-----BEGIN CERTIFICATE-----…",
///  "key_pem": "-----BEGIN PRIVATE KEY-----…", "not_after": 1798761600,
///  "refresh_at": 1792454400, "reason_code": 1,
///  "reason_message": "not yet issued"}
/// ```
///
/// `chain_pem`: the serving chain, leaf first; `key_pem`: its key;
/// `not_after`: the leaf's NotAfter, `refresh_at`: when it becomes due for
/// re-issue (NotAfter minus the refresh fraction of its lifetime), both
/// Unix seconds; `reason_code`: a `pki_leaf_reason` (`PKI_LEAF_UP_TO_DATE`
/// when the leaf given is returned as it is); `reason_message`: the reason
/// as one line (`"up to date"`, `"expires soon (…)"`…).
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
    out_leaf: *mut *mut pki_buffer,
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
) -> Result<pki_buffer, Failure> {
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
    let result = LeafResult {
        version: pki_rotate::request::REQUEST_VERSION,
        chain_pem: &chain,
        key_pem: &key,
        not_after: time_out(issued.cert.not_after()),
        refresh_at: time_out(outcome.refresh_at),
        reason_code: reason as u32,
        reason_message: &message,
    };
    let json = Zeroizing::new(
        serde_json::to_vec(&result)
            .map_err(|e| Failure::new(pki_result::PKI_RESULT_UNEXPECTED, e.to_string()))?,
    );
    Ok(pki_buffer::new(&json))
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
