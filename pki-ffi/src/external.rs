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
use crate::step::pki_step;
use crate::store::pki_store;
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
/// No service-account keys are compared: see
/// `pki_signer_validate_replacement_with_keys`.
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
    // SAFETY: the same contract, with no key sets.
    unsafe {
        pki_signer_validate_replacement_with_keys(
            signer,
            ca,
            ca_len,
            key,
            key_len,
            chain,
            chain_len,
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
            now,
            out_report,
        )
    }
}

/// Reads an optional service-account key set: NULL is none.
///
/// # Safety
///
/// `pem` NULL or valid for `len` bytes.
unsafe fn keys_in(pem: *const u8, len: usize, what: &str) -> Result<Option<Vec<Vec<u8>>>, Failure> {
    if pem.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL, valid for `len` bytes (contract).
    let pem = unsafe { bytes_in(pem, len, what) }?;
    Ok(Some(ServiceAccountKeys::keys_from_pem(pem)?))
}

/// `pki_signer_validate_replacement`, also comparing service-account key
/// sets (`service-account-key-kept`): `current_keys` are the keys tokens
/// are signed and verified with today and `proposed_keys` the set that
/// comes with the replacement, each PEM (`PUBLIC KEY` blocks, or private
/// keys whose public halves are taken). The check fails when the proposed
/// set drops a current key. `current_keys` NULL: no key ring to keep;
/// `proposed_keys` NULL: the set is unchanged.
///
/// Ownership and results are those of `pki_signer_validate_replacement`;
/// a key set that holds no key, or an encrypted one, gives its PEM result
/// (`PKI_RESULT_UNEXPECTED_PEM_LABEL`, `PKI_RESULT_NO_PEM_BLOCK`,
/// `PKI_RESULT_KEY_DECODE`, `PKI_RESULT_IMPORT`…).
///
/// # Safety
///
/// As for `pki_signer_validate_replacement`; `current_keys` and
/// `proposed_keys` NULL or valid for their lengths.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pki_signer_validate_replacement_with_keys(
    signer: *const pki_signer,
    ca: *const u8,
    ca_len: usize,
    key: *const u8,
    key_len: usize,
    chain: *const u8,
    chain_len: usize,
    current_keys: *const u8,
    current_keys_len: usize,
    proposed_keys: *const u8,
    proposed_keys_len: usize,
    now: i64,
    out_report: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let signer = unsafe { handle(signer, "signer") }?;
        out_ptr(out_report, "out_report")?;
        // SAFETY: pointers and lengths from the caller (contract).
        let import = unsafe { import_in(ca, ca_len, key, key_len, chain, chain_len) }?;
        let service_accounts = ServiceAccountKeys {
            // SAFETY: NULL or valid for its length (contract).
            current: unsafe { keys_in(current_keys, current_keys_len, "current_keys") }?,
            // SAFETY: NULL or valid for its length (contract).
            proposed: unsafe { keys_in(proposed_keys, proposed_keys_len, "proposed_keys") }?,
        };
        let now = time_in(now, "now")?;
        let report =
            pki_rotate::validate_replacement(&signer.state, &import, &service_accounts, now);
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
/// below it); `signer` itself is not changed. No service-account keys are
/// compared: see `pki_signer_rotate_to_with_keys`; and nothing is stored:
/// see `pki_signer_store_rotate_to`.
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
    // SAFETY: the same contract, with no key sets.
    unsafe {
        pki_signer_rotate_to_with_keys(
            signer,
            ca,
            ca_len,
            key,
            key_len,
            chain,
            chain_len,
            std::ptr::null(),
            0,
            std::ptr::null(),
            0,
            force,
            force_len,
            now,
            out_signer,
        )
    }
}

/// Reads the `force` argument: NULL is none.
///
/// # Safety
///
/// `force` NULL or valid for `len` bytes.
unsafe fn force_in(force: *const c_char, len: usize) -> Result<Option<String>, Failure> {
    if force.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL, valid for `len` bytes (contract).
    Ok(Some(unsafe { str_in(force, len, "force") }?.to_string()))
}

