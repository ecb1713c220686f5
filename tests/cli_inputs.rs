//! Every file pki reads is read by one bounded reader (issue 31, item 5):
//! a FIFO named where a file is expected is refused at once, with one
//! line, instead of hanging; a file far larger than any real input (a
//! sparse file of 3 GiB) is refused without being read into memory. Each
//! command and each `PKI_ETCD_*` variable that names a file is tried.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use support::cli::{ok, refused_output};
use support::store::{T0, store};

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// How long a refusal may take: it reads nothing, so it is immediate.
const AT_ONCE: Duration = Duration::from_secs(1);

/// The address space pki runs in here: enough for any command, far less
/// than a 3 GiB file read into memory, so such a read fails the test
/// instead of the machine.
const ADDRESS_SPACE_KIB: &str = "2097152";

/// One case: the arguments, and the environment variables set for it.
struct Case {
    args: Vec<String>,
    env: Vec<(&'static str, String)>,
}

fn case(args: &[&str]) -> Case {
    Case {
        args: args.iter().map(|s| s.to_string()).collect(),
        env: Vec::new(),
    }
}

fn with_env(args: &[&str], env: &[(&'static str, &str)]) -> Case {
    Case {
        env: env.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        ..case(args)
    }
}

/// Runs pki for `case` in a bounded address space, killed (and the test
/// failed) if it still runs after 10 s; its output and how long it took.
fn run(case: &Case) -> (Output, Duration) {
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "ulimit -v {ADDRESS_SPACE_KIB} && exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_pki"))
        .args(&case.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in &case.env {
        command.env(k, v);
    }
    let started = Instant::now();
    let mut child = command.spawn().unwrap();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > Duration::from_secs(10) {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("pki {:?} ({:?}) still ran after 10 s", case.args, case.env);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let took = started.elapsed();
    (child.wait_with_output().unwrap(), took)
}

/// Every command and variable that reads a file, with `input` in its place.
fn cases(input: &str, keys: &str, pem: &str, target: &str) -> Vec<Case> {
    let tls = "etcds://127.0.0.1:1/pki";
    vec![
        case(&["verify", "--bundle", input, "--chain", pem]),
        case(&["verify", "--bundle", pem, "--chain", input]),
        case(&["pin", input]),
        case(&["inspect", input]),
        case(&["fingerprint", "--bundle", input]),
        case(&["fingerprint", input]),
        case(&["fingerprint", target]),
        case(&["keys", "sign", keys, "--claims", input, "--now", T0]),
        case(&["keys", "verify", keys, "--token", input, "--now", T0]),
        with_env(&["status", tls], &[("PKI_ETCD_CACERT", input)]),
        with_env(
            &["status", tls],
            &[
                ("PKI_ETCD_CACERT", pem),
                ("PKI_ETCD_CERT", input),
                ("PKI_ETCD_KEY", pem),
            ],
        ),
        with_env(
            &["status", tls],
            &[
                ("PKI_ETCD_CACERT", pem),
                ("PKI_ETCD_CERT", pem),
                ("PKI_ETCD_KEY", input),
            ],
        ),
        with_env(
            &["status", "etcd://127.0.0.1:1/pki"],
            &[("PKI_ETCD_USER", "pki"), ("PKI_ETCD_PASSWORD_FILE", input)],
        ),
    ]
}

/// Runs every case with `input` (placed also inside the target directory
/// `target`) and checks each is refused at once with one line saying `why`.
fn refused_at_once(input: &Path, why: &[&str]) {
    let (tmp, dir) = store(&[]);
    let t = |p: &str| tmp.path().join(p).display().to_string();
    let (keys, pem) = (t("keys"), format!("{dir}/certs/web/tls.crt"));
    ok(&["keys", "init", &keys, "--now", T0]);
    let target = tmp.path().join("target");
    std::fs::create_dir_all(target.join("trust")).unwrap();
    std::fs::copy(&pem, target.join("trust/ca.crt")).unwrap();
    std::os::unix::fs::symlink(input, target.join("trust/other.crt")).unwrap();
    let input = input.display().to_string();
    for case in cases(&input, &keys, &pem, &target.display().to_string()) {
        let (out, took) = run(&case);
        let args: Vec<&str> = case.args.iter().map(String::as_str).collect();
        let err = refused_output(&args, &out);
        assert!(
            why.iter().any(|w| err.contains(w)),
            "{:?} {:?}: {err}",
            case.args,
            case.env
        );
        assert!(
            took < AT_ONCE,
            "{:?} {:?} took {took:?}",
            case.args,
            case.env
        );
    }
    // The same commands with good files succeed: each refusal was its input's.
    let token = ok(&["fingerprint", "--bundle", &pem]);
    assert!(!token.trim().is_empty());
    ok(&[
        "verify",
        "--bundle",
        &format!("{dir}/ca-bundle.crt"),
        "--chain",
        &pem,
        "--at",
        T0,
    ]);
}

#[test]
fn a_fifo_named_by_any_command_or_etcd_variable_is_refused_at_once_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let fifo = tmp.path().join("input.fifo");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    refused_at_once(&fifo, &["is a FIFO (named pipe), not a regular file"]);
}

#[test]
fn a_sparse_3_gib_file_named_by_any_command_or_etcd_variable_is_refused_without_reading_it() {
    let tmp = tempfile::tempdir().unwrap();
    let sparse = tmp.path().join("sparse.pem");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(3 << 30)
        .unwrap();
    refused_at_once(
        &sparse,
        &[
            "larger than the input limit",
            "hold more than the input limit",
        ],
    );
}

#[test]
fn fingerprint_of_a_directory_bounds_its_walk_and_refuses_a_link_loop() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("target");
    std::fs::create_dir_all(target.join("trust")).unwrap();
    std::fs::write(target.join("trust/ca.crt"), "x".repeat(4096)).unwrap();
    let path = target.display().to_string();
    let token = ok(&["fingerprint", &path]);
    // The same files, read again: the same token.
    assert_eq!(ok(&["fingerprint", &path]), token);
    // The files' total counts, not each file's size.
    std::fs::write(target.join("trust/other.crt"), "y".repeat(4096)).unwrap();
    let args = ["fingerprint", path.as_str(), "--max-input-size", "6K"];
    let err = refused_output(&args, &run(&case(&args)).0);
    assert!(
        err.contains("hold more than the input limit of 6144 bytes"),
        "{err}"
    );
    assert!(err.contains("--max-input-size"), "{err}");
    // A link back to a directory above would be walked forever.
    std::os::unix::fs::symlink(&target, target.join("trust/loop")).unwrap();
    let args = ["fingerprint", path.as_str()];
    let err = refused_output(&args, &run(&case(&args)).0);
    assert!(err.contains("a link back to a directory above it"), "{err}");
}

#[test]
fn a_fifo_in_place_of_a_capture_file_is_refused_at_once_with_one_line() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pki").display().to_string();
    ok(&[
        "cred",
        "init",
        &dir,
        "db",
        "--expire",
        "720h",
        "--grace",
        "1h",
        "--mint-cmd",
        "echo secret-1",
        "--revoke-cmd",
        "cat >/dev/null",
        "--now",
        T0,
    ]);
    let owner = tmp.path().join("pki/.cred-capture/db/.owner");
    std::fs::remove_file(&owner).unwrap();
    assert!(
        Command::new("mkfifo")
            .arg(&owner)
            .status()
            .unwrap()
            .success()
    );
    let args = ["cred", "reconcile", dir.as_str(), "--now", T0];
    let (out, took) = run(&case(&args));
    let err = refused_output(&args, &out);
    assert!(err.contains(".owner: is a FIFO (named pipe)"), "{err}");
    assert!(took < AT_ONCE, "took {took:?}");
}
