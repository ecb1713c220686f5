//! The `pki` command-line tool.
fn main() {}
