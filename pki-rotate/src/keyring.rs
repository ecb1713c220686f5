//! The key ring engine: service-account token signing keys (k3s), rotated
//! with a grace period.
//!
//! A [`KeyRing`] holds one **active** key (what the token issuer signs
//! with) and **accepted** public keys, each with an `accepted_until` (what
//! the API server verifies with). It publishes every key it accepts as
//! `PUBLIC KEY` PEM (what kube-apiserver's `--service-account-key-file`
//! takes) and as a JWK Set whose `kid`s are RFC 7638 thumbprints (what an
//! OIDC discovery endpoint serves).
//!
//! Rules:
//!
//! - The active key is rotated when it is older than the policy's
//!   `lifetime`, or once per forced reason ([`KeyRingInput::forced()`]); a
//!   forced rotation that coincides with a due one is one rotation,
//!   recorded as forced.
//! - At a rotation the previous active key joins the accepted keys until
//!   `rotated_at + grace`: tokens it signed just before the rotation keep
//!   verifying. A rotation never drops it (the k3s rule: the old key must be
//!   in the new accepted set).
//! - Accepted keys whose grace has ended are removed by the next step.
//! - The grace must cover the longest token lifetime when the policy states
//!   one: a token signed just before a rotation lives that long, and its key
//!   must be accepted as long. A policy where it does not is refused with
//!   the timeline that breaks; signing a token that would outlive the grace
//!   (or that has no `exp`) is refused too.
//! - The rule above holds for an imported active key too: once rotated
//!   out it is accepted until `rotated_at + grace`, then removed, like a
//!   generated one (DESIGN: the old key stays accepted for the grace
//!   period, then is removed). The operator sizes the grace for the tokens
//!   it signed, before the import or after.
//! - Imported keys that were not active (k3s's `service.key` keeps old
//!   keys after the first; public keys) never signed here: pki cannot know
//!   how long their tokens live, so they stay accepted until an operator
//!   retires them ([`KeyRingInput::retire()`]). Retiring a key whose grace
//!   has not ended is refused.

use crate::engine::{Engine, Outcome};
use crate::error::{Result, RotateError};
use pki_core::datetime::rfc3339;
use pki_core::policy::human;
use pki_core::{KeyAlgorithm, PrivateKey};
use rand_core::CryptoRng;
use std::borrow::Cow;
use std::collections::BTreeSet;
use time::{Duration, OffsetDateTime};

pub mod document;
pub mod jose;

pub use jose::{JoseError, Jwks, PublicKey};

/// The store key the CLI keeps the key ring under.
pub const STORE_KEY: &str = "keys";
/// Default lifetime of an active key.
pub const DEFAULT_LIFETIME: Duration = Duration::days(90);
/// Default grace period of a rotated-out key.
pub const DEFAULT_GRACE: Duration = Duration::hours(24);

/// Everything that decides how the ring behaves, besides time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRingPolicy {
    /// Type of new active keys: P-256 (ES256 tokens) or RSA (RS256).
    pub algorithm: KeyAlgorithm,
    /// Rotate the active key once it is this old.
    pub lifetime: Duration,
    /// How long a rotated-out key stays accepted, from the rotation.
    pub grace: Duration,
    /// The longest lifetime of a token signed by the ring, when known. The
    /// grace must cover it.
    pub max_token_lifetime: Option<Duration>,
}

impl Default for KeyRingPolicy {
    fn default() -> Self {
        KeyRingPolicy {
            algorithm: KeyAlgorithm::EcdsaP256,
            lifetime: DEFAULT_LIFETIME,
            grace: DEFAULT_GRACE,
            max_token_lifetime: None,
        }
    }
}

impl KeyRingPolicy {
    /// Refuses non-positive durations, and a grace that does not cover the
    /// longest token lifetime, explaining the timeline that breaks.
    pub fn validate(&self) -> Result<()> {
        let positive = |name: &'static str, d: Duration| {
            if d <= Duration::ZERO {
                Err(KeyRingError::Policy(format!(
                    "{name} must be positive, got {}",
                    human(d)
                )))
            } else {
                Ok(())
            }
        };
        positive("key lifetime", self.lifetime)?;
        positive("grace period", self.grace)?;
        if let Some(t) = self.max_token_lifetime {
            positive("longest token lifetime", t)?;
            if self.grace < t {
                return Err(KeyRingError::Policy(format!(
                    "grace period {} does not cover the longest token lifetime {}: a token signed \
                     just before a rotation at T stays in use until T+{}, but its key is accepted \
                     only until T+{}, so it would be rejected for {}",
                    human(self.grace),
                    human(t),
                    human(t),
                    human(self.grace),
                    human(t - self.grace)
                ))
                .into());
            }
        }
        Ok(())
    }
}

