//! Runs `go vet` and `go test -race` on the Go package (`pki-ffi/go`), so
//! that `cargo test` covers Go too. The package links the static library
//! that this test builds first, in this test's own target directory (so
//! `CARGO_TARGET_DIR` is respected), named to cgo with `-L`. An etcd
//! server is started for the Go tests of the URL store and named in
//! `PKI_TEST_ETCD_URL`; a kube-apiserver for those of the `kube://` store,
//! named in `PKI_TEST_KUBE_URL` with its admin's kubeconfig in
//! `KUBECONFIG` (and, for the Go tests' own REST calls around the
//! controller, its address, CA and admin token in `PKI_TEST_KUBE_SERVER`,
//! `PKI_TEST_KUBE_CA` and `PKI_TEST_KUBE_TOKEN`); SoftHSM2's module in
//! `PKI_TEST_PKCS11_MODULE`, for the test of a CA key in a token.

// Helpers outside #[test] functions panic on purpose: that fails the test.
#![allow(clippy::expect_used, clippy::panic)]
// The etcd and kube-apiserver supports each include the one `free_port`
// (pki-etcd/tests/support/free_port.rs) by path.
#![allow(clippy::duplicate_mod)]

#[path = "../../pki-etcd/tests/support/etcd.rs"]
mod etcd;
#[path = "../../pki-kube/tests/support/mod.rs"]
mod kube_support;
// SoftHSM2's module, named to the Go test of a token-held CA (which makes
// its own token).
#[path = "../../pki-core/tests/pkcs11/softhsm.rs"]
#[allow(dead_code)]
mod softhsm;
mod support;

use std::path::Path;
use std::process::Command;
use support::{profile_dir, require_tool, static_lib, workspace_root};

/// The servers the Go tests reach: etcd's URL, and a `kube://` URL with
/// the kubeconfig that may use it.
struct Servers<'a> {
    etcd_url: &'a str,
    kube_url: &'a str,
    kubeconfig: &'a Path,
    kube: &'a kube_support::kube::KubeServer,
}

fn go(args: &[&str], dir: &Path, lib: &Path, servers: &Servers<'_>) {
    let lib_dir = lib
        .parent()
        .expect("the static library sits in a directory");
    let target = profile_dir()
        .parent()
        .expect("target/<profile> has a parent")
        .to_path_buf();
    let mut cmd = Command::new("go");
    cmd.args(args)
        .current_dir(dir)
        .env("CGO_ENABLED", "1")
        // The module has no dependencies: never download a module or a toolchain.
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .env("GOWORK", "off")
        .env("PKI_TEST_ETCD_URL", servers.etcd_url)
        .env("PKI_TEST_KUBE_URL", servers.kube_url)
        .env("KUBECONFIG", servers.kubeconfig)
        .env("PKI_TEST_KUBE_SERVER", servers.kube.url())
        .env("PKI_TEST_KUBE_CA", servers.kube.ca())
        .env("PKI_TEST_KUBE_TOKEN", servers.kube.admin_token())
        .env("PKI_TEST_PKCS11_MODULE", softhsm::module())
        // Searched before the package's default target/debug.
        .env(
            "CGO_LDFLAGS",
            format!(
                "-L{} {}",
                lib_dir.display(),
                std::env::var("CGO_LDFLAGS").unwrap_or_default()
            ),
        )
        .env(
            "GOFLAGS",
            std::env::var("GOFLAGS").unwrap_or("-mod=mod".into()),
        );
    // Go needs a writable cache; CI may run with no HOME.
    if std::env::var_os("HOME").is_none() && std::env::var_os("GOCACHE").is_none() {
        cmd.env("GOCACHE", target.join("go-cache"));
    }
    if std::env::var_os("HOME").is_none() && std::env::var_os("GOPATH").is_none() {
        cmd.env("GOPATH", target.join("go-path"));
    }
    let output = cmd.output().expect("run go");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    print!("{stdout}");
    assert!(
        output.status.success(),
        "go {} failed in {}:\n{stdout}\n{stderr}",
        args.join(" "),
        dir.display()
    );
}

#[test]
fn go_package_vets_and_passes_its_race_enabled_tests() {
    require_tool(
        "go",
        "golang-go",
        "to test the Go package pki-ffi/go (Go 1.22 or later)",
    );
    require_tool("gcc", "gcc", "by cgo to build the Go package");
    let lib = static_lib();
    let dir = workspace_root().join("pki-ffi/go");
    let server = etcd::Etcd::start();
    let url = server.url("go");
    let kube = kube_support::kube::KubeServer::start();
    let _admin = kube_support::admin::Admin::new(&kube);
    let kube_url = format!("kube://{}/go", kube_support::admin::NAMESPACE);
    let servers = Servers {
        etcd_url: &url,
        kube_url: &kube_url,
        kubeconfig: kube.admin_kubeconfig(),
        kube: &kube,
    };
    go(&["vet", "./..."], &dir, lib, &servers);
    go(&["test", "-race", "-count=1", "./..."], &dir, lib, &servers);
}
