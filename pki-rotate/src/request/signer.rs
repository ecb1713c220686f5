//! The signer's requests (service-CA scheme, and CAs signed by someone
//! else's root): create, step (its policy, a forced rotation, leaf
//! changes, `rotate_to`, `renew_same_key`, an ack) and validate.

use super::leaf::LeafChangeRequest;
use super::{CaPem, KeyType, RequestError, seconds};
use crate::{
    AckInput, ForcedRotation, RotateError, ServiceAccountKeys, SignerInput, SignerPolicy,
    SignerState,
};
use pki_core::{CaImport, Pkcs11Uri, TokenAccess};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use time::OffsetDateTime;

/// A signer policy; every field optional, the others kept from the base
/// (the default policy at creation, the document's at a step).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignerPolicyFields {
    /// D, the CA lifetime (790 days by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime_seconds: Option<i64>,
    /// M, the minimum trust left before a rotation (395 days by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub min_trust_seconds: Option<i64>,
    /// I, the consumers' reload interval; 0 = unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reload_interval_seconds: Option<i64>,
    /// When a leaf is refreshed, as a fraction of its lifetime left (0.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leaf_refresh_fraction: Option<f64>,
    /// Whether the bundle keeps the previous root (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub keep_previous_root: Option<bool>,
}

impl SignerPolicyFields {
    /// `base` with the fields given here, not checked yet (the engine's
    /// plan checks every policy).
    pub fn over(&self, mut base: SignerPolicy) -> SignerPolicy {
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

/// Creates a signer: a new CA (`common_name`), an imported one (`import`),
/// or a saved document (`state`); exactly one of the three. A new CA's key
/// is made in a PKCS#11 token when `key_store` names one.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignerCreate {
    /// A new self-signed CA `CN=<common_name>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub common_name: Option<String>,
    /// The type of the CAs the signer makes (`"p256"` by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_type: Option<KeyType>,
    /// The PKCS#11 token the new CA's keys are made in, as a URI naming
    /// the token (`pkcs11:token=ops-hsm`), with `common_name` only: the
    /// key never leaves the token, and the document keeps its URI. The
    /// token is reached through the access the store was opened with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_store: Option<String>,
    /// Fields replacing those of the default policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<SignerPolicyFields>,
    /// An existing CA, signed by someone else's root.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<CaPem>,
    /// A saved signer document (its state bytes as a JSON value).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<serde_json::Value>,
}

/// Where a new signer is created: what reaches the caller's PKCS#11
/// tokens (None: no module was given), and where the store is (an
/// absolute directory or a store URL, as the CLI names it), from which the
/// first token key's id is derived.
#[derive(Clone, Copy)]
pub struct CreateSite<'a> {
    /// The caller's tokens.
    pub tokens: Option<&'a Arc<dyn TokenAccess>>,
    /// The store's location.
    pub location: &'a str,
}

impl<'a> CreateSite<'a> {
    /// The token `uri` (a request's `key_store`) names, with the caller's
    /// access to it: without one, the engine's own refusal for a token key
    /// without a token, so that callers see one error for both.
    pub(crate) fn token(
        &self,
        uri: &str,
    ) -> Result<(&'a Arc<dyn TokenAccess>, Pkcs11Uri), RequestError> {
        let store =
            Pkcs11Uri::parse(uri).map_err(|e| RequestError::invalid("key_store", e.to_string()))?;
        match self.tokens {
            Some(access) => Ok((access, store)),
            None => Err(RotateError::Core(pki_core::Error::Pkcs11TokenNotOpen {
                uri: store.to_string(),
            })
            .into()),
        }
    }
}

