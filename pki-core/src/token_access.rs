//! What reaches the PKCS#11 tokens that hold a document's CA keys.
//!
//! pki-core opens nothing on its own: the caller (the CLI, the C ABI, an
//! embedding program) opens the module and gives the PIN, and passes the
//! result as a [`TokenAccess`], the way it passes an RNG. A document whose
//! CA keys are token objects makes its new keys, finds its current one and
//! destroys the ones it retired through it, and through nothing else.
//!
//! [`Pkcs11Tokens`] (the `pkcs11` feature) is the access the CLI and the C
//! ABI give: one module and one PIN, each token logged in to the first time
//! a key of it is needed, so a command that signs nothing never touches a
//! token.

use crate::error::{Error, Result};
use crate::key::KeyAlgorithm;
use crate::pkcs11::Pkcs11Uri;
use crate::signing::SigningKey;
use std::sync::Arc;

/// The tokens a caller opened for the documents it steps.
///
/// Every method names its token by URI (`token=` and the other token
/// attributes), so one access serves documents whose keys are in several
/// tokens of one module.
pub trait TokenAccess: Send + Sync {
    /// The private key object `uri` names (by `id`, `object` or both).
    /// No such object is [`Error::Pkcs11KeyNotFound`], and only that: a
    /// caller can tell "the key is gone" from "the token could not be
    /// asked".
    ///
    /// # Errors
    ///
    /// [`Error::Pkcs11KeyNotFound`] when no object matches; any other error
    /// (the token cannot be opened, the PIN is refused,
    /// [`Error::Pkcs11KeyAmbiguous`]) means the token could not answer.
    fn find_key(&self, uri: &Pkcs11Uri) -> Result<Arc<dyn SigningKey>>;

    /// Generates a key pair of `algorithm` in the token `store` names: a
    /// token object with CKA_ID `id` and CKA_LABEL `label`, the private key
    /// sensitive and never extractable. [`Error::Pkcs11KeyExists`] when an
    /// object of the token already has `id`.
    ///
    /// # Errors
    ///
    /// [`Error::Pkcs11KeyExists`] when an object of the token already has `id`;
    /// the token's refusals (such as [`Error::Pkcs11TokenFull`] or
    /// [`Error::Pkcs11UnsupportedMechanism`]) otherwise.
    fn generate_key(
        &self,
        store: &Pkcs11Uri,
        algorithm: KeyAlgorithm,
        id: &[u8],
        label: &str,
    ) -> Result<Arc<dyn SigningKey>>;

    /// Destroys the key pair `uri` names by its `id`. None left is
    /// [`Error::Pkcs11KeyNotFound`].
    ///
    /// # Errors
    ///
    /// [`Error::Pkcs11KeyNotFound`] when no object has the URI's `id`; the
    /// token's refusals otherwise.
    fn destroy_key(&self, uri: &Pkcs11Uri) -> Result<usize>;
}

/// The key object `uri` names, through `access`, checked to be the key
/// whose public half is `public_key`: a token whose object was replaced
/// must never sign for the CA.
pub(crate) fn find_checked(
    access: &dyn TokenAccess,
    uri: &Pkcs11Uri,
    algorithm: KeyAlgorithm,
    public_key: &spki::SubjectPublicKeyInfoOwned,
) -> Result<Arc<dyn SigningKey>> {
    let object = access.find_key(uri)?;
    if object.algorithm() != algorithm || &object.public_key()? != public_key {
        return Err(Error::Pkcs11KeyReplaced {
            uri: uri.to_string(),
        });
    }
    Ok(object)
}

#[cfg(feature = "pkcs11")]
pub use opened::Pkcs11Tokens;

#[cfg(feature = "pkcs11")]
mod opened {
    use super::TokenAccess;
    use crate::error::{Error, Result};
    use crate::key::KeyAlgorithm;
    use crate::pkcs11::{Pkcs11Module, Pkcs11Pin, Pkcs11Token, Pkcs11Uri};
    use crate::signing::SigningKey;
    use std::sync::{Arc, Mutex};

