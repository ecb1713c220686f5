//! Where a CA's private key is: in this process ([`PrivateKey`]), or an
//! object in a PKCS#11 token ([`TokenKey`]) that signs there and of which
//! a document keeps only the URI and the public key.
//!
//! A [`TokenKey`] read back from a document is *unbound*: it knows which
//! object signs for the CA but holds no open token, since pki-core opens
//! nothing on its own. The caller that opened the token binds it
//! ([`TokenKey::bind`]) with the key object it found by the URI, checked
//! to be the one the certificate names. An unbound key refuses to sign
//! with one line naming the token it needs, so a step without the token
//! fails before anything is written.

use crate::error::{Error, Result};
use crate::key::{KeyAlgorithm, PrivateKey};
use crate::pkcs11::Pkcs11Uri;
use crate::provider::CryptoProvider;
use crate::signatures;
use crate::signing::SigningKey;
use crate::token_access::{TokenAccess, find_checked};
use spki::{AlgorithmIdentifierOwned, SubjectPublicKeyInfoOwned};
use std::sync::{Arc, OnceLock};
use zeroize::Zeroizing;

/// A CA's private key, in this process or in a token.
#[derive(Clone)]
pub enum CaKey {
    /// In this process: stored as PKCS#8 PEM (sealed at rest where the
    /// store seals).
    InProcess(PrivateKey),
    /// A key object in a PKCS#11 token, which never leaves it (boxed: a
    /// URI and a public key outweigh an in-process key's handle).
    Token(Box<TokenKey>),
}

impl std::fmt::Debug for CaKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CaKey::InProcess(key) => write!(f, "CaKey::InProcess({})", key.algorithm()),
            CaKey::Token(key) => write!(f, "CaKey::Token({})", key.uri),
        }
    }
}

impl From<PrivateKey> for CaKey {
    fn from(key: PrivateKey) -> Self {
        CaKey::InProcess(key)
    }
}

impl From<TokenKey> for CaKey {
    fn from(key: TokenKey) -> Self {
        CaKey::Token(Box::new(key))
    }
}

impl CaKey {
    /// The key when it is in this process: what a document stores as a
    /// private key file. None for a token key, which has no private
    /// material to store.
    pub fn in_process(&self) -> Option<&PrivateKey> {
        match self {
            CaKey::InProcess(key) => Some(key),
            CaKey::Token(_) => None,
        }
    }

    /// The key when it is an object in a token.
    pub fn token(&self) -> Option<&TokenKey> {
        match self {
            CaKey::InProcess(_) => None,
            CaKey::Token(key) => Some(key),
        }
    }

    /// The key's algorithm.
    pub fn algorithm(&self) -> KeyAlgorithm {
        SigningKey::algorithm(self)
    }

    /// The public key's SubjectPublicKeyInfo DER.
    ///
    /// # Errors
    ///
    /// [`Error::Crypto`] when the public key of a key in this process cannot be
    /// encoded (not expected for a key pki-core read or made), or
    /// [`Error::KeyDecode`] when a stored EC public point is not on its curve
    /// (see [`PrivateKey::from_stored_pem`]). A key in a token encodes the
    /// public key its document recorded: the token is not asked.
    pub fn public_key_der(&self) -> Result<Vec<u8>> {
        der::Encode::to_der(&SigningKey::public_key(self)?).map_err(Error::crypto)
    }

    /// The key in this process, or the error saying a token key has no
    /// private material to give.
    ///
    /// # Errors
    ///
    /// [`Error::Pkcs11`] when the key is an object in a token: its private half
    /// never leaves the token.
    pub fn private_key(&self) -> Result<&PrivateKey> {
        match self {
            CaKey::InProcess(key) => Ok(key),
            CaKey::Token(key) => Err(Error::Pkcs11 {
                operation: format!("reading the private key {}", key.uri),
                reason: "the key is an object in a token and never leaves it".into(),
            }),
        }
    }

    /// PKCS#8 DER of a key in this process (see [`CaKey::private_key`]).
    ///
    /// # Errors
    ///
    /// [`Error::Pkcs11`] for a key in a token (see [`CaKey::private_key`]),
    /// otherwise the errors of [`PrivateKey::to_pkcs8_der`].
    pub fn to_pkcs8_der(&self) -> Result<Zeroizing<Vec<u8>>> {
        self.private_key()?.to_pkcs8_der()
    }

