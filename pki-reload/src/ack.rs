//! Acknowledging the bundles a [`TrustReloader`](crate::TrustReloader)
//! loads, so that `pki status` knows this consumer reloaded.

use pki_rotate::{AckInput, Driver, Store, UptakeEngine};
use std::sync::{Arc, Mutex};

/// Told the fingerprint of every bundle a trust reloader loads. It is
/// called on the handshake's thread: an implementation that writes
/// somewhere must not wait for it there.
pub trait Acker: Send + Sync + std::fmt::Debug {
    /// The consumer now uses the bundle `fingerprint`.
    fn ack(&self, fingerprint: &str);
}

/// Acknowledges through the driver into a pki store (a directory store,
/// an etcd store, any [`Store`]), as `pki ack` does, on a thread of its
/// own: the handshake that loaded the bundle does not wait for the write.
/// An ack the store refuses (a bundle it did not publish) is kept in
/// [`StoreAcker::results`], not retried.
pub struct StoreAcker<S> {
    store: Arc<S>,
    consumer: String,
    key: String,
    results: Arc<Mutex<Vec<Result<String, String>>>>,
}

impl<S: Store> std::fmt::Debug for StoreAcker<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StoreAcker")
            .field("store", &self.store.location())
            .field("consumer", &self.consumer)
            .finish()
    }
}

impl<S: Store + Send + Sync + 'static> StoreAcker<S> {
    /// Acknowledges as `consumer` into the signer's document of `store`.
    pub fn new(store: S, consumer: impl Into<String>) -> Arc<Self> {
        Arc::new(StoreAcker {
            store: Arc::new(store),
            consumer: consumer.into(),
            key: pki_rotate::signer::STORE_KEY.to_string(),
            results: Arc::new(Mutex::new(Vec::new())),
        })
    }

    /// Every ack so far, oldest first: the fingerprint recorded, or why
    /// the store refused it. An ack still being written is not listed yet.
    pub fn results(&self) -> Vec<Result<String, String>> {
        self.results.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

impl<S: Store + Send + Sync + 'static> Acker for StoreAcker<S> {
    fn ack(&self, fingerprint: &str) {
        let (store, results) = (self.store.clone(), self.results.clone());
        let input = AckInput::new(self.consumer.clone(), fingerprint);
        let key = self.key.clone();
        let fingerprint = fingerprint.to_string();
        std::thread::spawn(move || {
            let now = time::OffsetDateTime::now_utc();
            let outcome = Driver::new(&*store)
                .step_unless_idle::<UptakeEngine, _>(&key, &input, now, &mut pki_core::os_rng())
                .map(|_| fingerprint)
                .map_err(|e| e.to_string());
            if let Ok(mut r) = results.lock() {
                r.push(outcome);
            }
        });
    }
}
