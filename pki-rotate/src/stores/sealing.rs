//! Private material sealed at rest: the store key, the sealed value format
//! and [`SealedStore`], a [`Store`](crate::Store) wrapper that seals the
//! secret files of every document before they reach the store beneath and
//! opens them when read.
//!
//! A sealed value is XChaCha20-Poly1305 (RustCrypto's `chacha20poly1305`)
//! under a 256-bit store key, with a random 192-bit nonce drawn from the
//! caller's RNG (random nonces of that size do not collide in practice).
//! Its layout, documented in `docs/book/src/sealing.md`:
//!
//! ```text
//! "PKISEAL" | version 1 | algorithm 1 | key id (8 bytes) | nonce (24 bytes) | ciphertext and tag
//! ```
//!
//! The associated data binds the value to where it belongs: the header
//! (version, algorithm, key id), the document's kind, its store key and
//! the file's path. A value copied onto another file, another document or
//! another store key fails to open.
//!
//! The key file, made by `pki store-key new` and read by whoever opens the
//! store, is text: a format line, the algorithm, the key id and the key,
//! each on its own line. The key id is the first 8 bytes of SHA-256 over a
//! fixed label and the key: sealed values name the key that opens them,
//! and a wrong key is told apart from a damaged value.

use crate::model::error::{Result, RotateError};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use rand_core::CryptoRng;
use sha2::{Digest, Sha256};
use zeroize::Zeroizing;

mod kind;
mod store;
mod witness;
pub use store::{SealedStore, SealingKeys};

pub use crate::model::{MAGIC, is_sealed};
/// The format version this build writes and reads.
pub const FORMAT_VERSION: u8 = 1;
/// XChaCha20-Poly1305, the one algorithm of format 1.
pub const ALGORITHM_XCHACHA20_POLY1305: u8 = 1;
/// Length of a store key.
pub const KEY_LEN: usize = 32;
/// Length of a key id.
pub const KEY_ID_LEN: usize = 8;
/// Length of a nonce.
pub const NONCE_LEN: usize = 24;
/// Length of the authentication tag.
pub const TAG_LEN: usize = 16;
/// Length of the header before the ciphertext.
pub const HEADER_LEN: usize = MAGIC.len() + 2 + KEY_ID_LEN + NONCE_LEN;

const KEY_FILE_FORMAT: &str = "pki-store-key 1";
const ALGORITHM_NAME: &str = "xchacha20-poly1305";
const KEY_ID_LABEL: &[u8] = b"pki store key id\0";
const AD_LABEL: &[u8] = b"pki sealed value\0";

/// A key that seals private material: 32 random bytes and their id.
/// Zeroized on drop; never printed.
#[derive(Clone)]
pub struct StoreKey {
    id: [u8; KEY_ID_LEN],
    key: Zeroizing<[u8; KEY_LEN]>,
}

impl std::fmt::Debug for StoreKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StoreKey({})", self.id_hex())
    }
}

impl StoreKey {
    /// A new key from the caller's RNG.
    pub fn generate<R: CryptoRng + ?Sized>(rng: &mut R) -> Self {
        let mut key = Zeroizing::new([0u8; KEY_LEN]);
        rng.fill_bytes(key.as_mut());
        Self::from_bytes(key)
    }

    fn from_bytes(key: Zeroizing<[u8; KEY_LEN]>) -> Self {
        let mut hash = Sha256::new();
        hash.update(KEY_ID_LABEL);
        hash.update(key.as_ref());
        let digest = hash.finalize();
        let mut id = [0u8; KEY_ID_LEN];
        id.copy_from_slice(&digest[..KEY_ID_LEN]);
        StoreKey { id, key }
    }

    /// The key id: what sealed values name.
    pub fn id(&self) -> [u8; KEY_ID_LEN] {
        self.id
    }

    /// The key id in hex, for messages.
    pub fn id_hex(&self) -> String {
        hex::encode(self.id)
    }

    /// The key file's contents (text; the caller writes it 0600).
    pub fn to_file(&self) -> Zeroizing<String> {
        Zeroizing::new(format!(
            "{KEY_FILE_FORMAT}\nalgorithm {ALGORITHM_NAME}\nid {}\nkey {}\n",
            self.id_hex(),
            hex::encode(self.key.as_ref())
        ))
    }

