//! The set's CA keys in a PKCS#11 token (see
//! [`crate::engines::token_keys`]): one key object per CA slot (`ca`,
//! `client-ca`, `next-ca`, `next-client-ca` of each CA), each new one
//! recorded before the token makes it, each old one destroyed only once
//! nothing trusts its CA (the rotation completed, or its new generation
//! was reverted).

use crate::engines::token_keys::{
    Attached, KeyChange, destroy_all, find_or_make, new_key_uri, uri_text,
};
use crate::model::error::Result;
use pki_core::{KeyAlgorithm, Pkcs11Uri, TokenAccess, TokenKey};
use rand_core::CryptoRng;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What the set's document records of the token objects that hold its CA keys.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetTokenKeys {
    /// The token new keys are made in (a URI naming only the token).
    #[serde(with = "uri_text")]
    pub store: Pkcs11Uri,
    /// The key object of each CA slot, by `CA/SLOT`.
    #[serde(with = "uri_text::map")]
    pub keys: BTreeMap<String, Pkcs11Uri>,
    /// Keys a rotation's start decided to make, recorded before the token
    /// makes them, by `CA/SLOT`.
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        with = "uri_text::map"
    )]
    pub pending: BTreeMap<String, Pkcs11Uri>,
    /// Key objects of CAs nothing trusts any more, to destroy.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "uri_text::list"
    )]
    pub retiring: Vec<Pkcs11Uri>,
    #[serde(skip)]
    access: Attached,
}

impl std::fmt::Debug for SetTokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetTokenKeys")
            .field("store", &self.store.to_string())
            .field("keys", &self.keys.len())
            .field("pending", &self.pending.len())
            .field("retiring", &self.retiring.len())
            .finish()
    }
}

/// The name of CA `ca`'s slot `slot` in the record.
pub fn slot(ca: &str, slot: &str) -> String {
    format!("{ca}/{slot}")
}

impl SetTokenKeys {
    /// An empty record: new keys made in the token `store` names.
    pub fn new(store: &Pkcs11Uri) -> Self {
        SetTokenKeys {
            store: store.token_only(),
            keys: BTreeMap::new(),
            pending: BTreeMap::new(),
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

    /// Every key object the document names: what the token must hold.
    pub fn named(&self) -> Vec<&Pkcs11Uri> {
        self.keys
            .values()
            .chain(self.pending.values())
            .chain(&self.retiring)
            .collect()
    }

    /// An intent to complete, or keys to destroy: another round at once.
    pub fn follow_up(&self) -> crate::FollowUp {
        crate::engines::token_keys::follow_up(!self.pending.is_empty(), !self.retiring.is_empty())
    }

    /// Records the keys of `slots` (each `CA/SLOT` with its label) that are
    /// not recorded yet: true when it recorded any (the rotation waits for
    /// the next round). Refused without access to the token.
    ///
    /// # Errors
    ///
    /// Those of [`SetTokenKeys::access`]: without access nothing is recorded.
    pub fn intend<R: CryptoRng + ?Sized>(
        &mut self,
        slots: &[(String, String)],
        rng: &mut R,
    ) -> Result<Vec<KeyChange>> {
        self.access()?;
        let mut changes = Vec::new();
        for (name, label) in slots {
            if self.pending.contains_key(name) {
                continue;
            }
            let uri = new_key_uri(&self.store, label, rng);
            self.pending.insert(name.clone(), uri.clone());
            changes.push(KeyChange::Intended(uri));
        }
        Ok(changes)
    }

    /// The key recorded for `name`, found or made in the token, now the
    /// slot's key; None when none was recorded (a key in this process).
    ///
    /// # Errors
    ///
    /// Those of [`SetTokenKeys::access`] and of
    /// [`find_or_make`]; the intent
    /// stays recorded then. None recorded is not an error.
    pub fn make(&mut self, name: &str, algorithm: KeyAlgorithm) -> Result<Option<TokenKey>> {
        let Some(uri) = self.pending.get(name).cloned() else {
            return Ok(None);
        };
        let key = find_or_make(self.access()?, &self.store, &uri, algorithm)?;
        self.pending.remove(name);
        self.keys.insert(name.to_string(), uri);
        Ok(Some(key))
    }

    /// The first key of slot `name`, made at creation (an id chosen by
    /// the caller, so a rerun adopts it).
    ///
    /// # Errors
    ///
    /// Those of [`SetTokenKeys::access`] and of
    /// [`find_or_make`]; nothing is
    /// recorded then.
    pub fn make_first(
        &mut self,
        name: &str,
        uri: &Pkcs11Uri,
        algorithm: KeyAlgorithm,
    ) -> Result<TokenKey> {
        let key = find_or_make(self.access()?, &self.store, uri, algorithm)?;
        self.keys.insert(name.to_string(), uri.clone());
        Ok(key)
    }

    /// CA `ca`'s rotation completed: its new generation's keys take the
    /// current slots, and the old generation's keys retire.
    pub fn complete(&mut self, ca: &str) -> Vec<KeyChange> {
        let mut changes = Vec::new();
        for (current, new) in [("ca", "next-ca"), ("client-ca", "next-client-ca")] {
            if let Some(old) = self.keys.remove(&slot(ca, current)) {
                changes.push(self.retire(old));
            }
            if let Some(new) = self.keys.remove(&slot(ca, new)) {
                self.keys.insert(slot(ca, current), new);
            }
        }
        changes
    }

    /// CA `ca`'s new generation was dropped (a revert ended): its keys retire.
    pub fn revert(&mut self, ca: &str) -> Vec<KeyChange> {
        let mut changes = Vec::new();
        for new in ["next-ca", "next-client-ca"] {
            if let Some(old) = self.keys.remove(&slot(ca, new)) {
                changes.push(self.retire(old));
            }
        }
        changes
    }

    fn retire(&mut self, uri: Pkcs11Uri) -> KeyChange {
        self.retiring.push(uri.clone());
        KeyChange::Retired(uri)
    }

    /// Destroys the key objects the committed document lists as retiring.
    ///
    /// # Errors
    ///
    /// Those of [`SetTokenKeys::access`] and of
    /// [`destroy_all`]; on an error
    /// the retiring list is kept.
    pub fn destroy_retiring(&mut self) -> Result<Vec<KeyChange>> {
        let changes = destroy_all(self.access()?, &self.retiring)?;
        self.retiring.clear();
        Ok(changes)
    }
}
