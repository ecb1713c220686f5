//! CAs signed by someone else's root: import, validation of a replacement
//! (the report as JSON data), and rotation of a signer to a supplied CA.
//!
//! Every PEM argument is pointer + length; the key and the chain may be
//! NULL (the key and the chain may also sit in the CA's own PEM, as
//! StarlingX uploads them).

use crate::abi::{bytes_in, handle, into_handle, os_rng, out_ptr, str_in, time_in, write_out};
use crate::buffer::pki_buffer;
use crate::error::{Failure, boundary, pki_result};
use crate::signer::{pki_policy, pki_policy_default, pki_signer};
use pki_core::{CaImport, KeyAlgorithm};
use pki_rotate::{Engine, ExternalEngine, ExternalInput, Replacement, ServiceAccountKeys};
use std::ffi::c_char;

/// Reads the CA, its optional key file and optional chain file.
///
/// # Safety
///
/// Each pointer NULL (for `ca`: refused) or valid for its length.
unsafe fn import_in(
    ca: *const u8,
    ca_len: usize,
    key: *const u8,
    key_len: usize,
    chain: *const u8,
    chain_len: usize,
) -> Result<CaImport, Failure> {
    // SAFETY: pointer and length from the caller (contract of the callers).
    let ca = unsafe { bytes_in(ca, ca_len, "ca") }?;
    let key = if key.is_null() {
        None
    } else {
        // SAFETY: non-NULL, valid for key_len bytes (contract).
        Some(unsafe { bytes_in(key, key_len, "key") }?)
    };
    let chain = if chain.is_null() {
        None
    } else {
        // SAFETY: non-NULL, valid for chain_len bytes (contract).
        Some(unsafe { bytes_in(chain, chain_len, "chain") }?)
    };
    Ok(CaImport::parse(ca, key, chain)?)
}

/// Creates a signer whose CA is an imported one: `ca` holds its
/// certificate (and possibly its key and the chain above it, issuer first),
/// `key` and `chain` are separate PEM inputs or NULL. The bundle holds the
/// chain's root; serving chains carry the CA and the intermediates.
///
/// On success the caller owns `*out_signer` and frees it once with
/// `pki_signer_free`; on failure `*out_signer` is not written.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`, `PKI_RESULT_PEM`,
/// `PKI_RESULT_KEY_DECODE`, `PKI_RESULT_UNSUPPORTED_KEY`,
/// `PKI_RESULT_KEY_MISMATCH`, `PKI_RESULT_NOT_A_CA`, `PKI_RESULT_IMPORT`
/// (two keys, a key without a certificate, an encrypted key, a chain out of
/// order or without its root), `PKI_RESULT_VALIDATION_FAILED` (no chain
/// for a CA that needs one), `PKI_RESULT_INVALID_POLICY` or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `ca` must be NULL or valid for `ca_len` bytes, `key` and `chain` NULL or
/// valid for their lengths; `policy` NULL or a valid `pki_policy`;
/// `out_signer` NULL or valid for one write.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pki_signer_import(
    ca: *const u8,
    ca_len: usize,
    key: *const u8,
    key_len: usize,
    chain: *const u8,
    chain_len: usize,
    policy: *const pki_policy,
    now: i64,
    out_signer: *mut *mut pki_signer,
) -> pki_result {
    boundary(|| {
        out_ptr(out_signer, "out_signer")?;
        // SAFETY: pointers and lengths from the caller (contract above).
        let import = unsafe { import_in(ca, ca_len, key, key_len, chain, chain_len) }?;
        // SAFETY: NULL or a valid pki_policy (contract).
        let policy = unsafe { policy.as_ref() }
            .copied()
            .unwrap_or_else(|| pki_policy_default())
            .to_signer_policy(KeyAlgorithm::EcdsaP256)?;
        let now = time_in(now, "now")?;
        let state = pki_rotate::SignerState::import(&import, policy, now)?;
        // SAFETY: checked non-NULL by out_ptr; valid for a write (contract).
        unsafe { write_out(out_signer, into_handle(pki_signer::loaded(state))) };
        Ok(())
    })
}

