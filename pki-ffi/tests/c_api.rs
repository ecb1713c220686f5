//! The C tests of `tests/c/`, compiled against `include/pki.h` and the static
//! library with `-Wall -Wextra -Wpedantic -Werror -fsanitize=address,undefined`
//! and run; any nonzero exit or sanitizer report fails the test.

// Helpers outside #[test] functions panic on purpose: that fails the test.
#![allow(clippy::expect_used, clippy::panic)]

mod support;
// A real kube-apiserver for the C test of a `kube://` store: pki-kube's
// own test support, shared by path as the Go test shares it.
#[path = "../../pki-kube/tests/support/mod.rs"]
mod kube_support;
// SoftHSM2's module, as pki-core's token tests find it (the C test makes
// its own token with it).
#[path = "../../pki-core/tests/pkcs11/softhsm.rs"]
#[allow(dead_code)]
mod softhsm;

use std::path::{Path, PathBuf};
use std::process::Command;
use support::{require_tool, scratch, static_lib, workspace_root};

const WARNINGS: &[&str] = &["-Wall", "-Wextra", "-Wpedantic", "-Werror"];
const SANITIZERS: &[&str] = &[
    "-fsanitize=address,undefined",
    "-fno-sanitize-recover=all",
    "-fno-omit-frame-pointer",
    "-g",
];

fn ffi_dir() -> PathBuf {
    workspace_root().join("pki-ffi")
}

/// Compiles `tests/c/<source>` (C11, or C++17 for `.cpp`) into `out_dir`.
fn build(source: &str, out_dir: &Path) -> PathBuf {
    build_path(&ffi_dir().join("tests/c").join(source), out_dir)
}

/// Compiles the C or C++ file at `path` into `out_dir`.
fn build_path(path: &Path, out_dir: &Path) -> PathBuf {
    let source = path
        .file_name()
        .and_then(|n| n.to_str())
        .expect("a source file name");
    let cpp = source.ends_with(".cpp");
    let (compiler, std) = if cpp {
        ("g++", "-std=c++17")
    } else {
        ("gcc", "-std=c11")
    };
    require_tool(compiler, compiler, "to build the C tests of pki-ffi");
    let exe = out_dir.join(source.replace('.', "_"));
    let output = Command::new(compiler)
        .arg(std)
        .args(WARNINGS)
        .args(SANITIZERS)
        .arg("-I")
        .arg(ffi_dir().join("include"))
        .arg(path)
        .arg(static_lib())
        .args(["-lpthread", "-ldl", "-lm", "-o"])
        .arg(&exe)
        .output()
        .expect("run the C compiler");
    assert!(
        output.status.success(),
        "{compiler} failed on {}:\n{}",
        path.display(),
        String::from_utf8_lossy(&output.stderr)
    );
    exe
}

/// Runs a sanitized test program; fails on a nonzero exit or any report.
fn run(exe: &Path, args: &[&Path]) -> String {
    let output = Command::new(exe)
        .args(args)
        .env(
            "ASAN_OPTIONS",
            "detect_leaks=1:halt_on_error=1:detect_stack_use_after_return=1",
        )
        .env("UBSAN_OPTIONS", "halt_on_error=1:print_stacktrace=1")
        .output()
        .expect("run the C test");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report = ["AddressSanitizer", "LeakSanitizer", "runtime error:"]
        .iter()
        .any(|m| stderr.contains(m));
    assert!(
        output.status.success() && !report,
        "{} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        exe.display(),
        output.status
    );
    print!("{stdout}");
    stdout
}

