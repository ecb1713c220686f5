//! CA keys in a PKCS#11 token (an HSM, SoftHSM2, a YubiKey): the key is
//! generated inside the token, marked sensitive and not extractable, and
//! signs there; pki holds its RFC 7512 URI and its public key, never the
//! private key.
//!
//! Always here: the URI reader ([`Pkcs11Uri`]) and the PIN
//! ([`Pkcs11Pin`]), pure data. With the `pkcs11` feature, through the
//! `cryptoki` crate: `Pkcs11Module` loads a module (the path is an
//! argument: pki-core reads no environment), `Pkcs11Module::login` opens
//! a `Pkcs11Token` with the user PIN, and the token generates, finds and
//! destroys `Pkcs11Key`s, which sign as a [`crate::SigningKey`].
//!
//! ECDSA keys sign the digest pki computes (SHA-256 for P-256, SHA-384 for
//! P-384) with CKM_ECDSA, and the token's r‖s becomes a DER
//! `ECDSA-Sig-Value`; RSA keys sign with CKM_SHA256_RSA_PKCS. Failures a
//! user can fix are their own [`crate::Error`] variants, one line each:
//! no module, a wrong PIN, no such token, a key object not found, a full
//! token, an unsupported mechanism.

#[cfg(feature = "pkcs11")]
mod errors;
#[cfg(feature = "pkcs11")]
mod key;
#[cfg(feature = "pkcs11")]
mod module;
mod pin;
#[cfg(feature = "pkcs11")]
mod session;
#[cfg(feature = "pkcs11")]
mod token;
mod uri;

#[cfg(feature = "pkcs11")]
pub use key::Pkcs11Key;
#[cfg(feature = "pkcs11")]
pub use module::Pkcs11Module;
pub use pin::Pkcs11Pin;
#[cfg(feature = "pkcs11")]
pub use token::Pkcs11Token;
pub use uri::{Pkcs11ObjectType, Pkcs11Uri};
