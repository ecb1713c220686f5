//! The signer (service-CA scheme, and CAs signed by someone else's root):
//! created, stepped and loaded in a store, and read through a `pki_signer`
//! handle (its bundle, lineage checks, a replacement's validation, its
//! state bytes).

use crate::abi::{bytes_in, free, handle, into_handle, json_in, key_in, os_rng, time_in};
use crate::buffer::pki_buffer;
use crate::bundle::pki_bundle;
use crate::error::{Failure, pki_result};
use crate::secret::pki_secret;
use crate::step::status_json;
use crate::store::pki_store;
use pki_core::{Certificate, LineageRule};
use pki_rotate::request::{
    SignerCreate, SignerPolicyFields, SignerRequest, SignerStep, ValidateRequest,
};
use pki_rotate::request::{StepEvent, StepResult};
use pki_rotate::status::SignerStatus;
use pki_rotate::{
    Engine, Event, ExternalEngine, ExternalInput, KeyRing, Outcome, Plan, Replacement,
    ServiceAccountKeys, SignerEngine, SignerInput, SignerState, SignerView, UptakeEngine,
};
use rand_core::CryptoRng;
use std::ffi::c_char;
use time::OffsetDateTime;

/// A signer's whole state: its CA (certificate and key), bridges, bundle,
/// forced-rotation reason, leaves and history, as read from a store, a step
/// or saved bytes. Immutable, so one handle may be read from several
/// threads at once; changes go through `pki_document_step`.
///
/// Free with `pki_signer_free`.
pub struct pki_signer {
    pub(crate) state: SignerState,
}

/// The signer engine as the C ABI drives it: a step's policy names only the
/// fields it changes, over the document's policy, which only the driver
/// reads. Everything else is [`SignerEngine`]'s.
struct AbiSigner;

/// The input of one signer step through the ABI.
#[derive(Debug, Clone, Default)]
struct AbiInput {
    /// Changes to the document's policy.
    policy: Option<SignerPolicyFields>,
    /// The signer input besides the policy.
    signer: SignerInput,
}

impl AbiInput {
    fn signer_input(&self, doc: &SignerState) -> SignerInput {
        let mut input = self.signer.clone();
        if let Some(p) = &self.policy {
            // Checked by `plan` (as every policy is) before anything is done.
            input.policy = Some(p.over(doc.policy));
        }
        input
    }
}

impl Engine for AbiSigner {
    type Document = SignerState;
    type Input = AbiInput;
    type Plan = Plan;
    type Event = Event;

    fn plan(doc: &SignerState, input: &AbiInput, now: OffsetDateTime) -> pki_rotate::Result<Plan> {
        SignerEngine::plan(doc, &input.signer_input(doc), now)
    }

    fn apply<'d, R: CryptoRng + ?Sized>(
        doc: &'d SignerState,
        plan: Plan,
        rng: &mut R,
    ) -> pki_rotate::Result<Outcome<'d, SignerState, Event>> {
        SignerEngine::apply(doc, plan, rng)
    }

    fn rebase(input: &mut AbiInput, read: &SignerState, fresh: &SignerState) {
        SignerEngine::rebase(&mut input.signer, read, fresh);
    }
}

/// The status JSON of a signer (`pki status --json`), empty when it cannot
/// be made (a time before the CA).
fn signer_status(doc: &SignerState, now: OffsetDateTime) -> String {
    SignerStatus::of(doc, now)
        .map(|s| status_json(&s))
        .unwrap_or_default()
}

/// What a signer step did, with the status of the signer now stored.
fn signer_step<E: serde::Serialize + std::fmt::Display>(
    step: &pki_rotate::Step<SignerState, E>,
    now: OffsetDateTime,
) -> StepResult {
    StepResult::of_step(step, StepEvent::of, |d| signer_status(d, now))
}

