//! The signer in a store: create, load, and step through pki-rotate's
//! driver (load → plan → apply → compare-and-swap, retried from a fresh
//! read when another writer got there first).

use crate::abi::time_out;
use crate::abi::{
    free_handle, getter, handle, into_handle, os_rng, out_ptr, str_in, time_in, write_out,
};
use crate::buffer::{CText, pki_buffer, pki_bytes};
use crate::error::{Failure, boundary, boundary_value, pki_result};
use crate::signer::{forced_in, pki_events, pki_forced_rotation, pki_policy, pki_signer};
use crate::store::pki_store;
use pki_core::KeyAlgorithm;
use pki_rotate::{Engine, Event, Outcome, Plan, SignerEngine, SignerInput, SignerState};
use rand_core::CryptoRng;
use std::ffi::c_char;
use time::OffsetDateTime;

/// The signer engine as the C ABI drives it: a `pki_policy` carries no key
/// type, so the key type of new CAs is taken from the document being
/// stepped, which only the driver reads. Everything else is
/// [`SignerEngine`]'s.
struct AbiSigner;

/// The input of one step through the ABI.
#[derive(Debug, Clone, Default)]
struct AbiInput {
    /// Replaces the document's rotation policy (not its key type).
    policy: Option<pki_policy>,
    /// The signer input besides the policy.
    signer: SignerInput,
}

impl AbiInput {
    fn signer_input(&self, doc: &SignerState) -> SignerInput {
        let mut input = self.signer.clone();
        if let Some(p) = self.policy {
            // Checked by `plan` (as every policy is) before anything is done.
            input.policy = Some(p.with_key_algorithm(doc.policy.key_algorithm));
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

/// Reads the `key` argument of the store functions.
///
/// # Safety
///
/// As for [`str_in`].
unsafe fn key_in<'a>(key: *const c_char, key_len: usize) -> Result<&'a str, Failure> {
    // SAFETY: same contract as ours.
    unsafe { str_in(key, key_len, "key") }
}

fn revision_buffer(revision: &pki_rotate::Revision) -> *mut pki_buffer {
    into_handle(pki_buffer::new(revision.as_str().as_bytes()))
}

/// Stores `signer` as a new document at `key` in `store`. Fails when a
/// document exists there already: nothing is overwritten.
///
/// `key` is `key_len` bytes: `/`-separated segments of `a-z`, `0-9`, `.`,
/// `_`, `-` (1 to 200 bytes; `"signer"` is the CLI's). `store` and `signer`
/// are borrowed for the call.
///
/// On success, when `out_revision` is not NULL, the caller owns
/// `*out_revision` (the document's revision in the store, opaque UTF-8) and
/// frees it with `pki_buffer_free`. `out_revision` NULL is accepted.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (bad key), `PKI_RESULT_ALREADY_INITIALIZED`,
/// `PKI_RESULT_STORE` (I/O or backend failure), `PKI_RESULT_CRYPTO` or
/// `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `key` NULL or valid for
/// `key_len` bytes; `signer` NULL or a live `pki_signer`; `out_revision`
/// NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_store_create(
    store: *const pki_store,
    key: *const c_char,
    key_len: usize,
    signer: *const pki_signer,
    out_revision: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let key = unsafe { key_in(key, key_len) }?;
        // SAFETY: NULL or a live handle (contract).
        let signer = unsafe { handle(signer, "signer") }?;
        let revision = store
            .driver::<SignerState>()
            .create::<AbiSigner>(key, &signer.state)?;
        if !out_revision.is_null() {
            // SAFETY: non-NULL; valid for a write (contract).
            unsafe { write_out(out_revision, revision_buffer(&revision)) };
        }
        Ok(())
    })
}

/// Reads the signer document at `key` in `store`.
///
/// `key` is as for `pki_signer_store_create`; `store` is borrowed.
///
/// On success the caller owns `*out_signer` (generation 0) and frees it
/// with `pki_signer_free`, and, when `out_revision` is not NULL,
/// `*out_revision` (free with `pki_buffer_free`). `out_revision` NULL is
/// accepted.
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
pub unsafe extern "C" fn pki_signer_store_load(
    store: *const pki_store,
    key: *const c_char,
    key_len: usize,
    out_signer: *mut *mut pki_signer,
    out_revision: *mut *mut pki_buffer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let key = unsafe { key_in(key, key_len) }?;
        out_ptr(out_signer, "out_signer")?;
        let (state, revision) = store.driver::<SignerState>().load::<AbiSigner>(key)?;
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_signer, into_handle(pki_signer::loaded(state))) };
        if !out_revision.is_null() {
            // SAFETY: non-NULL; valid for a write (contract).
            unsafe { write_out(out_revision, revision_buffer(&revision)) };
        }
        Ok(())
    })
}

/// What one `pki_signer_store_step` did: the document now in the store, its
/// revision, the events, whether the step wrote, and when to step again.
/// Immutable; free with `pki_step_free`.
pub struct pki_step {
    state: SignerState,
    events: pki_events,
    changed: bool,
    next_check: i64,
    revision: CText,
    attempts: u32,
}

