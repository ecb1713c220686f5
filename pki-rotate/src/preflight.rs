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

use pki_core::{
    Bundle, Certificate, ExpectedName, Purpose, SignatureCache, VerifyError, VerifyOptions,
    datetime::rfc3339, verify_chain_cached,
};
use time::OffsetDateTime;

/// The DNS name of probe leaves. `.invalid` (RFC 2606) can never be a real host.
pub const PROBE_NAME: &str = "preflight.pki.invalid";

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

/// Verifies one chain against one bundle for serverAuth and the leaf's first DNS name.
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
    let mut opts = VerifyOptions::new(at, Purpose::ServerAuth);
    opts.name = leaf.dns_names().into_iter().next().map(ExpectedName::Dns);
    verify_chain_cached(leaf, intermediates, bundle, &opts, cache)
        .map(|p| p.certs.iter().map(Certificate::id).collect())
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
