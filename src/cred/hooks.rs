//! Running the mint and revoke hooks: `sh -c CMD` in its own process
//! group, with a timeout that kills the whole group.
//!
//! The mint hook's stdout is not a pipe: it is a 0600 file in the capture
//! directory, created (exclusively) before the hook starts, so what the hook
//! prints survives pki dying while it runs. pki holds an exclusive `flock`
//! on that file, shared with the hook through its stdout descriptor: a later
//! run that cannot take the lock knows the hook is still running and waits
//! for it (up to the timeout, then kills its process group, whose id is in
//! `R-A.pid`). A small wrapper shell writes the hook's exit status to
//! `R-A.status` when it ends. Per attempt (rotation R, attempt A):
//!
//! ```text
//! CAPTURE/NAME/R-A.out      the hook's stdout (0600)
//! CAPTURE/NAME/R-A.err      its stderr, for the failure message (0600)
//! CAPTURE/NAME/R-A.status   its exit status, written when it ends
//! CAPTURE/NAME/R-A.pid      its process group
//! ```
//!
//! These files are removed once the attempt's result is committed. A mint
//! that fails (non-zero exit, timeout, pki killed with it) may still have
//! minted: whatever it printed goes with the failure to the engine, which
//! keeps it as a stray credential to revoke.

use pki_rotate::credential::Secret;
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Runs `$1` with `sh -c` and records its exit status in `$2` when it ends.
const WRAPPER: &str = r#"sh -c "$1"; rc=$?; printf '%s\n' "$rc" > "$2"; exit "$rc""#;

/// How often a wait checks on a hook.
const POLL: Duration = Duration::from_millis(20);

/// What a hook run came to.
pub enum HookResult<T> {
    /// Exit 0 (for a mint: with what it printed).
    Done(T),
    /// Anything else.
    Failed {
        /// A one-line reason.
        message: String,
        /// For a mint: what it printed before it failed, if anything.
        captured: Option<Secret>,
    },
}

impl<T> HookResult<T> {
    fn failed(message: impl Into<String>) -> Self {
        HookResult::Failed {
            message: message.into(),
            captured: None,
        }
    }
}

/// A failed mint, with what it printed (trimmed) when it printed anything.
fn mint_failed(message: String, printed: &[u8]) -> HookResult<Secret> {
    let value = Secret::from_output(printed);
    HookResult::Failed {
        message,
        captured: (!value.is_empty()).then_some(value),
    }
}

fn io_err(path: &Path, e: std::io::Error) -> String {
    format!("{}: {e}", path.display())
}

/// Creates `dir` (and its parents) 0700 whatever the umask.
pub fn private_dir(dir: &Path) -> Result<(), String> {
    DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io_err(dir, e))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(|e| io_err(dir, e))
}

fn private_file(path: &Path, create_new: bool) -> std::io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true).write(true).mode(0o600);
    if create_new {
        options.create_new(true);
    } else {
        options.create(true).truncate(true);
    }
    let f = options.open(path)?;
    f.set_permissions(fs::Permissions::from_mode(0o600))?;
    Ok(f)
}

/// The capture files of one mint attempt.
pub struct Attempt {
    dir: PathBuf,
    stem: String,
}

impl Attempt {
    pub fn new(dir: &Path, rotation: u64, attempt: u32) -> Self {
        Attempt {
            dir: dir.to_path_buf(),
            stem: format!("{rotation}-{attempt}"),
        }
    }

    fn path(&self, ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", self.stem))
    }

    /// Removes this attempt's files (its result is committed).
    pub fn remove(&self) {
        for ext in ["out", "err", "status", "pid"] {
            let _ = fs::remove_file(self.path(ext));
        }
    }
}

/// The mint attempts (rotation, attempt) with capture files in `dir`, in
/// order. Other files are removed, but for dotfiles (the lock, the owner).
pub fn attempts(dir: &Path) -> Vec<(u64, u32)> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = std::collections::BTreeSet::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') {
            continue;
        }
        let parsed = name.split_once('.').and_then(|(stem, ext)| {
            let (r, a) = stem.split_once('-')?;
            ["out", "err", "status", "pid"]
                .contains(&ext)
                .then_some(())?;
            Some((r.parse::<u64>().ok()?, a.parse::<u32>().ok()?))
        });
        match parsed {
            Some(attempt) => {
                found.insert(attempt);
            }
            // Leftovers of a revoke, or nothing of ours.
            None => {
                let _ = fs::remove_file(entry.path());
            }
        }
    }
    found.into_iter().collect()
}