#[test]
fn header_compiles_alone_as_c11_and_cpp17_with_warnings_as_errors() {
    let dir = scratch("c-header");
    for (compiler, std, file) in [
        ("gcc", "-std=c11", "only.c"),
        ("g++", "-std=c++17", "only.cpp"),
    ] {
        require_tool(compiler, compiler, "to compile pki.h");
        let src = dir.join(file);
        std::fs::write(&src, "#include \"pki.h\"\n#include \"pki.h\"\n").expect("write source");
        let output = Command::new(compiler)
            .arg(std)
            .args(WARNINGS)
            .arg("-fsyntax-only")
            .arg("-I")
            .arg(ffi_dir().join("include"))
            .arg(&src)
            .output()
            .expect("run the compiler");
        assert!(
            output.status.success(),
            "pki.h does not compile with {compiler} {std}:\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

#[test]
fn full_rotation_through_the_c_api_verifies_with_openssl() {
    require_tool(
        "openssl",
        "openssl",
        "to check the rotated chains with `openssl verify`",
    );
    let dir = scratch("c-rotation");
    let exe = build("rotation.c", &dir);
    let out = run(&exe, &[&dir]);
    assert!(
        out.contains("rotation: ") && out.contains(" 0 failed"),
        "{out}"
    );
}

#[test]
fn misuse_returns_codes_and_never_crashes() {
    let dir = scratch("c-misuse");
    let exe = build("misuse.c", &dir);
    let out = run(&exe, &[]);
    assert!(out.contains(" 0 failed"), "{out}");
}

#[test]
fn last_error_is_per_thread_and_handles_are_shared() {
    let dir = scratch("c-threads");
    let exe = build("threads.c", &dir);
    let out = run(&exe, &[]);
    assert!(out.contains(" 0 failed"), "{out}");
}

#[test]
fn cpp17_program_uses_the_header_and_library() {
    let dir = scratch("c-header-cpp");
    let exe = build("header.cpp", &dir);
    let out = run(&exe, &[]);
    assert!(out.contains(" 0 failed"), "{out}");
}

#[test]
fn result_codes_keep_their_numbers_in_the_header_and_the_library() {
    // Every code the library names (it names nothing above 999) is pinned
    // in codes.c, and nothing else is.
    let source = std::fs::read_to_string(ffi_dir().join("tests/c/codes.c")).expect("read codes.c");
    let pinned: Vec<(String, u32)> = source
        .lines()
        .filter_map(|l| l.trim().strip_prefix("PIN(PKI_RESULT_"))
        .map(|rest| {
            let (name, number) = rest
                .trim_end_matches(['\\', ' '])
                .trim_end_matches(')')
                .split_once(", ")
                .expect("PIN(NAME, NUMBER)");
            (
                format!("PKI_RESULT_{name}"),
                number.parse().expect("a number"),
            )
        })
        .collect();
    let library: Vec<(String, u32)> = (0..1000u32)
        .filter_map(|n| {
            // SAFETY: pki_result_name returns a static NUL-terminated string.
            let name = unsafe { std::ffi::CStr::from_ptr(pki_ffi::pki_result_name(n)) };
            let name = name.to_str().expect("ASCII name");
            (name != "PKI_RESULT_UNKNOWN").then(|| (name.to_string(), n))
        })
        .collect();
    assert_eq!(pinned, library, "tests/c/codes.c and the library disagree");

    let dir = scratch("c-codes");
    let exe = build("codes.c", &dir);
    let out = run(&exe, &[]);
    assert!(out.contains(" 0 failed"), "{out}");
}

#[test]
fn stores_step_the_signer_with_exact_next_checks_and_conflicts_apart_from_failures() {
    require_tool(
        "openssl",
        "openssl",
        "to check what the directory store published with `openssl verify`",
    );
    let dir = scratch("c-store");
    let exe = build("store.c", &dir);
    let out = run(&exe, &[&dir]);
    assert!(
        out.contains("store: ") && out.contains(" 0 failed"),
        "{out}"
    );
}

#[test]
fn a_snapshot_pairs_a_chain_with_its_own_key_and_its_token_is_acknowledged() {
    let dir = scratch("c-snapshot");
    let exe = build("snapshot.c", &dir);
    let out = run(&exe, &[&dir]);
    assert!(
        out.contains("snapshot: ") && out.contains(" 0 failed"),
        "{out}"
    );
}

#[test]
fn set_rotates_and_refuses_bad_input_with_codes_and_the_store_unchanged() {
    let dir = scratch("c-set");
    let exe = build("set.c", &dir);
    let out = run(&exe, &[&dir]);
    assert!(out.contains("set: ") && out.contains(" 0 failed"), "{out}");
}

#[test]
fn a_kube_store_opened_from_c_steps_a_signer_that_another_handle_reads_back() {
    let server = kube_support::kube::KubeServer::start();
    let _admin = kube_support::admin::Admin::new(&server);
    let url = format!("kube://{}/c-signer", kube_support::admin::NAMESPACE);
    let dir = scratch("c-kube");
    let exe = build("kube.c", &dir);
    let out = run(
        &exe,
        &[
            Path::new(&url),
            server.admin_kubeconfig(),
            server.reader_kubeconfig(),
        ],
    );
    assert!(out.contains("kube: ") && out.contains(" 0 failed"), "{out}");
}

#[test]
fn the_controller_loop_started_from_c_stops_when_another_thread_asks() {
    let server = kube_support::kube::KubeServer::start();
    let _admin = kube_support::admin::Admin::new(&server);
    let url = format!("kube://{}/c-controller", kube_support::admin::NAMESPACE);
    let dir = scratch("c-controller");
    let exe = build("controller.c", &dir);
    let out = run(&exe, &[Path::new(&url), server.admin_kubeconfig()]);
    assert!(
        out.contains("controller: ") && out.contains(" 0 failed"),
        "{out}"
    );
}

#[test]
fn a_ca_key_in_a_pkcs11_token_rotates_through_the_c_api_and_the_token_holds_exactly_its_keys() {
    require_tool(
        "openssl",
        "openssl",
        "to check the leaf's chain with `openssl verify`",
    );
    require_tool(
        "pkcs11-tool",
        "opensc",
        "to list the token's key objects independently of pki",
    );
    let module = softhsm::module();
    let dir = scratch("c-token");
    let exe = build("token.c", &dir);
    let out = run(&exe, &[&dir, &module]);
    assert!(
        out.contains("rotated: the token holds the 2 key(s)") && out.contains(" 0 failed"),
        "{out}"
    );
}

#[test]
fn key_rings_and_credentials_in_stores_rotate_and_refuse_bad_input() {
    let dir = scratch("c-keys-cred");
    let exe = build("keys_cred.c", &dir);
    let out = run(&exe, &[&dir]);
    assert!(
        out.contains("keys_cred: ") && out.contains(" 0 failed"),
        "{out}"
    );
}

/// Compiles the C program of section `heading` of the README or book
/// chapter at `readme` (relative to the workspace root), its first ```c block, and runs it
/// on a new directory store; returns its output and the store.
fn run_readme_c_example(readme: &str, heading: &str, name: &str) -> (String, PathBuf) {
    // A leading newline: a chapter's title is its first line.
    let text = "\n".to_string()
        + &std::fs::read_to_string(workspace_root().join(readme))
            .unwrap_or_else(|e| panic!("read {readme}: {e}"));
    let section = text
        .find(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("{readme} has no section `{heading}`"));
    let section_end = text[section + 1..]
        .find("\n## ")
        .map_or(text.len(), |n| section + 1 + n);
    let fence = text[section..section_end]
        .find("```c\n")
        .unwrap_or_else(|| panic!("section `{heading}` of {readme} has no ```c block"));
    let start = section + fence + "```c\n".len();
    let end = start + text[start..].find("```").expect("the C example ends");
    let dir = scratch(name);
    let source = dir.join(format!("{name}.c"));
    std::fs::write(&source, &text[start..end]).expect("write the example");
    let exe = build_path(&source, &dir);
    let store = dir.join("store");
    (run(&exe, &[&store]), store)
}

#[test]
fn readme_c_example_compiles_and_runs() {
    let (out, store) = run_readme_c_example("pki-ffi/README.md", "## C example", "c-readme");
    assert!(
        out.contains("rotated: rotated CA") && out.contains("wrote: 1"),
        "{out}"
    );
    assert!(store.join("signer/tls.crt").is_file());
}

#[test]
fn the_books_c_example_compiles_and_runs() {
    let (out, store) = run_readme_c_example(
        "docs/book/src/c-and-go.md",
        "# From C and Go",
        "c-book-chapter",
    );
    for expected in [
        "rotated: rotated CA",
        "leaf-reissued: ",
        "issued: ",
        "new-ca: ",
    ] {
        assert!(out.contains(expected), "no `{expected}` in:\n{out}");
    }
    assert!(store.join("signer/tls.crt").is_file());
    assert!(store.join("certs/web/tls.crt").is_file());
    assert!(store.join("targets/node-1").is_dir());
}

/// Every `pki_…`/`PKI_…` name `pki.h` declares outside its comments:
/// functions, types, enumerations and their values, constants.
fn header_names() -> std::collections::BTreeSet<String> {
    let header = std::fs::read_to_string(ffi_dir().join("include/pki.h")).expect("read pki.h");
    let mut code = String::with_capacity(header.len());
    let mut rest = header.as_str();
    while let Some(start) = rest.find("/*") {
        code.push_str(&rest[..start]);
        let end = rest[start..].find("*/").expect("a closed comment");
        rest = &rest[start + end + 2..];
    }
    code.push_str(rest);
    code.lines()
        .map(|l| l.split("//").next().unwrap_or_default())
        .flat_map(|l| l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
        .filter(|w| w.starts_with("pki_") || w.starts_with("PKI_"))
        .map(str::to_string)
        .collect()
}

/// The C names a document uses, with their line numbers: every word that
/// starts with `pki_` or `PKI_` (so `pki_x(` in C examples and `` `pki_x` ``
/// in the text alike), except Rust paths (`pki_rotate::…`) and words that
/// only contain one (`libpki_ffi.a`). A name followed by `*`
/// (`PKI_RESULT_SET_*`) is a prefix.
fn c_names(text: &str) -> Vec<(usize, String)> {
    let ident = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut names = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut at = 0;
        while let Some(found) = line[at..].find(['p', 'P']).map(|i| at + i) {
            let end = line[found..]
                .find(|c: char| !ident(c))
                .map_or(line.len(), |i| found + i);
            let word = &line[found..end];
            let after = &line[end..];
            let inside_a_word = line[..found].ends_with(ident);
            if !inside_a_word
                && (word.starts_with("pki_") || word.starts_with("PKI_"))
                && word.len() > 4
                && !after.starts_with("::")
            {
                let prefix = if after.starts_with('*') { "*" } else { "" };
                names.push((n + 1, format!("{word}{prefix}")));
            }
            at = end.max(found + 1);
        }
    }
    names
}

#[test]
fn readmes_name_only_c_functions_types_and_constants_the_header_declares() {
    // Not C names: the workspace's crates, environment variables of the
    // CLI (its hooks') and the tests, and the Go package's build tag.
    const NOT_C: &[&str] = &[
        "pki_debug",
        "pki_core",
        "pki_rotate",
        "pki_etcd",
        "pki_ffi",
        "PKI_ETCD_BIN",
        "PKI_KUBE_TOOLS",
        "PKI_KUBE_APISERVER",
        "PKI_KUBE_ETCD",
        "PKI_ETCD_CACERT",
        "PKI_ETCD_CERT",
        "PKI_ETCD_KEY",
        "PKI_ETCD_USER",
        "PKI_ETCD_PASSWORD_FILE",
        "PKI_UPDATE_DOCS",
        "PKI_CRED_NAME",
        "PKI_CRED_ROTATION",
        "PKI_CRED_ATTEMPT",
        "PKI_STORE_KEY_FILE",
        "PKI_PKCS11_MODULE",
        "PKI_PKCS11_PIN_FILE",
    ];
    let declared = header_names();
    assert!(declared.contains("pki_document_step") && declared.contains("PKI_RESULT_OK"));
    let mut stale = Vec::new();
    for readme in [
        "README.md",
        "pki-ffi/README.md",
        "docs/book/src/c-and-go.md",
    ] {
        let text = std::fs::read_to_string(workspace_root().join(readme))
            .unwrap_or_else(|e| panic!("read {readme}: {e}"));
        for (line, name) in c_names(&text) {
            let known = match name.strip_suffix('*') {
                Some(prefix) => declared.iter().any(|d| d.starts_with(prefix)),
                None => declared.contains(&name) || NOT_C.contains(&name.as_str()),
            };
            if !known {
                stale.push(format!("{readme}:{line}: `{name}`"));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "names that pki.h does not declare (rewrite them in terms of the current surface):\n{}",
        stale.join("\n")
    );
}
