//! The trust a signer's rotation cuts that the pre-flight matrix cannot
//! see: consumers that hold material from before the rotation it compares.

use crate::engines::preflight::{
    BUNDLE_OF_TWO_ROTATIONS_AGO, PREVIOUS_CA_EXPIRED, TrustBreak, check,
};
use pki_core::{Bundle, Certificate, SignatureCache, datetime::rfc3339};
use time::OffsetDateTime;

/// What the four-cell matrix of [`crate::engines::preflight::matrix`] cannot see: consumers outside
/// "before this rotation" and "after it" that a rotation still cuts off.
///
/// - The CA being replaced has expired: no bridge can be made from it, so
///   clients that still hold the bundle from before (only that CA) reject
///   every certificate issued from now on, until they reload.
/// - The previous rotation was less than the reload interval I ago (M when
///   the policy does not set I: the policy's promise is that consumers
///   reload within it): a client may still hold the bundle of two
///   rotations ago, which trusts only the CA before the previous one, and a
///   server may still serve a certificate of that CA. Bridges link only
///   adjacent CAs, so both are cut off until I has passed since the
///   previous rotation (or that CA expires).
///
/// `before` is the document before the rotation, `after` the rotated one,
/// `new_probe` a serving certificate of the new CA.
pub fn rotation_trust_breaks(
    before: &super::SignerState,
    after: &super::SignerState,
    new_probe: &Certificate,
    now: OffsetDateTime,
) -> Vec<TrustBreak> {
    let cache = SignatureCache::new();
    let mut breaks = Vec::new();
    let new_chain = after.serving_chain(new_probe);
    let reload = after.policy.rotation.effective_reload_interval();
    let old_ca = &before.ca.cert;
    if now > old_ca.not_after()
        && let Err(e) = check(&new_chain, &before.bundle, now, &cache)
    {
        breaks.push(TrustBreak {
            check: PREVIOUS_CA_EXPIRED,
            consumers: format!(
                "the CA {} expired at {}, so no bridge can be made: clients that have not reloaded the bundle since reject every certificate of the new CA",
                old_ca.id(),
                rfc3339(old_ca.not_after())
            ),
            until: after.policy.rotation.reload_interval.map(|i| now + i),
            cause: e.to_string(),
        });
    }
    let Some(previous) = &before.previous else {
        return breaks;
    };
    let Some(last) = before.history.last() else {
        return breaks;
    };
    let parse = |pem: Option<&String>| pem.and_then(|p| Certificate::from_pem(p.as_bytes()).ok());
    let Some(oldest_ca) = parse(previous.certificate.as_ref()) else {
        return breaks;
    };
    let held_until = (last.at + reload).min(oldest_ca.not_after());
    if now >= held_until {
        return breaks;
    }
    let oldest_bundle = Bundle::from_certs([oldest_ca.clone()]);
    if let Err(e) = check(&new_chain, &oldest_bundle, now, &cache) {
        breaks.push(TrustBreak {
            check: BUNDLE_OF_TWO_ROTATIONS_AGO,
            consumers: format!(
                "clients still holding the bundle from before the rotation at {} (trusting only CA {}) reject servers with certificates of the new CA",
                rfc3339(last.at),
                oldest_ca.id()
            ),
            until: Some(held_until),
            cause: e.to_string(),
        });
    }
    let old_chain = previous
        .probe
        .as_ref()
        .and_then(|pem| Certificate::all_from_pem(pem.as_bytes()).ok())
        .filter(|chain| chain.first().is_some_and(|c| c.is_valid_at(now)));
    if let Some(old_chain) = old_chain
        && let Err(e) = check(&old_chain, &after.bundle, now, &cache)
    {
        breaks.push(TrustBreak {
            check: BUNDLE_OF_TWO_ROTATIONS_AGO,
            consumers: format!(
                "servers still presenting certificates of CA {} (from before the rotation at {}) are rejected by clients that load the new bundle",
                oldest_ca.id(),
                rfc3339(last.at)
            ),
            until: Some(held_until),
            cause: e.to_string(),
        });
    }
    breaks
}
