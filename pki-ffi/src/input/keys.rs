//! A key ring's inputs: `pki_keyring_create` and `pki_keyring_step`.

use super::KeyTypeIn;
use crate::abi::seconds;
use crate::error::Failure;
use pki_rotate::{KeyRingInput, KeyRingPolicy};
use serde::Deserialize;
use serde_json::value::RawValue;
use time::OffsetDateTime;

/// A key ring policy; every field optional (the default's otherwise).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KeyRingPolicyIn {
    key_type: Option<KeyTypeIn>,
    lifetime_seconds: Option<i64>,
    grace_seconds: Option<i64>,
    /// 0 = not stated.
    max_token_lifetime_seconds: Option<i64>,
}

impl KeyRingPolicyIn {
    fn policy(&self) -> Result<KeyRingPolicy, Failure> {
        let mut p = KeyRingPolicy::default();
        if let Some(k) = self.key_type {
            if matches!(k, KeyTypeIn::P384) {
                return Err(Failure::invalid(
                    "key type \"p384\" is not a key type of the key ring (p256, rsa2048, \
                     rsa3072, rsa4096)",
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

/// `pki_keyring_create`: a new ring, an imported key set, or a saved document.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KeyRingCreateIn {
    policy: Option<KeyRingPolicyIn>,
    import: Option<String>,
    state: Option<Box<RawValue>>,
}

impl KeyRingCreateIn {
    pub(crate) fn document(
        &self,
        now: OffsetDateTime,
        rng: &mut pki_core::OsRng,
    ) -> Result<pki_rotate::KeyRing, Failure> {
        use pki_rotate::{ImportedKeys, KeyRing};
        if let Some(state) = &self.state {
            if self.policy.is_some() || self.import.is_some() {
                return Err(Failure::invalid(
                    "parameter `input`: a saved `state` comes alone (it carries its policy and keys)",
                ));
            }
            return Ok(KeyRing::from_json(state.get().as_bytes())?);
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

/// `pki_keyring_step`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct KeyRingStepIn {
    forced: Option<String>,
    #[serde(default)]
    retire: Vec<String>,
}

impl KeyRingStepIn {
    pub(crate) fn input(&self) -> KeyRingInput {
        let mut input = KeyRingInput::retire(self.retire.iter().cloned());
        input.forced = self.forced.clone();
        input
    }
}
