//! Helpers the integration tests share.

pub mod committed;
pub mod engine;
pub mod fs;
pub mod recording;
pub mod seed;
pub mod set;
pub mod tree;
