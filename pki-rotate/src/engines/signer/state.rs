//! The signer's document in memory: its CA, bridges, bundle, leaves and
//! the history of its rotations.

use super::{RotationReason, SignerPolicy};
use crate::engines::leaf::{IssuedLeaf, Leaf, LeafRequest, validate_leaf_name};
use crate::engines::token_keys::TokenKeys;
use crate::model::error::Result;
use pki_core::{Bundle, Certificate, CertificateAuthority, Pkcs11Uri, TokenAccess};
use rand_core::CryptoRng;
use std::collections::BTreeMap;
use std::sync::Arc;
use time::OffsetDateTime;

/// What is remembered about the CA that was rotated out.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PreviousCa {
    /// Its human id (`<SKI prefix>-<serial>`).
    pub id: String,
    /// Its own NotAfter.
    #[serde(with = "time::serde::rfc3339")]
    pub not_after: OffsetDateTime,
    /// Until when it stays trusted through bridge A (None: no bridges were issued).
    #[serde(with = "time::serde::rfc3339::option")]
    pub trusted_until: Option<OffsetDateTime>,
    /// Its self-signed certificate (PEM): the bundle of clients that have
    /// not refreshed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate: Option<String>,
    /// A probe leaf it issued at the rotation, followed by the chain it was
    /// served with (PEM): stands for the serving chains of servers that
    /// have not refreshed, in trust checks. Documents written before the
    /// chain was kept hold the probe alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub probe: Option<String>,
}

impl PreviousCa {
    /// The record of `state`'s CA once a rotation replaced it: trusted
    /// until `trusted_until`, its certificate kept when `keep_certificate`
    /// (the bundle of clients that have not refreshed), and the serving
    /// chain of `probe`, a leaf it issued at the rotation.
    pub(crate) fn of(
        state: &SignerState,
        probe: Option<&IssuedLeaf>,
        trusted_until: Option<OffsetDateTime>,
        keep_certificate: bool,
    ) -> Self {
        let old = &state.ca.cert;
        PreviousCa {
            id: old.id(),
            not_after: old.not_after(),
            trusted_until,
            certificate: keep_certificate.then(|| old.to_pem()),
            probe: probe.map(|p| {
                state
                    .serving_chain(&p.cert)
                    .iter()
                    .map(Certificate::to_pem)
                    .collect()
            }),
        }
    }
}

/// One rotation, as recorded in the history.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RotationRecord {
    /// When it happened.
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// Why.
    pub reason: RotationReason,
    /// Id of the CA rotated out.
    pub from: String,
    /// Id of the new CA.
    pub to: String,
    /// Until when the old CA stays trusted (None: no bridges).
    #[serde(with = "time::serde::rfc3339::option")]
    pub previous_trusted_until: Option<OffsetDateTime>,
    /// Safety checks an operator overrode to make this rotation happen
    /// (a failed validation of a supplied CA, a trust break allowed on
    /// purpose), each with what it found; the reason is in `reason`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overridden: Vec<OverriddenCheck>,
    /// Forced rotations this rotation satisfied besides its own reason, in
    /// the order they were recorded: a forced request that coincided with
    /// it or lost a race to it. Appended to, never rewritten, so every
    /// forced request that reported success is in the history.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forced_reasons: Vec<String>,
}

impl RotationRecord {
    /// Whether this rotation satisfied a forced rotation for `reason`.
    pub fn satisfied(&self, reason: &str) -> bool {
        matches!(&self.reason, RotationReason::Forced { reason: r } if r == reason)
            || self.forced_reasons.iter().any(|r| r == reason)
    }
}

pub use crate::model::OverriddenCheck;

