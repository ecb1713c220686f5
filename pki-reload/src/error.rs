//! [`ReloadError`]: why material could not be (re)loaded.

use std::path::PathBuf;

/// Why a reloader could not load its files. The material loaded before
/// stays in use.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ReloadError {
    /// A file could not be read.
    #[error("{}: {message}", .path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What the system said.
        message: String,
    },
    /// A file does not hold what it should (no certificate, a bad key).
    #[error("{}: {message}", .path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The key and the certificate kept coming from different generations
    /// (or never match): nothing was swapped in.
    #[error(
        "{} and {} did not hold a matching certificate and key in {attempts} reads",
        .cert.display(),
        .key.display()
    )]
    Mismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// How many times both were read.
        attempts: u32,
    },
    /// rustls refused the material.
    #[error("{0}")]
    Tls(String),
    /// No trust bundle file was given: there would be nothing to trust.
    #[error("no trust bundle file was given: name at least one (ca-bundle.crt)")]
    NoBundleFile,
}

impl ReloadError {
    pub(crate) fn io(path: &std::path::Path, e: std::io::Error) -> Self {
        ReloadError::Io {
            path: path.to_path_buf(),
            message: e.to_string(),
        }
    }

    /// A file the bounded reader refused or could not read.
    pub(crate) fn input(e: pki_rotate::input::InputError) -> Self {
        ReloadError::Io {
            path: e.path().to_path_buf(),
            message: e.reason(),
        }
    }

    pub(crate) fn invalid(path: &std::path::Path, message: impl ToString) -> Self {
        ReloadError::Invalid {
            path: path.to_path_buf(),
            message: message.to_string(),
        }
    }
}