/// Where a key came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyOrigin {
    /// Generated by the ring.
    Generated,
    /// Imported from an existing key set.
    Imported,
}

/// The key tokens are signed with.
#[derive(Debug, Clone)]
pub struct ActiveKey {
    /// The private key.
    pub key: PrivateKey,
    /// Its public half.
    pub public: PublicKey,
    /// Its RFC 7638 thumbprint, the `kid` of the tokens it signs.
    pub kid: String,
    /// When it became active (its age counts from here).
    pub since: OffsetDateTime,
    /// Generated or imported.
    pub origin: KeyOrigin,
}

impl ActiveKey {
    fn new(key: PrivateKey, since: OffsetDateTime, origin: KeyOrigin) -> Result<Self> {
        let der = key.public_key_der()?;
        let public = PublicKey::from_spki_der(&der).map_err(KeyRingError::Jose)?;
        Ok(ActiveKey {
            kid: public.thumbprint(),
            key,
            public,
            since,
            origin,
        })
    }
}

/// A public key that verifies tokens besides the active one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AcceptedKey {
    /// The public key.
    pub public: PublicKey,
    /// Its RFC 7638 thumbprint.
    pub kid: String,
    /// When it stopped being active (None: imported as an old key).
    pub rotated_out_at: Option<OffsetDateTime>,
    /// Until when it is accepted (None: until an operator retires it).
    pub accepted_until: Option<OffsetDateTime>,
    /// Generated or imported.
    pub origin: KeyOrigin,
}

impl AcceptedKey {
    fn imported(public: PublicKey) -> Self {
        AcceptedKey {
            kid: public.thumbprint(),
            public,
            rotated_out_at: None,
            accepted_until: None,
            origin: KeyOrigin::Imported,
        }
    }

    /// Whether tokens it signed verify at `now`.
    pub fn accepted_at(&self, now: OffsetDateTime) -> bool {
        self.accepted_until.is_none_or(|until| now < until)
    }
}

/// Why the active key was rotated.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum KeyRotationReason {
    /// The active key reached the policy's lifetime.
    Age {
        /// Its age at the decision, in seconds.
        age_seconds: i64,
        /// The lifetime, in seconds.
        lifetime_seconds: i64,
    },
    /// An operator asked with a reason not seen before.
    Forced {
        /// The operator's reason.
        reason: String,
    },
}

impl std::fmt::Display for KeyRotationReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyRotationReason::Age {
                age_seconds,
                lifetime_seconds,
            } => write!(
                f,
                "key is {} old, its lifetime is {}",
                human(Duration::seconds(*age_seconds)),
                human(Duration::seconds(*lifetime_seconds))
            ),
            KeyRotationReason::Forced { reason } => write!(f, "forced: {reason}"),
        }
    }
}

/// One rotation, as recorded in the history.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct KeyRotationRecord {
    /// When.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// Why.
    pub reason: KeyRotationReason,
    /// The key id rotated out.
    pub from: String,
    /// The new active key id.
    pub to: String,
    /// Until when the key rotated out stays accepted (None only in
    /// histories written before imported active keys got a grace too).
    #[serde(with = "time::serde::rfc3339::option")]
    pub previous_accepted_until: Option<OffsetDateTime>,
}

/// The whole state of a key ring.
#[derive(Debug, Clone)]
pub struct KeyRing {
    /// The policy.
    pub policy: KeyRingPolicy,
    /// The key that signs.
    pub active: ActiveKey,
    /// The other keys that verify, most recently rotated out first.
    pub accepted: Vec<AcceptedKey>,
    /// Every forced reason acted on: each forces one rotation only.
    pub forced_reasons: BTreeSet<String>,
    /// Every rotation, oldest first.
    pub history: Vec<KeyRotationRecord>,
}