impl SignerCreate {
    /// The new document at `now`, in the store `site` describes.
    ///
    /// # Errors
    ///
    /// [`RequestError::Invalid`] for fields that do not go together (a
    /// `key_store` without `common_name`, not exactly one of `common_name`,
    /// `import` and `state`, a `state` with `key_type` or `policy`), a
    /// `key_store` that is not a PKCS#11 URI, or a `state` that does not
    /// serialize; [`RequestError::Rotate`] with what the engine refuses: the
    /// policy ([`SignerPolicy::validate`]), the token's errors (or
    /// [`pki_core::Error::Pkcs11TokenNotOpen`] when `site` has no access), and
    /// those of [`SignerState::new`], [`SignerState::new_in_token`],
    /// [`SignerState::import`] or [`SignerState::from_json`].
    pub fn document<R: rand_core::CryptoRng + ?Sized>(
        &self,
        site: CreateSite<'_>,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<SignerState, RequestError> {
        let policy = || -> Result<SignerPolicy, RequestError> {
            let mut base = SignerPolicy::default();
            if let Some(k) = self.key_type {
                base.key_algorithm = k.algorithm();
            }
            let policy = self.policy.clone().unwrap_or_default().over(base);
            policy.validate()?;
            Ok(policy)
        };
        if self.key_store.is_some() && self.common_name.is_none() {
            return Err(RequestError::invalid(
                "key_store",
                "a token makes the key of a new CA only: give it with `common_name`",
            ));
        }
        match (&self.common_name, &self.import, &self.state) {
            (Some(cn), None, None) => match &self.key_store {
                None => Ok(SignerState::new(cn, policy()?, now, rng)?),
                Some(uri) => new_in_token(cn, uri, policy()?, site, now, rng),
            },
            (None, Some(ca), None) => Ok(SignerState::import(&ca.parse()?, policy()?, now)?),
            (None, None, Some(state)) => {
                if self.key_type.is_some() || self.policy.is_some() {
                    return Err(RequestError::invalid(
                        "state",
                        "a saved `state` carries its own key type and policy",
                    ));
                }
                let bytes = serde_json::to_vec(state)
                    .map_err(|e| RequestError::invalid("state", e.to_string()))?;
                Ok(SignerState::from_json(&bytes)?)
            }
            _ => Err(RequestError::invalid(
                "common_name, import, state",
                "give exactly one of `common_name` (a new CA), `import` (an existing CA) and \
                 `state` (a saved document)",
            )),
        }
    }
}

/// A new signer `cn` whose first CA key is made in the token `uri` names,
/// through `site`'s tokens. The key's id comes from the store's location
/// and the CA's name (as the CLI's `pki init --key-store`), so a creation
/// that failed after the token made the key adopts that key when run
/// again, instead of leaving it behind.
fn new_in_token<R: rand_core::CryptoRng + ?Sized>(
    cn: &str,
    uri: &str,
    policy: SignerPolicy,
    site: CreateSite<'_>,
    now: OffsetDateTime,
    rng: &mut R,
) -> Result<SignerState, RequestError> {
    let (access, store) = site.token(uri)?;
    Ok(SignerState::new_in_token(
        cn,
        policy,
        (access, &store, site.location),
        now,
        rng,
    )?)
}

/// A forced rotation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForcedRequest {
    /// Why (recorded; the same reason again is nothing to do).
    pub reason: String,
    /// How long the old CA stays trusted; 0 or absent: the normal grace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_seconds: Option<i64>,
    /// Distrust the old CA at once (compromise).
    #[serde(default)]
    pub no_bridges: bool,
}

/// A replacement CA and the service-account key sets to compare (`pki
/// validate --to`).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ValidateRequest {
    /// The replacement's certificate (and possibly key and chain), PEM.
    pub ca: String,
    /// Its key, PEM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Its chain, PEM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
    /// The service-account keys tokens are verified with today.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_keys: Option<String>,
    /// The service-account keys that come with the replacement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed_keys: Option<String>,
}

fn key_set(pem: &Option<String>) -> Result<Option<Vec<Vec<u8>>>, RequestError> {
    Ok(pem
        .as_deref()
        .map(|p| ServiceAccountKeys::keys_from_pem(p.as_bytes()))
        .transpose()?)
}

impl ValidateRequest {
    /// The replacement CA, parsed.
    ///
    /// # Errors
    ///
    /// Those of [`CaPem::parse`](super::CaPem::parse).
    pub fn import(&self) -> Result<CaImport, RequestError> {
        CaPem {
            ca: self.ca.clone(),
            key: self.key.clone(),
            chain: self.chain.clone(),
        }
        .parse()
    }

    /// Both key sets as given (no key ring of a store).
    ///
    /// # Errors
    ///
    /// [`RequestError::Rotate`] with the error of
    /// [`ServiceAccountKeys::keys_from_pem`] for a key set that does not read.
    pub fn key_sets(&self) -> Result<ServiceAccountKeys, RequestError> {
        Ok(ServiceAccountKeys {
            current: key_set(&self.current_keys)?,
            proposed: key_set(&self.proposed_keys)?,
        })
    }
}

