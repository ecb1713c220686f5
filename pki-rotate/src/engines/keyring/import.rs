//! Key sets read from a file (PEM blocks or a JWK Set) to start a ring
//! from.

use super::{Jwks, KeyRingError, PublicKey};
use crate::model::error::Result;
use pki_core::PrivateKey;

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
    ///
    /// # Errors
    ///
    /// [`KeyRingError::Import`] naming `location` (and the PEM block) when the
    /// input holds no key, a JWK Set that does not read (see [`Jwks::parse`]),
    /// PEM that does not read, a block that is not a private or public key
    /// (encrypted keys included), or a key that does not decode or that the
    /// ring cannot use.
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
