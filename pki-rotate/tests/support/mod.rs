//! Helpers the integration tests share.

pub mod set;
