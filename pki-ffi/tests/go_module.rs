//! A Go program outside this repository uses the Go package the way the
//! README tells Go users to: its own module in a temporary directory, a
//! `require` of `pki.invalid/go` with a `replace` to this checkout, the
//! release static library built by the one documented command (`cargo build
//! --release -p pki-ffi`), and `go build` with no hand-set `CGO_LDFLAGS`.
//! The program issues a serving certificate into a directory store and
//! verifies it with Go's crypto/x509.

// Helpers outside #[test] functions panic on purpose: that fails the test.
#![allow(clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::process::Command;
use support::{profile_dir, require_tool, workspace_root};

const MAIN_GO: &str = r#"package main

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"os"
	"path/filepath"
	"time"

	pki "pki.invalid/go"
)

func certs(path string) []*x509.Certificate {
	data, err := os.ReadFile(path)
	check(err)
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		check(err)
		out = append(out, cert)
	}
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "consumer:", err)
		os.Exit(1)
	}
}

func main() {
	dir := os.Args[1]
	now := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	store, err := pki.OpenStore(ctx, dir)
	check(err)
	defer store.Close()
	created, err := store.Create(ctx, "signer", pki.SignerSpec{CommonName: "consumer-ca"}, now)
	check(err)
	created.Close()
	step, err := store.Step(ctx, "signer", now, &pki.SignerInput{Leaves: []pki.LeafChange{{
		Action:  pki.LeafAdd,
		Name:    "web",
		Request: pki.LeafRequest{Kind: pki.LeafServer, DNSNames: []string{"web.example"}},
	}}})
	check(err)
	step.Close()

	roots := x509.NewCertPool()
	for _, c := range certs(filepath.Join(dir, "ca-bundle.crt")) {
		roots.AddCert(c)
	}
	chain := certs(filepath.Join(dir, "certs", "web", "tls.crt"))
	intermediates := x509.NewCertPool()
	for _, c := range chain[1:] {
		intermediates.AddCert(c)
	}
	opts := x509.VerifyOptions{
		DNSName:       "web.example",
		Roots:         roots,
		Intermediates: intermediates,
		CurrentTime:   now,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	_, err = chain[0].Verify(opts)
	check(err)
	opts.DNSName = "other.example"
	if _, err := chain[0].Verify(opts); err == nil {
		check(fmt.Errorf("a certificate for web.example verified as other.example"))
	}
	fmt.Printf("verified web.example, issued by %s, with pki %s\n", chain[0].Issuer.CommonName, pki.Version())
}
"#;

/// Runs a command to success and returns its stdout.
fn run(cmd: &mut Command, what: &str) -> String {
    let output = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{what} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn a_go_module_outside_the_repository_builds_against_the_release_library_and_verifies_a_leaf() {
    require_tool(
        "go",
        "golang-go",
        "to build a Go program with the Go package pki-ffi/go (Go 1.22 or later)",
    );
    require_tool("gcc", "gcc", "by cgo to build the Go package");
    let root = workspace_root();
    let target = profile_dir()
        .parent()
        .expect("target/<profile> has a parent")
        .to_path_buf();

    // The README's one command for Go users, in this test's target
    // directory (CARGO_TARGET_DIR respected).
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    run(
        Command::new(cargo)
            .args(["build", "--release", "-p", "pki-ffi"])
            .current_dir(&root)
            .env("CARGO_TARGET_DIR", &target),
        "cargo build --release -p pki-ffi",
    );
    assert!(target.join("release/libpki_ffi.a").is_file());

    let module = tempfile::tempdir().expect("temporary directory");
    assert!(
        !module.path().starts_with(&root),
        "the module is outside the repository"
    );
    let go_mod = format!(
        "module consumer\n\ngo 1.22\n\nrequire pki.invalid/go v0.0.0\n\nreplace pki.invalid/go => {}\n",
        root.join("pki-ffi/go").display()
    );
    std::fs::write(module.path().join("go.mod"), go_mod).expect("write go.mod");
    std::fs::write(module.path().join("main.go"), MAIN_GO).expect("write main.go");

    let mut build = Command::new("go");
    build
        .args(["build", "-o", "consumer", "."])
        .current_dir(module.path())
        .env("CGO_ENABLED", "1")
        // Nothing is downloaded: the only dependency is the replaced checkout.
        .env("GOTOOLCHAIN", "local")
        .env("GOPROXY", "off")
        .env("GOWORK", "off")
        .env("GOFLAGS", "-mod=mod")
        .env_remove("CGO_LDFLAGS");
    if target != root.join("target") {
        // The documented way when cargo builds elsewhere.
        build.env(
            "CGO_LDFLAGS",
            format!("-L{}", target.join("release").display()),
        );
    }
    if std::env::var_os("HOME").is_none() && std::env::var_os("GOCACHE").is_none() {
        build.env("GOCACHE", target.join("go-cache"));
    }
    if std::env::var_os("HOME").is_none() && std::env::var_os("GOPATH").is_none() {
        build.env("GOPATH", target.join("go-path"));
    }
    run(&mut build, "go build of a module outside the repository");

    let store = module.path().join("store");
    let out = run(
        Command::new(module.path().join("consumer")).arg(&store),
        "the Go program",
    );
    assert!(
        out.starts_with("verified web.example, issued by consumer-ca, with pki "),
        "{out}"
    );
    assert!(
        store.join("certs/web/tls.key").is_file(),
        "{}",
        Path::new(&store).display()
    );
}
