//! The key ring's signing keys as objects in a PKCS#11 token (see
//! [`crate::engines::token_keys`]): the active key signs there, each
//! rotation's new key is recorded before the token makes it, and a key
//! rotated out keeps its object while it is accepted; once its grace has
//! ended (or it is retired) and the ring has committed it as retiring, the
//! next round destroys the object.

use super::{KeyRing, KeyRingEvent};
use crate::engines::token_keys::{
    Attached, KeyChange, destroy_all, find_or_make, first_key_id, new_key_uri,
};
use crate::model::error::Result;
use pki_core::{KeyAlgorithm, Pkcs11Uri, TokenAccess, TokenKey};
use rand_core::CryptoRng;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The name a ring's first key id is derived from ([`first_key_id`]),
/// beside where its store is.
pub const FIRST_KEY_NAME: &str = "key ring";

/// The label of the ring's key of generation `generation` (1 for the
/// first): what `pkcs11-tool` lists.
pub fn key_label(generation: usize) -> String {
    format!("key ring key {generation}")
}

/// What a ring records of the token objects that hold the keys it made,
/// besides its active key's (which the active key itself names).
#[derive(Clone, PartialEq, Eq)]
pub struct RingTokenKeys {
    /// The token new keys are made in (a URI naming only the token).
    pub store: Pkcs11Uri,
    /// The key objects of the accepted keys, by kid: kept while the key is
    /// accepted.
    pub accepted: BTreeMap<String, Pkcs11Uri>,
    /// The key a rotation decided to make, recorded before the token makes
    /// it: adopted by the round that rotates when the token already holds
    /// it.
    pub pending: Option<Pkcs11Uri>,
    /// Key objects of keys no longer accepted: the next round destroys
    /// them, and only them.
    pub retiring: Vec<Pkcs11Uri>,
    access: Attached,
}

impl std::fmt::Debug for RingTokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RingTokenKeys")
            .field("store", &self.store.to_string())
            .field("accepted", &self.accepted.len())
            .field("pending", &self.pending.as_ref().map(ToString::to_string))
            .field("retiring", &self.retiring.len())
            .field("attached", &self.access.0.is_some())
            .finish()
    }
}

impl RingTokenKeys {
    /// An empty record: new keys made in the token `store` names.
    pub fn new(store: &Pkcs11Uri) -> Self {
        RingTokenKeys {
            store: store.token_only(),
            accepted: BTreeMap::new(),
            pending: None,
            retiring: Vec::new(),
            access: Attached(None),
        }
    }

    /// Attaches the caller's access to the token.
    pub fn attach(&mut self, access: &Arc<dyn TokenAccess>) {
        self.access.set(access);
    }

    /// The attached access, or the error naming the token a step needs.
    ///
    /// # Errors
    ///
    /// [`RotateError::Core`](crate::RotateError::Core) with
    /// [`pki_core::Error::Pkcs11TokenNotOpen`] naming the store's token when no
    /// access was attached.
    pub fn access(&self) -> Result<&Arc<dyn TokenAccess>> {
        self.access.get(&self.store)
    }

    /// An intent to complete, or keys to destroy: another round at once.
    pub fn follow_up(&self) -> crate::FollowUp {
        crate::engines::token_keys::follow_up(self.pending.is_some(), !self.retiring.is_empty())
    }

    /// Makes the access a forecast's simulation (see
    /// [`crate::engines::token_keys::TokenKeys::simulate`]).
    pub fn simulate(&mut self) {
        self.access.simulate();
    }