/// `pki_signer_rotate_to`, also comparing service-account key sets as
/// `pki_signer_validate_replacement_with_keys` does: a proposed set that
/// drops a current key fails `service-account-key-kept`, which refuses the
/// rotation unless `force` overrides it (and records it).
///
/// Ownership and results are those of `pki_signer_rotate_to`, plus the PEM
/// results of a malformed key set.
///
/// # Safety
///
/// As for `pki_signer_rotate_to`; `current_keys` and `proposed_keys` NULL
/// or valid for their lengths.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pki_signer_rotate_to_with_keys(
    signer: *const pki_signer,
    ca: *const u8,
    ca_len: usize,
    key: *const u8,
    key_len: usize,
    chain: *const u8,
    chain_len: usize,
    current_keys: *const u8,
    current_keys_len: usize,
    proposed_keys: *const u8,
    proposed_keys_len: usize,
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
        let service_accounts = ServiceAccountKeys {
            // SAFETY: NULL or valid for its length (contract).
            current: unsafe { keys_in(current_keys, current_keys_len, "current_keys") }?,
            // SAFETY: NULL or valid for its length (contract).
            proposed: unsafe { keys_in(proposed_keys, proposed_keys_len, "proposed_keys") }?,
        };
        // SAFETY: NULL or valid for its length (contract).
        let force = unsafe { force_in(force, force_len) }?;
        let now = time_in(now, "now")?;
        let input = ExternalInput::Replace(Box::new(Replacement {
            import,
            force,
            service_accounts,
        }));
        let outcome = ExternalEngine::step(&signer.state, &input, now, &mut os_rng())?;
        let next = pki_signer::loaded(outcome.into_document());
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_signer, into_handle(next)) };
        Ok(())
    })
}