pub(crate) fn create(
    store: &pki_store,
    key: &str,
    input: &SignerCreate,
    now: OffsetDateTime,
) -> Result<StepResult, Failure> {
    let location = store.new_document_location::<SignerState>(
        key,
        pki_rotate::signer::STORE_KEY,
        input.key_store.is_some(),
    )?;
    let site = pki_rotate::request::CreateSite {
        tokens: store.tokens.as_ref(),
        location: &location,
    };
    let doc = input.document(site, now, &mut os_rng())?;
    store.create::<SignerEngine>(key, &doc, now, signer_status)
}

pub(crate) fn step(
    store: &pki_store,
    key: &str,
    input: &SignerStep,
    now: OffsetDateTime,
) -> Result<StepResult, Failure> {
    let driver = store.driver::<SignerState>();
    let rng = &mut os_rng();
    let step = match input.request()? {
        SignerRequest::UnlessIdle(signer_input) => {
            return Ok(
                // After a step over part of the signer, its status is the
                // part's (the head and the named leaves).
                signer_step(
                    &driver.step_unless_idle::<SignerEngine, _>(key, &signer_input, now, rng)?,
                    now,
                ),
            );
        }
        SignerRequest::Ack(ack) => {
            return Ok(signer_step(
                &driver
                    .step::<UptakeEngine, _>(key, &ack, now, rng)?
                    .map_document(SignerView::into_signer),
                now,
            ));
        }
        SignerRequest::RotateTo(to) => {
            let asked = to.replacement();
            let service_accounts = if to.uses_store_keys() {
                // The store's key ring (`pki keys`, store key `keys`) is today's.
                ServiceAccountKeys::from_store(&store.of::<KeyRing>(), to.proposed_keys())?
            } else {
                asked.key_sets()?
            };
            let replace = ExternalInput::Replace(Box::new(Replacement {
                import: asked.import()?,
                force: to.force.clone(),
                service_accounts,
            }));
            driver
                .step::<ExternalEngine, _>(key, &replace, now, rng)?
                .map_document(SignerView::into_signer)
        }
        SignerRequest::RenewSameKey => driver
            .step::<ExternalEngine, _>(key, &ExternalInput::RenewSameKey, now, rng)?
            .map_document(SignerView::into_signer),
        SignerRequest::Step { policy, input } => {
            let abi = AbiInput {
                policy,
                signer: input,
            };
            driver.step::<AbiSigner, _>(key, &abi, now, rng)?
        }
    };
    Ok(signer_step(&step, now))
}

/// Reads the signer document at `key` in `store` without changing it.
///
/// `key` is as for `pki_document_create`; `store` and `key` are borrowed.
///
/// On success the caller owns `*out_signer` and frees it with
/// `pki_signer_free`, and, when `out_revision` is not NULL,
/// `*out_revision` (the document's revision, opaque UTF-8; free with
/// `pki_buffer_free`). `out_revision` NULL is accepted.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (bad key), `PKI_RESULT_NOT_INITIALIZED` (no
/// document at `key`), `PKI_RESULT_CORRUPT_STATE`,
/// `PKI_RESULT_UNSUPPORTED_STATE_VERSION`, `PKI_RESULT_STORE` or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `key` NULL or valid for
/// `key_len` bytes; `out_signer` NULL or valid for one write;
/// `out_revision` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_load(
    store: *const pki_store,
    key: *const c_char,
    key_len: usize,
    out_signer: *mut *mut pki_signer,
    out_revision: *mut *mut pki_buffer,
) -> pki_result {
    ffi!(out_signer, out_revision? => {
        store = handle(store, "store");
        key = key_in(key, key_len);
    } {
        let (state, revision) = store.driver::<SignerState>().load::<SignerEngine>(key)?;
        Ok::<_, Failure>((
            into_handle(pki_signer { state }),
            into_handle(pki_buffer::new(revision.as_str().as_bytes())),
        ))
    })
}

/// Which form of a signer `pki_document_read` writes.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum pki_signer_output {
    /// The whole document as its versioned state bytes (as
    /// `pki_signer_to_state`; secret: it holds the CA key).
    PKI_SIGNER_STATE = 0,
    /// The status at `now` as JSON, the same as `pki status --json`.
    PKI_SIGNER_STATUS = 1,
}