    /// Reads a key file. `location` names it in errors.
    ///
    /// # Errors
    ///
    /// [`StoreError::Sealing`](crate::StoreError::Sealing) naming `location`
    /// when the file is not text, its first line is not the format line, a line
    /// is missing or out of order, the algorithm is not supported, the key is
    /// not hex of the right length, text follows the key, or the id does not
    /// match the key.
    pub fn from_file(location: &str, bytes: &[u8]) -> Result<Self> {
        let bad = |reason: String| sealing_error(location, reason);
        let text = std::str::from_utf8(bytes)
            .map_err(|_| bad("is not a pki store key file (not text)".into()))?;
        let mut lines = text.lines().map(str::trim_end).filter(|l| !l.is_empty());
        if lines.next() != Some(KEY_FILE_FORMAT) {
            return Err(bad(format!(
                "is not a pki store key file (the first line must be \"{KEY_FILE_FORMAT}\")"
            )));
        }
        let mut field = |name: &str| -> Result<String> {
            match lines.next().and_then(|l| l.split_once(' ')) {
                Some((n, v)) if n == name => Ok(v.trim().to_string()),
                _ => Err(bad(format!("has no \"{name}\" line where expected"))),
            }
        };
        let algorithm = field("algorithm")?;
        if algorithm != ALGORITHM_NAME {
            return Err(bad(format!(
                "algorithm \"{}\" is not supported (only {ALGORITHM_NAME})",
                algorithm.escape_debug()
            )));
        }
        let id = field("id")?;
        let key_hex = Zeroizing::new(field("key")?);
        let mut key = Zeroizing::new([0u8; KEY_LEN]);
        hex::decode_to_slice(key_hex.as_bytes(), key.as_mut())
            .map_err(|_| bad(format!("key must be {} hex digits", 2 * KEY_LEN)))?;
        if lines.next().is_some() {
            return Err(bad("has text after the key line".into()));
        }
        let parsed = Self::from_bytes(key);
        if parsed.id_hex() != id {
            return Err(bad(format!(
                "key id {} does not match its key (expected {}): the file is damaged",
                id.escape_debug(),
                parsed.id_hex()
            )));
        }
        Ok(parsed)
    }

    fn cipher(&self) -> XChaCha20Poly1305 {
        XChaCha20Poly1305::new(&(*self.key).into())
    }
}

/// Where a sealed value belongs: bound into its associated data.
#[derive(Debug, Clone, Copy)]
pub struct Binding<'a> {
    /// The document kind (`"signer"`, …) its state file names, or `""`
    /// when it names none this build knows.
    pub kind: &'a str,
    /// The document's store key.
    pub key: &'a str,
    /// The file's path in the document.
    pub path: &'a str,
}

impl Binding<'_> {
    fn associated_data(&self, header: &[u8]) -> Vec<u8> {
        let mut ad = Vec::with_capacity(
            AD_LABEL.len() + header.len() + self.kind.len() + self.key.len() + self.path.len() + 3,
        );
        ad.extend_from_slice(AD_LABEL);
        // The header without the nonce: the version, algorithm and key id
        // cannot be changed without the value failing to open.
        ad.extend_from_slice(&header[..HEADER_LEN - NONCE_LEN]);
        // Lengths are implied by the separators: none of these may hold a
        // NUL (kinds are constants, keys and paths are checked).
        for part in [self.kind, self.key, self.path] {
            ad.extend_from_slice(part.as_bytes());
            ad.push(0);
        }
        ad
    }

    fn location(&self) -> String {
        format!("{} in {}", self.path, self.key)
    }
}

/// The header of a sealed value, parsed without opening it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SealedHeader {
    /// The format version.
    pub version: u8,
    /// The algorithm.
    pub algorithm: u8,
    /// The id of the key that sealed it.
    pub key_id: [u8; KEY_ID_LEN],
    /// The nonce.
    pub nonce: [u8; NONCE_LEN],
}

