//! CA keys kept as objects in a PKCS#11 token: what a document records of
//! them, and the two moves that keep the token holding exactly the key
//! objects the document names.
//!
//! - **A new key is recorded before it is made.** A rotation first commits
//!   the intended object (`pending`: its id and label); the next round
//!   finds that object in the token and adopts it, or makes it. A crash
//!   between the token making a key and the store committing the document
//!   that names it leaves an intent that the rerun completes, never an
//!   object nobody names.
//! - **An old key is destroyed only once nothing trusts its CA.** Its URI
//!   moves to `retiring` in one commit; the next round destroys exactly
//!   the objects listed there and commits them gone. A lookup that fails
//!   destroys nothing; a retiring object already gone counts as destroyed.
//!
//! The token itself is the caller's ([`TokenAccess`], attached to the
//! document after it is read, like an RNG passed to a step): an engine
//! opens nothing.

use crate::model::error::{Result, RotateError};
use pki_core::{KeyAlgorithm, Pkcs11Uri, TokenAccess, TokenKey};
use rand_core::CryptoRng;
use std::sync::Arc;

/// The length of the CKA_ID of a key pki makes: 16 random bytes, so two
/// documents sharing a token never pick the same id.
pub const KEY_ID_LEN: usize = 16;

/// The CKA_ID of the first CA key of the document created at `location`
/// (an absolute directory or a store URL) for `name`: derived from them,
/// so that a creation that crashed after the token made the key and
/// before the store held the document finds that key again when it is
/// run again, and adopts it instead of leaving it behind.
pub fn first_key_id(location: &str, name: &str) -> [u8; KEY_ID_LEN] {
    use sha2::Digest;
    let digest = sha2::Sha256::new()
        .chain_update(b"pki first CA key\n")
        .chain_update(location.as_bytes())
        .chain_update(b"\n")
        .chain_update(name.as_bytes())
        .finalize();
    let mut id = [0u8; KEY_ID_LEN];
    id.copy_from_slice(&digest[..KEY_ID_LEN]);
    id
}

/// Where the document at store key `key` of the store at `location` is,
/// for [`first_key_id`]: the store's location alone for the store's usual
/// document (`usual`, as the CLI keeps it), else with the key, so that two
/// documents of one store with the same CA name never derive one id.
pub fn document_location(location: &str, key: &str, usual: &str) -> String {
    if key == usual {
        location.to_string()
    } else {
        format!("{location}\nstore key {key}")
    }
}

/// The label of a document's CA key of generation `generation` (1 for
/// the first) for the CA named `name`: what `pkcs11-tool` lists.
pub fn key_label(name: &str, generation: usize) -> String {
    format!("{name} CA {generation}")
}

/// The URI of a new key object in the token `store` names: a random id
/// (two documents sharing a token never pick the same) and `label`.
pub fn new_key_uri<R: CryptoRng + ?Sized>(
    store: &Pkcs11Uri,
    label: &str,
    rng: &mut R,
) -> Pkcs11Uri {
    let mut id = [0u8; KEY_ID_LEN];
    rng.fill_bytes(&mut id);
    store.private_key(&id, label)
}

/// What a document records of the token objects that hold its CA keys.
#[derive(Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenKeys {
    /// The token new keys are made in (a URI naming only the token).
    #[serde(with = "uri_text")]
    pub store: Pkcs11Uri,
    /// The current CA's key object.
    #[serde(with = "uri_text")]
    pub current: Pkcs11Uri,
    /// The key a rotation decided to make, recorded before the token makes
    /// it: adopted by the round that completes the rotation when the token
    /// already holds it.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "uri_text::option"
    )]
    pub pending: Option<Pkcs11Uri>,
    /// The previous CA's key object, kept while that CA is trusted.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "uri_text::option"
    )]
    pub previous: Option<Pkcs11Uri>,
    /// Key objects of CAs nothing trusts any more: the next round destroys
    /// them, and only them.
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "uri_text::list"
    )]
    pub retiring: Vec<Pkcs11Uri>,
    /// Whether the current key is the operator's (an imported CA's key,
    /// `--key-uri`): pki never destroys a key it did not make.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub imported: bool,
    /// The access to the token, attached after the document is read.
    #[serde(skip)]
    access: Attached,
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenKeys")
            .field("store", &self.store.to_string())
            .field("current", &self.current.to_string())
            .field("pending", &self.pending.as_ref().map(ToString::to_string))
            .field("previous", &self.previous.as_ref().map(ToString::to_string))
            .field("retiring", &self.retiring.len())
            .field("attached", &self.access.0.is_some())
            .finish()
    }
}

