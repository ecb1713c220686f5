//! C ABI for pki.