/// One controller step on the signer document at `key`: read it and its
/// revision, rotate when due (less than the minimum trust left) or when
/// `forced` carries a reason not recorded yet, re-issue the leaves it keeps
/// when due, prune what expired, and, only when something changed, write
/// the result if the revision is still the one read. When another writer
/// changed the document in between (another replica, another process), the
/// step reads again and decides again from the fresh document, so racing
/// replicas rotate once and end on the same CA; after 8 lost writes in a
/// row it gives up with `PKI_RESULT_CONFLICT`. This is pki-rotate's
/// `Driver::step`, the same loop the CLI runs.
///
/// A rotation that would cut consumers off is refused with
/// `PKI_RESULT_TRUST_BREAK`, naming who breaks and until when: rotating a
/// CA that has already expired (no bridge can be made from it), or rotating
/// while clients may still hold the bundle of two rotations ago (within the
/// reload interval, M when the policy sets none, of the previous rotation).
/// A compromise rotation (`no_bridges`) distrusts the old CA on purpose and
/// is not refused. To rotate anyway, use `pki_signer_store_step_guarded`
/// with a reason.
///
/// `key` is as for `pki_signer_store_create`. `policy` NULL keeps the
/// document's policy; otherwise it replaces its rotation parameters (the key
/// type of new CAs stays the document's). `forced` NULL asks for no forced
/// rotation. `store`, `policy` and `forced` are borrowed for the call.
/// `now` is Unix seconds.
///
/// On success the caller owns `*out_step` and frees it with
/// `pki_step_free`; nothing is written on failure, and a failed step leaves
/// the store unchanged, except `PKI_RESULT_UNKNOWN_OUTCOME`: the write's
/// answer was lost and it may have landed (step again: it is safe).
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (bad key, reason not UTF-8),
/// `PKI_RESULT_NOT_INITIALIZED`, `PKI_RESULT_CONFLICT` (too many concurrent
/// writers: step again), `PKI_RESULT_STORE` (I/O or backend failure: not
/// retried), `PKI_RESULT_UNKNOWN_OUTCOME` (the write may have landed: step
/// again), `PKI_RESULT_CORRUPT_STATE`, `PKI_RESULT_UNSUPPORTED_STATE_VERSION`,
/// `PKI_RESULT_CLOCK_BEFORE_CA`, `PKI_RESULT_EMPTY_FORCED_REASON`,
/// `PKI_RESULT_INVALID_GRACE`, `PKI_RESULT_INVALID_POLICY`,
/// `PKI_RESULT_INVALID_REFRESH_FRACTION`, `PKI_RESULT_TRUST_CHECK_FAILED`,
/// `PKI_RESULT_TRUST_BREAK`, `PKI_RESULT_TIME`, `PKI_RESULT_ISSUANCE`,
/// `PKI_RESULT_CRYPTO`, `PKI_RESULT_EXPIRED` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `store` must be NULL or a live `pki_store`; `key` NULL or valid for
/// `key_len` bytes; `policy` NULL or a valid `pki_policy`; `forced` NULL or
/// a valid `pki_forced_rotation` whose `reason` is NULL or valid for
/// `reason_len` bytes; `out_step` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_signer_store_step(
    store: *const pki_store,
    key: *const c_char,
    key_len: usize,
    policy: *const pki_policy,
    forced: *const pki_forced_rotation,
    now: i64,
    out_step: *mut *mut pki_step,
) -> pki_result {
    // SAFETY: the same contract, and no override.
    unsafe {
        pki_signer_store_step_guarded(
            store,
            key,
            key_len,
            policy,
            forced,
            std::ptr::null(),
            0,
            now,
            out_step,
        )
    }
}

/// `pki_signer_store_step`, with the operator's reason to rotate even when
/// consumers would be cut off: with `allow_trust_break` (`allow_trust_break_len`
/// bytes of UTF-8, not blank) such a rotation is made, and each break is
/// recorded with the reason in the history entry's `overridden` checks
/// (`previous-ca-expired`, `bundle-of-two-rotations-ago`). NULL allows
/// nothing: exactly `pki_signer_store_step`.
///
/// Ownership, outputs and results are those of `pki_signer_store_step`;
/// `allow_trust_break` is borrowed for the call. A blank reason is
/// `PKI_RESULT_INVALID_ARGUMENT`.
///
/// # Safety
///
/// As for `pki_signer_store_step`; `allow_trust_break` NULL or valid for
/// `allow_trust_break_len` bytes.
#[unsafe(no_mangle)]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn pki_signer_store_step_guarded(
    store: *const pki_store,
    key: *const c_char,
    key_len: usize,
    policy: *const pki_policy,
    forced: *const pki_forced_rotation,
    allow_trust_break: *const c_char,
    allow_trust_break_len: usize,
    now: i64,
    out_step: *mut *mut pki_step,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let store = unsafe { handle(store, "store") }?;
        // SAFETY: pointer and length from the caller (contract).
        let key = unsafe { key_in(key, key_len) }?;
        out_ptr(out_step, "out_step")?;
        // SAFETY: NULL or a valid pki_policy (contract).
        let policy = unsafe { policy.as_ref() }.copied();
        if let Some(p) = policy {
            // Refuse a bad policy before reading the store (the key type
            // does not take part in the check).
            p.to_signer_policy(KeyAlgorithm::EcdsaP256)?;
        }
        // SAFETY: NULL or a valid pki_forced_rotation (contract).
        let forced = unsafe { forced_in(forced) }?;
        // SAFETY: NULL or valid for its length (contract).
        let allow_trust_break = unsafe {
            reason_in(
                allow_trust_break,
                allow_trust_break_len,
                "allow_trust_break",
            )
        }?;
        let now = time_in(now, "now")?;
        let input = AbiInput {
            policy,
            signer: SignerInput {
                forced,
                allow_trust_break,
                ..SignerInput::default()
            },
        };
        let step =
            store
                .driver::<SignerState>()
                .step::<AbiSigner, _>(key, &input, now, &mut os_rng())?;
        let result = into_handle(pki_step::new(step));
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_step, result) };
        Ok(())
    })
}

