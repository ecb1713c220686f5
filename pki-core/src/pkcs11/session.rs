//! The logged-in session a token's keys share.
//!
//! A cryptoki `Session` may move between threads but not be shared; the
//! session sits behind a mutex so that a token and its keys are `Send` and
//! `Sync`, and the calls of several threads take turns (a PKCS#11 session
//! runs one operation at a time anyway).

use cryptoki::mechanism::MechanismType;
use cryptoki::session::Session;
use std::sync::{Arc, Mutex};

/// A token's session, logged in as the user, shared by its keys.
#[derive(Clone)]
pub(super) struct Shared {
    inner: Arc<Inner>,
}

struct Inner {
    session: Mutex<Session>,
    /// The token's label.
    label: String,
    /// The mechanisms the token offers, read once at login.
    mechanisms: Vec<MechanismType>,
}

impl Shared {
    pub fn new(session: Session, label: String, mechanisms: Vec<MechanismType>) -> Self {
        Shared {
            inner: Arc::new(Inner {
                session: Mutex::new(session),
                label,
                mechanisms,
            }),
        }
    }

    /// The token's label.
    pub fn label(&self) -> &str {
        &self.inner.label
    }

    /// Whether the token offers `mechanism`.
    pub fn offers(&self, mechanism: MechanismType) -> bool {
        self.inner.mechanisms.contains(&mechanism)
    }

    /// Runs `f` with the session, alone. A panic of another thread while
    /// it held the session leaves nothing half-done on our side (the
    /// session is a handle), so a poisoned lock is taken over.
    pub fn with<T>(&self, f: impl FnOnce(&Session) -> T) -> T {
        let session = self
            .inner
            .session
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&session)
    }
}