    /// PKCS#8 PEM of a key in this process (see [`CaKey::private_key`]).
    ///
    /// # Errors
    ///
    /// [`Error::Pkcs11`] for a key in a token (see [`CaKey::private_key`]),
    /// otherwise the errors of [`PrivateKey::to_pkcs8_pem`].
    pub fn to_pkcs8_pem(&self) -> Result<Zeroizing<String>> {
        self.private_key()?.to_pkcs8_pem()
    }

    /// Whether the key is the private half of `spki`.
    pub fn matches(&self, spki: &SubjectPublicKeyInfoOwned) -> bool {
        match self {
            CaKey::InProcess(key) => key.matches(spki),
            CaKey::Token(key) => &key.public_key == spki,
        }
    }

    fn signer(&self) -> Result<&dyn SigningKey> {
        match self {
            CaKey::InProcess(key) => Ok(key),
            CaKey::Token(key) => key.bound(),
        }
    }
}

impl SigningKey for CaKey {
    fn algorithm(&self) -> KeyAlgorithm {
        match self {
            CaKey::InProcess(key) => key.algorithm(),
            CaKey::Token(key) => key.algorithm,
        }
    }

    fn public_key(&self) -> Result<SubjectPublicKeyInfoOwned> {
        match self {
            CaKey::InProcess(key) => key.public_key(),
            CaKey::Token(key) => Ok(key.public_key.clone()),
        }
    }

    fn sign(&self, message: &[u8], provider: &CryptoProvider) -> Result<Vec<u8>> {
        self.signer()?.sign(message, provider)
    }

    fn signature_algorithm(&self) -> Result<AlgorithmIdentifierOwned> {
        match self {
            CaKey::InProcess(key) => SigningKey::signature_algorithm(key),
            CaKey::Token(key) => Ok(crate::signing::signature_algorithm(key.algorithm)),
        }
    }
}

/// A key object in a PKCS#11 token, as a document keeps it: its URI, its
/// algorithm and its public key; and, once the caller has opened the token
/// and found the object, the object that signs.
#[derive(Clone)]
pub struct TokenKey {
    uri: Pkcs11Uri,
    algorithm: KeyAlgorithm,
    public_key: SubjectPublicKeyInfoOwned,
    bound: Option<Arc<dyn SigningKey>>,
}

impl std::fmt::Debug for TokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenKey")
            .field("uri", &self.uri.to_string())
            .field("algorithm", &self.algorithm)
            .field("bound", &self.bound.is_some())
            .finish()
    }
}

impl TokenKey {
    /// The key object `uri` names, of `algorithm`, whose public half is
    /// `public_key`. Unbound. Only the attributes that find the token and
    /// the object are kept ([`Pkcs11Uri::without_query`]): where the PIN
    /// and the module are is the caller's, never the document's.
    pub fn new(
        uri: &Pkcs11Uri,
        algorithm: KeyAlgorithm,
        public_key: SubjectPublicKeyInfoOwned,
    ) -> Self {
        TokenKey {
            uri: uri.without_query(),
            algorithm,
            public_key,
            bound: None,
        }
    }

    /// The key `object` a token just made or found, bound to it: what a
    /// document records is its URI and public key.
    ///
    /// # Errors
    ///
    /// Forwards the error of `object`'s [`SigningKey::public_key`] (for a
    /// token's object, the token could not give its public key).
    pub fn of_object(uri: &Pkcs11Uri, object: Arc<dyn SigningKey>) -> Result<Self> {
        let mut key = TokenKey::new(uri, object.algorithm(), object.public_key()?);
        key.bound = Some(object);
        Ok(key)
    }

    /// The URI that finds the object again.
    pub fn uri(&self) -> &Pkcs11Uri {
        &self.uri
    }

    /// The key's algorithm.
    pub fn algorithm(&self) -> KeyAlgorithm {
        self.algorithm
    }

    /// The public half the document records.
    pub fn public_key(&self) -> &SubjectPublicKeyInfoOwned {
        &self.public_key
    }

    /// Whether an object that signs is bound.
    pub fn is_bound(&self) -> bool {
        self.bound.is_some()
    }

