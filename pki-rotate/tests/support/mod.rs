//! Helpers the integration tests share.

pub mod fs;
pub mod set;