    /// Records the key a rotation will make (an id from `rng`, `label`):
    /// nothing is made yet. Refused when the token cannot be asked (no
    /// module, a wrong PIN, a missing token): an intent is recorded only
    /// when the round that completes it can reach the token.
    ///
    /// # Errors
    ///
    /// Those of [`RingTokenKeys::access`], and a
    /// [`RotateError::Core`](crate::RotateError::Core) with the token's error
    /// when asking it for the object fails (other than finding none); nothing
    /// is recorded then.
    pub fn intend<R: CryptoRng + ?Sized>(&mut self, label: &str, rng: &mut R) -> Result<KeyChange> {
        let access = self.access()?;
        let uri = new_key_uri(&self.store, label, rng);
        // Asking for the object the intent names logs in to the token: the
        // answer expected is that there is none yet.
        match access.find_key(&uri) {
            Ok(_) | Err(pki_core::Error::Pkcs11KeyNotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        self.pending = Some(uri.clone());
        Ok(KeyChange::Intended(uri))
    }

    /// The key the recorded intent names, found (a rerun after a crash
    /// that followed its making) or made now; None without an intent.
    ///
    /// # Errors
    ///
    /// Those of [`RingTokenKeys::access`] and of [`find_or_make`]. No intent is
    /// not an error.
    pub fn make_pending(&self, algorithm: KeyAlgorithm) -> Result<Option<TokenKey>> {
        let Some(uri) = &self.pending else {
            return Ok(None);
        };
        Ok(Some(find_or_make(
            self.access()?,
            &self.store,
            uri,
            algorithm,
        )?))
    }

    /// After a rotation: the intent is carried out, and the key rotated
    /// out (`kid`, its object `uri`) keeps its object while accepted.
    pub fn rotated(&mut self, kid: &str, uri: Option<&Pkcs11Uri>) {
        self.pending = None;
        if let Some(uri) = uri {
            self.accepted.insert(kid.to_string(), uri.clone());
        }
    }

    /// The key `kid` is no longer accepted: its object, if the ring made
    /// one, is listed for destruction.
    pub fn remove(&mut self, kid: &str) -> Option<KeyChange> {
        let uri = self.accepted.remove(kid)?;
        self.retiring.push(uri.clone());
        Some(KeyChange::Retired(uri))
    }

    /// Destroys the key objects the committed ring lists as retiring, and
    /// forgets them.
    ///
    /// # Errors
    ///
    /// Those of [`RingTokenKeys::access`] and of [`destroy_all`]; on an error
    /// the retiring list is kept.
    pub fn destroy_retiring(&mut self) -> Result<Vec<KeyChange>> {
        let changes = destroy_all(self.access()?, &self.retiring)?;
        self.retiring.clear();
        Ok(changes)
    }
}

/// The ring's first key: the object with the id derived from `location`
/// (where the store is), found (a rerun of a creation that crashed after
/// the token made it) or made now in the token `store` names.
pub(super) fn first_key(
    (access, store, location): (&Arc<dyn TokenAccess>, &Pkcs11Uri, &str),
    algorithm: KeyAlgorithm,
) -> Result<(TokenKey, RingTokenKeys)> {
    let id = first_key_id(location, FIRST_KEY_NAME);
    let uri = store.private_key(&id, &key_label(1));
    let mut keys = RingTokenKeys::new(store);
    keys.attach(access);
    let key = find_or_make(keys.access()?, &keys.store, &uri, algorithm)?;
    Ok((key, keys))
}

/// Records the new key of a rotation about to happen when the ring's keys
/// are in a token and no key is recorded yet: true when it did, and the
/// rotation waits for the next round (after this intent is committed).
pub(super) fn intend<R: CryptoRng + ?Sized>(
    next: &mut KeyRing,
    rng: &mut R,
    events: &mut Vec<KeyRingEvent>,
) -> Result<bool> {
    let generation = next.history.len() + 2;
    let Some(keys) = &mut next.token_keys else {
        return Ok(false);
    };
    if keys.pending.is_some() {
        return Ok(false);
    }
    events.push(keys.intend(&key_label(generation), rng)?.into());
    Ok(true)
}

impl From<KeyChange> for KeyRingEvent {
    fn from(change: KeyChange) -> Self {
        match change {
            KeyChange::Intended(uri) => KeyRingEvent::TokenKeyIntended {
                uri: uri.to_string(),
            },
            KeyChange::Retired(uri) => KeyRingEvent::TokenKeyRetired {
                uri: uri.to_string(),
            },
            KeyChange::Destroyed(uri) => KeyRingEvent::TokenKeyDestroyed {
                uri: uri.to_string(),
            },
        }
    }
}
