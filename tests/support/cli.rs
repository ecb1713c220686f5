//! Running the `pki` binary from the CLI tests: its output, the one-line
//! refusal contract (exit 1, one line on stderr starting `pki: `, no
//! panic), and a snapshot of a store directory to prove a refusal wrote
//! nothing.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::OnceLock;

/// Variables every `pki` run of this test process gets (see
/// [`set_pki_env`]).
static PKI_ENV: OnceLock<Vec<(String, String)>> = OnceLock::new();

/// Gives every `pki` run of this test process `vars` (`KUBECONFIG`, the
/// store key): so that the helpers written for directory stores run
/// unchanged on a store URL that needs them. Set once, before the first
/// run; a test binary that sets it runs on one server for all its tests.
pub fn set_pki_env(vars: &[(&str, &str)]) {
    let vars = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    PKI_ENV
        .set(vars)
        .expect("set_pki_env is called once per test process");
}

/// `pki ARGS`, ready to run, with the variables of [`set_pki_env`].
pub fn command(args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pki"));
    command.args(args);
    if let Some(vars) = PKI_ENV.get() {
        command.envs(vars.iter().map(|(k, v)| (k, v)));
    }
    command
}

/// Runs `pki ARGS`.
pub fn pki(args: &[&str]) -> Output {
    command(args).output().expect("run pki")
}

/// Bytes as text, lossily.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// What a command printed on stdout.
pub fn stdout(o: &Output) -> String {
    text(&o.stdout)
}

/// What a command printed on stderr.
pub fn stderr(o: &Output) -> String {
    text(&o.stderr)
}

/// `o`, the output of `pki ARGS`, must be a success; its stdout.
pub fn succeeded(args: &[&str], o: Output) -> String {
    assert!(
        o.status.success(),
        "pki {args:?} failed ({:?}): {}{}",
        o.status.code(),
        text(&o.stdout),
        text(&o.stderr)
    );
    text(&o.stdout)
}

/// Runs `pki ARGS`, which must succeed; its stdout.
pub fn ok(args: &[&str]) -> String {
    succeeded(args, pki(args))
}

/// `o`, the output of `pki ARGS`, must have exited with `code` without a
/// panic; a refusal (exit 1) prints one line, `pki: …`, followed only by
/// its details, indented (a trust break: who breaks, until when). Its
/// stderr.
pub fn exited_with(code: i32, args: &[&str], o: &Output) -> String {
    let err = text(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(code),
        "pki {args:?}: {}{err}",
        text(&o.stdout)
    );
    if code == 1 {
        assert!(err.starts_with("pki: "), "{err}");
        assert!(
            err.trim_end().lines().skip(1).all(|l| l.starts_with("  ")),
            "not one line and its indented details: {err}"
        );
    }
    assert!(
        !err.contains("panicked") && !err.contains("internal error"),
        "{err}"
    );
    err
}

/// Runs `pki ARGS`, which must exit with `code` (see [`exited_with`]); its
/// stderr.
pub fn fails_with(code: i32, args: &[&str]) -> String {
    exited_with(code, args, &pki(args))
}

/// `o`, the output of `pki ARGS`, must be a refusal: exit 1 with one line
/// on stderr, without a panic; that line.
pub fn refused_output(args: &[&str], o: &Output) -> String {
    exited_with(1, args, o)
}

/// Runs `pki ARGS`, which must be refused (see [`refused_output`]); the
/// line it printed.
pub fn refused(args: &[&str]) -> String {
    fails_with(1, args)
}

/// Every file under `dir` (links as their targets; the lock file aside), to
/// prove a command wrote nothing.
pub fn tree(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = tree_with_lock(dir);
    out.remove(".lock");
    out
}

/// Every file under `dir` (links as their targets), the lock file
/// included: to prove a refused command did not even take the lock.
pub fn tree_with_lock(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            let rel = path.strip_prefix(base).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(rel, target.display().to_string().into_bytes());
            } else if meta.is_dir() {
                walk(base, &path, out);
            } else {
                out.insert(rel, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Every entry under `dir`, links not followed: relative path → kind and
/// mode (`d0700`, `-0600`, `l0777`).
pub fn modes(dir: &Path) -> BTreeMap<String, String> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, String>) {
        for e in std::fs::read_dir(dir).unwrap() {
            let path = e.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let kind = if meta.is_dir() {
                'd'
            } else if meta.file_type().is_symlink() {
                'l'
            } else {
                '-'
            };
            let rel = path.strip_prefix(base).unwrap().display().to_string();
            out.insert(
                rel,
                format!("{kind}{:04o}", meta.permissions().mode() & 0o7777),
            );
            if meta.is_dir() {
                walk(base, &path, out);
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// The mode of the file a path leads to (links followed).
pub fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// Everything under `dir`, links not followed: path → kind, mode, content.
pub fn snapshot(dir: &Path) -> BTreeMap<String, (String, Vec<u8>)> {
    modes(dir)
        .into_iter()
        .map(|(path, m)| {
            let full = dir.join(&path);
            let meta = std::fs::symlink_metadata(&full).unwrap();
            let content = match m.as_bytes()[0] {
                // Not a FIFO: reading one would wait for a writer.
                b'-' if meta.is_file() => std::fs::read(&full).unwrap(),
                b'l' => std::fs::read_link(&full)
                    .unwrap()
                    .into_os_string()
                    .into_encoded_bytes(),
                _ => Vec::new(),
            };
            (path, (m, content))
        })
        .collect()
}

/// A self-signed CA made by OpenSSL (P-256, valid from now for `days`):
/// its certificate and key files in `dir`.
pub fn openssl_root(dir: &Path, name: &str, days: u32) -> (String, String) {
    let crt = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    let out = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
        ])
        .args(["-subj", &format!("/CN={name}"), "-days", &days.to_string()])
        .args(["-addext", "basicConstraints=critical,CA:TRUE"])
        .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output()
        .expect("openssl is not installed or cannot run; install it with `apt-get install openssl` (Debian) or run scripts/test.sh");
    assert!(out.status.success(), "openssl req: {}", text(&out.stderr));
    (crt.display().to_string(), key.display().to_string())
}

/// A Python with PyJWT and `cryptography` (an independent JOSE
/// implementation), or a failure that says how to install them (`.ci/run`
/// does).
pub fn python_with_pyjwt() -> std::path::PathBuf {
    for candidate in ["python3", "/usr/bin/python3"] {
        let works = Command::new(candidate)
            .args(["-c", "import jwt, cryptography"])
            .output()
            .is_ok_and(|o| o.status.success());
        if works {
            return std::path::PathBuf::from(candidate);
        }
    }
    panic!(
        "PyJWT with cryptography is missing: install it with \
         `apt-get install python3-jwt python3-cryptography` (or `pip install pyjwt cryptography`)"
    );
}
