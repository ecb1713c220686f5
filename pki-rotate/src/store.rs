//! Where signer state lives: the [`Store`] trait, an in-memory store, and
//! the crash-safe filesystem store [`FsStore`].

use crate::error::{Result, RotateError};
use crate::signer::SignerState;
use std::sync::Mutex;

mod fs;
pub use fs::{FsStore, WriteHook};

/// A place that keeps one [`SignerState`] and replaces it only when nobody
/// else did in between (compare-and-swap on a generation number).
pub trait Store {
    /// Loads the state and its generation.
    fn load(&self) -> Result<(SignerState, u64)>;
    /// Stores `state` if the current generation is still `expected`;
    /// returns the new generation. On error nothing changed.
    fn compare_and_swap(&self, expected: u64, state: &SignerState) -> Result<u64>;
}

/// A store in memory, for tests and for programs that keep the JSON
/// document elsewhere.
#[derive(Debug, Default)]
pub struct MemoryStore {
    inner: Mutex<Option<(Vec<u8>, u64)>>,
}

impl MemoryStore {
    /// A store holding `state` at generation 1.
    pub fn new(state: &SignerState) -> Result<Self> {
        let json = state.to_json(1)?;
        Ok(MemoryStore {
            inner: Mutex::new(Some((json.to_vec(), 1))),
        })
    }
}

impl Store for MemoryStore {
    fn load(&self) -> Result<(SignerState, u64)> {
        let guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (bytes, _) = guard
            .as_ref()
            .ok_or_else(|| RotateError::corrupt("memory store", "empty"))?;
        SignerState::from_json(bytes)
    }

    fn compare_and_swap(&self, expected: u64, state: &SignerState) -> Result<u64> {
        let mut guard = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let found = guard.as_ref().map(|(_, g)| *g).unwrap_or(0);
        if found != expected {
            return Err(RotateError::Conflict { expected, found });
        }
        let next = expected + 1;
        *guard = Some((state.to_json(next)?.to_vec(), next));
        Ok(next)
    }
}
