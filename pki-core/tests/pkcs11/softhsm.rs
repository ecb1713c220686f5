//! A SoftHSM2 token of the test's own, in a temporary directory.
//!
//! SoftHSM2 reads its configuration (where its tokens live) from
//! `SOFTHSM2_CONF` when the module is initialised, once per process; a
//! test cannot change its own environment without `unsafe`. So each token
//! test runs its body in a child process: [`in_token`] makes a directory
//! and a configuration, initialises a token there with `softhsm2-util`,
//! and runs this same test binary on that one test with `SOFTHSM2_CONF`
//! set; the child, seeing [`CHILD`], runs the body. The child must report
//! exactly one test passed, so a misspelled name cannot pass by running
//! nothing.
//!
//! Missing SoftHSM2 or OpenSC fails the test with one line saying what to
//! install: a token test never skips.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Set in the child: the directory of its token.
const CHILD: &str = "PKI_TEST_SOFTHSM2_DIR";
/// The token every test gets.
pub const LABEL: &str = "pki-test";
/// Its user PIN.
pub const PIN: &str = "1234";
/// Its security officer's PIN.
const SO_PIN: &str = "5678";

/// Where SoftHSM2's module may be (Debian's paths first).
const MODULES: &[&str] = &[
    "/usr/lib/softhsm/libsofthsm2.so",
    "/usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so",
    "/usr/local/lib/softhsm/libsofthsm2.so",
];

/// The token a test body runs against.
pub struct Token {
    /// SoftHSM2's PKCS#11 module.
    pub module: PathBuf,
    /// The configuration file (`SOFTHSM2_CONF`) for the tools the body runs.
    pub conf: PathBuf,
}

impl Token {
    /// A command with this token's configuration.
    pub fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program);
        command.env("SOFTHSM2_CONF", &self.conf);
        command
    }

    /// `pkcs11-tool --module M --token-label pki-test --login --pin 1234`
    /// with `args` after: OpenSC's reader of the token.
    pub fn pkcs11_tool(&self, args: &[&str]) -> String {
        String::from_utf8_lossy(&self.pkcs11_tool_bytes(args)).into_owned()
    }

    /// [`Token::pkcs11_tool`]'s output as bytes (an object it reads).
    pub fn pkcs11_tool_bytes(&self, args: &[&str]) -> Vec<u8> {
        let output = self
            .command("pkcs11-tool")
            .arg("--module")
            .arg(&self.module)
            .args(["--token-label", LABEL, "--login", "--pin", PIN])
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("{}: {e}", missing_opensc()));
        assert!(
            output.status.success(),
            "pkcs11-tool {args:?}: {}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        output.stdout
    }
}

fn missing_softhsm() -> String {
    "SoftHSM2 is not installed (no libsofthsm2.so or softhsm2-util): install it with `apt-get install softhsm2 opensc`, or run scripts/test.sh".into()
}

fn missing_opensc() -> String {
    "OpenSC's pkcs11-tool is not installed: install it with `apt-get install opensc`, or run scripts/test.sh".into()
}

/// SoftHSM2's module, or a one-line panic saying what to install.
pub fn module() -> PathBuf {
    MODULES
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{}", missing_softhsm()))
}

fn has(program: &str) -> bool {
    Command::new(program).arg("--help").output().is_ok()
}

/// Makes the token [`LABEL`] (PIN [`PIN`]) in `dir`: SoftHSM2's
/// configuration, its tokens directory and the token itself.
pub fn make_token(dir: &Path) -> Token {
    let module = module();
    assert!(has("softhsm2-util"), "{}", missing_softhsm());
    let tokens = dir.join("tokens");
    std::fs::create_dir(&tokens).expect("tokens directory");
    let conf = dir.join("softhsm2.conf");
    std::fs::write(
        &conf,
        format!(
            "directories.tokendir = {}\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n",
            tokens.display()
        ),
    )
    .expect("configuration");
    let token = Token { module, conf };
    let init = token
        .command("softhsm2-util")
        .args([
            "--init-token",
            "--free",
            "--label",
            LABEL,
            "--pin",
            PIN,
            "--so-pin",
            SO_PIN,
        ])
        .output()
        .expect("softhsm2-util runs");
    assert!(
        init.status.success(),
        "softhsm2-util --init-token: {}",
        String::from_utf8_lossy(&init.stderr)
    );
    token
}

/// Runs `body` against a fresh token: in a child process of this test
/// binary running only `test` (its exact name), with `SOFTHSM2_CONF`
/// naming a configuration in a temporary directory.
pub fn in_token(test: &str, body: impl FnOnce(&Token)) {
    if let Ok(dir) = std::env::var(CHILD) {
        let token = Token {
            module: module(),
            conf: Path::new(&dir).join("softhsm2.conf"),
        };
        body(&token);
        return;
    }
    assert!(has("pkcs11-tool"), "{}", missing_opensc());
    let dir = tempfile::tempdir().expect("temporary directory");
    let token = make_token(dir.path());
    let exe = std::env::current_exe().expect("the test binary");
    let output = token
        .command(exe.to_str().expect("a UTF-8 path"))
        .args([
            test,
            "--exact",
            "--nocapture",
            "--test-threads=1",
            "--include-ignored",
        ])
        .env(CHILD, dir.path())
        .output()
        .expect("the test binary runs again");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{test} against a SoftHSM2 token failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
    // What the body printed (shown with --nocapture).
    print!("{stdout}");
}