pub(crate) fn read(
    store: &pki_store,
    key: &str,
    output: u32,
    now: OffsetDateTime,
) -> Result<pki_buffer, Failure> {
    if output > 1 {
        return Err(Failure::invalid(format!(
            "output {output} is not a pki_signer_output (0-1)"
        )));
    }
    let (state, _) = store.driver::<SignerState>().load::<SignerEngine>(key)?;
    Ok(if output == 0 {
        pki_buffer::new(&state.to_json()?)
    } else {
        pki_buffer::new(signer_status(&state, now).as_bytes())
    })
}

/// Loads a signer from its versioned state bytes (the JSON document written
/// by `pki_signer_to_state`, certificates and keys included).
///
/// `state` is borrowed for the call. On success the caller owns
/// `*out_signer` and frees it with `pki_signer_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_UNSUPPORTED_STATE_VERSION` (a version this build does not
/// read: the state is never reset), `PKI_RESULT_CORRUPT_STATE` (malformed
/// JSON, missing or invalid material, zero length),
/// `PKI_RESULT_INVALID_LEAF_NAME` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `state` must be NULL or valid for `state_len` bytes; `out_signer` NULL
/// or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_from_state(
    state: *const u8,
    state_len: usize,
    out_signer: *mut *mut pki_signer,
) -> pki_result {
    ffi!(out_signer => {
        bytes = bytes_in(state, state_len, "state");
    } {
        let state = SignerState::from_json(bytes)?;
        Ok::<_, Failure>(into_handle(pki_signer { state }))
    })
}

/// Saves a signer as its versioned state bytes: one JSON document with the
/// kind and format version, the policy, the leaves, the history and every
/// certificate and key as PEM. It holds the CA's private key: store it as a
/// secret. `pki_document_create` takes it back as `{"state": …}`.
///
/// `signer` is borrowed. On success the caller owns `*out_state` and frees
/// it with `pki_buffer_free` (which zeroes it).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`, `PKI_RESULT_CRYPTO`,
/// `PKI_RESULT_CORRUPT_STATE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer`; `out_state` NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_to_state(
    signer: *const pki_signer,
    out_state: *mut *mut pki_buffer,
) -> pki_result {
    ffi!(out_state => {
        signer = handle(signer, "signer");
    } {
        let json = signer.state.to_json()?;
        Ok::<_, Failure>(into_handle(pki_buffer::new(&json)))
    })
}

/// The CA bundle clients should trust (current CA, bridge A, and the
/// previous root when the policy keeps it), as a new bundle object.
///
/// On success the caller owns `*out_bundle` and frees it with
/// `pki_bundle_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer`; `out_bundle` NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_bundle(
    signer: *const pki_signer,
    out_bundle: *mut *mut pki_bundle,
) -> pki_result {
    ffi!(out_bundle => {
        signer = handle(signer, "signer");
    } Ok::<_, Failure>(into_handle(pki_bundle::new(signer.state.bundle.clone()))))
}