/// Validates a proposed replacement of `signer`'s CA at `now` and writes
/// the report as JSON: `{"ok": bool, "checks": [{"name", "ok", "detail"}]}`
/// (names: key-matches, is-ca, chain-supplied, chains-to-current-trust,
/// valid-for-24h, service-account-key-kept). A failing check is data, not
/// an error: the result is `PKI_RESULT_OK` whenever the report was made.
///
/// `signer` is borrowed. On success the caller owns `*out_report` and frees
/// it once with `pki_buffer_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`, the PEM and import
/// results of `pki_signer_import`, or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer`; `ca`, `key`, `chain` as
/// for `pki_signer_import`; `out_report` NULL or valid for one write.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pki_signer_validate_replacement(
    signer: *const pki_signer,
    ca: *const u8,
    ca_len: usize,
    key: *const u8,
    key_len: usize,
    chain: *const u8,
    chain_len: usize,
    now: i64,
    out_report: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let signer = unsafe { handle(signer, "signer") }?;
        out_ptr(out_report, "out_report")?;
        // SAFETY: pointers and lengths from the caller (contract).
        let import = unsafe { import_in(ca, ca_len, key, key_len, chain, chain_len) }?;
        let now = time_in(now, "now")?;
        let report = pki_rotate::validate_replacement(
            &signer.state,
            &import,
            &ServiceAccountKeys::default(),
            now,
        );
        let json = serde_json::to_vec(&report)
            .map_err(|e| Failure::invalid(format!("report encoding: {e}")))?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_report, into_handle(pki_buffer::new(&json))) };
        Ok(())
    })
}