/// An optional operator's reason: NULL is none; otherwise UTF-8 that is
/// not blank, since it is recorded as the reason.
///
/// # Safety
///
/// `reason` NULL or valid for `len` bytes.
pub(crate) unsafe fn reason_in(
    reason: *const c_char,
    len: usize,
    what: &str,
) -> Result<Option<String>, Failure> {
    if reason.is_null() {
        return Ok(None);
    }
    // SAFETY: non-NULL, valid for `len` bytes (contract).
    let text = unsafe { str_in(reason, len, what) }?;
    if text.trim().is_empty() {
        return Err(Failure::invalid(format!(
            "parameter `{what}`: the reason must not be blank (it is recorded)"
        )));
    }
    Ok(Some(text.to_string()))
}

impl pki_step {
    /// What the driver's step returned, as the ABI hands it out.
    pub(crate) fn new(step: pki_rotate::Step<SignerState, Event>) -> Self {
        pki_step {
            events: pki_events::new(&step.events),
            changed: step.changed,
            next_check: time_out(step.next_wake),
            revision: CText::new(step.revision.as_str()),
            attempts: step.attempts,
            state: step.document,
        }
    }
}

/// The signer document now in the store after a step (written by it or
/// not), as a new handle with generation 0.
///
/// On success the caller owns `*out_signer` and frees it with
/// `pki_signer_free`; it stays valid after the step is freed.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER` or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step`; `out_signer` NULL or valid for
/// one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_signer(
    step: *const pki_step,
    out_signer: *mut *mut pki_signer,
) -> pki_result {
    boundary(|| {
        // SAFETY: NULL or a live handle (contract).
        let step = unsafe { handle(step, "step") }?;
        out_ptr(out_signer, "out_signer")?;
        let signer = into_handle(pki_signer::loaded(step.state.clone()));
        // SAFETY: checked non-NULL; valid for a write (contract).
        unsafe { write_out(out_signer, signer) };
        Ok(())
    })
}

/// What the step did, in order (possibly nothing): read with
/// `pki_events_len` and `pki_events_get`.
///
/// Borrowed: valid until `step` is freed; do not free it. NULL gives NULL.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_events(step: *const pki_step) -> *const pki_events {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(step, std::ptr::null(), |s| &s.events as *const pki_events) }
}

/// Whether the step wrote a new document (a rotation, a leaf issued, a
/// bundle pruned, a policy or forced reason recorded). NULL gives false.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_changed(step: *const pki_step) -> bool {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(step, false, |s| s.changed) }
}

/// When to step again if nothing else happens (Unix seconds, after the
/// step's `now`): the engine's wake-up time of the document now in the
/// store, so after a rotation the new CA's, bridges' and leaves' times.
/// NULL gives 0.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_next_check(step: *const pki_step) -> i64 {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(step, 0, |s| s.next_check) }
}

/// The document's revision in the store after the step: opaque UTF-8 text
/// (also NUL-terminated), equal to the one before when nothing was written.
///
/// Borrowed: valid until `step` is freed. NULL gives an empty view.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_revision(step: *const pki_step) -> pki_bytes {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(step, pki_bytes::EMPTY, |s| s.revision.view()) }
}

/// How many read-decide-write rounds the step took: 1 without contention,
/// one more for each write lost to another writer. NULL gives 0.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_attempts(step: *const pki_step) -> u32 {
    // SAFETY: NULL or a live handle (contract).
    unsafe { getter(step, 0, |s| s.attempts) }
}

/// Frees a step (the keys of its document are zeroed). NULL is accepted.
/// Signers read from it stay valid; its events and revision view do not.
///
/// # Safety
///
/// `step` must be NULL or a live `pki_step` not freed before.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_step_free(step: *mut pki_step) {
    // SAFETY: NULL or a live handle freed once (contract).
    boundary_value((), || unsafe { free_handle(step) })
}