/// Validates a proposed replacement of `signer`'s CA at `now` (k3s's
/// validateCA; `pki validate --to`) and writes the report as JSON: `{"ok":
/// bool, "checks": [{"name", "ok", "detail"}]}` (names: key-matches, is-ca,
/// chain-supplied, chains-to-current-trust, valid-for-24h,
/// service-account-key-kept). A failing check is data, not an error: the
/// result is `PKI_RESULT_OK` whenever the report was made. Nothing changes.
///
/// `input` is `input_len` bytes of JSON: `{"ca": PEM, "key": PEM, "chain":
/// PEM, "current_keys": PEM, "proposed_keys": PEM}`, as `rotate_to` of
/// a signer's `pki_document_step` without `force`. `ca` is required; the others are
/// optional. `current_keys` are the service-account keys tokens are
/// verified with today (absent: no key ring to keep), `proposed_keys` the
/// set that comes with the replacement (absent: unchanged): `PUBLIC KEY`
/// blocks, or private keys whose public halves are taken.
///
/// `signer` and `input` are borrowed. On success the caller owns
/// `*out_report` and frees it once with `pki_buffer_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (malformed input), `PKI_RESULT_TIME`, the
/// PEM and import results of a signer create's `import` (also for a
/// malformed key set), or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer`; `input` NULL or valid for
/// `input_len` bytes; `out_report` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_validate(
    signer: *const pki_signer,
    input: *const c_char,
    input_len: usize,
    now: i64,
    out_report: *mut *mut pki_buffer,
) -> pki_result {
    ffi!(out_report => {
        signer = handle(signer, "signer");
        input = json_in::<ValidateRequest>(input, input_len, "input");
        now = time_in(now, "now");
    } {
        let import = input.import()?;
        let keys = input.key_sets()?;
        let report = pki_rotate::validate_replacement(&signer.state, &import, &keys, now);
        let json = serde_json::to_vec(&report)
            .map_err(|e| Failure::invalid(format!("report encoding: {e}")))?;
        Ok::<_, Failure>(into_handle(pki_buffer::new(&json)))
    })
}

/// Frees a signer (its CA key is zeroed). NULL is accepted (nothing happens).
///
/// The caller owned `signer`; it must not be used afterwards. Objects read
/// from it before (bundles, buffers, leaves) stay valid.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_free(signer: *mut pki_signer) {
    // SAFETY: NULL or a live handle freed once (contract).
    unsafe { free(signer) }
}

/// The rule that decided a lineage check.
#[repr(u32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum pki_lineage_rule {
    /// The certificate's AuthorityKeyIdentifier equals the CA's SubjectKeyIdentifier.
    PKI_LINEAGE_KEY_IDENTIFIER_MATCH = 0,
    /// The certificate's AKI differs from the CA's SKI.
    PKI_LINEAGE_KEY_IDENTIFIER_MISMATCH = 1,
    /// The CA has an SKI, the certificate no AKI: not shown to be issued by it.
    PKI_LINEAGE_MISSING_AUTHORITY_KEY_IDENTIFIER = 2,
    /// The CA has no SKI; the issuer name equals the CA's subject.
    PKI_LINEAGE_LEGACY_NAME_MATCH = 3,
    /// The CA has no SKI; the names differ.
    PKI_LINEAGE_LEGACY_NAME_MISMATCH = 4,
}

/// The answer of `pki_signer_check_lineage`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct pki_lineage {
    /// Whether the certificate was issued by the signer's current CA.
    pub issued_by: bool,
    /// Which rule decided.
    pub rule: pki_lineage_rule,
}

