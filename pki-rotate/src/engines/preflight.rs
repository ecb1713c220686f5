//! The pre-flight trust matrix: proof, before a rotation is committed, that
//! every server still verifies against every client.
//!
//! A rotation changes what servers serve (old chain → new chain) and what
//! clients trust (old bundle → new bundle), and each side moves on its own
//! schedule. The matrix is the four combinations, each checked by RFC 5280
//! path validation ([`pki_core::verify_chain`]) at the rotation time and at
//! the end of the grace period. The chains are those of *probe* leaves
//! issued by the old and the new CA exactly as real serving certificates
//! are, so the check does not depend on which leaves exist.

use pki_core::datetime::rfc3339;
pub use pki_core::trust_matrix::{
    MatrixInputs, TrustCell, check, check_for, expected_name, matrix,
};
use pki_core::{Bundle, Certificate, Purpose, SignatureCache};
use time::OffsetDateTime;

/// The DNS name of probe leaves. `.invalid` (RFC 2606) can never be a real host.
pub const PROBE_NAME: &str = "preflight.pki.invalid";

use crate::model::OverriddenCheck;
pub use crate::model::Side;

/// Consumers a rotation would cut off, and until when: what
/// [`crate::engines::signer::rotation_trust_breaks`] finds.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TrustBreak {
    /// The check's stable name, as recorded in the history's `overridden`:
    /// `previous-ca-expired` or `bundle-of-two-rotations-ago`.
    pub check: &'static str,
    /// Who breaks, in words.
    pub consumers: String,
    /// The latest time a consumer could still be in that position (None:
    /// until each one reloads, which the policy gives no bound for).
    #[serde(with = "time::serde::rfc3339::option")]
    pub until: Option<OffsetDateTime>,
    /// Why their chains stop verifying (path validation's error).
    pub cause: String,
}

impl std::fmt::Display for TrustBreak {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.until {
            Some(t) => write!(f, "{} until {}", self.consumers, rfc3339(t))?,
            None => write!(f, "{} until they reload", self.consumers)?,
        }
        write!(f, " ({})", self.cause)
    }
}

impl TrustBreak {
    /// The history entry of this break once an operator allowed it for `reason`.
    pub fn overridden(&self, reason: &str) -> crate::model::OverriddenCheck {
        crate::model::OverriddenCheck {
            name: self.check.to_string(),
            detail: format!("allowed ({reason}): {self}"),
        }
    }

    /// The history entry of this break when an emergency rotation (`by`,
    /// in words) accepted it by its nature.
    pub fn accepted_by(&self, by: &str) -> crate::model::OverriddenCheck {
        crate::model::OverriddenCheck {
            name: self.check.to_string(),
            detail: format!("accepted by {by}: {self}"),
        }
    }
}

/// What a plan decided about the trust a rotation may break beyond the
/// four-cell matrix ([`crate::engines::signer::rotation_trust_breaks`]): which breaks
/// the rotation accepts by its nature, and whether an operator allowed the
/// rest. [`BreakAcceptance::sort`] applies it, the same way for the
/// signer's rotations and the external CA's replacements.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BreakAcceptance {
    /// Breaks are not looked for: a caller that cannot pass a reason asked
    /// so (nothing is recorded).
    pub unchecked: bool,
    /// An emergency rotation, in words for the history: a forced rotation
    /// with a grace period, or a compromise. It accepts the breaks of
    /// consumers that have not reloaded since the previous rotation.
    pub emergency: Option<String>,
    /// The emergency distrusts the previous CA at once (a compromise): it
    /// accepts every break.
    pub compromise: bool,
    /// The operator's reason to accept every break the rotation does not
    /// accept by its nature (recorded).
    pub allowed: Option<String>,
}

impl BreakAcceptance {
    /// Whether the rotation looks for breaks at all.
    pub fn checks(&self) -> bool {
        !self.unchecked
    }

    /// Whether the rotation accepts `found` by its nature. A grace period
    /// does not make a bridge from an expired CA, so only a compromise
    /// accepts that break.
    fn accepts(&self, found: &TrustBreak) -> bool {
        self.emergency.is_some() && (self.compromise || found.check == BUNDLE_OF_TWO_ROTATIONS_AGO)
    }