/// Rotates the signer document at `key` in `store` to a supplied CA, the
/// way `pki rotate DIR --to FILE` does: read the document and its revision,
/// validate the CA against today's trust, rotate and re-issue every leaf,
/// and write the result only if the revision is still the one read; when
/// another writer got there first, read again and validate again from the
/// fresh document (up to 8 rounds, then `PKI_RESULT_CONFLICT`). A refused
/// or failed rotation writes nothing, not even history.
///
/// The service-account check compares the store's key ring (the `keys`
/// document `pki keys` keeps in the same store, if any) with
/// `proposed_keys` (PEM, NULL: unchanged); to compare a key ring kept
/// elsewhere, load the signer and use `pki_signer_rotate_to_with_keys`. `force` (NULL:
/// none) overrides every failed check but `key-matches` and `is-ca`, and
/// is recorded with them in the history. `ca`, `ca_key` and `chain` are as
/// `ca`, `key` and `chain` of `pki_signer_import`; `key` as for
/// `pki_signer_store_create`. Everything is borrowed for the call.
///
/// On success the caller owns `*out_step` (read it with the `pki_step_`
/// functions) and frees it with `pki_step_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (bad key, `force` not UTF-8), the PEM and
/// import results of `pki_signer_import`, `PKI_RESULT_VALIDATION_FAILED`,
/// `PKI_RESULT_EMPTY_FORCED_REASON`, `PKI_RESULT_TRUST_CHECK_FAILED`,
/// `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_CONFLICT`, `PKI_RESULT_STORE`,
/// `PKI_RESULT_CORRUPT_STATE`, `PKI_RESULT_UNSUPPORTED_STATE_VERSION`,
/// `PKI_RESULT_ISSUANCE`, `PKI_RESULT_CRYPTO` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `key` NULL or valid for
/// `key_len` bytes; `ca` NULL or valid for `ca_len` bytes, `ca_key`,
/// `chain` and `proposed_keys` NULL or valid for their lengths; `force`
/// NULL or valid for `force_len` bytes; `out_step` NULL or valid for one
/// write.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pki_signer_store_rotate_to(
    store: *const pki_store,
    key: *const c_char,
    key_len: usize,
    ca: *const u8,
    ca_len: usize,
    ca_key: *const u8,
    ca_key_len: usize,
    chain: *const u8,
    chain_len: usize,
    proposed_keys: *const u8,
    proposed_keys_len: usize,
    force: *const c_char,
    force_len: usize,
    now: i64,
    out_step: *mut *mut pki_step,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let key = unsafe { str_in(key, key_len, "key") }?;
        out_ptr(out_step, "out_step")?;
        // SAFETY: pointers and lengths from the caller (contract).
        let import = unsafe { import_in(ca, ca_len, ca_key, ca_key_len, chain, chain_len) }?;
        // SAFETY: NULL or valid for its length (contract).
        let force = unsafe { force_in(force, force_len) }?;
        let proposed = if proposed_keys.is_null() {
            None
        } else {
            // SAFETY: non-NULL, valid for its length (contract).
            Some(unsafe { bytes_in(proposed_keys, proposed_keys_len, "proposed_keys") }?)
        };
        let now = time_in(now, "now")?;
        let service_accounts =
            ServiceAccountKeys::from_store(&store.of::<pki_rotate::KeyRing>(), proposed)?;
        let input = ExternalInput::Replace(Box::new(Replacement {
            import,
            force,
            service_accounts,
        }));
        let step = store
            .driver::<pki_rotate::SignerState>()
            .step::<ExternalEngine, _>(key, &input, now, &mut os_rng())?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_step, into_handle(pki_step::new(step))) };
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
    use pki_rotate::{Driver, KeyRing, Store};
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

    fn public_pem(key: &PrivateKey) -> String {
        pki_core::pem::encode("PUBLIC KEY", &key.public_key_der().unwrap())
    }

    fn failed_checks(r: &serde_json::Value) -> Vec<String> {
        r["checks"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["ok"] == false)
            .map(|c| c["name"].as_str().unwrap().to_string())
            .collect()
    }

    #[test]
    fn service_account_key_sets_reach_validation_and_rotation_through_the_c_abi() {
        let org = root("Org Root");
        let (code, signer) = import(&pem_of(&org, &[]));
        assert_eq!(code, PKI_RESULT_OK);
        let next = root("Next Root");
        let pem = pem_of(&next, &[]);
        let kept = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut os_rng()).unwrap();
        let other = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut os_rng()).unwrap();
        let current = public_pem(&kept);
        let dropped = public_pem(&other);
        let kept_too = format!("{}{}", public_pem(&other), public_pem(&kept));
        let at = T0.unix_timestamp() + 86_400;

        let validate = |proposed: &str| -> serde_json::Value {
            let mut out = null_mut();
            // SAFETY: a live signer, valid slices and out pointer.
            let code = unsafe {
                pki_signer_validate_replacement_with_keys(
                    signer,
                    pem.as_ptr(),
                    pem.len(),
                    null(),
                    0,
                    null(),
                    0,
                    current.as_ptr(),
                    current.len(),
                    proposed.as_ptr(),
                    proposed.len(),
                    at,
                    &mut out,
                )
            };
            assert_eq!(code, PKI_RESULT_OK);
            // SAFETY: the live buffer written above; the view is copied
            // before the buffer is freed once.
            let json = unsafe {
                let view = crate::buffer::pki_buffer_data(out);
                let bytes = std::slice::from_raw_parts(view.data, view.len).to_vec();
                pki_buffer_free(out);
                bytes
            };
            serde_json::from_slice(&json).unwrap()
        };
        assert_eq!(
            failed_checks(&validate(&dropped)),
            ["service-account-key-kept"]
        );
        assert_eq!(failed_checks(&validate(&kept_too)), Vec::<String>::new());

        let rotate = |proposed: &str, force: Option<&str>| -> pki_result {
            let mut out = null_mut();
            let (f, f_len) = force.map_or((null(), 0), |f| (f.as_ptr().cast(), f.len()));
            // SAFETY: a live signer, valid slices and out pointer.
            let code = unsafe {
                pki_signer_rotate_to_with_keys(
                    signer,
                    pem.as_ptr(),
                    pem.len(),
                    null(),
                    0,
                    null(),
                    0,
                    current.as_ptr(),
                    current.len(),
                    proposed.as_ptr(),
                    proposed.len(),
                    f,
                    f_len,
                    at,
                    &mut out,
                )
            };
            if code == PKI_RESULT_OK {
                // SAFETY: written on success; read, then freed once.
                let record = unsafe { (*out).state.history.last().cloned().unwrap() };
                if force.is_some() {
                    assert_eq!(record.overridden[0].name, "service-account-key-kept");
                }
                // SAFETY: freed once.
                unsafe { pki_signer_free(out) };
            }
            code
        };
        assert_eq!(rotate(&dropped, None), PKI_RESULT_VALIDATION_FAILED);
        assert_eq!(rotate(&dropped, Some("key ring moved")), PKI_RESULT_OK);
        assert_eq!(rotate(&kept_too, None), PKI_RESULT_OK);
        // A key set without a key is an error, not an empty set.
        assert_eq!(
            rotate(&pem_of(&next, &[]).replace("PRIVATE KEY", "X"), None),
            PKI_RESULT_UNEXPECTED_PEM_LABEL
        );
        // SAFETY: freed once.
        unsafe { pki_signer_free(signer) };
    }

    /// The signer document at `signer` in `store` and its revision.
    fn load(store: *const pki_store) -> (pki_rotate::SignerState, String) {
        let (mut signer, mut revision) = (null_mut(), null_mut());
        // SAFETY: a live store; out pointers valid for the call.
        let code = unsafe {
            crate::step::pki_signer_store_load(
                store,
                c"signer".as_ptr(),
                6,
                &mut signer,
                &mut revision,
            )
        };
        assert_eq!(code, PKI_RESULT_OK);
        // SAFETY: both written on success; each read, then freed once.
        unsafe {
            let state = (*signer).state.clone();
            let view = crate::buffer::pki_buffer_data(revision);
            let rev = String::from_utf8(std::slice::from_raw_parts(view.data, view.len).to_vec())
                .unwrap();
            pki_buffer_free(revision);
            pki_signer_free(signer);
            (state, rev)
        }
    }

    /// A memory store where another writer changes the signer document
    /// (adds a leaf) just before the first compare-and-swap write of it.
    struct Racing {
        inner: pki_rotate::MemoryStore,
        raced: std::sync::atomic::AtomicBool,
    }

    impl pki_rotate::Store for Racing {
        fn location(&self) -> String {
            self.inner.location()
        }
        fn get(
            &self,
            key: &str,
        ) -> pki_rotate::Result<Option<(pki_rotate::Files, pki_rotate::Revision)>> {
            self.inner.get(key)
        }
        fn put(
            &self,
            key: &str,
            expected: Option<&pki_rotate::Revision>,
            files: &pki_rotate::Files,
        ) -> pki_rotate::Result<pki_rotate::Revision> {
            if key == "signer"
                && expected.is_some()
                && !self.raced.swap(true, std::sync::atomic::Ordering::SeqCst)
            {
                let web = pki_rotate::SignerInput::request(
                    "web",
                    pki_rotate::LeafRequest::server(vec!["web.example".into()]),
                );
                Driver::new(&self.inner)
                    .step::<pki_rotate::SignerEngine, _>(
                        key,
                        &web,
                        T0 + Duration::days(1),
                        &mut os_rng(),
                    )
                    .unwrap();
            }
            self.inner.put(key, expected, files)
        }
    }

    #[test]
    fn a_store_backed_rotation_to_a_supplied_ca_validates_against_the_store_and_writes_by_compare_and_swap()
     {
        let store = into_handle(pki_store {
            backing: crate::store::Backing::Files(Box::new(Racing {
                inner: pki_rotate::MemoryStore::new(),
                raced: false.into(),
            })),
        });
        let org = root("Org Root");
        let (code, signer) = import(&pem_of(&org, &[]));
        assert_eq!(code, PKI_RESULT_OK);
        // SAFETY: live handles; the key is valid for its length.
        let code = unsafe {
            crate::step::pki_signer_store_create(store, c"signer".as_ptr(), 6, signer, null_mut())
        };
        assert_eq!(code, PKI_RESULT_OK);
        // SAFETY: freed once.
        unsafe { pki_signer_free(signer) };
        // The store keeps a service-account key ring, as `pki keys` does.
        let kept = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut os_rng()).unwrap();
        let mut files = pki_rotate::Files::new();
        files
            .insert(
                "keys/public.pem",
                pki_rotate::File::public(public_pem(&kept)),
            )
            .unwrap();
        // SAFETY: the live store created above.
        unsafe { (*store).of::<KeyRing>().put("keys", None, &files) }.unwrap();
        let (before, revision) = load(store);

        let next = root("Next Root");
        let pem = pem_of(&next, &[]);
        let stranger =
            public_pem(&PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut os_rng()).unwrap());
        let rotate = |proposed: Option<&str>| -> (pki_result, *mut pki_step) {
            let (p, p_len) = proposed.map_or((null(), 0), |p| (p.as_ptr(), p.len()));
            let mut out = null_mut();
            // SAFETY: a live store, valid slices and out pointer.
            let code = unsafe {
                pki_signer_store_rotate_to(
                    store,
                    c"signer".as_ptr(),
                    6,
                    pem.as_ptr(),
                    pem.len(),
                    null(),
                    0,
                    null(),
                    0,
                    p,
                    p_len,
                    null(),
                    0,
                    T0.unix_timestamp() + 86_400,
                    &mut out,
                )
            };
            (code, out)
        };
        // Dropping the key ring's key is refused, and nothing is written.
        let (code, out) = rotate(Some(&stranger));
        assert_eq!(code, PKI_RESULT_VALIDATION_FAILED);
        assert!(out.is_null());
        assert_eq!(load(store).1, revision);

        // Another writer adds a leaf while this rotation is being decided:
        // the first write loses, the rotation is decided again from the
        // fresh document, and its leaf is re-issued by the new CA too.
        let (code, step) = rotate(None);
        assert_eq!(code, PKI_RESULT_OK);
        // SAFETY: the live step written above.
        unsafe {
            assert!(crate::step::pki_step_changed(step));
            assert_eq!(crate::step::pki_step_attempts(step), 2);
        }
        let (after, new_revision) = load(store);
        assert_ne!(new_revision, revision);
        assert_eq!(after.ca.cert, next.cert);
        assert_ne!(before.ca.cert, after.ca.cert);
        assert_eq!(after.history.len(), 1);
        let web = &after.leaves["web"].issued.as_ref().unwrap().cert;
        assert!(pki_core::issued_by(web, &next.cert).issued_by);
        // SAFETY: freed once each.
        unsafe {
            crate::step::pki_step_free(step);
            crate::store::pki_store_free(store);
        }
    }

    #[test]
    fn the_store_backed_step_refuses_a_trust_break_unless_a_reason_allows_it() {
        use crate::signer::pki_forced_rotation;
        let mut store = null_mut();
        // SAFETY: out pointer valid for the call.
        let code = unsafe { crate::store::pki_store_new_memory(&mut store) };
        assert_eq!(code, PKI_RESULT_OK);
        let mut signer = null_mut();
        // SAFETY: valid name and out pointer.
        let code = unsafe {
            crate::signer::pki_signer_new(
                c"service-ca".as_ptr(),
                10,
                0,
                null(),
                T0.unix_timestamp(),
                &mut signer,
            )
        };
        assert_eq!(code, PKI_RESULT_OK);
        // SAFETY: live handles.
        let code = unsafe {
            crate::step::pki_signer_store_create(store, c"signer".as_ptr(), 6, signer, null_mut())
        };
        assert_eq!(code, PKI_RESULT_OK);
        // SAFETY: freed once.
        unsafe { pki_signer_free(signer) };
        let forced = |reason: &'static std::ffi::CStr| pki_forced_rotation {
            reason: reason.as_ptr(),
            reason_len: reason.count_bytes(),
            grace_seconds: 0,
            no_bridges: false,
        };
        let step = |reason: &'static std::ffi::CStr, day: i64, allow: Option<&str>| -> pki_result {
            let f = forced(reason);
            let (a, a_len) = allow.map_or((null(), 0), |a| (a.as_ptr().cast(), a.len()));
            let mut out = null_mut();
            // SAFETY: live store, valid forced rotation, slices and out pointer.
            let code = unsafe {
                match allow {
                    None => crate::step::pki_signer_store_step(
                        store,
                        c"signer".as_ptr(),
                        6,
                        null(),
                        &f,
                        T0.unix_timestamp() + day * 86_400,
                        &mut out,
                    ),
                    Some(_) => crate::step::pki_signer_store_step_guarded(
                        store,
                        c"signer".as_ptr(),
                        6,
                        null(),
                        &f,
                        a,
                        a_len,
                        T0.unix_timestamp() + day * 86_400,
                        &mut out,
                    ),
                }
            };
            if code == PKI_RESULT_OK {
                // SAFETY: freed once.
                unsafe { crate::step::pki_step_free(out) };
            } else {
                assert!(out.is_null());
            }
            code
        };
        assert_eq!(step(c"first", 1, None), PKI_RESULT_OK);
        let (_, revision) = load(store);
        // A day later, clients may still hold the bundle of two rotations ago.
        assert_eq!(step(c"second", 2, None), PKI_RESULT_TRUST_BREAK);
        crate::error::with_last_error(|m| assert!(m.contains("until"), "{m}"));
        assert_eq!(load(store).1, revision);
        assert_eq!(step(c"second", 2, Some("  ")), PKI_RESULT_INVALID_ARGUMENT);
        assert_eq!(step(c"second", 2, Some("lab store")), PKI_RESULT_OK);
        let (after, _) = load(store);
        let record = after.history.last().unwrap();
        assert_eq!(record.overridden[0].name, "bundle-of-two-rotations-ago");
        assert!(record.overridden[0].detail.contains("lab store"));
        // SAFETY: freed once.
        unsafe { crate::store::pki_store_free(store) };
    }
}