/// The whole state of a signer: its CA, bridges, bundle and leaves.
#[derive(Debug, Clone)]
pub struct SignerState {
    /// The policy this state was created or last applied with.
    pub policy: SignerPolicy,
    /// The current CA (certificate and key).
    pub ca: CertificateAuthority,
    /// Bridge B: the current CA signed by the previous CA's key, appended to
    /// serving chains. None before the first rotation or after it expired.
    pub bridge: Option<Certificate>,
    /// What follows bridge B in serving chains: empty when the previous CA
    /// was self-signed; the previous CA and its external intermediates when
    /// it was imported under someone else's root, so clients that trust
    /// only that root still find a path through bridge B. Kept with bridge
    /// B in `signer/intermediate-ca.crt`, after it.
    pub bridge_chain: Vec<Certificate>,
    /// The CA bundle clients should trust.
    pub bundle: Bundle,
    /// The CA rotated out last, if any.
    pub previous: Option<PreviousCa>,
    /// The reason of the last forced rotation: a forced rotation runs once per reason.
    pub forced_rotation_reason: Option<String>,
    /// Leaves by name.
    pub leaves: BTreeMap<String, Leaf>,
    /// Every rotation so far, oldest first.
    pub history: Vec<RotationRecord>,
    /// The chain above an imported CA (None: pki generated the CA).
    pub external: Option<crate::engines::signer::ExternalCa>,
    /// The bundles published last, oldest first (see [`crate::engines::uptake`]).
    pub published: Vec<super::PublishedBundle>,
    /// What each consumer acknowledged last, by name.
    pub consumers: BTreeMap<String, super::ConsumerRecord>,
    /// The token objects that hold the CA keys (None: the CA key is in
    /// this process, stored as `signer/tls.key`).
    pub token_keys: Option<TokenKeys>,
}

