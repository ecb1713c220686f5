//! The trust matrix every pre-flight proves before a rotation is
//! committed: each serving chain a consumer may be handed (old, new)
//! against each bundle a consumer may trust (old, new), at each time that
//! matters, by RFC 5280 path validation ([`crate::verify_chain`]). A red
//! cell is a consumer cut off.
//!
//! pki-rotate's engines build the chains and bundles (probe leaves issued
//! exactly as real ones, every version of a CA set's files) and judge the
//! red cells; the cells themselves are checked here, one way for all.

use crate::datetime::rfc3339;
use crate::{
    Bundle, Certificate, ExpectedName, Purpose, SignatureCache, VerifyError, VerifyOptions,
    verify_chain_cached,
};
use time::OffsetDateTime;

/// Which side of a rotation a chain or a bundle comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Side {
    /// Before the rotation.
    Old,
    /// After the rotation.
    New,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Old => "old",
            Side::New => "new",
        })
    }
}

/// One cell: a serving chain against a bundle at a time.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct TrustCell {
    /// Whose serving chain.
    pub chain: Side,
    /// Whose bundle.
    pub bundle: Side,
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// The ids of the path found (leaf first, anchor last), or why none was.
    #[serde(serialize_with = "result_as_text")]
    pub result: Result<Vec<String>, VerifyError>,
}

fn result_as_text<S: serde::Serializer>(
    result: &Result<Vec<String>, VerifyError>,
    s: S,
) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(&result.as_ref().map_err(ToString::to_string), s)
}

impl TrustCell {
    /// Whether the chain verified.
    pub fn verified(&self) -> bool {
        self.result.is_ok()
    }

    /// `old serving chain x new bundle at 2027-...`.
    pub fn label(&self) -> String {
        format!(
            "{} serving chain x {} bundle at {}",
            self.chain,
            self.bundle,
            rfc3339(self.at)
        )
    }
}

/// What the cells are made of.
#[derive(Debug, Clone, Copy)]
pub struct MatrixInputs<'a> {
    /// The old serving chain (leaf first), if one exists.
    pub old_chain: Option<&'a [Certificate]>,
    /// The new serving chain (leaf first), if one exists.
    pub new_chain: Option<&'a [Certificate]>,
    /// The old bundle, if known.
    pub old_bundle: Option<&'a Bundle>,
    /// The new bundle.
    pub new_bundle: &'a Bundle,
}

/// Verifies one serving chain (leaf first) against one bundle at `at`, for
/// serverAuth and the leaf's first name ([`expected_name`]): the ids of the
/// path found (leaf first, anchor last), or why none was.
///
/// # Errors
///
/// The [`VerifyError`] of the verification (see [`check_for`]); an empty
/// `chain` is [`VerifyError::UnknownIssuer`].
pub fn check(
    chain: &[Certificate],
    bundle: &Bundle,
    at: OffsetDateTime,
    cache: &SignatureCache,
) -> Result<Vec<String>, VerifyError> {
    let Some((leaf, intermediates)) = chain.split_first() else {
        // Callers always pass a leaf; an empty chain has nothing to verify.
        return Err(VerifyError::UnknownIssuer {
            cert: "(none: empty serving chain)".to_string(),
            issuer: String::new(),
        });
    };
    check_for(leaf, intermediates, bundle, at, Purpose::ServerAuth, cache)
}

/// Verifies `leaf` (with `intermediates`) against `bundle` at `at` for
/// `purpose`, as a peer would: a client checks a server's first name
/// ([`expected_name`]); a server checks no name of its clients. Every cell
/// of every pre-flight is this check.
///
/// # Errors
///
/// The [`VerifyError`] of
/// [`verify_chain_cached`]: why no path
/// from `leaf` to `bundle` verified at `at` for `purpose` (an expired
/// certificate, an unknown issuer, a bad signature, a name that does not match,
/// and so on).
pub fn check_for(
    leaf: &Certificate,
    intermediates: &[Certificate],
    bundle: &Bundle,
    at: OffsetDateTime,
    purpose: Purpose,
    cache: &SignatureCache,
) -> Result<Vec<String>, VerifyError> {
    let mut opts = VerifyOptions::new(at, purpose);
    if purpose == Purpose::ServerAuth {
        opts.name = expected_name(leaf);
    }
    verify_chain_cached(leaf, intermediates, bundle, &opts, cache)
        .map(|p| p.certs.iter().map(Certificate::id).collect())
}

/// The name a client connecting to the holder of `leaf` expects: its first
/// DNS name (a wildcard is no host name, so `*.example.com` becomes
/// `host.example.com`, a name it matches), else its first IP address.
pub fn expected_name(leaf: &Certificate) -> Option<ExpectedName> {
    leaf.dns_names()
        .into_iter()
        .next()
        .map(|d| match d.strip_prefix("*.") {
            Some(parent) => ExpectedName::Dns(format!("host.{parent}")),
            None => ExpectedName::Dns(d),
        })
        .or_else(|| leaf.ip_addresses().into_iter().next().map(ExpectedName::Ip))
}

/// Every available cell at each of `times`.
pub fn matrix(inputs: &MatrixInputs<'_>, times: &[OffsetDateTime]) -> Vec<TrustCell> {
    let cache = SignatureCache::new();
    let mut cells = Vec::new();
    for &at in times {
        for (chain_side, chain) in [(Side::Old, inputs.old_chain), (Side::New, inputs.new_chain)] {
            let Some(chain) = chain else { continue };
            for (bundle_side, bundle) in [
                (Side::Old, inputs.old_bundle),
                (Side::New, Some(inputs.new_bundle)),
            ] {
                let Some(bundle) = bundle else { continue };
                cells.push(TrustCell {
                    chain: chain_side,
                    bundle: bundle_side,
                    at,
                    result: check(chain, bundle, at, &cache),
                });
            }
        }
    }
    cells
}