/// Errors of the key ring, carried by [`RotateError::KeyRing`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyRingError {
    /// The policy is refused.
    #[error("key ring policy refused: {0}")]
    Policy(String),
    /// A token, JWK or JWK Set was refused.
    #[error(transparent)]
    Jose(#[from] JoseError),
    /// A key set to import holds nothing usable, or something unusable.
    #[error("{location}: {reason}")]
    Import {
        /// Which file or block.
        location: String,
        /// What is wrong.
        reason: String,
    },
    /// Retiring a key was refused.
    #[error("cannot retire key \"{kid}\": {reason}")]
    Retire {
        /// The key id.
        kid: String,
        /// Why.
        reason: String,
    },
    /// The time given is before the active key became active. Deliberate:
    /// nothing the ring does can happen before its own active key existed,
    /// so such a time says the clock is behind, and acting on it would
    /// date tokens and history before the key that made them.
    #[error(
        "cannot {action} at {now}: the active key became active only at {since}, so the clock or the time given is behind (refusing to date anything before the key that makes it); use {since} or later"
    )]
    ClockBehind {
        /// What was refused: `sign a token`, `step the key ring`.
        action: &'static str,
        /// The time given (RFC 3339).
        now: String,
        /// When the active key became active (RFC 3339).
        since: String,
    },
    /// A token was not signed: its claims would outlive the grace period.
    #[error("refusing to sign: {0}")]
    TokenLifetime(String),
}

impl From<KeyRingError> for RotateError {
    fn from(e: KeyRingError) -> Self {
        RotateError::KeyRing(Box::new(e))
    }
}

impl From<JoseError> for RotateError {
    fn from(e: JoseError) -> Self {
        KeyRingError::Jose(e).into()
    }
}

/// A key set read from a file: private keys (the first becomes active) and
/// public keys (kept accepted).
#[derive(Debug, Clone, Default)]
pub struct ImportedKeys {
    /// Private keys, in file order.
    pub private: Vec<PrivateKey>,
    /// Public keys, in file order.
    pub public: Vec<PublicKey>,
}

impl ImportedKeys {
    /// Reads a key set: PEM blocks (`PRIVATE KEY`, `EC PRIVATE KEY`, `RSA
    /// PRIVATE KEY`, `PUBLIC KEY`, `RSA PUBLIC KEY`; k3s's `service.key`
    /// holds several private keys) or a JWK Set (JSON). `location` names
    /// the file in errors.
    pub fn parse(location: &str, bytes: &[u8]) -> Result<Self> {
        let bad = |reason: String| KeyRingError::Import {
            location: location.to_string(),
            reason,
        };
        if bytes.trim_ascii_start().starts_with(b"{") {
            let jwks = Jwks::parse(bytes).map_err(|e| bad(e.to_string()))?;
            if jwks.keys.is_empty() {
                return Err(bad("the JWK Set holds no key".into()).into());
            }
            return Ok(ImportedKeys {
                private: Vec::new(),
                public: jwks.keys,
            });
        }
        let blocks = pki_core::pem::read_blocks(bytes).map_err(|e| bad(e.to_string()))?;
        let mut out = ImportedKeys::default();
        for (i, block) in blocks.iter().enumerate() {
            let what = |e: &dyn std::fmt::Display| {
                bad(format!("PEM block {} ({}): {e}", i + 1, block.label))
            };
            match block.label.as_str() {
                "PRIVATE KEY" => out
                    .private
                    .push(PrivateKey::from_pkcs8_der(&block.der).map_err(|e| what(&e))?),
                "EC PRIVATE KEY" => out
                    .private
                    .push(PrivateKey::from_sec1_der(&block.der).map_err(|e| what(&e))?),
                "RSA PRIVATE KEY" => out
                    .private
                    .push(PrivateKey::from_pkcs1_der(&block.der).map_err(|e| what(&e))?),
                "PUBLIC KEY" => out
                    .public
                    .push(PublicKey::from_spki_der(&block.der).map_err(|e| what(&e))?),
                "RSA PUBLIC KEY" => out
                    .public
                    .push(PublicKey::from_pkcs1_der(&block.der).map_err(|e| what(&e))?),
                other => {
                    return Err(bad(format!(
                        "PEM block {} is \"{other}\", not a private or public key (encrypted keys are not supported)",
                        i + 1
                    ))
                    .into());
                }
            }
        }
        if out.private.is_empty() && out.public.is_empty() {
            return Err(bad("holds no PEM key block".into()).into());
        }
        Ok(out)
    }
}

