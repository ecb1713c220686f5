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
//!
//! What the mint hook prints is capped (`--max-output`, 64 KiB by
//! default): pki watches the capture file while the hook runs and kills
//! the hook's process group once it holds more than the cap. Over the cap
//! the mint failed, and the first cap bytes go with the failure, to be
//! revoked like any stray; the rest is kept beside the capture
//! (`R-A.spill`, see `spill.rs`) for that revocation, not dropped. When
//! pki kills a hook (timeout, over the cap)
//! it says so in `R-A.status` first (`timeout`, `over-cap`), so that a run
//! that adopts the attempt after a crash reads the same outcome. Only the
//! end of a hook's stderr is read (the last line becomes the message).

use pki_rotate::credential::Secret;
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// Runs `$1` with `sh -c` and records its exit status in `$2` when it ends.
/// The status file is written under umask 077 (in a subshell: the hook
/// keeps the caller's umask), so it is 0600 like the other capture files.
const WRAPPER: &str = r#"sh -c "$1"; rc=$?; (umask 077; printf '%s\n' "$rc" > "$2"); exit "$rc""#;

/// How often a wait checks on a hook, at most.
const POLL: Duration = Duration::from_millis(20);

/// The pauses between checks on a hook: 1 ms at first, doubling up to
/// [`POLL`], so a hook that is done at once (most are) is seen at once,
/// and one that runs for seconds costs few wake-ups.
struct Pauses(Duration);

impl Pauses {
    fn new() -> Self {
        Pauses(Duration::from_millis(1))
    }

    fn sleep(&mut self) {
        std::thread::sleep(self.0);
        self.0 = (self.0 * 2).min(POLL);
    }
}

/// How much of the end of a hook's stderr is read for its failure message.
const STDERR_TAIL: u64 = 4096;

/// What `R-A.status` holds when pki killed the hook after its timeout.
const KILLED_TIMEOUT: &str = "timeout";
/// What `R-A.status` holds when pki killed the hook for printing too much.
const KILLED_OVER_CAP: &str = "over-cap";

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

/// Makes `dir` 0700, creating it and each missing parent 0700 whatever the
/// umask (parents that exist keep their mode: they may be the user's).
pub fn private_dir(dir: &Path) -> Result<(), String> {
    let mut missing = Vec::new();
    let mut at = Some(dir);
    while let Some(path) = at.filter(|p| !p.as_os_str().is_empty()) {
        if fs::symlink_metadata(path).is_ok() {
            break;
        }
        missing.push(path);
        at = path.parent();
    }
    for path in missing.iter().rev() {
        match DirBuilder::new().mode(0o700).create(path) {
            Ok(()) => fs::set_permissions(path, fs::Permissions::from_mode(0o700))
                .map_err(|e| io_err(path, e))?,
            // Another run made it meanwhile.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(io_err(path, e)),
        }
    }
    fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).map_err(|e| io_err(dir, e))
}

/// Opens a file 0600 whatever the umask: a new one (`create_new`), or
/// created or truncated.
pub fn private_file(path: &Path, create_new: bool) -> std::io::Result<File> {
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
    rotation: u64,
    attempt: u32,
    stem: String,
}

