//! The key ring's document and its forms.
//!
//! **Files** ([`KeyRing::to_files`]), what stores keep and consumers read:
//!
//! | file | what |
//! |---|---|
//! | `keys/key-ring.json` | the document: policy, key ids and public keys, forced reasons, history |
//! | `keys/active.key` | the active private key, PKCS#8 PEM (secret: 0600); absent when the ring's keys are in a PKCS#11 token |
//! | `keys/public.pem` | every published public key as a `PUBLIC KEY` block, active first |
//! | `keys/jwks.json` | the same keys as a JWK Set, `kid` = RFC 7638 thumbprint |
//!
//! `public.pem` and `jwks.json` are derived: reading takes the state file
//! and the active key only, and checks that the key is the one the state
//! names. **One JSON document** ([`KeyRing::to_json`]) carries the active
//! key inline under `material`, for embedders (the C ABI) that keep one
//! blob. Secret data keys are the paths with `/` → `.`
//! (`keys.active.key`…).
//!
//! Format version 1, fields of `key-ring.json`:
//!
//! | field | meaning |
//! |---|---|
//! | `kind`, `version` | `"key-ring"`, 1 |
//! | `policy` | algorithm, lifetime_seconds, grace_seconds, max_token_lifetime_seconds |
//! | `active` | kid, since, origin; public_key (PEM) when the key is in a token |
//! | `accepted` | kid, public_key (PEM), rotated_out_at, accepted_until, origin |
//! | `forced_reasons` | forced reasons acted on |
//! | `history` | rotations: at, reason, from, to, previous_accepted_until |
//! | `material` | (JSON form only) `active_key`: PKCS#8 PEM; absent when the key is in a token |
//! | `token_keys` | (keys in a PKCS#11 token only) `store` (the token new keys are made in), `active` (the active key's object), `accepted` (kid → object of each accepted key the ring made), `pending` (a rotation's key, recorded before it is made), `retiring` (objects to destroy) |
//!
//! A ring whose keys are in a token keeps no private material: each key
//! is a URI (`pkcs11:token=…;object=…;id=…`) and its public key.

use super::token_keys::RingTokenKeys;
use super::{
    AcceptedKey, ActiveKey, KeyOrigin, KeyRing, KeyRingPolicy, KeyRotationRecord, PublicKey,
};
use crate::engines::token_keys::uri_text;
use crate::model::document::{Document as DocumentForm, Envelope, File, Files, SecretData};
use crate::model::error::{Result, RotateError};
use pki_core::{CaKey, KeyAlgorithm, Pkcs11Uri, PrivateKey, TokenKey};
use std::collections::{BTreeMap, BTreeSet};
use time::{Duration, OffsetDateTime};
use zeroize::Zeroizing;