impl KeyRing {
    /// A new ring with a freshly generated active key.
    pub fn new<R: CryptoRng + ?Sized + 'static>(
        policy: KeyRingPolicy,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Self> {
        policy.validate()?;
        let key = PrivateKey::generate(policy.algorithm, rng)?;
        Ok(KeyRing {
            policy,
            active: ActiveKey::new(key, now, KeyOrigin::Generated)?,
            accepted: Vec::new(),
            forced_reasons: BTreeSet::new(),
            history: Vec::new(),
        })
    }

    /// A ring over an existing key set. The first private key becomes the
    /// active key (k3s signs with the first key of `service.key`); once
    /// rotated out it is accepted for the grace period like any active key.
    /// Every other key stays accepted until retired. Without a private key a new
    /// active key is generated. Duplicate keys are kept once.
    pub fn import<R: CryptoRng + ?Sized + 'static>(
        policy: KeyRingPolicy,
        keys: ImportedKeys,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Self> {
        policy.validate()?;
        let mut private = keys.private.into_iter();
        let active = match private.next() {
            Some(key) => ActiveKey::new(key, now, KeyOrigin::Imported)?,
            None => ActiveKey::new(
                PrivateKey::generate(policy.algorithm, rng)?,
                now,
                KeyOrigin::Generated,
            )?,
        };
        let mut seen = BTreeSet::from([active.kid.clone()]);
        let mut accepted = Vec::new();
        let others = private
            .map(|k| -> Result<PublicKey> {
                Ok(PublicKey::from_spki_der(&k.public_key_der()?).map_err(KeyRingError::Jose)?)
            })
            .collect::<Result<Vec<_>>>()?;
        for public in others.into_iter().chain(keys.public) {
            if seen.insert(public.thumbprint()) {
                accepted.push(AcceptedKey::imported(public));
            }
        }
        Ok(KeyRing {
            policy,
            active,
            accepted,
            forced_reasons: BTreeSet::new(),
            history: Vec::new(),
        })
    }

    /// When the active key becomes due for rotation by age.
    pub fn rotation_due_at(&self) -> OffsetDateTime {
        self.active.since + self.policy.lifetime
    }

    /// Every public key that verifies tokens at `now`: the active key
    /// first, then the accepted ones still in their grace.
    pub fn verifying_keys(&self, now: OffsetDateTime) -> Vec<(&str, &PublicKey)> {
        std::iter::once((self.active.kid.as_str(), &self.active.public))
            .chain(
                self.accepted
                    .iter()
                    .filter(|k| k.accepted_at(now))
                    .map(|k| (k.kid.as_str(), &k.public)),
            )
            .collect()
    }

    /// Every public key the ring publishes (active first), whatever the time:
    /// what `public.pem` and `jwks.json` hold.
    pub fn published_keys(&self) -> Vec<&PublicKey> {
        std::iter::once(&self.active.public)
            .chain(self.accepted.iter().map(|k| &k.public))
            .collect()
    }

    /// The JWK Set of the published keys.
    pub fn jwks(&self) -> Jwks {
        Jwks {
            keys: self.published_keys().into_iter().cloned().collect(),
        }
    }

    /// `PUBLIC KEY` PEM blocks of the published keys, active first.
    pub fn public_pem(&self) -> String {
        self.published_keys()
            .into_iter()
            .map(PublicKey::to_pem)
            .collect()
    }

