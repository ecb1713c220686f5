//! [`Secret`]: a credential's bytes, zeroized on drop and never printed.

use zeroize::Zeroizing;

/// A credential's bytes, as the mint hook printed them (trimmed). Zeroized
/// on drop and never printed by `Debug`.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Zeroizing<Vec<u8>>);

impl Secret {
    /// Wraps credential bytes.
    pub fn new(bytes: impl Into<Vec<u8>>) -> Self {
        Secret(Zeroizing::new(bytes.into()))
    }

    /// The bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// Hook output as a credential: surrounding ASCII whitespace removed
    /// (a trailing newline is not part of the credential).
    pub fn from_output(output: &[u8]) -> Self {
        Secret::new(output.trim_ascii())
    }

    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Secret({} bytes)", self.0.len())
    }
}
