//! pki-kube: the pki document store on the Kubernetes API server
//! (`kube://[CONTEXT@]NAMESPACE/NAME`), with compare-and-swap on an
//! object's `resourceVersion`.
//!
//! So far: the store's address, [`KubeUrl`], whose malformed forms are a
//! typed [`UrlError`] (bad usage, not a failed operation). The tests run
//! kube-rs against a real kube-apiserver (built by
//! `scripts/kube-tools.sh`, started by `tests/support/kube.rs`): an admin
//! writes a Secret, a replace with a stale `resourceVersion` is refused
//! with 409 Conflict, and a user without the right to read Secrets gets
//! 403 Forbidden.

mod url;

pub use url::{KubeUrl, MAX_NAME_LEN, SCHEME, UrlError, is_kube_url};