    /// Signs `claims` (a JSON object, kept byte for byte as the payload)
    /// with the active key: a compact JWS with header
    /// `{"alg","kid","typ":"JWT"}`. When the policy states the longest
    /// token lifetime, the claims must carry an `exp` within it of `now`.
    /// A `now` before the active key became active is refused, as in `plan`.
    pub fn sign_token(&self, claims: &[u8], now: OffsetDateTime) -> Result<String> {
        if now < self.active.since {
            return Err(KeyRingError::ClockBehind {
                action: "sign a token",
                now: rfc3339(now),
                since: rfc3339(self.active.since),
            }
            .into());
        }
        let map = jose::parse_claims(claims).map_err(KeyRingError::Jose)?;
        if let Some(max) = self.policy.max_token_lifetime {
            let limit = now + max;
            match map.get("exp").and_then(serde_json::Value::as_f64) {
                None => {
                    return Err(KeyRingError::TokenLifetime(format!(
                        "the claims have no numeric \"exp\", so the token would outlive the {} grace period (the longest token lifetime is {})",
                        human(self.policy.grace),
                        human(max)
                    ))
                    .into());
                }
                Some(exp) if exp > limit.unix_timestamp() as f64 => {
                    return Err(KeyRingError::TokenLifetime(format!(
                        "\"exp\" {exp} is after {} ({} from now, the longest token lifetime)",
                        rfc3339(limit),
                        human(max)
                    ))
                    .into());
                }
                Some(_) => {}
            }
        }
        let signer = jose::TokenSigner::new(&self.active.key).map_err(KeyRingError::Jose)?;
        Ok(jose::sign(&signer, &self.active.kid, claims).map_err(KeyRingError::Jose)?)
    }

    /// Verifies a compact JWS at `now`: its `kid` must name the active key
    /// or an accepted key still in its grace, the signature must verify
    /// with that key, and `exp` / `nbf` (when present) must hold at `now`.
    /// Returns the key id and the claims.
    pub fn verify_token(
        &self,
        token: &[u8],
        now: OffsetDateTime,
    ) -> Result<(String, serde_json::Map<String, serde_json::Value>)> {
        let parsed = jose::ParsedToken::parse(token).map_err(KeyRingError::Jose)?;
        let key = if parsed.kid == self.active.kid {
            &self.active.public
        } else {
            match self.accepted.iter().find(|k| k.kid == parsed.kid) {
                Some(k) if k.accepted_at(now) => &k.public,
                Some(k) => {
                    return Err(KeyRingError::Jose(JoseError::KeyNoLongerAccepted {
                        kid: k.kid.clone(),
                        until: k.accepted_until.map(rfc3339).unwrap_or_default(),
                    })
                    .into());
                }
                None => {
                    return Err(
                        KeyRingError::Jose(JoseError::UnknownKid(parsed.kid.clone())).into(),
                    );
                }
            }
        };
        parsed.verify_signature(key).map_err(KeyRingError::Jose)?;
        parsed
            .check_time(now.unix_timestamp())
            .map_err(KeyRingError::Jose)?;
        Ok((parsed.kid, parsed.claims))
    }
}

/// What the caller asks of a step besides time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeyRingInput {
    /// Rotate now, once per distinct reason.
    pub forced: Option<String>,
    /// Stop accepting these keys (by kid) now: imported keys, or keys whose
    /// grace has ended.
    pub retire: Vec<String>,
    /// Set by [`Engine::rebase`]: a concurrent writer already rotated, so
    /// the forced reason is recorded without a second rotation.
    already_rotated: bool,
}

impl KeyRingInput {
    /// A forced rotation with `reason`.
    pub fn forced(reason: impl Into<String>) -> Self {
        KeyRingInput {
            forced: Some(reason.into()),
            ..KeyRingInput::default()
        }
    }

    /// Retire the keys `kids` (imported keys, or keys past their grace).
    pub fn retire(kids: impl IntoIterator<Item = String>) -> Self {
        KeyRingInput {
            retire: kids.into_iter().collect(),
            ..KeyRingInput::default()
        }
    }
}

/// What a step decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRingPlan {
    /// The time of the decision.
    pub now: OffsetDateTime,
    /// Rotate the active key, and why.
    pub rotate: Option<KeyRotationReason>,
    /// A forced reason to record without rotating (a concurrent writer
    /// already rotated).
    pub record_forced: Option<String>,
    /// Accepted keys whose grace has ended, to remove.
    pub expired: Vec<String>,
    /// Keys to retire on request.
    pub retire: Vec<String>,
}

