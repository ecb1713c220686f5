//! What makes a report's health: the trust matrix now, what is broken,
//! what is due that the plan does not decide (an imported CA's
//! replacement), and until when all of it stays `ok`, which the signer's
//! idle promise carries so that `pki status --check` can answer from it.

use super::{CellResult, PendingAction, TrustCellSummary};
use crate::engines::signer::SignerState;
use pki_core::Certificate;
use time::OffsetDateTime;

/// The automatic rotation holds an imported CA (its replacement must come
/// from its issuer), so without this its approaching expiry would show as
/// nothing due until it turned into broken.
pub(super) fn replacement_due(state: &SignerState, now: OffsetDateTime) -> Option<PendingAction> {
    state.external.as_ref()?;
    let ca = &state.ca.cert;
    let expires_at = std::iter::once(ca.not_after())
        .chain(state.leaf_not_after_limit())
        .min()?;
    let min_trust = state.policy.rotation.min_trust;
    if expires_at - now >= min_trust {
        return None;
    }
    let what = if expires_at < ca.not_after() {
        format!(
            "a certificate of the chain above the imported CA {}",
            ca.id()
        )
    } else {
        format!("the imported CA {}", ca.id())
    };
    let when = if expires_at < now {
        "expired at"
    } else {
        "expires at"
    };
    Some(PendingAction::SupplyReplacement {
        ca_id: ca.id(),
        expires_at,
        detail: format!(
            "{what} {when} {}, within the minimum trust {}; pki does not renew a CA someone else signed: have its issuer sign a replacement and run `pki rotate DIR --to FILE`",
            pki_core::datetime::rfc3339(expires_at),
            pki_core::policy::human(min_trust)
        ),
    })
}

/// The trust matrix at `now` as a report shows it, each cell marked
/// retired when it involves a previous CA whose trust window has ended.
pub(super) fn trust_summaries(state: &SignerState, now: OffsetDateTime) -> Vec<TrustCellSummary> {
    let previous_trusted = state
        .previous
        .as_ref()
        .is_some_and(|p| previous_trusted_at(p, now));
    trust_now(state, now)
        .into_iter()
        .map(|c| TrustCellSummary {
            retired: !previous_trusted
                && (c.chain == crate::engines::preflight::Side::Old
                    || c.bundle == crate::engines::preflight::Side::Old),
            chain: c.chain,
            bundle: c.bundle,
            at: c.at,
            result: match c.result {
                Ok(path) => CellResult::Verified { path },
                Err(e) => CellResult::Failed {
                    error: e.to_string(),
                },
            },
        })
        .collect()
}

/// Why the health is `broken` at `now`, one sentence each: what the
/// document says that does not hold (a foreign bridge: the driver refuses
/// to act on it), an expired CA or leaf, a failing trust cell that is not
/// retired.
pub(super) fn problems_at(
    state: &SignerState,
    now: OffsetDateTime,
    trust: &[TrustCellSummary],
) -> Vec<String> {
    let ca = &state.ca.cert;
    let mut problems = crate::Document::problems(state);
    if now > ca.not_after() {
        problems.push(format!(
            "the CA {} expired at {}",
            ca.id(),
            pki_core::datetime::rfc3339(ca.not_after())
        ));
    }
    for (name, leaf) in &state.leaves {
        if let Some(issued) = &leaf.issued
            && now > issued.cert.not_after()
        {
            problems.push(format!(
                "certificate {name} expired at {}",
                pki_core::datetime::rfc3339(issued.cert.not_after())
            ));
        }
    }
    for c in trust.iter().filter(|c| !c.retired) {
        if let CellResult::Failed { error } = &c.result {
            problems.push(format!(
                "{} serving chain x {} bundle fails: {error}",
                c.chain, c.bundle
            ));
        }
    }
    problems
}

/// How far a promise that nothing is due from `now` to `until` (the plan's
/// next check) also holds that the health of `state` is `ok`: nothing
/// broken, no consumer lagging, no imported CA waiting for its
/// replacement. None when one of them is so at `now`, else `until` or an
/// earlier end. The signer's idle promise ends there, so a promise that
/// covers a time also answers `pki status --check` (exit 0) at it.
pub(crate) fn ok_until(
    state: &SignerState,
    now: OffsetDateTime,
    mut until: OffsetDateTime,
) -> Option<OffsetDateTime> {
    if !problems_at(state, now, &trust_summaries(state, now)).is_empty() {
        return None;
    }
    // Both turn at the first instant after a time: the promise ends there.
    let after = |t: OffsetDateTime| t + time::Duration::NANOSECOND;
    // A consumer that has not loaded the current bundle lags once the
    // reload deadline has passed (`uptake::lags`).
    let current = state.bundle_fingerprint();
    if let Some(deadline) = state.reload_deadline()
        && state.consumers.values().any(|r| r.fingerprint != current)
    {
        until = until.min(after(deadline));
    }
    // An imported CA's replacement falls due once less than the minimum
    // trust remains before it or its chain expires (`replacement_due`).
    if state.external.is_some()
        && let Some(expires_at) = std::iter::once(state.ca.cert.not_after())
            .chain(state.leaf_not_after_limit())
            .min()
    {
        until = until.min(after(expires_at - state.policy.rotation.min_trust));
    }
    (until > now).then_some(until)
}

/// Whether the previous CA is still within its trust window at `now`:
/// bridged (not distrusted at a compromise), the bridge not yet ended, and
/// the CA itself not expired.
pub(super) fn previous_trusted_at(
    previous: &crate::engines::signer::PreviousCa,
    now: OffsetDateTime,
) -> bool {
    previous.trusted_until.is_some_and(|t| now <= t) && now <= previous.not_after
}

fn trust_now(
    state: &SignerState,
    now: OffsetDateTime,
) -> Vec<crate::engines::preflight::TrustCell> {
    let previous = state.previous.as_ref();
    let parse = |pem: Option<&String>| pem.and_then(|p| Certificate::from_pem(p.as_bytes()).ok());
    // Once the previous CA has expired, servers and clients holding only its
    // material are broken by expiry, not by the rotation: leave its cells out.
    // The old serving chain as servers that have not refreshed present it:
    // the probe and what followed it (an imported CA's intermediates), so
    // status builds the chain the way a client does.
    let old_chain = previous
        .and_then(|p| p.probe.as_ref())
        .and_then(|pem| Certificate::all_from_pem(pem.as_bytes()).ok())
        .filter(|chain| chain.first().is_some_and(|c| c.is_valid_at(now)));
    let old_bundle = parse(previous.and_then(|p| p.certificate.as_ref()))
        .filter(|c| c.is_valid_at(now))
        .map(|c| pki_core::Bundle::from_certs([c]));
    let new_chain = state
        .leaves
        .values()
        .filter_map(|l| l.issued.as_ref())
        .find(|i| {
            pki_core::issued_by(&i.cert, &state.ca.cert).issued_by
                && i.cert
                    .extended_key_usage()
                    .unwrap_or(&[])
                    .contains(&pki_core::EKU_SERVER_AUTH)
        })
        .map(|i| state.serving_chain(&i.cert));
    crate::engines::preflight::matrix(
        &crate::engines::preflight::MatrixInputs {
            old_chain: old_chain.as_deref(),
            new_chain: new_chain.as_deref(),
            old_bundle: old_bundle.as_ref(),
            new_bundle: &state.bundle,
        },
        &[now],
    )
}
