//! A key ring's requests: create and step.

use super::{CreateSite, KeyType, RequestError, seconds};
use crate::{ImportedKeys, KeyRing, KeyRingInput, KeyRingPolicy};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// A key ring policy; every field optional (the default's otherwise).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRingPolicyFields {
    /// `"p256"` (ES256, the default) or an RSA type (RS256); not `"p384"`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_type: Option<KeyType>,
    /// How long a key is active (90 days).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifetime_seconds: Option<i64>,
    /// How long a rotated-out key stays accepted (24 hours).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_seconds: Option<i64>,
    /// The longest token lifetime; 0 = not stated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_token_lifetime_seconds: Option<i64>,
}

impl KeyRingPolicyFields {
    /// The policy: the default with the fields given.
    ///
    /// # Errors
    ///
    /// [`RequestError::Invalid`] for `key_type` `"p384"`, which the key ring
    /// does not sign with. The durations are checked when the ring is made
    /// ([`KeyRingPolicy::validate`]).
    pub fn policy(&self) -> Result<KeyRingPolicy, RequestError> {
        let mut p = KeyRingPolicy::default();
        if let Some(k) = self.key_type {
            if matches!(k, KeyType::P384) {
                return Err(RequestError::invalid(
                    "key_type",
                    "\"p384\" is not a key type of the key ring (p256, rsa2048, rsa3072, rsa4096)",
                ));
            }
            p.algorithm = k.algorithm();
        }
        if let Some(s) = self.lifetime_seconds {
            p.lifetime = seconds(s);
        }
        if let Some(s) = self.grace_seconds {
            p.grace = seconds(s);
        }
        if let Some(s) = self.max_token_lifetime_seconds {
            p.max_token_lifetime = (s != 0).then(|| seconds(s));
        }
        Ok(p)
    }
}

/// Creates a key ring: a new ring, an imported key set, or a saved document.
#[derive(Debug, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRingCreate {
    /// Fields replacing those of the default policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<KeyRingPolicyFields>,
    /// An existing key set: PEM keys or a JWK Set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub import: Option<String>,
    /// A saved ring (its state as a JSON value), alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<serde_json::Value>,
    /// The PKCS#11 token the new ring's keys are made in, as a URI naming
    /// the token (`pkcs11:token=ops-hsm`), for a new ring only (not with
    /// `import` or `state`): the keys never leave the token, and the
    /// document keeps their URIs. The token is reached through the access
    /// the store was opened with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_store: Option<String>,
}

impl KeyRingCreate {
    /// The new document at `now`, made without a token (a `key_store` is
    /// refused naming the token it needs: see [`KeyRingCreate::document_at`]).
    ///
    /// # Errors
    ///
    /// Those of [`KeyRingCreate::document_at`]; a `key_store` is always refused
    /// ([`RotateError::Core`](crate::RotateError::Core) with
    /// [`pki_core::Error::Pkcs11TokenNotOpen`]).
    pub fn document<R: rand_core::CryptoRng + ?Sized>(
        &self,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<KeyRing, RequestError> {
        let site = CreateSite {
            tokens: None,
            location: "",
        };
        self.document_at(site, now, rng)
    }

    /// The new document at `now`, in the store `site` describes: a
    /// `key_store`'s first key is made through its tokens, its id derived
    /// from its location.
    ///
    /// # Errors
    ///
    /// [`RequestError::Invalid`] for fields that do not go together (a
    /// `key_store` with `import` or `state`, a `state` with `policy` or
    /// `import`), a `key_store` that is not a PKCS#11 URI, a `state` that does
    /// not serialize, or a policy refused by [`KeyRingPolicyFields::policy`];
    /// [`RequestError::Rotate`] with what the key ring refuses: the token's
    /// errors (or [`pki_core::Error::Pkcs11TokenNotOpen`] when `site` has no
    /// access), those of [`KeyRing::from_json`], [`ImportedKeys::parse`],
    /// [`KeyRing::import`], [`KeyRing::new`] or [`KeyRing::new_in_token`].
    pub fn document_at<R: rand_core::CryptoRng + ?Sized>(
        &self,
        site: CreateSite<'_>,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<KeyRing, RequestError> {
        if let Some(uri) = &self.key_store {
            if self.import.is_some() || self.state.is_some() {
                return Err(RequestError::invalid(
                    "key_store",
                    "a token makes the keys of a new ring only: not with `import` or `state`",
                ));
            }
            let policy = self.policy.clone().unwrap_or_default().policy()?;
            return new_in_token(uri, policy, site, now);
        }
        if let Some(state) = &self.state {
            if self.policy.is_some() || self.import.is_some() {
                return Err(RequestError::invalid(
                    "state",
                    "a saved `state` comes alone (it carries its policy and keys)",
                ));
            }
            let bytes = serde_json::to_vec(state)
                .map_err(|e| RequestError::invalid("state", e.to_string()))?;
            return Ok(KeyRing::from_json(&bytes)?);
        }
        let policy = self.policy.clone().unwrap_or_default().policy()?;
        Ok(match &self.import {
            Some(keys) => KeyRing::import(
                policy,
                ImportedKeys::parse("import", keys.as_bytes())?,
                now,
                rng,
            )?,
            None => KeyRing::new(policy, now, rng)?,
        })
    }
}

/// A new ring whose first key is made in the token `uri` names, through
/// the tokens of `site`.
fn new_in_token(
    uri: &str,
    policy: KeyRingPolicy,
    site: CreateSite<'_>,
    now: OffsetDateTime,
) -> Result<KeyRing, RequestError> {
    let (access, store) = site.token(uri)?;
    Ok(KeyRing::new_in_token(
        policy,
        (access, &store, site.location),
        now,
    )?)
}

/// One key ring step: `{}` is the periodic step.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KeyRingStep {
    /// Rotate now, once per distinct reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced: Option<String>,
    /// Key ids to retire (imported keys, or keys past their grace).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retire: Vec<String>,
}

impl KeyRingStep {
    /// The engine's input.
    pub fn input(&self) -> KeyRingInput {
        let mut input = KeyRingInput::retire(self.retire.iter().cloned());
        input.forced = self.forced.clone();
        input
    }
}
