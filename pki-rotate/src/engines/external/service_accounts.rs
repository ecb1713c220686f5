//! The service-account signing keys a replacement must keep: read from PEM
//! or from the store's key ring, and the `service-account-key-kept` check.

use super::{Check, check};
use crate::model::error::{Result, RotateError};

/// The service-account signing keys, by SubjectPublicKeyInfo DER: the ones
/// the store's key ring holds today, and the set a replacement proposes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ServiceAccountKeys {
    /// The current keys (None: the store keeps no key ring).
    pub current: Option<Vec<Vec<u8>>>,
    /// The proposed key set (None: unchanged).
    pub proposed: Option<Vec<Vec<u8>>>,
}

impl ServiceAccountKeys {
    /// The SubjectPublicKeyInfo DER of every key in PEM text: `PUBLIC KEY`
    /// blocks as they are, and the public half of private keys (PKCS#8,
    /// SEC1, PKCS#1); other blocks are skipped. Input without any key is
    /// refused, as is an encrypted key.
    ///
    /// # Errors
    ///
    /// A [`RotateError::Core`]: the PEM's own error when it does not read,
    /// [`pki_core::Error::EncryptedKey`] for an encrypted key, a key error for
    /// a private key that does not decode, and
    /// [`pki_core::Error::UnexpectedPemLabel`] or
    /// [`pki_core::Error::NoPemBlock`] when no key is found.
    pub fn keys_from_pem(pem: &[u8]) -> Result<Vec<Vec<u8>>> {
        let blocks = pki_core::pem::read_blocks(pem)?;
        let mut keys = Vec::new();
        let mut other = None;
        for (i, block) in blocks.iter().enumerate() {
            let key = match block.label.as_str() {
                "PUBLIC KEY" => {
                    keys.push(block.der.to_vec());
                    continue;
                }
                "ENCRYPTED PRIVATE KEY" => {
                    return Err(pki_core::Error::EncryptedKey {
                        place: format!("the service-account key set, PEM block {}", i + 1),
                    }
                    .into());
                }
                "PRIVATE KEY" => pki_core::PrivateKey::from_pkcs8_der(&block.der)?,
                "EC PRIVATE KEY" => pki_core::PrivateKey::from_sec1_der(&block.der)?,
                "RSA PRIVATE KEY" => pki_core::PrivateKey::from_pkcs1_der(&block.der)?,
                label => {
                    other.get_or_insert((i + 1, label.to_string()));
                    continue;
                }
            };
            keys.push(key.public_key_der()?);
        }
        if keys.is_empty() {
            return Err(match other {
                Some((block, found)) => pki_core::Error::UnexpectedPemLabel {
                    block,
                    found,
                    expected: "PUBLIC KEY or a private key (a service-account key set)",
                },
                None => pki_core::Error::NoPemBlock {
                    what: "the service-account key set",
                },
            }
            .into());
        }
        Ok(keys)
    }

    /// The keys to compare for a replacement proposed to the signer in
    /// `store`: the current ones from the store's key ring (`pki keys`, the
    /// `keys` document's `keys/public.pem`; None when the store keeps no
    /// key ring) and the `proposed` set (PEM; None: unchanged).
    ///
    /// # Errors
    ///
    /// Those of [`Store::get`](crate::Store::get); those of
    /// [`ServiceAccountKeys::keys_from_pem`] for `proposed`, and for the
    /// store's public keys as a
    /// [`DocumentError::Material`](crate::DocumentError::Material) naming the
    /// store and file.
    pub fn from_store<S: crate::Store + ?Sized>(
        store: &S,
        proposed: Option<&[u8]>,
    ) -> Result<Self> {
        let path = crate::engines::keyring::document::PUBLIC_PEM;
        let current = match store.get(crate::engines::keyring::STORE_KEY)? {
            Some((files, _)) => match files.get(path) {
                Some(pem) => Some(Self::keys_from_pem(pem).map_err(|e| match e {
                    RotateError::Core(core) => {
                        RotateError::material(format!("{}: {path}", store.location()), core)
                    }
                    other => other,
                })?),
                None => None,
            },
            None => None,
        };
        let proposed = proposed.map(Self::keys_from_pem).transpose()?;
        Ok(ServiceAccountKeys { current, proposed })
    }
}

/// `service-account-key-kept`: every current key must stay in the proposed
/// set, or tokens signed with a dropped key stop verifying at once.
pub fn check_service_account_keys(keys: &ServiceAccountKeys) -> Check {
    let name = check::SERVICE_ACCOUNT_KEY_KEPT;
    let Some(current) = &keys.current else {
        return Check::new(name, true, "no service-account key ring in this store");
    };
    let Some(proposed) = &keys.proposed else {
        return Check::new(
            name,
            true,
            format!("key set unchanged ({} current keys)", current.len()),
        );
    };
    let dropped: Vec<String> = current
        .iter()
        .enumerate()
        .filter(|(_, k)| !proposed.contains(k))
        .map(|(i, _)| format!("#{}", i + 1))
        .collect();
    if dropped.is_empty() {
        Check::new(
            name,
            true,
            format!(
                "the proposed {} keys keep all {} current keys",
                proposed.len(),
                current.len()
            ),
        )
    } else {
        Check::new(
            name,
            false,
            format!(
                "the proposed key set drops current key(s) {} of {}: tokens they signed would stop verifying",
                dropped.join(", "),
                current.len()
            ),
        )
    }
}
