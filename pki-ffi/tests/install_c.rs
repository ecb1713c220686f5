//! `scripts/install.sh --c PREFIX` installs what a C program needs, and a
//! C program outside the repository compiles, links and runs (the book's
//! lines in docs/book/src/c-and-go.md, then stricter flags) with only
//! `pkg-config` telling the compiler where things are: the header, the
//! release static library and `pki.pc`, for `pkg-config --cflags --libs
//! pki` and for `--static`.

// Helpers outside #[test] functions panic on purpose: that fails the test.
#![allow(clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::process::Command;
use support::{profile_dir, require_tool, workspace_root};

const PROGRAM: &str = r#"#include <stdio.h>
#include <string.h>
#include "pki.h"

int main(void) {
  pki_store *store = NULL;
  pki_buffer *step = NULL;
  const char *spec = "{\"common_name\": \"installed-ca\"}";
  if (pki_store_open("memory:", 7, NULL, 0, &store) != PKI_RESULT_OK)
    return 1;
  pki_result r = pki_document_create(store, PKI_KIND_SIGNER, "signer", 6, spec, strlen(spec), 1767225600, &step);
  if (r != PKI_RESULT_OK) {
    fprintf(stderr, "pki_document_create: %s\n", pki_result_name(r));
    return 1;
  }
  printf("pki %s created a signer: %d\n", pki_version(),
         strstr((const char *)pki_buffer_data(step).data, "\"changed\":true") != NULL);
  pki_buffer_free(step);
  pki_store_free(store);
  return 0;
}
"#;

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

/// `pkg-config ARGS pki` with PREFIX's pkgconfig directory, split into
/// arguments.
fn pkg_config(prefix: &Path, args: &[&str]) -> Vec<String> {
    let out = run(
        Command::new("pkg-config")
            .args(args)
            .arg("pki")
            .env("PKG_CONFIG_PATH", prefix.join("lib/pkgconfig"))
            .env_remove("PKG_CONFIG_LIBDIR")
            .env_remove("PKG_CONFIG_SYSROOT_DIR"),
        &format!("pkg-config {} pki", args.join(" ")),
    );
    out.split_whitespace().map(str::to_owned).collect()
}

/// The book's install-and-compile lines (docs/book/src/c-and-go.md,
/// after "**From C**"): its one ```sh block there.
fn book_block() -> String {
    let chapter = workspace_root().join("docs/book/src/c-and-go.md");
    let text = std::fs::read_to_string(&chapter).expect("c-and-go.md");
    let from = text.find("**From C**").expect("c-and-go.md: **From C**");
    let rest = &text[from..];
    let start = rest.find("```sh\n").expect("its sh block") + "```sh\n".len();
    let end = start + rest[start..].find("```").expect("the block's end");
    rest[start..end].to_string()
}

/// The book's lines run as written but for the prefix (a temporary one
/// for `/opt/pki`) and the script's path; then the program they built
/// runs, and the same program builds `--static` too.
#[test]
fn a_c_program_builds_against_the_installed_library_with_pkg_config() {
    require_tool(
        "pkg-config",
        "pkg-config",
        "to find the installed C library",
    );
    require_tool("gcc", "gcc", "to compile the C program");
    let target = profile_dir()
        .parent()
        .expect("target/<profile> has a parent")
        .to_path_buf();
    let prefix = tempfile::tempdir().expect("temporary prefix");
    let dir = tempfile::tempdir().expect("temporary directory");
    let source = dir.path().join("main.c");
    std::fs::write(&source, PROGRAM).expect("write main.c");
    let script = book_block();
    for from in ["scripts/install.sh", "/opt/pki", "main.c", "-o main"] {
        assert!(
            script.contains(from),
            "the book's block has no `{from}`:\n{script}"
        );
    }
    let install = workspace_root().join("scripts/install.sh");
    let script = script
        .replace(
            "scripts/install.sh",
            install.to_str().expect("a UTF-8 path"),
        )
        .replace("/opt/pki", prefix.path().to_str().expect("a UTF-8 path"));
    run(
        Command::new("sh")
            .args(["-e", "-c", &script])
            .current_dir(dir.path())
            .env("CARGO_TARGET_DIR", &target)
            .env_remove("DESTDIR")
            .env_remove("PKG_CONFIG_LIBDIR")
            .env_remove("PKG_CONFIG_SYSROOT_DIR"),
        &format!("the book's C lines:\n{script}"),
    );
    let out = run(
        &mut Command::new(dir.path().join("main")),
        "the book's C program",
    );
    assert!(
        out.starts_with("pki ") && out.ends_with("created a signer: 1\n"),
        "{out}"
    );
    for file in [
        "lib/libpki_ffi.a",
        "include/pki/pki.h",
        "lib/pkgconfig/pki.pc",
    ] {
        assert!(prefix.path().join(file).is_file(), "{file} not installed");
    }
    let pc = std::fs::read_to_string(prefix.path().join("lib/pkgconfig/pki.pc")).expect("pki.pc");
    assert!(
        pc.starts_with(&format!("prefix={}\n", prefix.path().display())),
        "{pc}"
    );
    let installed = std::fs::read(prefix.path().join("include/pki/pki.h")).expect("pki.h");
    let checked_in = std::fs::read(workspace_root().join("pki-ffi/include/pki.h")).expect("pki.h");
    assert!(
        installed == checked_in,
        "the installed header is the checked-in one"
    );

    for flags in [
        &["--cflags", "--libs"][..],
        &["--cflags", "--libs", "--static"][..],
    ] {
        let exe = dir.path().join("main");
        let _ = std::fs::remove_file(&exe);
        run(
            Command::new("gcc")
                .args(["-std=c11", "-Wall", "-Wextra", "-Werror", "-o"])
                .arg(&exe)
                .arg(&source)
                .args(pkg_config(prefix.path(), flags)),
            &format!("gcc main.c $(pkg-config {} pki)", flags.join(" ")),
        );
        let out = run(&mut Command::new(&exe), "the C program");
        assert!(
            out.starts_with("pki ") && out.ends_with("created a signer: 1\n"),
            "{out}"
        );
    }
}