impl KeyRingPlan {
    /// Whether the plan changes nothing.
    pub fn is_empty(&self) -> bool {
        self.rotate.is_none()
            && self.record_forced.is_none()
            && self.expired.is_empty()
            && self.retire.is_empty()
    }
}

/// What a step did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
#[non_exhaustive]
pub enum KeyRingEvent {
    /// A new key became active.
    Rotated {
        /// Why.
        reason: KeyRotationReason,
        /// The previous active key id.
        previous: String,
        /// The new active key id.
        current: String,
        /// Until when the previous key stays accepted (always set now;
        /// None only in older histories).
        #[serde(with = "time::serde::rfc3339::option")]
        previous_accepted_until: Option<OffsetDateTime>,
    },
    /// An accepted key's grace ended and it was removed.
    Expired {
        /// Its key id.
        kid: String,
    },
    /// A key was retired on request.
    Retired {
        /// Its key id.
        kid: String,
    },
    /// A forced reason was recorded without a rotation: a concurrent
    /// writer had just rotated.
    ForcedRotationSatisfied {
        /// The reason.
        reason: String,
        /// The active key id the concurrent rotation made.
        by: String,
    },
}

impl std::fmt::Display for KeyRingEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KeyRingEvent::Rotated {
                reason,
                previous,
                current,
                previous_accepted_until,
            } => {
                write!(
                    f,
                    "rotated signing key {previous} -> {current} ({reason}); "
                )?;
                match previous_accepted_until {
                    Some(t) => write!(f, "previous key accepted until {}", rfc3339(*t)),
                    None => write!(f, "previous key (imported) accepted until retired"),
                }
            }
            KeyRingEvent::Expired { kid } => {
                write!(f, "removed key {kid}: its grace period has ended")
            }
            KeyRingEvent::Retired { kid } => write!(f, "retired key {kid}"),
            KeyRingEvent::ForcedRotationSatisfied { reason, by } => write!(
                f,
                "forced rotation ({reason}) already done by a concurrent rotation to {by}; recorded as forced"
            ),
        }
    }
}

/// The key ring as an [`Engine`].
#[derive(Debug, Clone, Copy)]
pub struct KeyRingEngine;

impl Engine for KeyRingEngine {
    type Document = KeyRing;
    type Input = KeyRingInput;
    type Plan = KeyRingPlan;
    type Event = KeyRingEvent;

    fn plan(doc: &KeyRing, input: &KeyRingInput, now: OffsetDateTime) -> Result<KeyRingPlan> {
        plan(doc, input, now)
    }

    fn apply<'d, R: CryptoRng + ?Sized + 'static>(
        doc: &'d KeyRing,
        plan: KeyRingPlan,
        rng: &mut R,
    ) -> Result<Outcome<'d, KeyRing, KeyRingEvent>> {
        apply(doc, plan, rng)
    }

    /// A forced rotation that lost the race to another writer's rotation
    /// (the active key changed in between) is that rotation: the reason is
    /// recorded, no second key is made.
    fn rebase(input: &mut KeyRingInput, read: &KeyRing, fresh: &KeyRing) {
        if read.active.kid != fresh.active.kid {
            input.already_rotated = true;
        }
    }
}

