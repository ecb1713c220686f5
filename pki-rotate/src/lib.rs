//! Rotation engines.