impl Attempt {
    pub fn new(dir: &Path, rotation: u64, attempt: u32) -> Self {
        Attempt {
            dir: dir.to_path_buf(),
            rotation,
            attempt,
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
            // Kept for a stray's revocation (see spill.rs).
            None if name.ends_with(&format!(".{}", super::spill::EXT)) => {}
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
    cap: u64,
) -> Result<Option<HookResult<Secret>>, String> {
    if !attempt.path("out").exists() {
        return Ok(None);
    }
    Ok(match adopt(attempt, timeout, cap)? {
        HookResult::Failed { captured: None, .. } => None,
        result => Some(result),
    })
}

/// Runs the mint hook once for `attempt`, or, when an earlier run started
/// it, waits for that run and adopts what it captured. What the hook
/// prints beyond `cap` bytes makes it fail.
pub fn mint(
    attempt: &Attempt,
    name: &str,
    command: &str,
    timeout: Duration,
    cap: u64,
) -> Result<HookResult<Secret>, String> {
    let out_path = attempt.path("out");
    match private_file(&out_path, true) {
        Ok(out) => run_mint(attempt, out, name, command, timeout, cap),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => adopt(attempt, timeout, cap),
        Err(e) => Err(io_err(&out_path, e)),
    }
}

/// How a mint hook run ended.
enum Ended {
    Exited(ExitStatus),
    TimedOut,
    OverCap,
}

fn run_mint(
    attempt: &Attempt,
    mut out: File,
    name: &str,
    command: &str,
    timeout: Duration,
    cap: u64,
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
        .env("PKI_CRED_ROTATION", attempt.rotation.to_string())
        .env("PKI_CRED_ATTEMPT", attempt.attempt.to_string())
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(err)
        .process_group(0)
        .spawn()
        .map_err(|e| format!("cannot start the mint hook: {e}"))?;
    let pid_path = attempt.path("pid");
    let recorded = private_file(&pid_path, false)
        .and_then(|mut f| f.write_all(child.id().to_string().as_bytes()));
    if let Err(e) = recorded {
        kill_group(child.id());
        let _ = child.wait();
        return Err(io_err(&pid_path, e));
    }
    let ended = wait_mint(&mut child, attempt, &out, timeout, cap);
    // Read in every case: a hook that failed or was killed may have
    // minted, and what it printed is the only way to revoke that.
    let spill = attempt.path(super::spill::EXT);
    let printed = read_capped(&mut out, &out_path, cap, Some(&spill))?;
    super::sealed_capture::seal(&out_path, &printed)?;
    if ended_over_cap(&ended, &printed, cap) {
        return Ok(over_cap(&printed, cap));
    }
    Ok(match ended {
        Ended::TimedOut => mint_failed(
            format!(
                "mint hook timed out after {} and was killed",
                human(timeout)
            ),
            &printed,
        ),
        Ended::Exited(status) if !status.success() => {
            mint_failed(failure("mint", status, &attempt.path("err")), &printed)
        }
        Ended::Exited(_) | Ended::OverCap => printed_credential(&printed),
    })
}

fn ended_over_cap(ended: &Ended, printed: &[u8], cap: u64) -> bool {
    matches!(ended, Ended::OverCap) || printed.len() as u64 > cap
}

/// Waits for the mint hook up to `timeout`, and no longer than it keeps
/// its output within `cap`; a hook stopped for either is killed with its
/// process group, the reason written to `R-A.status` first.
fn wait_mint(
    child: &mut Child,
    attempt: &Attempt,
    out: &File,
    timeout: Duration,
    cap: u64,
) -> Ended {
    let deadline = Instant::now() + timeout;
    let mut pauses = Pauses::new();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Ended::Exited(status),
            Ok(None) => {}
            Err(_) => {
                kill_group(child.id());
                let _ = child.wait();
                return Ended::TimedOut;
            }
        }
        let (why, ended) = if out.metadata().is_ok_and(|m| m.len() > cap) {
            (KILLED_OVER_CAP, Ended::OverCap)
        } else if Instant::now() >= deadline {
            (KILLED_TIMEOUT, Ended::TimedOut)
        } else {
            pauses.sleep();
            continue;
        };
        let _ = fs::write(attempt.path("status"), format!("{why}\n"));
        kill_group(child.id());
        let _ = child.wait();
        return ended;
    }
}

/// Reads the capture from its start, at most `cap + 1` bytes (one more
/// than the cap says it was over), and cuts the file there: a hook that
/// printed far more leaves no more than that in the capture. What it
/// printed past the stray's value goes to `spill` first, when given.
fn read_capped(
    out: &mut File,
    path: &Path,
    cap: u64,
    spill: Option<&Path>,
) -> Result<zeroize::Zeroizing<Vec<u8>>, String> {
    let mut printed = zeroize::Zeroizing::new(Vec::new());
    out.rewind()
        .and_then(|()| out.take(cap.saturating_add(1)).read_to_end(&mut printed))
        .map_err(|e| io_err(path, e))?;
    if printed.len() as u64 > cap {
        // A capture already cut to the cap (by a run that died before it
        // was settled) had its spill written first: keep that one.
        let cut = spill.is_some_and(Path::exists)
            && out
                .metadata()
                .is_ok_and(|m| m.len() <= cap.saturating_add(1));
        if let Some(spill) = spill.filter(|_| !cut) {
            let cap = usize::try_from(cap).unwrap_or(usize::MAX);
            super::spill::write(out, super::spill::start(&printed, cap), spill)?;
        }
        // Best effort: only disk space is at stake, the decision is taken.
        if let Ok(f) = OpenOptions::new().write(true).open(path) {
            let _ = f.set_len(cap.saturating_add(1));
        }
    }
    Ok(printed)
}

/// Reads a capture an earlier run left: sealed (the hook had ended; it is
/// at most `cap + 1` bytes once opened, its spill written), or in clear as
/// the hook wrote it (what is over the cap goes to `spill`).
fn read_capture(
    out: &mut File,
    path: &Path,
    cap: u64,
    spill: &Path,
) -> Result<zeroize::Zeroizing<Vec<u8>>, String> {
    let mut magic = [0u8; 7];
    let sealed = out.rewind().is_ok()
        && out.read_exact(&mut magic).is_ok()
        && pki_rotate::sealing::is_sealed(&magic);
    if !sealed {
        return read_capped(out, path, cap, Some(spill));
    }
    let whole = cap
        .saturating_add(1)
        .saturating_add(super::sealed_capture::OVERHEAD);
    let bytes = read_capped(out, path, whole, None)?;
    super::sealed_capture::open(path, bytes)
}

/// A mint that printed more than `cap` bytes: failed, and what it printed
/// up to the cap is kept to be revoked (it may hold a credential).
fn over_cap(printed: &[u8], cap: u64) -> HookResult<Secret> {
    let kept = &printed[..printed
        .len()
        .min(usize::try_from(cap).unwrap_or(usize::MAX))];
    mint_failed(
        format!(
            "mint hook printed more than {} (--max-output) and was stopped; what it printed up to the cap is revoked",
            size(cap)
        ),
        kept,
    )
}

