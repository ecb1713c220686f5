//! Generates `pki-etcd/src/proto/*.rs` from the `.proto` files in
//! `pki-etcd/proto/` (see `pki-etcd/regen-proto.sh`), so that building
//! pki-etcd needs no protobuf compiler. The test `proto_is_current`
//! generates the code again, without protoc, and compares.

use std::io;
use std::path::{Path, PathBuf};

/// The files compiled, relative to [`proto_root`].
pub const PROTOS: &[&str] = &[
    "etcd/api/mvccpb/kv.proto",
    "etcd/api/authpb/auth.proto",
    "etcd/api/etcdserverpb/rpc.proto",
];

/// The generated files, one per protobuf package, relative to
/// [`generated_dir`].
pub const GENERATED: &[&str] = &["mvccpb.rs", "authpb.rs", "etcdserverpb.rs"];

/// Messages whose derived `Debug` would print a password or a token:
/// pki-etcd writes their `Debug` by hand.
const SECRET_MESSAGES: &[&str] = &[
    ".etcdserverpb.AuthenticateRequest",
    ".etcdserverpb.AuthenticateResponse",
    ".etcdserverpb.AuthUserAddRequest",
];

/// `pki-etcd/proto`.
pub fn proto_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto")
}

/// `pki-etcd/src/proto`.
pub fn generated_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../src/proto")
}

/// The generator's settings: clients only (pki-etcd serves nothing), no
/// transport helpers (pki-etcd builds its own channel).
fn builder(out_dir: &Path) -> tonic_prost_build::Builder {
    tonic_prost_build::configure()
        .build_server(false)
        .build_transport(false)
        .skip_debug(SECRET_MESSAGES.iter().copied())
        .emit_rerun_if_changed(false)
        .out_dir(out_dir)
}

/// Generates the code into `out_dir` with `protoc` (what a maintainer runs
/// after changing a `.proto` file).
///
/// # Errors
///
/// The error `tonic-prost-build` gives when `protoc` cannot be found or run,
/// refuses a `.proto` file, or the files cannot be written to `out_dir`.
pub fn generate_with_protoc(out_dir: &Path) -> io::Result<()> {
    let root = proto_root();
    let protos: Vec<PathBuf> = PROTOS.iter().map(|p| root.join(p)).collect();
    builder(out_dir).compile_protos(&protos, &[root])
}

/// Generates the code into `out_dir` from descriptors parsed by protox, a
/// protobuf compiler in Rust: what the staleness check uses, so that it
/// needs no `protoc`.
///
/// # Errors
///
/// An [`io::Error`] when protox cannot read or compile a `.proto` file (its
/// error is the source), or when the code cannot be generated or written to
/// `out_dir`.
pub fn generate_with_protox(out_dir: &Path) -> io::Result<()> {
    let fds = protox::compile(PROTOS, [proto_root()]).map_err(io::Error::other)?;
    // The attribute `compile_protos` adds by itself (see tonic-prost-build's
    // `compile_with_config`), so that both ways write the same code.
    builder(out_dir)
        .type_attribute(".", "#[allow(clippy::all)]")
        .compile_fds(fds)
}