/// Decides what a step does at `now`.
pub fn plan(ring: &KeyRing, input: &KeyRingInput, now: OffsetDateTime) -> Result<KeyRingPlan> {
    if now < ring.active.since {
        return Err(KeyRingError::ClockBehind {
            action: "step the key ring",
            now: rfc3339(now),
            since: rfc3339(ring.active.since),
        }
        .into());
    }
    let mut plan = KeyRingPlan {
        now,
        rotate: None,
        record_forced: None,
        expired: Vec::new(),
        retire: Vec::new(),
    };
    if let Some(reason) = &input.forced {
        if reason.trim().is_empty() {
            return Err(RotateError::EmptyForcedReason);
        }
        crate::text::check_reason("the forced rotation's reason", reason)?;
        if !ring.forced_reasons.contains(reason) {
            if input.already_rotated {
                plan.record_forced = Some(reason.clone());
            } else {
                plan.rotate = Some(KeyRotationReason::Forced {
                    reason: reason.clone(),
                });
            }
        }
    }
    if plan.rotate.is_none() && plan.record_forced.is_none() && now >= ring.rotation_due_at() {
        plan.rotate = Some(KeyRotationReason::Age {
            age_seconds: (now - ring.active.since).whole_seconds(),
            lifetime_seconds: ring.policy.lifetime.whole_seconds(),
        });
    }
    for kid in &input.retire {
        if *kid == ring.active.kid {
            return Err(KeyRingError::Retire {
                kid: kid.clone(),
                reason: "it is the active key (rotate first)".into(),
            }
            .into());
        }
        let Some(key) = ring.accepted.iter().find(|k| k.kid == *kid) else {
            return Err(KeyRingError::Retire {
                kid: kid.clone(),
                reason: "no accepted key has this id".into(),
            }
            .into());
        };
        if let Some(until) = key.accepted_until
            && now < until
        {
            return Err(KeyRingError::Retire {
                kid: kid.clone(),
                reason: format!(
                    "it is accepted until {}: tokens it signed before the rotation may still be in use",
                    rfc3339(until)
                ),
            }
            .into());
        }
        if !plan.retire.contains(kid) {
            plan.retire.push(kid.clone());
        }
    }
    plan.expired = ring
        .accepted
        .iter()
        .filter(|k| !k.accepted_at(now) && !plan.retire.contains(&k.kid))
        .map(|k| k.kid.clone())
        .collect();
    Ok(plan)
}

/// Carries out `plan`: a new active key from `rng` when rotating.
pub fn apply<'d, R: CryptoRng + ?Sized + 'static>(
    ring: &'d KeyRing,
    plan: KeyRingPlan,
    rng: &mut R,
) -> Result<Outcome<'d, KeyRing, KeyRingEvent>> {
    let now = plan.now;
    if plan.is_empty() {
        return Ok(Outcome {
            document: Cow::Borrowed(ring),
            events: Vec::new(),
            next_wake: next_wake(ring, now),
        });
    }
    let mut next = ring.clone();
    let mut events = Vec::new();
    if let Some(reason) = plan.record_forced {
        next.forced_reasons.insert(reason.clone());
        events.push(KeyRingEvent::ForcedRotationSatisfied {
            reason,
            by: ring.active.kid.clone(),
        });
    }
    // Removals first: a key rotated out now must not be swept by them.
    next.accepted.retain(|k| {
        if plan.retire.contains(&k.kid) {
            events.push(KeyRingEvent::Retired { kid: k.kid.clone() });
            false
        } else if plan.expired.contains(&k.kid) {
            events.push(KeyRingEvent::Expired { kid: k.kid.clone() });
            false
        } else {
            true
        }
    });
    if let Some(reason) = plan.rotate {
        let key = PrivateKey::generate(next.policy.algorithm, rng)?;
        let fresh = ActiveKey::new(key, now, KeyOrigin::Generated)?;
        let old = std::mem::replace(&mut next.active, fresh);
        // Whatever its origin, the key that signed until now leaves after
        // the grace: keeping an imported one forever would publish a key
        // nobody signs with, and DESIGN promises its removal. The grace is
        // what covers the tokens it signed, here or before the import.
        let until = Some(now + next.policy.grace);
        // A rotation never drops the key that signed tokens still in use:
        // it goes first among the accepted keys for the grace period.
        next.accepted.retain(|k| k.kid != old.kid);
        next.accepted.insert(
            0,
            AcceptedKey {
                public: old.public,
                kid: old.kid.clone(),
                rotated_out_at: Some(now),
                accepted_until: until,
                origin: old.origin,
            },
        );
        if let KeyRotationReason::Forced { reason } = &reason {
            next.forced_reasons.insert(reason.clone());
        }
        next.history.push(KeyRotationRecord {
            at: now,
            reason: reason.clone(),
            from: old.kid.clone(),
            to: next.active.kid.clone(),
            previous_accepted_until: until,
        });
        events.push(KeyRingEvent::Rotated {
            reason,
            previous: old.kid,
            current: next.active.kid.clone(),
            previous_accepted_until: until,
        });
    }
    let wake = next_wake(&next, now);
    Ok(Outcome {
        document: Cow::Owned(next),
        events,
        next_wake: wake,
    })
}