/// `rotate_to`: a replacement CA, and the reason to override its failed
/// checks.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RotateToRequest {
    /// The replacement's certificate (and possibly key and chain), PEM.
    pub ca: String,
    /// Its key, PEM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Its chain, PEM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chain: Option<String>,
    /// The service-account keys tokens are verified with today (absent:
    /// the key ring the store keeps under `keys`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_keys: Option<String>,
    /// The service-account keys that come with the replacement.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proposed_keys: Option<String>,
    /// The reason to override failed checks (recorded with each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<String>,
}

/// An ack: a consumer loaded a published bundle.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    /// Who loaded it.
    pub consumer: String,
    /// The bundle's fingerprint (hex).
    pub fingerprint: String,
}

/// One signer step: every field optional; `{}` is the periodic step.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignerStep {
    /// Changes to the document's policy (not the key type).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<SignerPolicyFields>,
    /// Rotate now, once per distinct reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced: Option<ForcedRequest>,
    /// Rotate even when consumers would be cut off; recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allow_trust_break: Option<String>,
    /// Changes to the leaves the document keeps, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub leaves: Vec<LeafChangeRequest>,
    /// `pki rotate --to` (alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rotate_to: Option<RotateToRequest>,
    /// `pki rotate --renew-same-key` (alone).
    #[serde(default)]
    pub renew_same_key: bool,
    /// `pki ack` (alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ack: Option<AckRequest>,
    /// The step decided from the store's summary of the document when that
    /// says nothing is due: alone, the periodic step (no document read, no
    /// status); with `leaves`, a step over those leaves.
    #[serde(default)]
    pub unless_idle: bool,
}

/// What a signer step asks for, each a request of its own.
#[derive(Debug, Clone)]
pub enum SignerRequest {
    /// The signer engine, with policy fields over the document's.
    Step {
        /// Changes to the document's policy.
        policy: Option<SignerPolicyFields>,
        /// The rest of the input.
        input: SignerInput,
    },
    /// The signer engine, decided from the store's summary when it says
    /// nothing is due.
    UnlessIdle(SignerInput),
    /// The uptake engine: a consumer's ack.
    Ack(AckInput),
    /// The external-CA engine: a replacement CA.
    RotateTo(RotateToRequest),
    /// The external-CA engine: a new certificate on the same key.
    RenewSameKey,
}

impl SignerStep {
    /// Whether it asks for something besides leaf changes (and the
    /// requests of their own).
    fn asks_beyond_leaves(&self) -> bool {
        self.policy.is_some() || self.forced.is_some() || self.allow_trust_break.is_some()
    }

    /// Whether it asks for something besides `rotate_to` or
    /// `renew_same_key`.
    fn has_signer_fields(&self) -> bool {
        self.asks_beyond_leaves() || !self.leaves.is_empty()
    }

    /// The request it makes, refused when fields that go alone are mixed.
    ///
    /// # Errors
    ///
    /// [`RequestError::Invalid`] when fields that go alone are mixed (see
    /// above), or `allow_trust_break` is blank; those of
    /// [`LeafChangeRequest::change`] for each leaf change.
    pub fn request(&self) -> Result<SignerRequest, RequestError> {
        let alone = |what: &str| {
            RequestError::invalid(
                what,
                "a request of its own: give it without `policy`, `forced`, \
                 `allow_trust_break`, `leaves` or another of `rotate_to`, `renew_same_key`, \
                 `ack` and `unless_idle`",
            )
        };
        if self.unless_idle {
            if self.asks_beyond_leaves()
                || self.renew_same_key
                || self.rotate_to.is_some()
                || self.ack.is_some()
            {
                return Err(RequestError::invalid(
                    "unless_idle",
                    "goes alone or with `leaves` only: give it without `policy`, `forced`, \
                     `allow_trust_break`, `rotate_to`, `renew_same_key` and `ack`",
                ));
            }
            return Ok(SignerRequest::UnlessIdle(self.signer_input()?));
        }
        if let Some(ack) = &self.ack {
            if self.has_signer_fields() || self.renew_same_key || self.rotate_to.is_some() {
                return Err(alone("ack"));
            }
            let ack = AckInput::new(ack.consumer.clone(), ack.fingerprint.clone());
            return Ok(SignerRequest::Ack(ack));
        }
        if let Some(to) = &self.rotate_to {
            if self.has_signer_fields() || self.renew_same_key {
                return Err(alone("rotate_to"));
            }
            return Ok(SignerRequest::RotateTo(to.clone()));
        }
        if self.renew_same_key {
            if self.has_signer_fields() {
                return Err(alone("renew_same_key"));
            }
            return Ok(SignerRequest::RenewSameKey);
        }
        Ok(SignerRequest::Step {
            policy: self.policy.clone(),
            input: self.signer_input()?,
        })
    }

