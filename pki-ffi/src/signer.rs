//! The signer (service-CA scheme, and CAs signed by someone else's root):
//! created, stepped and loaded in a store, and read through a `pki_signer`
//! handle (its bundle, lineage checks, a replacement's validation, its
//! state bytes).

use crate::abi::{
    bytes_in, free, handle, into_handle, json_in, json_or_default, key_in, os_rng, time_in,
};
use crate::buffer::pki_buffer;
use crate::bundle::pki_bundle;
use crate::error::{Failure, pki_result};
use crate::step::{pki_step, status_json};
use crate::store::pki_store;
use pki_core::{Certificate, LineageRule};
use pki_rotate::request::StepEvent;
use pki_rotate::request::{
    SignerCreate, SignerPolicyFields, SignerRequest, SignerStep, ValidateRequest,
};
use pki_rotate::status::SignerStatus;
use pki_rotate::{
    Engine, Event, ExternalEngine, ExternalInput, KeyRing, Outcome, Plan, Replacement,
    ServiceAccountKeys, SignerEngine, SignerInput, SignerState, Stepped, UptakeEngine,
};
use rand_core::CryptoRng;
use std::ffi::c_char;
use time::OffsetDateTime;

/// A signer's whole state: its CA (certificate and key), bridges, bundle,
/// forced-rotation reason, leaves and history, as read from a store, a step
/// or saved bytes. Immutable, so one handle may be read from several
/// threads at once; changes go through `pki_signer_step`.
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

/// A signer step as the ABI hands it out.
fn signer_step<E: serde::Serialize + std::fmt::Display>(
    step: pki_rotate::Step<SignerState, E>,
    now: OffsetDateTime,
) -> *mut pki_step {
    into_handle(signer_step_value(step, now))
}

/// [`signer_step`] before it becomes a handle.
fn signer_step_value<E: serde::Serialize + std::fmt::Display>(
    step: pki_rotate::Step<SignerState, E>,
    now: OffsetDateTime,
) -> pki_step {
    let (out, doc) = pki_step::of_driver(step, StepEvent::of, |d| signer_status(d, now));
    out.with_signer(doc)
}

fn create(
    store: &pki_store,
    key: &str,
    input: &SignerCreate,
    now: OffsetDateTime,
) -> Result<*mut pki_step, Failure> {
    let doc = input.document(now, &mut os_rng())?;
    let step = store.create::<SignerEngine>(key, &doc, now, signer_status)?;
    Ok(into_handle(step.with_signer(doc)))
}

