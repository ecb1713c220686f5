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
//! - The keys may be objects in a PKCS#11 token ([`KeyRing::new_in_token`],
//!   [`token_keys`]): a rotation records its new key in one commit and
//!   makes (or adopts) it in the next round; a key that leaves the ring
//!   is listed as retiring in one commit and its object destroyed in the
//!   next round. The ring then keeps no private key, only URIs and
//!   public keys.

use crate::engines::{Engine, Outcome};
use crate::model::error::Result;
use pki_core::KeyAlgorithm;
use pki_core::policy::human;
use rand_core::CryptoRng;
use time::{Duration, OffsetDateTime};

mod apply;
pub mod document;
mod event;
mod import;
pub mod jose;
mod plan;
mod ring;
mod status;
pub mod token_keys;

pub use crate::model::error::KeyRingError;
pub use apply::apply;
pub use event::KeyRingEvent;
pub use import::ImportedKeys;
pub use jose::{JoseError, Jwks, PublicKey};
pub use plan::{KeyRingInput, KeyRingPlan, next_wake, plan};
pub use ring::{AcceptedKey, ActiveKey, KeyOrigin, KeyRing, KeyRotationReason, KeyRotationRecord};
pub use status::{KeyReport, KeyRingStatus, PolicyReport};
pub use token_keys::RingTokenKeys;

/// The store key the CLI keeps the key ring under.
pub const STORE_KEY: &str = "keys";

/// The key ring's document key, tied to its kind.
pub const KEY: crate::DocumentKey<KeyRing> = crate::DocumentKey::new(STORE_KEY);
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
    ///
    /// # Errors
    ///
    /// [`KeyRingError::Policy`] saying which duration is not positive, or that
    /// the grace does not cover the longest token lifetime and what would
    /// break.
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

    fn apply<'d, R: CryptoRng + ?Sized>(
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