/// A small file of the capture directory (a process group, an exit
/// status), read as the bounded reader reads any: None when it cannot be.
fn read_small(path: &Path) -> Option<String> {
    let bytes = pki_rotate::input::read_file(path, 64).ok()?;
    String::from_utf8(bytes).ok()
}

/// A byte count as people write it.
fn size(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{} MiB", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{} KiB", b >> 10),
        b => format!("{b} bytes"),
    }
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
/// to end (killing it after `timeout`, or once it printed more than `cap`
/// bytes), then take what it printed.
fn adopt(attempt: &Attempt, timeout: Duration, cap: u64) -> Result<HookResult<Secret>, String> {
    let out_path = attempt.path("out");
    let mut out = pki_rotate::input::open_file(&out_path).map_err(|e| e.to_string())?;
    let deadline = Instant::now() + timeout;
    let mut killed: Option<(&str, Instant)> = None;
    loop {
        match out.try_lock() {
            Ok(()) => break,
            Err(fs::TryLockError::WouldBlock) => {}
            Err(fs::TryLockError::Error(e)) => return Err(io_err(&out_path, e)),
        }
        match killed {
            None => {
                // Still running after a whole timeout of ours, or printing
                // too much: kill it as if we had started it.
                let why = if out.metadata().is_ok_and(|m| m.len() > cap) {
                    Some(KILLED_OVER_CAP)
                } else if Instant::now() >= deadline {
                    Some(KILLED_TIMEOUT)
                } else {
                    None
                };
                if let Some(why) = why {
                    let _ = fs::write(attempt.path("status"), format!("{why}\n"));
                    if let Some(pgid) =
                        read_small(&attempt.path("pid")).and_then(|p| p.trim().parse::<u32>().ok())
                    {
                        kill_group(pgid);
                    }
                    killed = Some((why, Instant::now()));
                }
            }
            Some((_, at)) if at.elapsed() >= Duration::from_secs(5) => {
                return Err(format!(
                    "{}: the mint hook of an earlier run still holds it and could not be killed",
                    out_path.display()
                ));
            }
            Some(_) => {}
        }
        std::thread::sleep(POLL);
    }
    let printed = read_capture(&mut out, &out_path, cap, &attempt.path(super::spill::EXT))?;
    let status = read_small(&attempt.path("status")).unwrap_or_default();
    let status = status.trim();
    if printed.len() as u64 > cap || status == KILLED_OVER_CAP {
        return Ok(over_cap(&printed, cap));
    }
    if status == KILLED_TIMEOUT {
        return Ok(mint_failed(
            format!(
                "mint hook of an earlier run timed out after {} and was killed",
                human(timeout)
            ),
            &printed,
        ));
    }
    Ok(match status.parse::<i32>().ok() {
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

/// Runs the revoke hook with `input` on stdin (the old credential, or what
/// a failed mint printed, as [`super::spill::revoke_input`] makes it:
/// already gone is success either way).
pub fn revoke(
    capture: &Path,
    name: &str,
    command: &str,
    input: zeroize::Zeroizing<Vec<u8>>,
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
        // A thread: a hook that never reads must not block the timeout.
        std::thread::spawn(move || {
            // A hook that exits without reading closes the pipe: not an error.
            let _ = stdin.write_all(&input);
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
    let mut pauses = Pauses::new();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => pauses.sleep(),
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

/// Adds the last line the hook wrote on stderr (only the end of the file
/// is read: a hook may write a lot there). The engine stores it sanitized.
fn with_stderr(what: String, err_path: &Path) -> String {
    let mut err = Vec::new();
    if let Ok(mut f) = pki_rotate::input::open_file(err_path) {
        let len = f.metadata().map_or(0, |m| m.len());
        let _ = f
            .seek(std::io::SeekFrom::Start(len.saturating_sub(STDERR_TAIL)))
            .and_then(|_| f.take(STDERR_TAIL).read_to_end(&mut err));
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_over_the_cap_spills_the_rest_once_and_is_cut_to_the_cap() {
        let dir = tempfile::tempdir().unwrap();
        let (out_path, spill) = (dir.path().join("1-1.out"), dir.path().join("1-1.spill"));
        std::fs::write(&out_path, b"user:pass\nrest of the output\n").unwrap();
        let mut out = OpenOptions::new().read(true).open(&out_path).unwrap();
        // The value is the first 10 bytes trimmed: the spill starts after it.
        let printed = read_capped(&mut out, &out_path, 10, Some(&spill)).unwrap();
        assert_eq!(&printed[..], b"user:pass\nr");
        assert_eq!(std::fs::read(&out_path).unwrap(), b"user:pass\nr");
        assert_eq!(std::fs::read(&spill).unwrap(), b"\nrest of the output\n");
        // Read again after a crash: the capture is cut, its spill kept.
        let mut out = OpenOptions::new().read(true).open(&out_path).unwrap();
        read_capped(&mut out, &out_path, 10, Some(&spill)).unwrap();
        assert_eq!(std::fs::read(&spill).unwrap(), b"\nrest of the output\n");
    }
}