/// Parses a sealed value's header and returns it with the ciphertext.
/// Every malformed input is an error, never a panic.
///
/// # Errors
///
/// A one-line reason when `bytes` is not a sealed value (no magic), is of a
/// format version or algorithm this build does not read, or is truncated.
pub fn parse_sealed(bytes: &[u8]) -> std::result::Result<(SealedHeader, &[u8]), String> {
    let rest = bytes
        .strip_prefix(MAGIC.as_slice())
        .ok_or("is not a sealed value")?;
    let (&version, rest) = rest.split_first().ok_or("sealed value is truncated")?;
    if version != FORMAT_VERSION {
        return Err(format!(
            "sealed value format {version} is not supported (only {FORMAT_VERSION})"
        ));
    }
    let (&algorithm, rest) = rest.split_first().ok_or("sealed value is truncated")?;
    if algorithm != ALGORITHM_XCHACHA20_POLY1305 {
        return Err(format!(
            "sealed value algorithm {algorithm} is not supported"
        ));
    }
    let (key_id, rest) = rest
        .split_at_checked(KEY_ID_LEN)
        .ok_or("sealed value is truncated")?;
    let (nonce, ciphertext) = rest
        .split_at_checked(NONCE_LEN)
        .ok_or("sealed value is truncated")?;
    if ciphertext.len() < TAG_LEN {
        return Err("sealed value is truncated".into());
    }
    let mut header = SealedHeader {
        version,
        algorithm,
        key_id: [0; KEY_ID_LEN],
        nonce: [0; NONCE_LEN],
    };
    header.key_id.copy_from_slice(key_id);
    header.nonce.copy_from_slice(nonce);
    Ok((header, ciphertext))
}

/// Seals `clear` under `key` for the place `binding` names.
///
/// # Errors
///
/// [`StoreError::Sealing`](crate::StoreError::Sealing) when the cipher refuses
/// `clear` (larger than it seals); nothing else fails.
pub fn seal<R: CryptoRng + ?Sized>(
    key: &StoreKey,
    binding: Binding<'_>,
    clear: &[u8],
    rng: &mut R,
) -> Result<Vec<u8>> {
    let mut nonce = [0u8; NONCE_LEN];
    rng.fill_bytes(&mut nonce);
    let mut out = Vec::with_capacity(HEADER_LEN + clear.len() + TAG_LEN);
    out.extend_from_slice(MAGIC);
    out.push(FORMAT_VERSION);
    out.push(ALGORITHM_XCHACHA20_POLY1305);
    out.extend_from_slice(&key.id);
    out.extend_from_slice(&nonce);
    let ad = binding.associated_data(&out);
    let sealed = key
        .cipher()
        .encrypt(
            &XNonce::from(nonce),
            Payload {
                msg: clear,
                aad: &ad,
            },
        )
        .map_err(|_| sealing_error(&binding.location(), "could not be sealed".into()))?;
    out.extend_from_slice(&sealed);
    Ok(out)
}

/// Opens a sealed value with whichever of `keys` sealed it. A value of
/// another key, a changed value, or a value copied from another place
/// fails with a one-line [`StoreError::Sealing`](crate::StoreError::Sealing).
///
/// # Errors
///
/// [`StoreError::Sealing`](crate::StoreError::Sealing) naming the place when
/// `sealed` is not a sealed value this build reads, no key of `keys` sealed it
/// (or none is given), or it does not open (changed, or copied from another
/// place).
pub fn open(keys: &[StoreKey], binding: Binding<'_>, sealed: &[u8]) -> Result<Zeroizing<Vec<u8>>> {
    let location = binding.location();
    let (header, ciphertext) = parse_sealed(sealed).map_err(|e| sealing_error(&location, e))?;
    let Some(key) = keys.iter().find(|k| k.id == header.key_id) else {
        return Err(sealing_error(
            &location,
            if keys.is_empty() {
                format!(
                    "is sealed (key id {}) and no store key was given",
                    hex::encode(header.key_id)
                )
            } else {
                format!(
                    "is sealed under key id {}, not under the store key given ({})",
                    hex::encode(header.key_id),
                    keys.iter()
                        .map(StoreKey::id_hex)
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            },
        ));
    };
    let ad = binding.associated_data(&sealed[..HEADER_LEN]);
    key.cipher()
        .decrypt(
            &XNonce::from(header.nonce),
            Payload {
                msg: ciphertext,
                aad: &ad,
            },
        )
        .map(Zeroizing::new)
        .map_err(|_| {
            sealing_error(
                &location,
                "does not open: the sealed value was changed or belongs to another file or document"
                    .into(),
            )
        })
}

fn sealing_error(location: &str, reason: String) -> RotateError {
    RotateError::Store(crate::StoreError::Sealing {
        location: location.to_string(),
        reason,
    })
}

#[cfg(test)]
mod tests;
