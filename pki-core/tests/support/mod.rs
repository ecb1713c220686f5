//! Helpers the path-validation tests share.

pub mod custom;
pub mod fixtures;