    /// The signer input besides the policy (which needs the document).
    fn signer_input(&self) -> Result<SignerInput, RequestError> {
        let allow_trust_break = match &self.allow_trust_break {
            Some(r) if r.trim().is_empty() => {
                return Err(RequestError::invalid(
                    "allow_trust_break",
                    "must not be blank (it is recorded)",
                ));
            }
            other => other.clone(),
        };
        Ok(SignerInput {
            forced: self.forced.as_ref().map(|f| ForcedRotation {
                reason: f.reason.clone(),
                grace: f.grace_seconds.filter(|s| *s != 0).map(seconds),
                no_bridges: f.no_bridges,
            }),
            leaves: self
                .leaves
                .iter()
                .map(LeafChangeRequest::change)
                .collect::<Result<_, _>>()?,
            allow_trust_break,
            ..SignerInput::default()
        })
    }
}

impl RotateToRequest {
    /// The replacement as a validation request.
    pub fn replacement(&self) -> ValidateRequest {
        ValidateRequest {
            ca: self.ca.clone(),
            key: self.key.clone(),
            chain: self.chain.clone(),
            current_keys: self.current_keys.clone(),
            proposed_keys: self.proposed_keys.clone(),
        }
    }

    /// The proposed key set as given, when no current set is: the store's
    /// key ring is then the current one.
    pub fn uses_store_keys(&self) -> bool {
        self.current_keys.is_none()
    }

    /// The proposed key set as PEM.
    pub fn proposed_keys(&self) -> Option<&[u8]> {
        self.proposed_keys.as_deref().map(str::as_bytes)
    }
}

#[cfg(test)]
mod key_store_tests {
    use super::*;
    use rand_chacha::ChaCha20Rng;
    use rand_core::SeedableRng;
    use time::macros::datetime;

    const NOWHERE: CreateSite<'static> = CreateSite {
        tokens: None,
        location: "memory:",
    };

    fn create(json: &str) -> Result<SignerState, RequestError> {
        let request: SignerCreate = super::super::from_json("input", json.as_bytes())?;
        request.document(
            NOWHERE,
            datetime!(2026-01-01 0:00 UTC),
            &mut ChaCha20Rng::seed_from_u64(7),
        )
    }

    #[test]
    fn a_key_store_without_tokens_is_the_engines_refusal_naming_the_module() {
        let e = create(r#"{"common_name": "ca", "key_store": "pkcs11:token=hsm"}"#).unwrap_err();
        assert!(
            matches!(
                &e,
                RequestError::Rotate(RotateError::Core(
                    pki_core::Error::Pkcs11TokenNotOpen { .. }
                ))
            ),
            "{e}"
        );
        assert!(e.to_string().contains("PKI_PKCS11_MODULE"), "{e}");
    }

    #[test]
    fn a_key_store_goes_with_a_new_ca_only_and_must_be_a_pkcs11_uri() {
        for (json, why) in [
            (
                r#"{"state": {}, "key_store": "pkcs11:token=hsm"}"#,
                "common_name",
            ),
            (
                r#"{"common_name": "ca", "key_store": "https://hsm"}"#,
                "key_store",
            ),
        ] {
            let e = create(json).unwrap_err();
            assert!(
                matches!(&e, RequestError::Invalid { .. }) && e.to_string().contains(why),
                "{json}: {e}"
            );
        }
        // Without a key store nothing reaches a token.
        assert!(
            create(r#"{"common_name": "ca"}"#)
                .unwrap()
                .token_keys
                .is_none()
        );
    }
}
