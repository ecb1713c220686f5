//! The key types pki issues and accepts, by the names the command line
//! and the state files use.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// The key types pki issues and accepts.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum KeyAlgorithm {
    /// ECDSA over NIST P-256, signing with SHA-256. The default: small and fast.
    #[default]
    #[serde(rename = "p256")]
    EcdsaP256,
    /// ECDSA over NIST P-384, signing with SHA-384.
    #[serde(rename = "p384")]
    EcdsaP384,
    /// RSA with a 2048-bit modulus, PKCS#1 v1.5 signatures with SHA-256.
    Rsa2048,
    /// RSA with a 3072-bit modulus.
    Rsa3072,
    /// RSA with a 4096-bit modulus.
    Rsa4096,
}

impl KeyAlgorithm {
    /// The name used on the command line and in state files.
    pub fn as_str(self) -> &'static str {
        match self {
            KeyAlgorithm::EcdsaP256 => "p256",
            KeyAlgorithm::EcdsaP384 => "p384",
            KeyAlgorithm::Rsa2048 => "rsa2048",
            KeyAlgorithm::Rsa3072 => "rsa3072",
            KeyAlgorithm::Rsa4096 => "rsa4096",
        }
    }

    /// Whether this is an RSA algorithm (leaf key usage then includes keyEncipherment).
    pub fn is_rsa(self) -> bool {
        matches!(
            self,
            KeyAlgorithm::Rsa2048 | KeyAlgorithm::Rsa3072 | KeyAlgorithm::Rsa4096
        )
    }
}

impl fmt::Display for KeyAlgorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for KeyAlgorithm {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        match s {
            "p256" | "ecdsa-p256" => Ok(KeyAlgorithm::EcdsaP256),
            "p384" | "ecdsa-p384" => Ok(KeyAlgorithm::EcdsaP384),
            "rsa2048" => Ok(KeyAlgorithm::Rsa2048),
            "rsa3072" => Ok(KeyAlgorithm::Rsa3072),
            "rsa4096" => Ok(KeyAlgorithm::Rsa4096),
            other => Err(Error::UnsupportedKey {
                reason: format!(
                    "unknown key type \"{other}\" (expected p256, p384, rsa2048, rsa3072 or rsa4096)"
                ),
            }),
        }
    }
}