/// The document kind.
pub const KIND: &str = "key-ring";
/// The format version this build writes (and the newest it reads).
pub const VERSION: u32 = 1;
/// The document.
pub const STATE_FILE: &str = "keys/key-ring.json";
/// The active private key (secret).
pub const ACTIVE_KEY: &str = "keys/active.key";
/// The published public keys, PEM.
pub const PUBLIC_PEM: &str = "keys/public.pem";
/// The published public keys, JWK Set.
pub const JWKS: &str = "keys/jwks.json";
/// Every file, and whether it is secret.
pub const FILES: &[(&str, bool)] = &[
    (STATE_FILE, false),
    (ACTIVE_KEY, true),
    (PUBLIC_PEM, false),
    (JWKS, false),
];

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Document {
    kind: String,
    version: u32,
    policy: PolicyDoc,
    active: ActiveDoc,
    accepted: Vec<AcceptedDoc>,
    forced_reasons: BTreeSet<String>,
    history: Vec<KeyRotationRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    material: Option<Material>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    token_keys: Option<TokenKeysDoc>,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TokenKeysDoc {
    #[serde(with = "uri_text")]
    store: Pkcs11Uri,
    #[serde(with = "uri_text")]
    active: Pkcs11Uri,
    #[serde(
        default,
        skip_serializing_if = "BTreeMap::is_empty",
        with = "uri_text::map"
    )]
    accepted: BTreeMap<String, Pkcs11Uri>,
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "uri_text::option"
    )]
    pending: Option<Pkcs11Uri>,
    #[serde(
        default,
        skip_serializing_if = "Vec::is_empty",
        with = "uri_text::list"
    )]
    retiring: Vec<Pkcs11Uri>,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct PolicyDoc {
    algorithm: KeyAlgorithm,
    lifetime_seconds: i64,
    grace_seconds: i64,
    max_token_lifetime_seconds: Option<i64>,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct ActiveDoc {
    kid: String,
    #[serde(with = "time::serde::rfc3339")]
    since: OffsetDateTime,
    origin: KeyOrigin,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    public_key: Option<String>,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct AcceptedDoc {
    kid: String,
    public_key: String,
    #[serde(with = "time::serde::rfc3339::option")]
    rotated_out_at: Option<OffsetDateTime>,
    #[serde(with = "time::serde::rfc3339::option")]
    accepted_until: Option<OffsetDateTime>,
    origin: KeyOrigin,
}

#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Material {
    active_key: Zeroizing<String>,
}

/// Durations are kept in seconds; anything that does not fit a `Duration`
/// is a corrupt document, not a panic.
fn seconds(location: &str, field: &str, s: i64) -> Result<Duration> {
    if s.unsigned_abs() > 1_000 * 365 * 86_400 {
        return Err(RotateError::corrupt(
            format!("{location}: policy.{field}"),
            format!("{s} seconds is out of range"),
        ));
    }
    Ok(Duration::seconds(s))
}

impl KeyRing {
    fn document(&self, with_material: bool) -> Result<Document> {
        Ok(Document {
            kind: KIND.to_string(),
            version: VERSION,
            policy: PolicyDoc {
                algorithm: self.policy.algorithm,
                lifetime_seconds: self.policy.lifetime.whole_seconds(),
                grace_seconds: self.policy.grace.whole_seconds(),
                max_token_lifetime_seconds: self
                    .policy
                    .max_token_lifetime
                    .map(|d| d.whole_seconds()),
            },
            active: ActiveDoc {
                kid: self.active.kid.clone(),
                since: self.active.since,
                origin: self.active.origin,
                public_key: self.active.key.token().map(|_| self.active.public.to_pem()),
            },
            accepted: self
                .accepted
                .iter()
                .map(|k| AcceptedDoc {
                    kid: k.kid.clone(),
                    public_key: k.public.to_pem(),
                    rotated_out_at: k.rotated_out_at,
                    accepted_until: k.accepted_until,
                    origin: k.origin,
                })
                .collect(),
            forced_reasons: self.forced_reasons.clone(),
            history: self.history.clone(),
            material: match self.active.key.in_process() {
                Some(key) if with_material => Some(Material {
                    active_key: key.to_pkcs8_pem()?,
                }),
                _ => None,
            },
            token_keys: self.token_keys_doc(),
        })
    }

    fn token_keys_doc(&self) -> Option<TokenKeysDoc> {
        let keys = self.token_keys.as_ref()?;
        Some(TokenKeysDoc {
            store: keys.store.clone(),
            active: self.active.key.token()?.uri().clone(),
            accepted: keys.accepted.clone(),
            pending: keys.pending.clone(),
            retiring: keys.retiring.clone(),
        })
    }

    /// The whole ring as one JSON document, with the active key inline
    /// (a key in a token: its URI and public key alone).
    ///
    /// # Errors
    ///
    /// [`RotateError::Core`] when the active key does not encode as PKCS#8, and
    /// [`DocumentError::Json`](crate::DocumentError::Json) when the document
    /// does not serialize.
    pub fn to_json(&self) -> Result<Zeroizing<String>> {
        let doc = self.document(true)?;
        serde_json::to_string_pretty(&doc)
            .map(Zeroizing::new)
            .map_err(|e| RotateError::json(KIND, e))
    }

    /// Reads the one-document JSON form.
    ///
    /// # Errors
    ///
    /// [`DocumentError::Unsupported`](crate::DocumentError::Unsupported) for
    /// another kind or version,
    /// [`DocumentError::Json`](crate::DocumentError::Json) for JSON that does
    /// not parse, [`DocumentError::Material`](crate::DocumentError::Material)
    /// for an active key that does not decode, and
    /// [`DocumentError::Corrupt`](crate::DocumentError::Corrupt) for a missing
    /// active key, an invalid policy or duration, a key that does not match its
    /// recorded id, or an accepted key that does not decode; a
    /// [`KeyRingError::Jose`](crate::KeyRingError::Jose) for an active key the
    /// ring cannot publish.
    pub fn from_json(bytes: &[u8]) -> Result<Self> {
        let mut doc = parse("key ring JSON", bytes)?;
        let key = doc
            .material
            .take()
            .map(|material| {
                PrivateKey::from_pem(material.active_key.as_bytes())
                    .map_err(|e| RotateError::material("key ring JSON: material.active_key", e))
            })
            .transpose()?;
        let key = active_key(
            ("key ring JSON", "\"material\" (the active key)"),
            &doc,
            key,
        )?;
        Self::from_document("key ring JSON", doc, key)
    }

    fn from_document(location: &str, doc: Document, key: CaKey) -> Result<Self> {
        let policy = KeyRingPolicy {
            algorithm: doc.policy.algorithm,
            lifetime: seconds(location, "lifetime_seconds", doc.policy.lifetime_seconds)?,
            grace: seconds(location, "grace_seconds", doc.policy.grace_seconds)?,
            max_token_lifetime: doc
                .policy
                .max_token_lifetime_seconds
                .map(|s| seconds(location, "max_token_lifetime_seconds", s))
                .transpose()?,
        };
        policy
            .validate()
            .map_err(|e| RotateError::corrupt(format!("{location}: policy"), e))?;
        let active = ActiveKey::new(key, doc.active.since, doc.active.origin)?;
        if active.kid != doc.active.kid {
            return Err(RotateError::corrupt(
                ACTIVE_KEY,
                format!(
                    "holds key {}, but {location} names {} as active",
                    active.kid, doc.active.kid
                ),
            ));
        }
        let mut accepted = Vec::with_capacity(doc.accepted.len());
        let mut seen = BTreeSet::from([active.kid.clone()]);
        for (i, a) in doc.accepted.into_iter().enumerate() {
            let what = format!("{location}: accepted[{i}]");
            let der = public_key_der(&what, &a.public_key)?;
            let public = PublicKey::from_spki_der(&der)
                .map_err(|e| RotateError::corrupt(what.clone(), e))?;
            if public.thumbprint() != a.kid {
                return Err(RotateError::corrupt(
                    what,
                    format!(
                        "kid {} is not the thumbprint {} of its key",
                        a.kid,
                        public.thumbprint()
                    ),
                ));
            }
            if !seen.insert(a.kid.clone()) {
                return Err(RotateError::corrupt(
                    what,
                    format!("key {} appears twice", a.kid),
                ));
            }
            accepted.push(AcceptedKey {
                public,
                kid: a.kid,
                rotated_out_at: a.rotated_out_at,
                accepted_until: a.accepted_until,
                origin: a.origin,
            });
        }
        let token_keys = doc
            .token_keys
            .map(|t| ring_token_keys(location, t, &accepted))
            .transpose()?;
        Ok(KeyRing {
            policy,
            active,
            accepted,
            forced_reasons: doc.forced_reasons,
            history: doc.history,
            token_keys,
        })
    }
}

/// The DER of the one `PUBLIC KEY` PEM block `pem` holds, `what` naming
/// where it is.
fn public_key_der(what: &str, pem: &str) -> Result<Vec<u8>> {
    let blocks =
        pki_core::pem::read_blocks(pem.as_bytes()).map_err(|e| RotateError::material(what, e))?;
    let [block] = blocks.as_slice() else {
        return Err(RotateError::corrupt(
            what,
            "public_key must hold exactly one PEM block",
        ));
    };
    if block.label != "PUBLIC KEY" {
        return Err(RotateError::corrupt(what, "public_key is not a PUBLIC KEY"));
    }
    Ok(block.der.to_vec())
}

/// The active key: the private key read (`key`), or the token object the
/// document names with its public key. `(location, source)` name the
/// document and where a private key is read from.
fn active_key(
    (location, source): (&str, &str),
    doc: &Document,
    key: Option<PrivateKey>,
) -> Result<CaKey> {
    let Some(token) = &doc.token_keys else {
        return key
            .map(CaKey::from)
            .ok_or_else(|| RotateError::corrupt(location, format!("has no {source}")));
    };
    if key.is_some() {
        return Err(RotateError::corrupt(
            source,
            format!(
                "is present, but {location} keeps the active key in a token ({})",
                token.active
            ),
        ));
    }
    let what = format!("{location}: active");
    let pem = doc.active.public_key.as_deref().ok_or_else(|| {
        RotateError::corrupt(&what, "has no public_key, and its key is in a token")
    })?;
    let der = public_key_der(&what, pem)?;
    let spki = <spki::SubjectPublicKeyInfoOwned as spki::der::Decode>::from_der(&der)
        .map_err(|e| RotateError::corrupt(&what, e))?;
    let algorithm = pki_core::public_key_algorithm(&spki)?;
    Ok(TokenKey::new(&token.active, algorithm, spki).into())
}

/// The ring's record of its token objects, each accepted key's object
/// naming one of `accepted`.
fn ring_token_keys(
    location: &str,
    doc: TokenKeysDoc,
    accepted: &[AcceptedKey],
) -> Result<RingTokenKeys> {
    if let Some(kid) = doc
        .accepted
        .keys()
        .find(|kid| !accepted.iter().any(|k| &k.kid == *kid))
    {
        return Err(RotateError::corrupt(
            format!("{location}: token_keys.accepted"),
            format!("names key {kid}, which is not an accepted key"),
        ));
    }
    let mut keys = RingTokenKeys::new(&doc.store);
    keys.accepted = doc.accepted;
    keys.pending = doc.pending;
    keys.retiring = doc.retiring;
    Ok(keys)
}

impl DocumentForm for KeyRing {
    const KIND: &'static str = KIND;
    const VERSION: u32 = VERSION;

    /// `keys/key-ring.json`, whatever the document holds.
    fn state_file(near: Option<&str>) -> Option<String> {
        let _ = near;
        Some(STATE_FILE.to_string())
    }

    /// The active key: sealed everywhere but in a directory store.
    fn sealed_witness_paths(read: Option<&Files>) -> BTreeSet<String> {
        match read {
            None => BTreeSet::from([ACTIVE_KEY.to_string()]),
            Some(_) => BTreeSet::new(),
        }
    }

    /// The files a store keeps (see the module docs).
    fn to_files(&self) -> Result<Files> {
        let doc = self.document(false)?;
        let mut state = serde_json::to_vec_pretty(&doc).map_err(|e| RotateError::json(KIND, e))?;
        state.push(b'\n');
        let mut files = Files::new();
        files.insert(STATE_FILE, File::public(state))?;
        // A key in a token has no file: the state's `token_keys` names it.
        if let Some(key) = self.active.key.in_process() {
            let key = key.to_pkcs8_pem()?;
            files.insert(ACTIVE_KEY, File::secret(key.as_bytes().to_vec()))?;
        }
        files.insert(PUBLIC_PEM, File::public(self.public_pem().into_bytes()))?;
        files.insert(JWKS, File::public(self.jwks().to_json().into_bytes()))?;
        Ok(files)
    }

    /// Reads the ring back from its files: the state file and the active key.
    fn from_files(files: &Files) -> Result<Self> {
        let state = files
            .get(STATE_FILE)
            .ok_or_else(|| RotateError::corrupt(STATE_FILE, "is missing"))?;
        let doc = parse(STATE_FILE, state)?;
        let key = files
            .get(ACTIVE_KEY)
            .map(|pem| PrivateKey::from_pem(pem).map_err(|e| RotateError::material(ACTIVE_KEY, e)))
            .transpose()?;
        let key = match (&doc.token_keys, key) {
            (None, None) => return Err(RotateError::corrupt(ACTIVE_KEY, "is missing")),
            (_, key) => active_key((STATE_FILE, ACTIVE_KEY), &doc, key)?,
        };
        Self::from_document(STATE_FILE, doc, key)
    }

    /// Token issuers sign with `keys/active.key` where it is published.
    fn published_secret(path: &str) -> bool {
        path == ACTIVE_KEY
    }

    fn files_to_secret_data(files: &Files) -> Result<SecretData> {
        crate::model::document::files_to_secret_data(files, &[])
    }

    fn files_from_secret_data(data: &SecretData) -> Result<Files> {
        crate::model::document::files_from_secret_data(data, &[], FILES.iter().copied())
    }

    fn attach_tokens(&mut self, access: &std::sync::Arc<dyn pki_core::TokenAccess>) {
        self.attach_token_access(access);
    }

    fn follow_up(&self) -> crate::FollowUp {
        self.token_keys
            .as_ref()
            .map_or(crate::FollowUp::None, RingTokenKeys::follow_up)
    }

    fn simulate_tokens(&mut self) {
        if let Some(keys) = &mut self.token_keys {
            keys.simulate();
        }
    }
}

fn parse(location: &str, bytes: &[u8]) -> Result<Document> {
    let envelope = Envelope::probe(location, bytes)?;
    envelope.check(location, KIND, VERSION, |_| false)?;
    serde_json::from_slice(bytes).map_err(|e| RotateError::json(location, e))
}
