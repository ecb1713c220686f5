//! pki-kube: the pki document store on the Kubernetes API server
//! (`kube://[CONTEXT@]NAMESPACE/NAME`), with compare-and-swap on an
//! object's `resourceVersion`.
//!
//! Nothing is here yet but the dependencies the store will use (kube-rs
//! and k8s-openapi, TLS by rustls). The tests run them against a real
//! kube-apiserver (built by `scripts/kube-tools.sh`, started by
//! `tests/support/kube.rs`): an admin writes a Secret, a replace with a
//! stale `resourceVersion` is refused with 409 Conflict, and a user
//! without the right to read Secrets gets 403 Forbidden.