    /// Sorts a rotation's `breaks` by what the plan decided: the history
    /// entries of every break it accepts (by the rotation's nature first,
    /// then those the operator allowed), and the breaks nothing accepted,
    /// which [`crate::engines::guard::judge`] refuses.
    pub fn sort(&self, breaks: Vec<TrustBreak>) -> (Vec<OverriddenCheck>, Vec<TrustBreak>) {
        if self.unchecked {
            return (Vec::new(), Vec::new());
        }
        let (accepted, refused): (Vec<_>, Vec<_>) =
            breaks.into_iter().partition(|b| self.accepts(b));
        let mut records: Vec<OverriddenCheck> = match &self.emergency {
            Some(by) => accepted.iter().map(|b| b.accepted_by(by)).collect(),
            None => Vec::new(),
        };
        match &self.allowed {
            Some(allowed) => {
                records.extend(refused.iter().map(|b| b.overridden(allowed)));
                (records, Vec::new())
            }
            None => (records, refused),
        }
    }
}

/// The names of the checks [`crate::engines::signer::rotation_trust_breaks`] makes.
pub const PREVIOUS_CA_EXPIRED: &str = "previous-ca-expired";
/// See [`PREVIOUS_CA_EXPIRED`].
pub const BUNDLE_OF_TWO_ROTATIONS_AGO: &str = "bundle-of-two-rotations-ago";

/// What a refusal for `breaks` refuses, in a few words for the first line
/// of a message (the breaks themselves are the details): which guard
/// holds, with the reload interval it assumes when the policy sets none.
pub fn refusal_summary(breaks: &[TrustBreak], policy: &pki_core::RotationPolicy) -> String {
    let mut parts = Vec::new();
    if breaks.iter().any(|b| b.check == PREVIOUS_CA_EXPIRED) {
        parts.push("the CA being replaced has expired (no bridge can be made)".to_string());
    }
    if breaks
        .iter()
        .any(|b| b.check == BUNDLE_OF_TWO_ROTATIONS_AGO)
    {
        let interval = pki_core::policy::human(policy.effective_reload_interval());
        let assumed = if policy.reload_interval.is_none() {
            "assumed "
        } else {
            ""
        };
        parts.push(format!(
            "within the reload interval ({assumed}{interval}) of the previous rotation"
        ));
    }
    parts.join(", and ")
}

/// Whether `ca` can issue a leaf of `request` that consumers accept: a
/// probe leaf, issued by `ca` exactly as a real one would be (its names,
/// its kind, its NotAfter cut at `not_after_limit`), presented with
/// `chain_after_leaf` (what follows a leaf of `ca` in the chain servers
/// send), verified against `bundle` (what consumers trust) at `now`, by
/// the verifier every check uses: path length, name constraints, key
/// usage, validity. The probe is never kept; its key and serial come from
/// a fixed seed, so the check is a pure function of its inputs. Returns
/// why it does not verify.
///
/// # Errors
///
/// Why the probe does not verify, as a message: its issuance failed, or its
/// path to `bundle` does not validate for one of the request's purposes.
pub fn probe_issuance(
    ca: &pki_core::CertificateAuthority,
    chain_after_leaf: &[Certificate],
    bundle: &Bundle,
    request: &crate::LeafRequest,
    not_after_limit: Option<OffsetDateTime>,
    now: OffsetDateTime,
) -> Result<(), String> {
    use rand_core::SeedableRng;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(0x0070_726f_6265);
    let key = pki_core::PrivateKey::generate(pki_core::KeyAlgorithm::EcdsaP256, &mut rng)
        .map_err(|e| e.to_string())?;
    let mut params = pki_core::CertificateParams::new(
        request.kind.profile(),
        &request.common_name(),
        now,
        request.lifetime,
    )
    .map_err(|e| e.to_string())?;
    params.dns_names = request.dns_names.clone();
    params.ip_addresses = request.ip_addresses.clone();
    params.not_after_limit = not_after_limit;
    let public = key.public_key().map_err(|e| e.to_string())?;
    let probe = ca
        .issue(&params, &public, &mut rng)
        .map_err(|e| e.to_string())?;
    let purposes: &[Purpose] = match request.kind {
        crate::LeafKind::Server => &[Purpose::ServerAuth],
        crate::LeafKind::Client => &[Purpose::ClientAuth],
        crate::LeafKind::ServerClient => &[Purpose::ServerAuth, Purpose::ClientAuth],
    };
    let cache = SignatureCache::new();
    for &purpose in purposes {
        check_for(&probe, chain_after_leaf, bundle, now, purpose, &cache)
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}
