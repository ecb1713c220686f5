//! Shared by the integration tests that drive the C ABI from other
//! languages: builds the static library they link.

// Test helpers: failing loudly is their job.
#![allow(dead_code, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The workspace root.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("pki-ffi sits in the workspace")
        .to_path_buf()
}

/// `target/<profile>` of this test binary (`target/debug/deps/<test>-<hash>`).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary path");
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary in target/<profile>/deps")
        .to_path_buf()
}

/// The static library `libpki_ffi.a` matching this test binary, and its path.
///
/// Building this test built pki-ffi's library target with all its crate
/// types, so the archive already sits next to the test binary in
/// `target/<profile>/deps/`, compiled with exactly the features of this
/// build. Running `cargo build -p pki-ffi` instead would resolve features
/// for pki-ffi alone and recompile a second copy of its dependency tree
/// (minutes on a cold machine); it remains the fallback when the archive is
/// missing.
pub fn static_lib() -> &'static Path {
    static LIB: OnceLock<PathBuf> = OnceLock::new();
    LIB.get_or_init(|| {
        let profile = profile_dir();
        let built = profile.join("deps").join("libpki_ffi.a");
        if built.is_file() {
            return built;
        }
        let release = profile.file_name().is_some_and(|n| n == "release");
        build_static_lib(profile.parent().expect("target directory"), release)
    })
}

/// Runs `cargo build -p pki-ffi --lib` into `target_dir` and returns the
/// path of the static library.
pub fn build_static_lib(target_dir: &Path, release: bool) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", "pki-ffi", "--lib"])
        .current_dir(workspace_root())
        .env("CARGO_TARGET_DIR", target_dir);
    if release {
        cmd.arg("--release");
    }
    let status = cmd.status().expect("run cargo build -p pki-ffi");
    assert!(status.success(), "cargo build -p pki-ffi failed");
    let lib = target_dir
        .join(if release { "release" } else { "debug" })
        .join("libpki_ffi.a");
    assert!(lib.exists(), "{} was not built", lib.display());
    lib
}

/// Fails with one line naming the Debian package to install when `tool` is
/// not on PATH (`why`: what the test needs it for).
pub fn require_tool(tool: &str, package: &str, why: &str) {
    let found = Command::new(tool).arg("--version").output().is_ok()
        || Command::new(tool).arg("version").output().is_ok();
    assert!(
        found,
        "`{tool}` is not installed or not on PATH; it is needed {why}: install it with `apt-get install {package}` (Debian) or run scripts/test.sh"
    );
}

/// A scratch directory for one test, emptied first.
pub fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch directory");
    dir
}
