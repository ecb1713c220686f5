//! The signer's inputs: `pki_signer_create`, `pki_signer_step` (its policy,
//! forced rotation and `rotate_to`) and `pki_signer_validate`.

use super::leaf::LeafChangeIn;
use super::{CaIn, KeyTypeIn};
use crate::abi::seconds;
use crate::error::Failure;
use pki_core::CaImport;
use pki_rotate::{ForcedRotation, ServiceAccountKeys, SignerPolicy, SignerState};
use serde::Deserialize;
use serde_json::value::RawValue;
use time::OffsetDateTime;

/// A signer policy; every field optional, the others kept from the base
/// (the default policy at creation, the document's at a step).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PolicyIn {
    lifetime_seconds: Option<i64>,
    min_trust_seconds: Option<i64>,
    /// 0 = unknown.
    reload_interval_seconds: Option<i64>,
    leaf_refresh_fraction: Option<f64>,
    keep_previous_root: Option<bool>,
}

impl PolicyIn {
    /// `base` with the fields given here, not checked yet.
    pub(crate) fn over(&self, mut base: SignerPolicy) -> SignerPolicy {
        if let Some(s) = self.lifetime_seconds {
            base.rotation.lifetime = seconds(s);
        }
        if let Some(s) = self.min_trust_seconds {
            base.rotation.min_trust = seconds(s);
        }
        if let Some(s) = self.reload_interval_seconds {
            base.rotation.reload_interval = (s != 0).then(|| seconds(s));
        }
        if let Some(f) = self.leaf_refresh_fraction {
            base.leaf_refresh_fraction = f;
        }
        if let Some(k) = self.keep_previous_root {
            base.keep_previous_root = k;
        }
        base
    }
}

/// `pki_signer_create`: a new CA, an imported one, or a saved document.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SignerCreateIn {
    common_name: Option<String>,
    key_type: Option<KeyTypeIn>,
    policy: Option<PolicyIn>,
    import: Option<CaIn>,
    state: Option<Box<RawValue>>,
}

impl SignerCreateIn {
    pub(crate) fn document(
        &self,
        now: OffsetDateTime,
        rng: &mut pki_core::OsRng,
    ) -> Result<SignerState, Failure> {
        let policy = || -> Result<SignerPolicy, Failure> {
            let mut base = SignerPolicy::default();
            if let Some(k) = self.key_type {
                base.key_algorithm = k.algorithm();
            }
            let policy = self.policy.clone().unwrap_or_default().over(base);
            policy.validate()?;
            Ok(policy)
        };
        match (&self.common_name, &self.import, &self.state) {
            (Some(cn), None, None) => Ok(SignerState::new(cn, policy()?, now, rng)?),
            (None, Some(ca), None) => Ok(SignerState::import(&ca.parse()?, policy()?, now)?),
            (None, None, Some(state)) => {
                if self.key_type.is_some() || self.policy.is_some() {
                    return Err(Failure::invalid(
                        "parameter `input`: a saved `state` carries its own key type and policy",
                    ));
                }
                Ok(SignerState::from_json(state.get().as_bytes())?)
            }
            _ => Err(Failure::invalid(
                "parameter `input`: give exactly one of `common_name` (a new CA), `import` \
                 (an existing CA) and `state` (a saved document)",
            )),
        }
    }
}

/// A forced rotation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ForcedIn {
    reason: String,
    /// 0 or absent: the normal grace.
    grace_seconds: Option<i64>,
    #[serde(default)]
    no_bridges: bool,
}

/// A replacement CA and the service-account key sets to compare.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ValidateIn {
    ca: String,
    key: Option<String>,
    chain: Option<String>,
    current_keys: Option<String>,
    proposed_keys: Option<String>,
}

fn key_set(pem: &Option<String>) -> Result<Option<Vec<Vec<u8>>>, Failure> {
    pem.as_deref()
        .map(|p| ServiceAccountKeys::keys_from_pem(p.as_bytes()))
        .transpose()
        .map_err(Failure::from)
}