/// The next time something is due: the active key's rotation or the end of
/// an accepted key's grace, never before `now`.
pub fn next_wake(ring: &KeyRing, now: OffsetDateTime) -> OffsetDateTime {
    ring.accepted
        .iter()
        .filter_map(|k| k.accepted_until)
        .chain(std::iter::once(ring.rotation_due_at()))
        .min()
        .unwrap_or_else(|| ring.rotation_due_at())
        .max(now)
}

/// A read-only report of a ring at a time, for `pki keys status --json`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KeyRingStatus {
    /// Version of this report's shape.
    pub schema_version: u32,
    /// The report time.
    #[serde(with = "time::serde::rfc3339")]
    pub now: OffsetDateTime,
    /// The policy.
    pub policy: PolicyReport,
    /// The active key.
    pub active: KeyReport,
    /// The other published keys, most recently rotated out first.
    pub accepted: Vec<KeyReport>,
    /// When the active key is due for rotation.
    #[serde(with = "time::serde::rfc3339")]
    pub rotation_due_at: OffsetDateTime,
    /// Whether a step at `now` would change something.
    pub action_due: bool,
    /// When the next step is due.
    #[serde(with = "time::serde::rfc3339")]
    pub next_wake: OffsetDateTime,
    /// Forced reasons already acted on.
    pub forced_reasons: Vec<String>,
    /// Every rotation, oldest first.
    pub history: Vec<KeyRotationRecord>,
}

/// The policy in a report, durations in seconds and in words.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PolicyReport {
    /// `p256`, `rsa2048`…
    pub algorithm: String,
    /// Key lifetime, seconds.
    pub lifetime_seconds: i64,
    /// Grace period, seconds.
    pub grace_seconds: i64,
    /// Longest token lifetime, seconds (null: not stated).
    pub max_token_lifetime_seconds: Option<i64>,
}

/// One key in a report.
#[derive(Debug, Clone, serde::Serialize)]
pub struct KeyReport {
    /// RFC 7638 thumbprint.
    pub kid: String,
    /// `ES256` or `RS256`.
    pub alg: String,
    /// Generated or imported.
    pub origin: KeyOrigin,
    /// When it became active (the active key only).
    #[serde(
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub since: Option<OffsetDateTime>,
    /// When it was rotated out.
    #[serde(
        with = "time::serde::rfc3339::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub rotated_out_at: Option<OffsetDateTime>,
    /// Until when it is accepted (null: the active key, or until retired).
    #[serde(with = "time::serde::rfc3339::option")]
    pub accepted_until: Option<OffsetDateTime>,
    /// Whether tokens it signed verify at the report time.
    pub accepted: bool,
}

impl KeyRing {
    /// The report at `now`.
    pub fn status(&self, now: OffsetDateTime) -> KeyRingStatus {
        let action_due = plan(self, &KeyRingInput::default(), now)
            .map(|p| !p.is_empty())
            .unwrap_or(false);
        KeyRingStatus {
            schema_version: 1,
            now,
            policy: PolicyReport {
                algorithm: self.policy.algorithm.as_str().to_string(),
                lifetime_seconds: self.policy.lifetime.whole_seconds(),
                grace_seconds: self.policy.grace.whole_seconds(),
                max_token_lifetime_seconds: self
                    .policy
                    .max_token_lifetime
                    .map(|d| d.whole_seconds()),
            },
            active: KeyReport {
                kid: self.active.kid.clone(),
                alg: self.active.public.algorithm().as_str().to_string(),
                origin: self.active.origin,
                since: Some(self.active.since),
                rotated_out_at: None,
                accepted_until: None,
                accepted: true,
            },
            accepted: self
                .accepted
                .iter()
                .map(|k| KeyReport {
                    kid: k.kid.clone(),
                    alg: k.public.algorithm().as_str().to_string(),
                    origin: k.origin,
                    since: None,
                    rotated_out_at: k.rotated_out_at,
                    accepted_until: k.accepted_until,
                    accepted: k.accepted_at(now),
                })
                .collect(),
            rotation_due_at: self.rotation_due_at(),
            action_due,
            next_wake: next_wake(self, now),
            forced_reasons: self.forced_reasons.iter().cloned().collect(),
            history: self.history.clone(),
        }
    }
}
