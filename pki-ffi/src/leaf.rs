//! Serving and client certificates: a builder for the request, and
//! reconciliation of one leaf against a signer.
//!
//! Each leaf lives outside the signer state (in Kubernetes, each serving
//! certificate is its own Secret): the caller passes the leaf it has (chain
//! and key PEM) and gets back what it should have, with the reason.

use crate::abi::{
    bytes_in, free_handle, getter, handle, handle_mut, into_handle, os_rng, out_ptr, seconds,
    str_in, time_in, time_out, write_out,
};
use crate::buffer::{CText, pki_bytes};
use crate::error::{Failure, boundary, boundary_value, pki_result};
use crate::signer::pki_signer;
use pki_core::{Certificate, PrivateKey};
use pki_rotate::signer::reconcile_external;
use pki_rotate::{DEFAULT_LEAF_LIFETIME, IssuedLeaf};
use pki_rotate::{LeafKind, LeafReason, LeafRequest};
use std::ffi::c_char;
use std::net::IpAddr;

/// What a leaf certificate is for.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum pki_leaf_kind {
    /// TLS server (extendedKeyUsage serverAuth).
    PKI_LEAF_KIND_SERVER = 0,
    /// TLS client (clientAuth).
    PKI_LEAF_KIND_CLIENT = 1,
    /// Both serverAuth and clientAuth.
    PKI_LEAF_KIND_SERVER_CLIENT = 2,
}

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

/// Collects the request of a leaf: kind, names, lifetime.
/// `pki_leaf_builder_build` consumes it; afterwards every call on it returns
/// `PKI_RESULT_BUILDER_CONSUMED` until it is freed.
///
/// Not synchronised: use from one thread at a time. Free with
/// `pki_leaf_builder_free` (also after building).
pub struct pki_leaf_builder {
    request: Option<LeafRequest>,
}

impl pki_leaf_builder {
    fn request(&mut self) -> Result<&mut LeafRequest, Failure> {
        self.request.as_mut().ok_or_else(consumed)
    }
}

fn consumed() -> Failure {
    Failure::new(
        pki_result::PKI_RESULT_BUILDER_CONSUMED,
        "the leaf builder was already consumed by pki_leaf_builder_build",
    )
}

/// A leaf request: immutable, reusable for every reconcile of the same leaf,
/// usable from several threads at once. Free with `pki_leaf_request_free`.
pub struct pki_leaf_request {
    pub(crate) request: LeafRequest,
}

/// Starts a leaf request of `kind` (a `pki_leaf_kind`), without names, with
/// the default lifetime (365 days, cut at the CA's NotAfter).
///
/// On success the caller owns `*out_builder` and frees it with
/// `pki_leaf_builder_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (unknown kind) or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `out_builder` must be NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_leaf_builder_new(
    kind: u32,
    out_builder: *mut *mut pki_leaf_builder,
) -> pki_result {
    boundary(|| {
        out_ptr(out_builder, "out_builder")?;
        let kind = match kind {
            0 => LeafKind::Server,
            1 => LeafKind::Client,
            2 => LeafKind::ServerClient,
            other => {
                return Err(Failure::invalid(format!(
                    "leaf kind {other} is not a pki_leaf_kind (0 server, 1 client, 2 both)"
                )));
            }
        };
        let builder = into_handle(pki_leaf_builder {
            request: Some(LeafRequest {
                kind,
                dns_names: Vec::new(),
                ip_addresses: Vec::new(),
                lifetime: DEFAULT_LEAF_LIFETIME,
            }),
        });
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_builder, builder) };
        Ok(())
    })
}

/// Adds a DNS subjectAltName (`name_len` bytes of UTF-8, no NUL needed).
/// The first DNS name is also the subject's commonName.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (empty, not UTF-8),
/// `PKI_RESULT_BUILDER_CONSUMED` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `builder` must be NULL or a live `pki_leaf_builder` not used by another
/// thread during the call; `name` NULL or valid for `name_len` bytes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_leaf_builder_add_dns_name(
    builder: *mut pki_leaf_builder,
    name: *const c_char,
    name_len: usize,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle used by this thread only (contract).
        let builder = unsafe { handle_mut(builder, "builder") }?;
        // SAFETY: pointer and length from the caller (contract).
        let name = unsafe { str_in(name, name_len, "name") }?;
        let request = builder.request()?;
        if name.is_empty() {
            return Err(Failure::invalid("DNS name is empty"));
        }
        request.dns_names.push(name.to_string());
        Ok(())
    })
}

/// Adds an IP address subjectAltName, given as text (`10.0.0.1`, `::1`).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (not an IP address),
/// `PKI_RESULT_BUILDER_CONSUMED` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// As for `pki_leaf_builder_add_dns_name`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_leaf_builder_add_ip_address(
    builder: *mut pki_leaf_builder,
    ip: *const c_char,
    ip_len: usize,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle used by this thread only (contract).
        let builder = unsafe { handle_mut(builder, "builder") }?;
        // SAFETY: pointer and length from the caller (contract).
        let text = unsafe { str_in(ip, ip_len, "ip") }?;
        let request = builder.request()?;
        let ip: IpAddr = text
            .parse()
            .map_err(|_| Failure::invalid(format!("\"{text}\" is not an IP address")))?;
        request.ip_addresses.push(ip);
        Ok(())
    })
}