/// What the capture of an attempt whose result may not be committed holds:
/// None when its hook printed nothing (or never ran).
pub fn leftover(
    attempt: &Attempt,
    timeout: Duration,
) -> Result<Option<HookResult<Secret>>, String> {
    if !attempt.path("out").exists() {
        return Ok(None);
    }
    Ok(match adopt(attempt, timeout)? {
        HookResult::Failed { captured: None, .. } => None,
        result => Some(result),
    })
}

/// Runs the mint hook once for `attempt`, or, when an earlier run started
/// it, waits for that run and adopts what it captured.
pub fn mint(
    attempt: &Attempt,
    name: &str,
    command: &str,
    timeout: Duration,
) -> Result<HookResult<Secret>, String> {
    let out_path = attempt.path("out");
    match private_file(&out_path, true) {
        Ok(out) => run_mint(attempt, out, name, command, timeout),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => adopt(attempt, timeout),
        Err(e) => Err(io_err(&out_path, e)),
    }
}

fn run_mint(
    attempt: &Attempt,
    mut out: File,
    name: &str,
    command: &str,
    timeout: Duration,
) -> Result<HookResult<Secret>, String> {
    let out_path = attempt.path("out");
    // The lock lives as long as any descriptor of this open file: ours,
    // and the hook's stdout after pki dies.
    out.lock().map_err(|e| io_err(&out_path, e))?;
    // The capture file's existence says "this attempt may have run": make
    // it durable before the hook can mint anything.
    File::open(&attempt.dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| io_err(&attempt.dir, e))?;
    let err_path = attempt.path("err");
    let err = private_file(&err_path, false).map_err(|e| io_err(&err_path, e))?;
    let stdout = out.try_clone().map_err(|e| io_err(&out_path, e))?;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(WRAPPER)
        .arg("pki-cred-mint")
        .arg(command)
        .arg(attempt.path("status"))
        .env("PKI_CRED_NAME", name)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start the mint hook: {e}"))?;
    let pid_path = attempt.path("pid");
    if let Err(e) = fs::write(&pid_path, child.id().to_string()) {
        kill_group(child.id());
        let _ = child.wait();
        return Err(io_err(&pid_path, e));
    }
    let status = wait(&mut child, timeout);
    // Read in every case: a hook that failed or was killed may have
    // minted, and what it printed is the only way to revoke that.
    let mut printed = zeroize::Zeroizing::new(Vec::new());
    out.rewind()
        .and_then(|()| out.read_to_end(&mut printed))
        .map_err(|e| io_err(&out_path, e))?;
    Ok(match status {
        None => mint_failed(
            format!(
                "mint hook timed out after {} and was killed",
                human(timeout)
            ),
            &printed,
        ),
        Some(status) if !status.success() => {
            mint_failed(failure("mint", status, &attempt.path("err")), &printed)
        }
        Some(_) => printed_credential(&printed),
    })
}

fn printed_credential(printed: &[u8]) -> HookResult<Secret> {
    let value = Secret::from_output(printed);
    if value.is_empty() {
        HookResult::failed("mint hook exited 0 but printed nothing")
    } else {
        HookResult::Done(value)
    }
}