/// Checks whether a certificate was issued by the signer's current CA, by
/// AuthorityKeyIdentifier == SubjectKeyIdentifier (names only for a CA
/// without SKI), and says which rule decided.
///
/// `cert_pem` holds one or more `CERTIFICATE` blocks; the first is checked
/// (a serving chain's leaf). Borrowed for the call.
///
/// On success writes `*out_lineage`, and, when `out_reason` is not NULL,
/// a one-line explanation the caller owns and frees with `pki_buffer_free`.
/// `out_reason` NULL is accepted.
///
/// Returns `PKI_RESULT_OK` (whatever the answer), `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_PEM`, `PKI_RESULT_UNEXPECTED_PEM_LABEL`,
/// `PKI_RESULT_NO_PEM_BLOCK`, `PKI_RESULT_CERTIFICATE_DECODE`,
/// `PKI_RESULT_MALFORMED_EXTENSION` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer`; `cert_pem` NULL or valid
/// for `cert_pem_len` bytes; `out_lineage` NULL or valid for one write;
/// `out_reason` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_check_lineage(
    signer: *const pki_signer,
    cert_pem: *const u8,
    cert_pem_len: usize,
    out_lineage: *mut pki_lineage,
    out_reason: *mut *mut pki_buffer,
) -> pki_result {
    ffi!(out_lineage, out_reason? => {
        signer = handle(signer, "signer");
        pem = bytes_in(cert_pem, cert_pem_len, "cert_pem");
    } {
        let cert = first_certificate(pem)?;
        let lineage = pki_core::issued_by(&cert, &signer.state.ca.cert);
        let rule = match lineage.rule {
            LineageRule::KeyIdentifierMatch => pki_lineage_rule::PKI_LINEAGE_KEY_IDENTIFIER_MATCH,
            LineageRule::KeyIdentifierMismatch => {
                pki_lineage_rule::PKI_LINEAGE_KEY_IDENTIFIER_MISMATCH
            }
            LineageRule::MissingAuthorityKeyIdentifier => {
                pki_lineage_rule::PKI_LINEAGE_MISSING_AUTHORITY_KEY_IDENTIFIER
            }
            LineageRule::LegacyNameMatch => pki_lineage_rule::PKI_LINEAGE_LEGACY_NAME_MATCH,
            LineageRule::LegacyNameMismatch => pki_lineage_rule::PKI_LINEAGE_LEGACY_NAME_MISMATCH,
        };
        let answer = pki_lineage {
            issued_by: lineage.issued_by,
            rule,
        };
        let reason = into_handle(pki_buffer::new(lineage.to_string().as_bytes()));
        Ok::<_, Failure>((answer, reason))
    })
}

/// The first certificate of a PEM input (every block must be a certificate).
pub(crate) fn first_certificate(pem: &[u8]) -> Result<Certificate, Failure> {
    Certificate::all_from_pem(pem)?
        .into_iter()
        .next()
        .ok_or_else(|| {
            pki_core::Error::NoPemBlock {
                what: "certificate input",
            }
            .into()
        })
}

/// Saves a signer as Secret-shaped named blobs (see the table in the
/// README): `tls.crt`, `tls.key`, `ca-bundle.crt`, `intermediate-ca.crt`
/// (after a rotation), `forced-rotation-reason` (after a forced rotation),
/// `pki-state.json` and `certs.NAME.tls.crt`, `certs.NAME.tls.key` for the
/// leaves it keeps. A Go controller copies them to `Secret.Data` as they
/// are; a callback store uses the same keys.
///
/// `signer` is borrowed. On success the caller owns `*out_secret` and frees
/// it with `pki_secret_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`, `PKI_RESULT_CRYPTO`,
/// `PKI_RESULT_CORRUPT_STATE` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `signer` must be NULL or a live `pki_signer`; `out_secret` NULL or valid
/// for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_to_secret(
    signer: *const pki_signer,
    out_secret: *mut *mut pki_secret,
) -> pki_result {
    ffi!(out_secret => {
        signer = handle(signer, "signer");
    } {
        let secret = pki_secret::from_data(&signer.state.to_secret_data()?);
        Ok::<_, Failure>(into_handle(secret))
    })
}

/// Loads a signer from Secret-shaped named blobs written by
/// `pki_signer_to_secret` (possibly after a round trip through a
/// Kubernetes Secret). Keys it does not know are ignored. When
/// `forced-rotation-reason` is present it is the recorded reason (empty =
/// none), overriding the copy in `pki-state.json`.
///
/// `secret` is borrowed. On success the caller owns `*out_signer` and frees
/// it with `pki_signer_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_CORRUPT_STATE` (a missing or malformed entry, named in the
/// message), `PKI_RESULT_UNSUPPORTED_STATE_VERSION`,
/// `PKI_RESULT_INVALID_LEAF_NAME` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `secret` must be NULL or a live `pki_secret`; `out_signer` NULL or
/// valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_from_secret(
    secret: *const pki_secret,
    out_signer: *mut *mut pki_signer,
) -> pki_result {
    ffi!(out_signer => {
        secret = handle(secret, "secret");
    } {
        let state = SignerState::from_secret_data(&secret.to_data())?;
        Ok::<_, Failure>(into_handle(pki_signer { state }))
    })
}
