//! Helpers the integration tests share.

pub mod engine;
pub mod fs;
pub mod set;
pub mod tree;