/// Sets the requested lifetime in seconds (positive; the certificate's
/// NotAfter is still cut at the CA's NotAfter).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (not positive),
/// `PKI_RESULT_BUILDER_CONSUMED` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `builder` must be NULL or a live `pki_leaf_builder` not used by another
/// thread during the call.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_leaf_builder_set_lifetime(
    builder: *mut pki_leaf_builder,
    lifetime_seconds: i64,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle used by this thread only (contract).
        let builder = unsafe { handle_mut(builder, "builder") }?;
        let request = builder.request()?;
        if lifetime_seconds <= 0 {
            return Err(Failure::invalid(format!(
                "lifetime must be positive, got {lifetime_seconds} s"
            )));
        }
        request.lifetime = seconds(lifetime_seconds);
        Ok(())
    })
}

/// Finishes the request. Consumes the builder's contents: later calls on
/// `builder` (other than `pki_leaf_builder_free`) return
/// `PKI_RESULT_BUILDER_CONSUMED`. The builder itself must still be freed.
///
/// On success the caller owns `*out_request` and frees it with
/// `pki_leaf_request_free`. On failure the builder is not consumed.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (no DNS name and no IP address),
/// `PKI_RESULT_BUILDER_CONSUMED` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `builder` must be NULL or a live `pki_leaf_builder` not used by another
/// thread during the call; `out_request` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_leaf_builder_build(
    builder: *mut pki_leaf_builder,
    out_request: *mut *mut pki_leaf_request,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle used by this thread only (contract).
        let builder = unsafe { handle_mut(builder, "builder") }?;
        out_ptr(out_request, "out_request")?;
        let request = builder.request()?;
        if request.dns_names.is_empty() && request.ip_addresses.is_empty() {
            return Err(Failure::invalid(
                "a leaf needs at least one DNS name or IP address",
            ));
        }
        let request = builder.request.take().ok_or_else(consumed)?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_request, into_handle(pki_leaf_request { request })) };
        Ok(())
    })
}

/// Frees a builder, consumed or not. NULL is accepted (nothing happens).
///
/// # Safety
///
/// `builder` must be NULL or a live `pki_leaf_builder` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_leaf_builder_free(builder: *mut pki_leaf_builder) {
    // SAFETY: NULL or a live handle freed once (contract).
    boundary_value((), || unsafe { free_handle(builder) })
}

/// Frees a leaf request. NULL is accepted (nothing happens).
///
/// # Safety
///
/// `request` must be NULL or a live `pki_leaf_request` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_leaf_request_free(request: *mut pki_leaf_request) {
    // SAFETY: NULL or a live handle freed once (contract).
    boundary_value((), || unsafe { free_handle(request) })
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
/// `PKI_RESULT_INVALID_ARGUMENT` (only one of the previous chain and key),
/// `PKI_RESULT_PEM`, `PKI_RESULT_UNEXPECTED_PEM_LABEL`,
/// `PKI_RESULT_NO_PEM_BLOCK`, `PKI_RESULT_CERTIFICATE_DECODE`,
/// `PKI_RESULT_MALFORMED_EXTENSION`, `PKI_RESULT_KEY_DECODE`,
/// `PKI_RESULT_UNSUPPORTED_KEY`, `PKI_RESULT_RSA_KEY_TOO_SMALL`,
/// `PKI_RESULT_KEY_MISMATCH`, `PKI_RESULT_TIME`, `PKI_RESULT_ISSUANCE`
/// (e.g. the CA is not valid at `now`), `PKI_RESULT_EXPIRED`,
/// `PKI_RESULT_CRYPTO` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer`; `request` NULL or a live
/// `pki_leaf_request`; `prev_chain_pem` NULL or valid for `prev_chain_pem_len`
/// bytes; `prev_key_pem` NULL or valid for `prev_key_pem_len` bytes;
/// `out_leaf` NULL or valid for one write.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pki_leaf_reconcile(
    signer: *const pki_signer,
    request: *const pki_leaf_request,
    now: i64,
    prev_chain_pem: *const u8,
    prev_chain_pem_len: usize,
    prev_key_pem: *const u8,
    prev_key_pem_len: usize,
    out_leaf: *mut *mut pki_leaf,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let signer = unsafe { handle(signer, "signer") }?;
        // SAFETY: NULL or a live handle (contract).
        let request = unsafe { handle(request, "request") }?;
        out_ptr(out_leaf, "out_leaf")?;
        let previous = match (prev_chain_pem.is_null(), prev_key_pem.is_null()) {
            (true, true) => None,
            (false, false) => {
                // SAFETY: pointer and length from the caller (contract).
                let chain =
                    unsafe { bytes_in(prev_chain_pem, prev_chain_pem_len, "prev_chain_pem") }?;
                // SAFETY: pointer and length from the caller (contract).
                let key = unsafe { bytes_in(prev_key_pem, prev_key_pem_len, "prev_key_pem") }?;
                Some(previous_leaf(chain, key)?)
            }
            _ => {
                return Err(Failure::invalid(
                    "give both prev_chain_pem and prev_key_pem, or neither",
                ));
            }
        };
        let now = time_in(now, "now")?;
        let outcome = reconcile_external(
            &signer.state,
            &request.request,
            previous,
            now,
            &mut os_rng(),
        )?;
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
        let out = pki_leaf {
            chain_pem: CText::new(&chain),
            key_pem: CText::new(&key),
            reason,
            reason_message: CText::new(&message),
            not_after: time_out(issued.cert.not_after()),
            refresh_at: time_out(outcome.refresh_at),
        };
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_leaf, into_handle(out)) };
        Ok(())
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
    boundary_value((), || unsafe { free_handle(leaf) })
}