    /// The tokens of one PKCS#11 module, logged in to with one user PIN
    /// the first time a key of each is needed.
    pub struct Pkcs11Tokens {
        module: Pkcs11Module,
        pin: Option<Pkcs11Pin>,
        /// The tokens logged in to so far, by the URI that found them.
        open: Mutex<Vec<(Pkcs11Uri, Pkcs11Token)>>,
    }

    impl std::fmt::Debug for Pkcs11Tokens {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "Pkcs11Tokens({})", self.module.path().display())
        }
    }

    impl Pkcs11Tokens {
        /// The tokens of `module`, logged in to with `pin` (None: a login
        /// fails naming where a PIN comes from).
        pub fn new(module: Pkcs11Module, pin: Option<Pkcs11Pin>) -> Self {
            Pkcs11Tokens {
                module,
                pin,
                open: Mutex::new(Vec::new()),
            }
        }

        /// The token `uri` names, logged in to once.
        ///
        /// # Errors
        ///
        /// - [`Error::Pkcs11`] when no PIN was given, or an earlier login in
        ///   this process panicked;
        /// - the errors of [`Pkcs11Module::login`]:
        ///   [`Error::Pkcs11TokenNotFound`], [`Error::Pkcs11WrongPin`], and the
        ///   module's other refusals.
        pub fn token(&self, uri: &Pkcs11Uri) -> Result<Pkcs11Token> {
            let wanted = uri.token_only();
            let mut open = self.open.lock().map_err(|_| Error::Pkcs11 {
                operation: "opening a token".into(),
                reason: "an earlier login in this process panicked".into(),
            })?;
            if let Some((_, token)) = open.iter().find(|(found, _)| *found == wanted) {
                return Ok(token.clone());
            }
            let pin = self.pin.as_ref().ok_or_else(|| Error::Pkcs11 {
                operation: format!("logging in to {wanted}"),
                reason: "no user PIN was given: set PKI_PKCS11_PIN_FILE to a file holding it, or pin-source in the URI".into(),
            })?;
            let token = self.module.login(&wanted, pin)?;
            open.push((wanted, token.clone()));
            Ok(token)
        }
    }

    /// Each call goes to the token its URI names, logged in to once.
    impl TokenAccess for Pkcs11Tokens {
        fn find_key(&self, uri: &Pkcs11Uri) -> Result<Arc<dyn SigningKey>> {
            TokenAccess::find_key(&self.token(uri)?, uri)
        }

        fn generate_key(
            &self,
            store: &Pkcs11Uri,
            algorithm: KeyAlgorithm,
            id: &[u8],
            label: &str,
        ) -> Result<Arc<dyn SigningKey>> {
            TokenAccess::generate_key(&self.token(store)?, store, algorithm, id, label)
        }

        fn destroy_key(&self, uri: &Pkcs11Uri) -> Result<usize> {
            TokenAccess::destroy_key(&self.token(uri)?, uri)
        }
    }

    impl TokenAccess for Pkcs11Token {
        fn find_key(&self, uri: &Pkcs11Uri) -> Result<Arc<dyn SigningKey>> {
            Ok(Arc::new(Pkcs11Token::find_key(self, uri)?))
        }

        fn generate_key(
            &self,
            store: &Pkcs11Uri,
            algorithm: KeyAlgorithm,
            id: &[u8],
            label: &str,
        ) -> Result<Arc<dyn SigningKey>> {
            if store.token.as_deref().is_some_and(|t| t != self.label()) {
                return Err(Error::Pkcs11 {
                    operation: format!("generating a key in {store}"),
                    reason: format!("this session is logged in to token \"{}\"", self.label()),
                });
            }
            Ok(Arc::new(Pkcs11Token::generate_key(
                self, algorithm, id, label,
            )?))
        }

        fn destroy_key(&self, uri: &Pkcs11Uri) -> Result<usize> {
            Pkcs11Token::destroy_key(self, uri.id.as_deref().unwrap_or_default())
        }
    }
}