/// The caller's access to the token: never stored, never compared.
#[derive(Clone, Default)]
pub(crate) struct Attached(pub(crate) Option<Arc<dyn TokenAccess>>);

impl PartialEq for Attached {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl Eq for Attached {}

impl Attached {
    pub(crate) fn set(&mut self, access: &Arc<dyn TokenAccess>) {
        self.0 = Some(Arc::clone(access));
    }

    /// The access, or the error naming the token `store` a step needs.
    pub(crate) fn get(&self, store: &Pkcs11Uri) -> Result<&Arc<dyn TokenAccess>> {
        self.0.as_ref().ok_or_else(|| {
            RotateError::from(pki_core::Error::Pkcs11TokenNotOpen {
                uri: store.to_string(),
            })
        })
    }
}

/// What changed in the token, for the engine's events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyChange {
    /// A rotation's new key was recorded; the next round makes it.
    Intended(Pkcs11Uri),
    /// A key no longer trusted was listed for destruction.
    Retired(Pkcs11Uri),
    /// A retiring key was destroyed (or found already gone).
    Destroyed(Pkcs11Uri),
}

impl TokenKeys {
    /// The record of a CA whose key is the object `current`, new keys
    /// made in the token `store` names.
    pub fn new(store: &Pkcs11Uri, current: &Pkcs11Uri) -> Self {
        TokenKeys {
            store: store.token_only(),
            current: current.without_query(),
            pending: None,
            previous: None,
            retiring: Vec::new(),
            imported: false,
            access: Attached(None),
        }
    }

