//! [`CertFiles`]: where a consumer's leaf is published.

use std::path::{Path, PathBuf};

/// Where a leaf's chain and key are.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertFiles {
    /// The chain: the leaf first, then what a peer needs to reach its
    /// trust (bridge B after a signer rotation).
    pub cert: PathBuf,
    /// The leaf's private key.
    pub key: PathBuf,
}

impl CertFiles {
    /// `tls.crt` and `tls.key` in `dir`.
    pub fn in_dir(dir: &Path) -> Self {
        CertFiles {
            cert: dir.join("tls.crt"),
            key: dir.join("tls.key"),
        }
    }

    /// The signer's leaf `name` in a directory store: `DIR/certs/NAME/`.
    pub fn leaf(store: &Path, name: &str) -> Self {
        Self::in_dir(&store.join("certs").join(name))
    }

    /// The leaf `name` of a CA set's target: `DIR/targets/TARGET/certs/NAME/`.
    pub fn target_leaf(store: &Path, target: &str, name: &str) -> Self {
        Self::in_dir(&store.join("targets").join(target).join("certs").join(name))
    }
}