impl SignerState {
    /// Creates a signer with a new self-signed CA of subject `CN=<common_name>`.
    ///
    /// # Errors
    ///
    /// Those of [`SignerPolicy::validate`]; a
    /// [`RotateError::Core`](crate::RotateError::Core) when the key or the
    /// self-signed certificate cannot be made (a common name that makes no
    /// subject name, a lifetime past the end of time).
    pub fn new<R: CryptoRng + ?Sized>(
        common_name: &str,
        policy: SignerPolicy,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Self> {
        policy.validate()?;
        let ca = CertificateAuthority::generate_root(
            common_name,
            policy.key_algorithm,
            now,
            policy.rotation.lifetime,
            rng,
        )?;
        Ok(Self::with_new_ca(ca, policy, None, now))
    }

    /// A signer with nothing yet but its new CA `ca` (its key in this
    /// process, or in a token `token_keys` names), published at `now`.
    fn with_new_ca(
        ca: CertificateAuthority,
        policy: SignerPolicy,
        token_keys: Option<TokenKeys>,
        now: OffsetDateTime,
    ) -> Self {
        let mut state = SignerState {
            bundle: Bundle::from_certs([ca.cert.clone()]),
            policy,
            ca,
            bridge: None,
            bridge_chain: Vec::new(),
            previous: None,
            forced_rotation_reason: None,
            leaves: BTreeMap::new(),
            history: Vec::new(),
            external: None,
            published: Vec::new(),
            consumers: BTreeMap::new(),
            token_keys,
        };
        state.note_published(now);
        state
    }

    /// Creates a signer whose CA key is made in the PKCS#11 token `store`
    /// names, through `access`. The key's id comes from `location` (where
    /// the document is: [`first_key_id`](crate::engines::token_keys::first_key_id))
    /// and the CA's name: a token that already holds an object with that
    /// id (made by a run of the same creation that crashed before its
    /// store write) has it adopted instead of a second key made beside it.
    ///
    /// # Errors
    ///
    /// Those of [`SignerPolicy::validate`]; a
    /// [`RotateError::Core`](crate::RotateError::Core) when the token cannot be
    /// reached or refuses to find or make the key, or the self-signed
    /// certificate cannot be made or does not match the key.
    pub fn new_in_token<R: CryptoRng + ?Sized>(
        common_name: &str,
        policy: SignerPolicy,
        (access, store, location): (&Arc<dyn TokenAccess>, &Pkcs11Uri, &str),
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<Self> {
        policy.validate()?;
        let id = crate::engines::token_keys::first_key_id(location, common_name);
        let label = crate::engines::token_keys::key_label(common_name, 1);
        let current = store.private_key(&id, &label);
        let mut keys = TokenKeys::new(store, &current);
        keys.attach(access);
        let key = pki_core::CaKey::from(keys.find_or_make(&current, policy.key_algorithm)?);
        let params = pki_core::CertificateParams::new(
            pki_core::Profile::RootCa,
            common_name,
            now,
            policy.rotation.lifetime,
        )?;
        let cert = params.self_signed_with(&key, rng)?;
        let ca = CertificateAuthority::new(cert, key)?;
        Ok(Self::with_new_ca(ca, policy, Some(keys), now))
    }

    /// See [`crate::Document::attach_tokens`]: the CA key, when it is a
    /// token object, signs through `access`, and so do the key moves of
    /// rotations.
    pub(crate) fn attach_token_access(&mut self, access: &Arc<dyn TokenAccess>) {
        if let Some(keys) = &mut self.token_keys {
            keys.attach(access);
        }
        if let pki_core::CaKey::Token(key) = &mut self.ca.key {
            key.attach(Arc::clone(access));
        }
    }

    /// Adds or changes a leaf request. The next plan issues it (new name or
    /// changed names) without touching the other leaves.
    ///
    /// # Errors
    ///
    /// [`SignerError::InvalidLeafName`](crate::SignerError::InvalidLeafName)
    /// for `name`, and those of [`LeafRequest::validate`] for `request`;
    /// nothing changes then.
    pub fn request_leaf(&mut self, name: &str, request: LeafRequest) -> Result<()> {
        validate_leaf_name(name)?;
        request.validate()?;
        match self.leaves.get_mut(name) {
            Some(leaf) => leaf.request = std::sync::Arc::new(request),
            None => {
                self.leaves.insert(
                    name.to_string(),
                    Leaf {
                        request: std::sync::Arc::new(request),
                        issued: None,
                    },
                );
            }
        }
        Ok(())
    }

    /// The chain a server presents for an issued leaf: the leaf, then
    /// bridge B when the leaf comes from the current CA and a bridge exists.
    pub fn serving_chain(&self, leaf: &Certificate) -> Vec<Certificate> {
        let mut chain = vec![leaf.clone()];
        if let Some(bridge) = &self.bridge
            && pki_core::issued_by(leaf, &self.ca.cert).issued_by
        {
            chain.push(bridge.clone());
            chain.extend(self.bridge_chain.iter().cloned());
        }
        if let Some(external) = &self.external
            && pki_core::issued_by(leaf, &self.ca.cert).issued_by
        {
            chain.extend(external.serving_suffix(&self.ca.cert));
        }
        chain
    }

    /// The latest NotAfter a leaf of the current CA may have besides the
    /// CA's own: the earliest NotAfter of an imported CA's external
    /// intermediates and root (None for a CA pki generated).
    pub fn leaf_not_after_limit(&self) -> Option<OffsetDateTime> {
        self.external
            .as_ref()
            .and_then(crate::engines::signer::ExternalCa::not_after)
    }

    /// Issues a leaf of the current CA, its NotAfter within the CA's and
    /// the chain's ([`SignerState::leaf_not_after_limit`]).
    pub(crate) fn issue_leaf<R: CryptoRng + ?Sized>(
        &self,
        request: &LeafRequest,
        now: OffsetDateTime,
        rng: &mut R,
    ) -> Result<IssuedLeaf> {
        crate::engines::leaf::issue_leaf_within(
            &self.ca,
            request,
            now,
            self.leaf_not_after_limit(),
            rng,
        )
    }

    /// When the current CA becomes due for automatic rotation: NotAfter − M.
    pub fn rotation_due_at(&self, policy: &SignerPolicy) -> OffsetDateTime {
        self.ca.cert.not_after() - policy.rotation.min_trust
    }
}