    /// The record of an imported CA whose key is the operator's object
    /// `current`: signed with, never destroyed.
    pub fn imported(current: &Pkcs11Uri) -> Self {
        TokenKeys {
            imported: true,
            ..TokenKeys::new(current, current)
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
    /// [`RotateError::Core`] with [`pki_core::Error::Pkcs11TokenNotOpen`]
    /// naming the store's token when no access was attached.
    pub fn access(&self) -> Result<&Arc<dyn TokenAccess>> {
        self.access.get(&self.store)
    }

    /// Every key object the document names: what the token must hold.
    pub fn named(&self) -> Vec<&Pkcs11Uri> {
        std::iter::once(&self.current)
            .chain(&self.pending)
            .chain(&self.previous)
            .chain(&self.retiring)
            .collect()
    }

    /// Whether the document asks for another round at once: its input
    /// again for an intent to complete, one that asks nothing for keys
    /// to destroy.
    pub fn follow_up(&self) -> crate::FollowUp {
        follow_up(self.pending.is_some(), !self.retiring.is_empty())
    }

    /// Records the key a rotation will make (an id from `rng`, `label`):
    /// nothing is made yet. Refused without access to the token, so no
    /// intent is recorded that nothing could complete.
    ///
    /// # Errors
    ///
    /// Those of [`TokenKeys::access`]: without access nothing is recorded.
    pub fn intend<R: CryptoRng + ?Sized>(&mut self, label: &str, rng: &mut R) -> Result<KeyChange> {
        self.access()?;
        let uri = new_key_uri(&self.store, label, rng);
        self.pending = Some(uri.clone());
        Ok(KeyChange::Intended(uri))
    }

    /// The key the recorded intent names, made or adopted
    /// ([`TokenKeys::find_or_make`]); None without an intent.
    ///
    /// # Errors
    ///
    /// Those of [`TokenKeys::find_or_make`]. No intent is not an error.
    pub fn make_pending(&self, algorithm: KeyAlgorithm) -> Result<Option<TokenKey>> {
        self.pending
            .as_ref()
            .map(|uri| self.find_or_make(uri, algorithm))
            .transpose()
    }

    /// The key object `uri` names, found or made in the store's token
    /// ([`find_or_make`]).
    ///
    /// # Errors
    ///
    /// Those of [`TokenKeys::access`] and of [`find_or_make`].
    pub fn find_or_make(&self, uri: &Pkcs11Uri, algorithm: KeyAlgorithm) -> Result<TokenKey> {
        find_or_make(self.access()?, &self.store, uri, algorithm)
    }

    /// After a rotation to `new` (made by [`TokenKeys::make_pending`]):
    /// `new` is current; the old current key becomes the previous one,
    /// kept while its CA is trusted (`previous_trusted`), else retired at
    /// once; a previous key the rotation replaced is retired.
    pub fn rotated(&mut self, new: &TokenKey, previous_trusted: bool) -> Vec<KeyChange> {
        let old = std::mem::replace(&mut self.current, new.uri().clone());
        self.pending = None;
        let mut changes = Vec::new();
        if let Some(replaced) = self.previous.take() {
            changes.push(self.retire(replaced));
        }
        if std::mem::take(&mut self.imported) {
            // The operator's key: forgotten, never destroyed.
            return changes;
        }
        if previous_trusted {
            self.previous = Some(old);
        } else {
            changes.push(self.retire(old));
        }
        changes
    }

    /// Retires the previous key: its CA is no longer trusted.
    pub fn retire_previous(&mut self) -> Option<KeyChange> {
        let previous = self.previous.take()?;
        Some(self.retire(previous))
    }

    fn retire(&mut self, uri: Pkcs11Uri) -> KeyChange {
        self.retiring.push(uri.clone());
        KeyChange::Retired(uri)
    }

    /// Destroys every key object this (committed) document lists as
    /// retiring, and forgets them ([`destroy_all`]).
    ///
    /// # Errors
    ///
    /// Those of [`TokenKeys::access`] and of [`destroy_all`]; on an error the
    /// retiring list is kept, so a later run destroys what is left.
    pub fn destroy_retiring(&mut self) -> Result<Vec<KeyChange>> {
        let changes = destroy_all(self.access()?, &self.retiring)?;
        self.retiring.clear();
        Ok(changes)
    }
}

/// The round a document with an intent (`pending`) or keys to destroy
/// (`retiring`) asks for next.
pub fn follow_up(pending: bool, retiring: bool) -> crate::FollowUp {
    match (pending, retiring) {
        (true, _) => crate::FollowUp::RepeatInput,
        (false, true) => crate::FollowUp::Upkeep,
        (false, false) => crate::FollowUp::None,
    }
}

/// The key object `uri` names (an id and a label a document chose): the
/// object already in the token (a rerun after a crash that followed its
/// making), else made now in the token `store` names. Either way of
/// `algorithm`, bound to sign.
///
/// # Errors
///
/// A [`RotateError::Core`] with what the token reports when it cannot find,
/// destroy (a half-made object) or make the key (a PKCS#11 error, a full token,
/// an unsupported mechanism) or read its public key;
/// [`pki_core::Error::Pkcs11`] when the object found is of another algorithm
/// than `algorithm`.
pub fn find_or_make(
    access: &Arc<dyn TokenAccess>,
    store: &Pkcs11Uri,
    uri: &Pkcs11Uri,
    algorithm: KeyAlgorithm,
) -> Result<TokenKey> {
    let object = match access.find_key(uri) {
        Ok(object) if signs(&*object) => object,
        Err(pki_core::Error::Pkcs11KeyNotFound { .. }) => make(access, store, uri, algorithm)?,
        // An object that is found but cannot sign (or be read) is one the
        // token was still making when the process died: some tokens
        // (SoftHSM2's file store) write a key's attributes one after the
        // other. Nothing was ever signed with a key no committed document
        // names as current, so it is made again.
        found => {
            match access.destroy_key(uri) {
                Ok(_) | Err(pki_core::Error::Pkcs11KeyNotFound { .. }) => {}
                Err(destroy) => {
                    return Err(found.err().unwrap_or(destroy).into());
                }
            }
            make(access, store, uri, algorithm)?
        }
    };
    if object.algorithm() != algorithm {
        return Err(RotateError::from(pki_core::Error::Pkcs11 {
            operation: format!("adopting the recorded key {uri}"),
            reason: format!(
                "the token's object is a {} key, the policy asks for {algorithm}: destroy the object or change the policy's key type",
                object.algorithm()
            ),
        }));
    }
    Ok(TokenKey::of_object(uri, object)?)
}

/// Whether `key` signs: a self-signed certificate it makes verifies with
/// the public key it reports.
fn signs(key: &dyn pki_core::SigningKey) -> bool {
    let check = || -> pki_core::Result<bool> {
        let at = time::OffsetDateTime::UNIX_EPOCH;
        let params = pki_core::CertificateParams::new(
            pki_core::Profile::RootCa,
            "pki key check",
            at,
            time::Duration::DAY,
        )?;
        // A fixed serial source: the certificate is thrown away.
        let mut rng = <rand_chacha::ChaCha20Rng as rand_core::SeedableRng>::seed_from_u64(0);
        let cert = params.self_signed_with(key, &mut rng)?;
        Ok(pki_core::verify_signature(&key.public_key()?, &cert).is_ok())
    };
    check().unwrap_or(false)
}

/// Makes the key object `uri` names. Objects with its id but no private
/// key (a key pair whose making was cut short: the token made the public
/// half, then the process died) are what the document's own intent left:
/// they are destroyed and the pair made again.
fn make(
    access: &Arc<dyn TokenAccess>,
    store: &Pkcs11Uri,
    uri: &Pkcs11Uri,
    algorithm: KeyAlgorithm,
) -> Result<Arc<dyn pki_core::SigningKey>> {
    let id = uri.id.as_deref().unwrap_or_default();
    let label = uri.object.as_deref().unwrap_or_default();
    match access.generate_key(store, algorithm, id, label) {
        Err(pki_core::Error::Pkcs11KeyExists { .. }) => {
            access.destroy_key(uri)?;
            Ok(access.generate_key(store, algorithm, id, label)?)
        }
        made => Ok(made?),
    }
}

/// Destroys the key objects `uris` name, which a committed document lists
/// as retiring. An object already gone counts as destroyed; any other
/// failure stops here.
///
/// # Errors
///
/// A [`RotateError::Core`] with the token's error for the first object it fails
/// to destroy (other than one already gone); the objects before it are
/// destroyed.
pub fn destroy_all(access: &Arc<dyn TokenAccess>, uris: &[Pkcs11Uri]) -> Result<Vec<KeyChange>> {
    let mut changes = Vec::with_capacity(uris.len());
    for uri in uris {
        match access.destroy_key(uri) {
            Ok(_) | Err(pki_core::Error::Pkcs11KeyNotFound { .. }) => {}
            Err(e) => return Err(e.into()),
        }
        changes.push(KeyChange::Destroyed(uri.clone()));
    }
    Ok(changes)
}

impl TokenKeys {
    /// Turns the attached access into a simulation of it, for a forecast
    /// ([`crate::forecast`]) that steps copies of the document in memory:
    /// keys it makes are made in memory (from their id), keys it destroys
    /// are forgotten there, and the token itself is only asked to find
    /// the current key to sign with. A forecast never changes a token.
    pub fn simulate(&mut self) {
        self.access.simulate();
    }
}

impl Attached {
    /// Turns the access into a forecast's simulation of it (see
    /// [`TokenKeys::simulate`]).
    pub(crate) fn simulate(&mut self) {
        let real = self.0.take();
        self.0 = Some(Arc::new(Simulated {
            real,
            made: std::sync::Mutex::new(Vec::new()),
        }));
    }
}

/// A key a simulated token made, by its id.
type MadeKey = (Vec<u8>, Arc<dyn pki_core::SigningKey>);

/// A token as a forecast sees it (see [`TokenKeys::simulate`]).
struct Simulated {
    real: Option<Arc<dyn TokenAccess>>,
    made: std::sync::Mutex<Vec<MadeKey>>,
}

impl Simulated {
    fn made(&self, id: Option<&[u8]>) -> Option<Arc<dyn pki_core::SigningKey>> {
        let made = self.made.lock().ok()?;
        made.iter()
            .find(|(made_id, _)| Some(made_id.as_slice()) == id)
            .map(|(_, key)| Arc::clone(key))
    }
}

impl TokenAccess for Simulated {
    fn find_key(&self, uri: &Pkcs11Uri) -> pki_core::Result<Arc<dyn pki_core::SigningKey>> {
        if let Some(key) = self.made(uri.id.as_deref()) {
            return Ok(key);
        }
        match &self.real {
            Some(real) => real.find_key(uri),
            None => Err(pki_core::Error::Pkcs11KeyNotFound {
                token: uri.token.clone().unwrap_or_default(),
                object: uri.describe_object(),
            }),
        }
    }

    fn generate_key(
        &self,
        _store: &Pkcs11Uri,
        algorithm: KeyAlgorithm,
        id: &[u8],
        _label: &str,
    ) -> pki_core::Result<Arc<dyn pki_core::SigningKey>> {
        // The forecast is a function of its inputs: the key comes from its id.
        let mut seed = [0u8; 32];
        for (slot, byte) in seed.iter_mut().zip(id) {
            *slot = *byte;
        }
        let mut rng = <rand_chacha::ChaCha20Rng as rand_core::SeedableRng>::from_seed(seed);
        let key: Arc<dyn pki_core::SigningKey> =
            Arc::new(pki_core::PrivateKey::generate(algorithm, &mut rng)?);
        if let Ok(mut made) = self.made.lock() {
            made.push((id.to_vec(), Arc::clone(&key)));
        }
        Ok(key)
    }

    fn destroy_key(&self, uri: &Pkcs11Uri) -> pki_core::Result<usize> {
        if let Ok(mut made) = self.made.lock() {
            made.retain(|(id, _)| Some(id.as_slice()) != uri.id.as_deref());
        }
        Ok(1)
    }
}

/// A token key of a document read back: the object `uri` names, whose
/// public half is the one `cert` certifies.
///
/// # Errors
///
/// The error of [`pki_core::public_key_algorithm`] when `cert`'s public key is
/// of no algorithm pki signs with.
pub fn current_key(uri: &Pkcs11Uri, cert: &pki_core::Certificate) -> pki_core::Result<TokenKey> {
    let spki = cert.public_key().clone();
    let algorithm = pki_core::public_key_algorithm(&spki)?;
    Ok(TokenKey::new(uri, algorithm, spki))
}

/// PKCS#11 URIs as their text in a document.
pub(crate) mod uri_text {
    use pki_core::Pkcs11Uri;
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(uri: &Pkcs11Uri, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(uri)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Pkcs11Uri, D::Error> {
        let text = String::deserialize(d)?;
        Pkcs11Uri::parse(&text).map_err(serde::de::Error::custom)
    }

    pub mod option {
        use super::*;

        pub fn serialize<S: Serializer>(uri: &Option<Pkcs11Uri>, s: S) -> Result<S::Ok, S::Error> {
            match uri {
                Some(uri) => s.collect_str(uri),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Pkcs11Uri>, D::Error> {
            Option::<String>::deserialize(d)?
                .map(|text| Pkcs11Uri::parse(&text).map_err(serde::de::Error::custom))
                .transpose()
        }
    }

    pub mod map {
        use super::*;
        use serde::ser::SerializeMap;
        use std::collections::BTreeMap;

        pub fn serialize<S: Serializer>(
            uris: &BTreeMap<String, Pkcs11Uri>,
            s: S,
        ) -> Result<S::Ok, S::Error> {
            let mut map = s.serialize_map(Some(uris.len()))?;
            for (name, uri) in uris {
                map.serialize_entry(name, &uri.to_string())?;
            }
            map.end()
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(
            d: D,
        ) -> Result<BTreeMap<String, Pkcs11Uri>, D::Error> {
            BTreeMap::<String, String>::deserialize(d)?
                .into_iter()
                .map(|(name, text)| {
                    Pkcs11Uri::parse(&text)
                        .map(|uri| (name, uri))
                        .map_err(serde::de::Error::custom)
                })
                .collect()
        }
    }

    pub mod list {
        use super::*;
        use serde::ser::SerializeSeq;

        pub fn serialize<S: Serializer>(uris: &[Pkcs11Uri], s: S) -> Result<S::Ok, S::Error> {
            let mut seq = s.serialize_seq(Some(uris.len()))?;
            for uri in uris {
                seq.serialize_element(&uri.to_string())?;
            }
            seq.end()
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<Pkcs11Uri>, D::Error> {
            Vec::<String>::deserialize(d)?
                .iter()
                .map(|text| Pkcs11Uri::parse(text).map_err(serde::de::Error::custom))
                .collect()
        }
    }
}