    /// Binds `object`, found in the token by [`TokenKey::uri`]. Refused
    /// when its public key is not the one recorded: a token whose object
    /// was replaced must never sign for the CA.
    ///
    /// # Errors
    ///
    /// [`Error::Pkcs11KeyReplaced`] when `object`'s public key or algorithm is
    /// not the one recorded, and the error of `object`'s
    /// [`SigningKey::public_key`] when it cannot give its public key.
    pub fn bind(&mut self, object: Arc<dyn SigningKey>) -> Result<()> {
        if object.public_key()? != self.public_key || object.algorithm() != self.algorithm {
            return Err(Error::Pkcs11KeyReplaced {
                uri: self.uri.to_string(),
            });
        }
        self.bound = Some(object);
        Ok(())
    }

    /// Binds the key to the object `access` finds by [`TokenKey::uri`],
    /// looked up the first time the key signs (a step that signs nothing
    /// never asks the token) and checked then to be the key recorded, as
    /// [`TokenKey::bind`] checks it.
    pub fn attach(&mut self, access: Arc<dyn TokenAccess>) {
        self.bound = Some(Arc::new(FoundOnUse {
            access,
            uri: self.uri.clone(),
            algorithm: self.algorithm,
            public_key: self.public_key.clone(),
            found: OnceLock::new(),
        }));
    }

    fn bound(&self) -> Result<&dyn SigningKey> {
        self.bound
            .as_deref()
            .ok_or_else(|| Error::Pkcs11TokenNotOpen {
                uri: self.uri.to_string(),
            })
    }
}

/// A token key object found the first time it signs (see
/// [`TokenKey::attach`]).
struct FoundOnUse {
    access: Arc<dyn TokenAccess>,
    uri: Pkcs11Uri,
    algorithm: KeyAlgorithm,
    public_key: SubjectPublicKeyInfoOwned,
    found: OnceLock<Arc<dyn SigningKey>>,
}

impl FoundOnUse {
    fn object(&self) -> Result<&Arc<dyn SigningKey>> {
        if let Some(object) = self.found.get() {
            return Ok(object);
        }
        let object = find_checked(&*self.access, &self.uri, self.algorithm, &self.public_key)?;
        // Two threads finding it at once find the same object: either is kept.
        Ok(self.found.get_or_init(|| object))
    }
}

impl SigningKey for FoundOnUse {
    fn algorithm(&self) -> KeyAlgorithm {
        self.algorithm
    }

    fn public_key(&self) -> Result<SubjectPublicKeyInfoOwned> {
        Ok(self.public_key.clone())
    }

    fn sign(&self, message: &[u8], provider: &CryptoProvider) -> Result<Vec<u8>> {
        self.object()?.sign(message, provider)
    }
}

/// The algorithm of the key `spki` holds (a CA certificate's public key),
/// among those pki signs with: what a document that keeps a key in a token
/// learns from the CA's certificate instead of storing it.
/// [`crate::Error::UnsupportedKey`] for a key pki does not sign with.
///
/// # Errors
///
/// [`Error::UnsupportedKey`] for a key pki does not sign with: an RSA key of
/// another size than 2048, 3072 or 4096 bits, an EC key on another curve than
/// P-256 or P-384, or a key of any other algorithm.
pub fn public_key_algorithm(spki: &SubjectPublicKeyInfoOwned) -> Result<KeyAlgorithm> {
    use rsa::traits::PublicKeyParts;
    let unsupported = |reason: String| Error::UnsupportedKey { reason };
    let rsa_failure = match signatures::rsa_key(spki) {
        Ok(key) => {
            return match signatures::modulus_bits(&key.n_bytes()) {
                2048 => Ok(KeyAlgorithm::Rsa2048),
                3072 => Ok(KeyAlgorithm::Rsa3072),
                4096 => Ok(KeyAlgorithm::Rsa4096),
                bits => Err(unsupported(format!(
                    "RSA key of {bits} bits (pki signs with 2048, 3072 or 4096)"
                ))),
            };
        }
        Err(failure) => failure,
    };
    match (signatures::ec_key(spki), rsa_failure) {
        (Ok(signatures::EcPublicKey::P256(..)), _) => Ok(KeyAlgorithm::EcdsaP256),
        (Ok(signatures::EcPublicKey::P384(..)), _) => Ok(KeyAlgorithm::EcdsaP384),
        (Err(signatures::SigFailure::UnsupportedKey(reason)), _)
        | (_, signatures::SigFailure::UnsupportedKey(reason)) => Err(unsupported(reason)),
        _ => Err(unsupported(format!(
            "public key of algorithm {} (pki signs with EC P-256, P-384 or RSA)",
            spki.algorithm.oid
        ))),
    }
}
