//! A shared cache of signature outcomes.

use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Remembers which signatures verified, so that verifying many leaves
/// through the same intermediate checks the intermediate's signature once.
///
/// The key is the pair (issuer SubjectPublicKeyInfo DER, signed
/// certificate DER), stored as the SHA-256 of their two SHA-256 digests
/// (which each certificate computes once and keeps): 32 bytes per entry
/// instead of kilobytes, and a stale or forged entry would need a SHA-256
/// collision. The certificate's DER holds everything else the outcome
/// depends on (TBSCertificate bytes, algorithm, signature), so a hit is
/// exactly as good as a check. Only "verifies" and "does not verify" are
/// cached; unsupported algorithms and keys are recomputed.
///
/// Every [`crate::Bundle`] carries one, which [`crate::verify_chain`] uses.
///
/// Thread-safe: share one cache between threads by reference or `Arc`.
/// When `capacity` entries are stored, the cache is emptied before the
/// next insertion, which bounds memory without bookkeeping.
#[derive(Debug)]
pub struct SignatureCache {
    entries: Mutex<HashMap<[u8; 32], bool>>,
    capacity: usize,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl Default for SignatureCache {
    fn default() -> Self {
        Self::new()
    }
}

impl SignatureCache {
    /// Default capacity: 65 536 entries, about 3 MiB.
    pub const DEFAULT_CAPACITY: usize = 1 << 16;

    /// An empty cache of [`Self::DEFAULT_CAPACITY`].
    pub fn new() -> Self {
        Self::with_capacity(Self::DEFAULT_CAPACITY)
    }

    /// An empty cache that holds at most `capacity` outcomes (at least one).
    pub fn with_capacity(capacity: usize) -> Self {
        SignatureCache {
            entries: Mutex::new(HashMap::new()),
            capacity: capacity.max(1),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }

    /// Lookups answered from the cache.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Lookups that had to verify.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }

    /// Number of stored outcomes.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether no outcome is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Forgets every outcome (the counters are kept).
    pub fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<[u8; 32], bool>> {
        // A panic while holding the lock cannot leave the map inconsistent
        // (every operation on it is a single call), so a poisoned lock is
        // still usable.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The key of the outcome of checking, with the key whose
    /// SubjectPublicKeyInfo has SHA-256 `issuer_spki_sha256`, the
    /// signature of the certificate whose DER has SHA-256
    /// `signed_fingerprint`.
    pub(crate) fn key(issuer_spki_sha256: &[u8; 32], signed_fingerprint: &[u8; 32]) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(issuer_spki_sha256);
        h.update(signed_fingerprint);
        h.finalize().into()
    }

    pub(crate) fn get(&self, key: &[u8; 32]) -> Option<bool> {
        let found = self.lock().get(key).copied();
        let counter = if found.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        found
    }

    pub(crate) fn insert(&self, key: [u8; 32], valid: bool) {
        let mut map = self.lock();
        if map.len() >= self.capacity {
            map.clear();
        }
        map.insert(key, valid);
    }
}