/// Rotates `signer` to a supplied CA: validates it, refuses it when a check
/// fails unless `force` (a non-empty reason, recorded with every overridden
/// check in the history) is given, then re-issues every leaf. A
/// self-signed replacement is bridged both ways with the current CA's key
/// (when the current CA's chain and pathLenConstraints allow one more CA
/// below it); `signer` itself is not changed.
///
/// On success the caller owns `*out_signer` (the rotated signer) and frees
/// it once with `pki_signer_free`; on failure it is not written.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (`force` not UTF-8), the PEM and import
/// results of `pki_signer_import`, `PKI_RESULT_VALIDATION_FAILED`,
/// `PKI_RESULT_EMPTY_FORCED_REASON`, `PKI_RESULT_TRUST_CHECK_FAILED`,
/// `PKI_RESULT_ISSUANCE`, `PKI_RESULT_CRYPTO` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer`; `ca`, `key`, `chain` as
/// for `pki_signer_import`; `force` NULL or valid for `force_len` bytes;
/// `out_signer` NULL or valid for one write.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pki_signer_rotate_to(
    signer: *const pki_signer,
    ca: *const u8,
    ca_len: usize,
    key: *const u8,
    key_len: usize,
    chain: *const u8,
    chain_len: usize,
    force: *const c_char,
    force_len: usize,
    now: i64,
    out_signer: *mut *mut pki_signer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let signer = unsafe { handle(signer, "signer") }?;
        out_ptr(out_signer, "out_signer")?;
        // SAFETY: pointers and lengths from the caller (contract).
        let import = unsafe { import_in(ca, ca_len, key, key_len, chain, chain_len) }?;
        let force = if force.is_null() {
            None
        } else {
            // SAFETY: non-NULL, valid for force_len bytes (contract).
            Some(unsafe { str_in(force, force_len, "force") }?.to_string())
        };
        let now = time_in(now, "now")?;
        let input = ExternalInput::Replace(Box::new(Replacement {
            import,
            force,
            service_accounts: ServiceAccountKeys::default(),
        }));
        let outcome = ExternalEngine::step(&signer.state, &input, now, &mut os_rng())?;
        let next = pki_signer::loaded(outcome.into_document());
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_signer, into_handle(next)) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

    use super::*;
    use crate::buffer::pki_buffer_free;
    use crate::error::pki_result::*;
    use crate::signer::pki_signer_free;
    use pki_core::{CertificateAuthority, CertificateParams, PrivateKey, Profile};
    use std::ptr::{null, null_mut};
    use time::{Duration, macros::datetime};

    // 2026-01-01: every CA here is made at this time.
    const T0: time::OffsetDateTime = datetime!(2026-01-01 00:00 UTC);

    fn root(cn: &str) -> CertificateAuthority {
        CertificateAuthority::generate_root(
            cn,
            KeyAlgorithm::EcdsaP256,
            T0,
            Duration::days(3650),
            &mut os_rng(),
        )
        .unwrap()
    }

    fn under(issuer: &CertificateAuthority, cn: &str) -> CertificateAuthority {
        let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut os_rng()).unwrap();
        let params = CertificateParams::new(
            Profile::IntermediateCa { path_len: Some(0) },
            cn,
            T0,
            Duration::days(700),
        )
        .unwrap();
        let cert = issuer
            .issue(&params, &key.public_key().unwrap(), &mut os_rng())
            .unwrap();
        CertificateAuthority::new(cert, key).unwrap()
    }

    fn pem_of(ca: &CertificateAuthority, chain: &[&CertificateAuthority]) -> String {
        let mut s = ca.cert.to_pem();
        s.push_str(&ca.key.to_pkcs8_pem().unwrap());
        for c in chain {
            s.push_str(&c.cert.to_pem());
        }
        s
    }

    fn import(pem: &str) -> (pki_result, *mut pki_signer) {
        let mut signer = null_mut();
        // SAFETY: valid slices and out pointer for the call.
        let code = unsafe {
            pki_signer_import(
                pem.as_ptr(),
                pem.len(),
                null(),
                0,
                null(),
                0,
                null(),
                T0.unix_timestamp(),
                &mut signer,
            )
        };
        (code, signer)
    }

    fn report(signer: *const pki_signer, pem: &str) -> serde_json::Value {
        let mut out = null_mut();
        // SAFETY: a live signer, valid slices and out pointer.
        let code = unsafe {
            pki_signer_validate_replacement(
                signer,
                pem.as_ptr(),
                pem.len(),
                null(),
                0,
                null(),
                0,
                T0.unix_timestamp() + 86_400,
                &mut out,
            )
        };
        assert_eq!(code, PKI_RESULT_OK);
        // SAFETY: a live buffer from the call above, freed once.
        let view = unsafe { crate::buffer::pki_buffer_data(out) };
        // SAFETY: the view is valid until the buffer is freed below.
        let json = unsafe { std::slice::from_raw_parts(view.data, view.len) }.to_vec();
        // SAFETY: the live buffer from the call above, freed once.
        unsafe { pki_buffer_free(out) };
        serde_json::from_slice(&json).unwrap()
    }

    fn rotate_to(signer: *const pki_signer, pem: &str, force: Option<&str>) -> pki_result {
        let mut out = null_mut();
        let (f, f_len) = force.map_or((null(), 0), |f| (f.as_ptr().cast(), f.len()));
        // SAFETY: a live signer, valid slices and out pointer.
        let code = unsafe {
            pki_signer_rotate_to(
                signer,
                pem.as_ptr(),
                pem.len(),
                null(),
                0,
                null(),
                0,
                f,
                f_len,
                T0.unix_timestamp() + 86_400,
                &mut out,
            )
        };
        if code == PKI_RESULT_OK {
            // SAFETY: written on success; freed once.
            let history = unsafe { &(*out).state.history };
            assert_eq!(history.len(), 1);
            // SAFETY: the live signer written above, freed once.
            unsafe { pki_signer_free(out) };
        } else {
            assert!(out.is_null(), "written on failure");
        }
        code
    }

    #[test]
    fn import_validate_and_rotate_through_the_c_abi() {
        let org = root("Org Root");
        let int = under(&org, "Org Intermediate");
        // pathlen 0 on the intermediate would forbid a CA below it: issue
        // the cluster CAs from the root's intermediate with none.
        let int = {
            let params = CertificateParams::new(
                Profile::IntermediateCa { path_len: None },
                "Org Intermediate",
                T0,
                Duration::days(1800),
            )
            .unwrap();
            let cert = org
                .issue(&params, &int.key.public_key().unwrap(), &mut os_rng())
                .unwrap();
            CertificateAuthority::new(cert, int.key).unwrap()
        };
        let cluster = under(&int, "cluster-ca");
        let (code, signer) = import(&pem_of(&cluster, &[&int, &org]));
        assert_eq!(code, PKI_RESULT_OK);
        // SAFETY: live handle from the import.
        // SAFETY: the live handle from the import.
        let bundle = unsafe { (*signer).state.bundle.certs() };
        assert_eq!(bundle, std::slice::from_ref(&org.cert));

        let next = under(&int, "cluster-ca-2");
        let r = report(signer, &pem_of(&next, &[&int, &org]));
        assert_eq!(r["ok"], true, "{r}");
        let r = report(signer, &pem_of(&next, &[]));
        assert_eq!(r["ok"], false, "{r}");
        let failed: Vec<&str> = r["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["ok"] == false)
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(failed, ["chain-supplied"]);
        assert_eq!(
            rotate_to(signer, &pem_of(&next, &[&int, &org]), None),
            PKI_RESULT_OK
        );

        let other = root("Other Root");
        let stranger = under(&other, "cluster-ca-3");
        let pem = pem_of(&stranger, &[&other]);
        assert_eq!(rotate_to(signer, &pem, None), PKI_RESULT_VALIDATION_FAILED);
        assert_eq!(
            rotate_to(signer, &pem, Some("org root replaced")),
            PKI_RESULT_OK
        );

        let (code, none) = import(&format!(
            "{}{}",
            pem_of(&cluster, &[&int, &org]),
            &*org.key.to_pkcs8_pem().unwrap()
        ));
        assert_eq!(code, PKI_RESULT_IMPORT);
        assert!(none.is_null());
        // SAFETY: freed once.
        unsafe { pki_signer_free(signer) };
    }
}
