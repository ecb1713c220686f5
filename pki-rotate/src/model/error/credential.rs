//! [`CredentialError`]: What the credential engine refuses.

/// What the credential engine refuses.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialError {
    /// A credential name is not usable (it becomes a store key and a
    /// directory name, `creds/NAME/`).
    #[error(
        "invalid credential name \"{}\": use 1-64 characters of a-z, 0-9, '-', '_' and '.', not starting with '.'",
        .0.escape_debug()
    )]
    InvalidName(String),
    /// A credential policy that cannot keep a credential working (a grace
    /// period as long as the expiry, a zero expiry…).
    #[error("credential policy: {0}")]
    InvalidPolicy(String),
    /// The embedder reported a result the credential's document does not
    /// wait for (a mint of another rotation, a revocation of the current
    /// credential…). Nothing is recorded.
    #[error("credential \"{name}\": {reason}")]
    UnexpectedReport {
        /// The credential.
        name: String,
        /// What was reported and what the document waits for.
        reason: String,
    },
    /// A mint owner (who runs a credential's mint attempt) that is empty,
    /// too long or holds characters outside `[A-Za-z0-9._:@/-]`.
    #[error(
        "invalid mint owner \"{}\": use 1-128 characters of A-Z, a-z, 0-9 and . _ : @ / -",
        .0.escape_debug()
    )]
    InvalidMintOwner(String),
    /// Advancing a credential kept finding another bookkeeping step due
    /// after the bound: a store that does not keep what is written, or a
    /// bug. Each step taken was committed.
    #[error(
        "credential \"{name}\": still stepping after {steps} steps: refusing to loop (a store that does not keep its writes?)"
    )]
    NotSettling {
        /// The credential.
        name: String,
        /// The steps taken.
        steps: u32,
    },
}