impl ValidateIn {
    pub(crate) fn import(&self) -> Result<CaImport, Failure> {
        CaIn {
            ca: self.ca.clone(),
            key: self.key.clone(),
            chain: self.chain.clone(),
        }
        .parse()
    }

    /// Both key sets as given (no key ring of a store).
    pub(crate) fn key_sets(&self) -> Result<ServiceAccountKeys, Failure> {
        Ok(ServiceAccountKeys {
            current: key_set(&self.current_keys)?,
            proposed: key_set(&self.proposed_keys)?,
        })
    }
}

/// `pki_signer_step`'s `rotate_to`: a replacement CA, and the reason to
/// override its failed checks.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RotateToIn {
    ca: String,
    key: Option<String>,
    chain: Option<String>,
    current_keys: Option<String>,
    proposed_keys: Option<String>,
    force: Option<String>,
}

impl RotateToIn {
    pub(crate) fn validate_in(&self) -> ValidateIn {
        ValidateIn {
            ca: self.ca.clone(),
            key: self.key.clone(),
            chain: self.chain.clone(),
            current_keys: self.current_keys.clone(),
            proposed_keys: self.proposed_keys.clone(),
        }
    }

    pub(crate) fn force(&self) -> Option<String> {
        self.force.clone()
    }

    /// The proposed key set as given, when no current set is: the store's
    /// key ring is then the current one.
    pub(crate) fn uses_store_keys(&self) -> bool {
        self.current_keys.is_none()
    }

    pub(crate) fn proposed_keys(&self) -> Option<&[u8]> {
        self.proposed_keys.as_deref().map(str::as_bytes)
    }
}

/// `pki_signer_step`: every field optional; `{}` (or NULL) is the periodic
/// controller step.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct SignerStepIn {
    pub(crate) policy: Option<PolicyIn>,
    forced: Option<ForcedIn>,
    allow_trust_break: Option<String>,
    #[serde(default)]
    leaves: Vec<LeafChangeIn>,
    pub(crate) rotate_to: Option<RotateToIn>,
    #[serde(default)]
    pub(crate) renew_same_key: bool,
    pub(crate) ack: Option<AckIn>,
    /// The step decided from the store's summary of the document when that
    /// says nothing is due: with no leaves, the periodic step (no document
    /// read, no status); with leaves, a step over those leaves.
    #[serde(default)]
    pub(crate) unless_idle: bool,
}

/// `pki_signer_step`'s `ack`: a consumer loaded a published bundle.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct AckIn {
    pub(crate) consumer: String,
    pub(crate) fingerprint: String,
}

impl SignerStepIn {
    /// Whether the input asks for something besides `rotate_to` or
    /// `renew_same_key`, which are requests of their own.
    pub(crate) fn has_signer_fields(&self) -> bool {
        self.asks_beyond_leaves() || !self.leaves.is_empty()
    }

    /// Whether the input asks for something besides leaf changes (and the
    /// requests of their own).
    pub(crate) fn asks_beyond_leaves(&self) -> bool {
        self.policy.is_some() || self.forced.is_some() || self.allow_trust_break.is_some()
    }

    /// The signer input besides the policy (which needs the document).
    pub(crate) fn signer_input(&self) -> Result<pki_rotate::SignerInput, Failure> {
        let allow_trust_break = match &self.allow_trust_break {
            Some(r) if r.trim().is_empty() => {
                return Err(Failure::invalid(
                    "parameter `input`: `allow_trust_break` must not be blank (it is recorded)",
                ));
            }
            other => other.clone(),
        };
        Ok(pki_rotate::SignerInput {
            forced: self.forced.as_ref().map(|f| ForcedRotation {
                reason: f.reason.clone(),
                grace: f.grace_seconds.filter(|s| *s != 0).map(seconds),
                no_bridges: f.no_bridges,
            }),
            leaves: self
                .leaves
                .iter()
                .map(LeafChangeIn::change)
                .collect::<Result<_, _>>()?,
            allow_trust_break,
            ..pki_rotate::SignerInput::default()
        })
    }
}