fn step(
    store: &pki_store,
    key: &str,
    input: &SignerStep,
    now: OffsetDateTime,
) -> Result<*mut pki_step, Failure> {
    let driver = store.driver::<SignerState>();
    let rng = &mut os_rng();
    let step = match input.request()? {
        SignerRequest::UnlessIdle(signer_input) => {
            return Ok(
                match driver.step_unless_idle::<SignerEngine, _>(key, &signer_input, now, rng)? {
                    Stepped::Idle(idle) => into_handle(pki_step::idle(&idle)),
                    Stepped::Step(step) => signer_step(step, now),
                    // Its status and signer are the part's (the head and the
                    // named leaves).
                    Stepped::Part(step) => into_handle(signer_step_value(step, now).by_parts()),
                },
            );
        }
        SignerRequest::Ack(ack) => {
            return Ok(signer_step(
                driver.step::<UptakeEngine, _>(key, &ack, now, rng)?,
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
            driver.step::<ExternalEngine, _>(key, &replace, now, rng)?
        }
        SignerRequest::RenewSameKey => {
            driver.step::<ExternalEngine, _>(key, &ExternalInput::RenewSameKey, now, rng)?
        }
        SignerRequest::Step { policy, input } => {
            let abi = AbiInput {
                policy,
                signer: input,
            };
            driver.step::<AbiSigner, _>(key, &abi, now, rng)?
        }
    };
    Ok(signer_step(step, now))
}

/// Creates a signer document at `key` in `store`, from `input` (JSON, see
/// below), at `now` (Unix seconds). A document already there is never
/// overwritten: `PKI_RESULT_ALREADY_INITIALIZED`, and nothing is written.
///
/// `input` is `input_len` bytes of JSON, one of:
///
/// - a new self-signed CA `CN=<common_name>`, valid from `now`:
///   `{"common_name": "service-ca", "key_type": "p256", "policy": {…}}`;
/// - an imported CA (signed by someone else's root; the bundle holds the
///   chain's root, serving chains carry the CA and the intermediates):
///   `{"import": {"ca": PEM, "key": PEM, "chain": PEM}, "policy": {…}}`,
///   where `ca` holds the certificate and may also hold its key and the
///   chain above it (issuer first), and `key` and `chain` are optional;
/// - a saved document (`pki_signer_to_state`'s bytes, as a JSON value):
///   `{"state": {…}}`.
///
/// `key_type` is `"p256"` (default), `"p384"`, `"rsa2048"`, `"rsa3072"` or
/// `"rsa4096"`: the type of the CAs the signer makes. `policy` fields, all
/// optional, replace those of the default policy: `lifetime_seconds` (D,
/// 790 days), `min_trust_seconds` (M, 395 days), `reload_interval_seconds`
/// (I, 0 = unknown), `leaf_refresh_fraction` (0.2) and `keep_previous_root`
/// (false); lifetime >= 2 x M and M > I are checked.
///
/// `key` is `key_len` bytes: `/`-separated segments of `a-z`, `0-9`, `.`,
/// `_`, `-` (1 to 200 bytes; `"signer"` is the CLI's). `store`, `key` and
/// `input` are borrowed for the call.
///
/// On success the caller owns `*out_step` (changed, the revision, the next
/// wake-up, the status, and the signer through `pki_step_signer`) and frees
/// it with `pki_step_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (bad key, malformed input),
/// `PKI_RESULT_INVALID_POLICY`, `PKI_RESULT_INVALID_REFRESH_FRACTION`,
/// `PKI_RESULT_ISSUANCE` (an unusable name), `PKI_RESULT_TIME`, the PEM
/// and import results (`PKI_RESULT_PEM`, `PKI_RESULT_KEY_DECODE`,
/// `PKI_RESULT_KEY_MISMATCH`, `PKI_RESULT_NOT_A_CA`, `PKI_RESULT_IMPORT`,
/// `PKI_RESULT_VALIDATION_FAILED`…), `PKI_RESULT_CORRUPT_STATE`,
/// `PKI_RESULT_UNSUPPORTED_STATE_VERSION` (a saved state),
/// `PKI_RESULT_ALREADY_INITIALIZED`, `PKI_RESULT_STORE`,
/// `PKI_RESULT_UNKNOWN_OUTCOME`, `PKI_RESULT_CRYPTO` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `key` NULL or valid for
/// `key_len` bytes; `input` NULL or valid for `input_len` bytes; `out_step`
/// NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_create(
    store: *const pki_store,
    key: *const c_char,
    key_len: usize,
    input: *const c_char,
    input_len: usize,
    now: i64,
    out_step: *mut *mut pki_step,
) -> pki_result {
    ffi!(out_step => {
        store = handle(store, "store");
        key = key_in(key, key_len);
        input = json_in::<SignerCreate>(input, input_len, "input");
        now = time_in(now, "now");
    } create(store, key, &input, now))
}

/// One controller step on the signer document at `key` in `store` at `now`
/// (Unix seconds): pki-rotate's `Driver::step`, the loop the CLI runs.
/// Read the document and its revision, decide, and, only when something
/// changed, write the result if the revision is still the one read; when
/// another writer changed it in between (another replica, another process),
/// read again and decide again from the fresh document, so racing replicas
/// rotate once and end on the same CA (after 8 lost writes in a row:
/// `PKI_RESULT_CONFLICT`). A refused step writes nothing.
///
/// `input` is `input_len` bytes of JSON; NULL (or `{}`) is the periodic
/// step: rotate when less than the minimum trust is left, re-issue the
/// leaves the document keeps when due, prune what expired. Every field is
/// optional:
///
/// - `"policy": {…}`: changes the fields named (as for
///   `pki_signer_create`; not the key type) and records them;
/// - `"forced": {"reason": "…", "grace_seconds": 0, "no_bridges": false}`:
///   rotate now, once per distinct reason (the reason recorded by the last
///   forced rotation does nothing); `grace_seconds` (0: normal) is how long
///   the old CA stays trusted through bridge A; `no_bridges` distrusts it at
///   once (compromise);
/// - `"allow_trust_break": "reason"`: rotate even when consumers would be
///   cut off (an expired CA; clients that may still hold the bundle of two
///   rotations ago, within the reload interval, M when the policy sets
///   none); without it such a rotation is `PKI_RESULT_TRUST_BREAK` (the
///   message names who breaks and until when). The reason is recorded with
///   each break in the rotation's history (`overridden`); a compromise
///   rotation is not refused;
/// - `"leaves": [...]`: changes to the leaves the document keeps, in order,
///   each issued in the same step; a directory store publishes leaf NAME as
///   `certs/NAME/tls.crt` (leaf, then bridge B) and `tls.key`:
///   `{"request": {"name": "web", "kind": "server", "dns_names": […],
///   "ip_addresses": […], "lifetime_seconds": N}}` adds a leaf or extends its
///   request (`kind`: `"server"`, `"client"`, `"server+client"`),
///   `{"replace": {…}}` may also change its kind or drop names,
///   `{"remove": {"name": "web"}}` stops keeping it (a name it does not
///   keep is nothing to do: a rerun), `{"renew": {"name": "web"}}` re-issues
///   it now;
/// - `"rotate_to": {"ca": PEM, "key": PEM, "chain": PEM, "current_keys":
///   PEM, "proposed_keys": PEM, "force": "reason"}` (alone): `pki rotate
///   --to`. Validate the supplied CA against today's trust, rotate, re-issue
///   every leaf; a self-signed replacement is bridged both ways. A failed
///   check is `PKI_RESULT_VALIDATION_FAILED` unless `force` gives a reason,
///   recorded with every overridden check (`key-matches` and `is-ca` cannot
///   be). `service-account-key-kept` compares `proposed_keys` (absent:
///   unchanged) with `current_keys`, or, when `current_keys` is absent, with
///   the key ring the store keeps under `keys` (as `pki keys` does);
/// - `"renew_same_key": true` (alone): `pki rotate --renew-same-key`, a new
///   certificate for the current CA on its own key and Subject
///   (`PKI_RESULT_IMPORTED_CA` for an imported CA);
/// - `"unless_idle": true` (alone, or with `leaves` only): the step decided
///   from the summary a directory or etcd store keeps with the document when
///   it says nothing is due at `now`, so that its cost follows the work, not
///   the number of leaves. Alone it is the periodic step (what `pki rotate`
///   does): inside the summary's promise the store's head or index is read,
///   not the document, and the step has `pki_step_idle` true, no events, an
///   empty status and no signer (`pki_step_signer` is
///   `PKI_RESULT_NOT_FOUND`). With `leaves` (what `pki issue`, `renew` and
///   `remove` do), inside the promise it reads and writes the document's
///   head and those leaves only (`pki_step_by_parts` true): the store ends
///   as the whole step would leave it, and the step's status and signer
///   hold the CA, the bundle and those leaves, not the others. Outside the
///   promise, or on a store that keeps no summary, either is the whole step;
/// - `"ack": {"consumer": "web-1", "fingerprint": "…"}` (alone): `pki ack`,
///   the consumer loaded the bundle of that fingerprint (hex, as
///   `PKI_BUNDLE_FINGERPRINT` or `pki_snapshot_fingerprint`). Nothing else
///   changes, whatever is due. A bundle the signer did not publish (it
///   remembers its last 16) is `PKI_RESULT_UNKNOWN_BUNDLE`; the
///   fingerprint already recorded for the consumer writes nothing.
///
/// `key` is as for `pki_signer_create`; `store`, `key` and `input` are
/// borrowed for the call.
///
/// On success the caller owns `*out_step` and frees it with
/// `pki_step_free`. Nothing is written on failure, and a failed step leaves
/// the store unchanged, except `PKI_RESULT_UNKNOWN_OUTCOME`: the write's
/// answer was lost and it may have landed (step again: it is safe).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (bad key, malformed input, a blank
/// `allow_trust_break`, a bad leaf request), `PKI_RESULT_NOT_INITIALIZED`,
/// `PKI_RESULT_CONFLICT` (too many concurrent writers: step again),
/// `PKI_RESULT_STORE` (I/O or backend failure: not retried),
/// `PKI_RESULT_UNKNOWN_OUTCOME`, `PKI_RESULT_CORRUPT_STATE`,
/// `PKI_RESULT_UNSUPPORTED_STATE_VERSION`, `PKI_RESULT_CLOCK_BEFORE_CA`,
/// `PKI_RESULT_EMPTY_FORCED_REASON`, `PKI_RESULT_INVALID_GRACE`,
/// `PKI_RESULT_INVALID_POLICY`, `PKI_RESULT_INVALID_REFRESH_FRACTION`,
/// `PKI_RESULT_INVALID_LEAF_NAME`, `PKI_RESULT_UNKNOWN_LEAF`,
/// `PKI_RESULT_TRUST_CHECK_FAILED`, `PKI_RESULT_TRUST_BREAK`,
/// `PKI_RESULT_VALIDATION_FAILED`, `PKI_RESULT_IMPORTED_CA`,
/// `PKI_RESULT_UNKNOWN_BUNDLE`, the PEM and import results of a supplied
/// CA, `PKI_RESULT_TIME`,
/// `PKI_RESULT_ISSUANCE`, `PKI_RESULT_CRYPTO`, `PKI_RESULT_EXPIRED` or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `key` NULL or valid for
/// `key_len` bytes; `input` NULL or valid for `input_len` bytes; `out_step`
/// NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_step(
    store: *const pki_store,
    key: *const c_char,
    key_len: usize,
    input: *const c_char,
    input_len: usize,
    now: i64,
    out_step: *mut *mut pki_step,
) -> pki_result {
    ffi!(out_step => {
        store = handle(store, "store");
        key = key_in(key, key_len);
        input = json_or_default::<SignerStep>(input, input_len, "input");
        now = time_in(now, "now");
    } step(store, key, &input, now))
}

/// Reads the signer document at `key` in `store` without changing it.
///
/// `key` is as for `pki_signer_create`; `store` and `key` are borrowed.
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
/// secret. `pki_signer_create` takes it back as `{"state": …}`.
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
/// `pki_signer_step` without `force`. `ca` is required; the others are
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
/// PEM and import results of `pki_signer_create`'s `import` (also for a
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

#[cfg(test)]
mod tests;