/// An earlier run (a pki that died) started this attempt: wait for its hook
/// to end, then take what it printed.
fn adopt(attempt: &Attempt, timeout: Duration) -> Result<HookResult<Secret>, String> {
    let out_path = attempt.path("out");
    let mut out = File::open(&out_path).map_err(|e| io_err(&out_path, e))?;
    let deadline = Instant::now() + timeout;
    let mut killed = false;
    loop {
        match out.try_lock() {
            Ok(()) => break,
            Err(fs::TryLockError::WouldBlock) => {}
            Err(fs::TryLockError::Error(e)) => return Err(io_err(&out_path, e)),
        }
        if Instant::now() >= deadline && !killed {
            // Still running after a whole timeout of ours: kill it as if we
            // had started it.
            if let Some(pgid) = fs::read_to_string(attempt.path("pid"))
                .ok()
                .and_then(|p| p.trim().parse::<u32>().ok())
            {
                kill_group(pgid);
            }
            killed = true;
        } else if killed && Instant::now() >= deadline + Duration::from_secs(5) {
            return Err(format!(
                "{}: the mint hook of an earlier run still holds it and could not be killed",
                out_path.display()
            ));
        }
        std::thread::sleep(POLL);
    }
    let mut printed = zeroize::Zeroizing::new(Vec::new());
    out.read_to_end(&mut printed)
        .map_err(|e| io_err(&out_path, e))?;
    if killed {
        return Ok(mint_failed(
            format!(
                "mint hook of an earlier run timed out after {} and was killed",
                human(timeout)
            ),
            &printed,
        ));
    }
    let status = fs::read_to_string(attempt.path("status"))
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    Ok(match status {
        Some(0) => printed_credential(&printed),
        Some(code) => mint_failed(
            with_stderr(
                format!("mint hook exited with status {code}"),
                &attempt.path("err"),
            ),
            &printed,
        ),
        // The hook ended without its status: pki and the wrapper were
        // killed together. What it printed is the credential, if anything.
        None if !Secret::from_output(&printed).is_empty() => printed_credential(&printed),
        None => HookResult::failed(
            "mint hook was interrupted before printing anything (pki stopped while it ran)",
        ),
    })
}

/// Runs the revoke hook with `value` on stdin (the old credential, or what
/// a failed mint printed: already gone is success either way).
pub fn revoke(
    capture: &Path,
    name: &str,
    command: &str,
    value: &Secret,
    timeout: Duration,
) -> Result<HookResult<()>, String> {
    let err_path = capture.join("revoke.err");
    let err = private_file(&err_path, false).map_err(|e| io_err(&err_path, e))?;
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(command)
        .env("PKI_CRED_NAME", name)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start the revoke hook: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let mut bytes = zeroize::Zeroizing::new(value.as_bytes().to_vec());
        bytes.push(b'\n');
        // A thread: a hook that never reads must not block the timeout.
        std::thread::spawn(move || {
            // A hook that exits without reading closes the pipe: not an error.
            let _ = stdin.write_all(&bytes);
        });
    }
    let status = wait(&mut child, timeout);
    let result = match status {
        None => HookResult::failed(format!(
            "revoke hook timed out after {} and was killed",
            human(timeout)
        )),
        Some(s) if s.success() => HookResult::Done(()),
        Some(s) => HookResult::failed(failure("revoke", s, &err_path)),
    };
    let _ = fs::remove_file(&err_path);
    Ok(result)
}

/// Waits for `child` up to `timeout`; on timeout kills its process group
/// and returns None.
fn wait(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(POLL),
            _ => {
                kill_group(child.id());
                let _ = child.wait();
                return None;
            }
        }
    }
}

fn kill_group(pgid: u32) {
    if let Some(pid) = i32::try_from(pgid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        // Already gone is fine: there is nothing left to stop.
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

fn failure(hook: &str, status: ExitStatus, err_path: &Path) -> String {
    let what = match (status.code(), status.signal()) {
        (Some(code), _) => format!("{hook} hook exited with status {code}"),
        (None, Some(sig)) => format!("{hook} hook was killed by signal {sig}"),
        _ => format!("{hook} hook failed"),
    };
    with_stderr(what, err_path)
}

/// Adds the last line the hook wrote on stderr.
fn with_stderr(what: String, err_path: &Path) -> String {
    let err = fs::read(err_path).unwrap_or_default();
    let text = String::from_utf8_lossy(&err);
    match text.lines().rev().map(str::trim).find(|l| !l.is_empty()) {
        Some(line) => format!("{what}: {line}"),
        None => what,
    }
}

fn human(d: Duration) -> String {
    if d.as_secs() == 0 {
        format!("{}ms", d.as_millis())
    } else {
        pki_core::policy::human(time::Duration::seconds(
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        ))
    }
}
