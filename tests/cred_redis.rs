//! `pki cred` against a real service: the hooks mint and revoke ACL users
//! of a Redis server started on 127.0.0.1 for each test, and every check of
//! "works" or "revoked" is a real `AUTH` against it. `ACL USERS` tells
//! whether any credential leaked.
//!
//! Times are pinned with `--now` from 2026-01-01 (T0): expiry 2h, grace 10m.
//! Some tests keep the credential in a real etcd instead of a directory.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../pki-etcd/tests/support/etcd.rs"]
mod etcd;

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const T0: &str = "2026-01-01T00:00:00Z";
const DUE: &str = "2026-01-01T02:00:00Z";
const IN_GRACE: &str = "2026-01-01T02:05:00Z";
const GRACE_END: &str = "2026-01-01T02:10:00Z";

fn require(tool: &str, package: &str) {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "{tool} is missing: install it with `apt-get install -y {package}` (the credential tests mint Redis ACL users)"
    );
}

struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    fn start(dir: &Path) -> Redis {
        require("redis-server", "redis-server");
        require("redis-cli", "redis-tools");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let redis = Redis { child, port };
        let deadline = Instant::now() + Duration::from_secs(20);
        while redis.cli(&["PING"]) != "PONG" {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        redis
    }

    fn cli(&self, args: &[&str]) -> String {
        let o = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// The ACL users the hooks created and not deleted.
    fn cred_users(&self) -> BTreeSet<String> {
        self.cli(&["ACL", "USERS"])
            .lines()
            .filter(|u| u.starts_with("cred-"))
            .map(str::to_string)
            .collect()
    }

    /// Whether `user:password` logs in.
    fn logs_in(&self, credential: &str) -> bool {
        let (user, password) = credential.split_once(':').expect("user:password");
        self.cli(&["AUTH", user, password]) == "OK"
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A store directory, hook scripts and a Redis server.
struct Setup {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    dir: String,
    redis: Redis,
}

impl Setup {
    fn new() -> Setup {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let redis = Redis::start(&root);
        let port = redis.port;
        let r = root.display();
        // Mint: a new ACL user with a random password, printed as
        // user:password. Knobs (files in the test directory) make it sleep,
        // fail or kill pki at chosen points.
        let mint = format!(
            r#"#!/bin/sh
set -e
echo "$PKI_CRED_NAME" >> {r}/mint.log
# Knobs that act after pki may be killed are read now: the test removes
# them as soon as pki is dead, while this hook may still be running.
fails_after=; [ -f {r}/mint-fails-after-minting ] && fails_after=1
[ -f {r}/mint-fails ] && {{ echo "cloud API said no" >&2; exit 3; }}
[ -f {r}/mint-fails-escapes ] && {{ printf 'boom \033[2J\033[31mred\rpki: cred db: fake line \302\233 \342\200\256x\n' >&2; exit 3; }}
[ -f {r}/mint-slow ] && sleep 0.5
[ -f {r}/mint-hangs ] && sleep 1000
[ -f {r}/mint-prints-nothing ] && exit 0
u="cred-$(od -An -N6 -tx1 /dev/urandom | tr -d ' \n')"
p="$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
out=$(redis-cli -h 127.0.0.1 -p {port} ACL SETUSER "$u" on ">$p" '~*' '+@all')
[ "$out" = OK ] || {{ echo "ACL SETUSER: $out" >&2; exit 1; }}
printf '%s:%s\n' "$u" "$p" >> {r}/minted.log
if [ -f {r}/mint-sleeps ]; then touch {r}/mint-sleeping; while [ -f {r}/mint-sleeps ]; do sleep 0.05; done; fi
[ -f {r}/mint-kills-pki-before-print ] && while [ ! -s {r}/pki.pid ]; do sleep 0.01; done && kill -9 "$(cat {r}/pki.pid)"
printf '%s:%s\n' "$u" "$p"
[ -f {r}/mint-floods ] && head -c "$(cat {r}/mint-floods)" /dev/zero | tr '\0' x
[ -f {r}/mint-kills-pki-after-print ] && kill -9 "$(cat {r}/pki.pid)"
[ -n "$fails_after" ] && {{ echo "lost the reply after creating the user" >&2; exit 5; }}
[ -f {r}/mint-hangs-after-minting ] && sleep 1001
exit 0
"#
        );
        // Revoke: delete the user named by the credential on stdin; a user
        // already gone counts as revoked (DELUSER answers 0).
        let revoke = format!(
            r#"#!/bin/sh
IFS= read -r cred || [ -n "$cred" ]
echo "$cred" >> {r}/revoke.log
[ -f {r}/revoke-fails ] && {{ echo "revocation API down" >&2; exit 4; }}
[ -f {r}/revoke-hangs ] && sleep 1000
out=$(redis-cli -h 127.0.0.1 -p {port} ACL DELUSER "${{cred%%:*}}")
case "$out" in 0|1) ;; *) echo "ACL DELUSER: $out" >&2; exit 1;; esac
[ -f {r}/revoke-kills-pki ] && kill -9 "$(cat {r}/pki.pid)"
exit 0
"#
        );
        for (name, text) in [("mint.sh", mint), ("revoke.sh", revoke)] {
            let path = root.join(name);
            std::fs::write(&path, text).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        let dir = root.join("store").display().to_string();
        Setup {
            _tmp: tmp,
            root,
            dir,
            redis,
        }
    }

    fn knob(&self, name: &str, on: bool) {
        let path = self.root.join(name);
        if on {
            std::fs::write(path, "").unwrap();
        } else {
            let _ = std::fs::remove_file(path);
        }
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_pki"));
        c.args(args);
        // Where captures of a store URL go: inside the test directory.
        c.env("XDG_STATE_HOME", self.root.join("state"));
        c
    }

    fn pki(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn init(&self, extra: &[&str]) -> Output {
        let mint = format!("{}/mint.sh", self.root.display());
        let revoke = format!("{}/revoke.sh", self.root.display());
        let mut args = vec![
            "cred",
            "init",
            &self.dir,
            "db",
            "--expire",
            "2h",
            "--grace",
            "10m",
            "--mint-cmd",
            &mint,
            "--revoke-cmd",
            &revoke,
            "--now",
            T0,
        ];
        args.extend_from_slice(extra);
        self.pki(&args)
    }

    fn reconcile(&self, now: &str, extra: &[&str]) -> Output {
        let mut args = vec!["cred", "reconcile", &self.dir, "--now", now];
        args.extend_from_slice(extra);
        self.pki(&args)
    }

    fn file(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(Path::new(&self.dir).join("creds/db").join(name))
            .ok()
            .map(|s| s.trim().to_string())
    }

    fn status(&self, now: &str) -> serde_json::Value {
        let o = self.pki(&["cred", "status", &self.dir, "--json", "--now", now]);
        ok(&o);
        serde_json::from_slice(&o.stdout).unwrap()
    }

    /// Every credential the mint hook created, in order.
    fn minted(&self) -> Vec<String> {
        std::fs::read_to_string(self.root.join("minted.log"))
            .map(|s| s.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }

    fn revoked(&self) -> Vec<String> {
        std::fs::read_to_string(self.root.join("revoke.log"))
            .map(|s| s.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// `pki cred status --check`'s exit status at `now`.
    fn check(&self, now: &str) -> i32 {
        let o = self.pki(&["cred", "status", &self.dir, "--check", "--now", now]);
        o.status.code().unwrap()
    }

    fn mint_runs(&self) -> usize {
        std::fs::read_to_string(self.root.join("mint.log"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    /// Every file and its bytes under the store's current generation.
    fn snapshot(&self) -> Vec<(String, Vec<u8>)> {
        let mut out = Vec::new();
        let base = Path::new(&self.dir).join("creds/db");
        for entry in std::fs::read_dir(&base).unwrap() {
            let p = entry.unwrap().path();
            out.push((p.display().to_string(), std::fs::read(&p).unwrap()));
        }
        out.sort();
        out
    }

    /// Makes the next store operation fail, or lets it pass again. The
    /// directory store refuses to read or write while its live generation
    /// is writable by others, so opening it up is a fault the next run hits
    /// before anything is written (a stray file in the way of the next
    /// generation no longer works: the store removes such leftovers).
    fn block_next_write(&self, on: bool) {
        use std::os::unix::fs::PermissionsExt;
        let link = std::fs::read_link(Path::new(&self.dir).join(".data")).unwrap();
        let live = Path::new(&self.dir).join(link);
        let mode = if on { 0o777 } else { 0o700 };
        std::fs::set_permissions(live, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn ok(o: &Output) {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        stderr(o)
    );
}

/// A hook failure recorded in the store: exit 0 (the command did its job),
/// the failure as exactly one line on stderr.
fn recorded(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(0),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        stderr(o)
    );
    let e = stderr(o);
    assert_eq!(
        e.trim_end().lines().count(),
        1,
        "one line: {e:?}\nstdout: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    assert!(e.starts_with("pki: cred db: "), "{e}");
    e
}

/// Hook failures recorded in the store: exit 0, one line on stderr each.
fn recorded_lines(o: &Output) -> Vec<String> {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(o));
    let lines: Vec<String> = stderr(o).lines().map(str::to_string).collect();
    assert!(
        lines.iter().all(|l| l.starts_with("pki: cred db: ")),
        "{lines:?}"
    );
    lines
}

/// Exit 1 with exactly one line on stderr.
fn refused(o: &Output) -> String {
    assert_eq!(
        o.status.code(),
        Some(1),
        "stdout: {}\nstderr: {}",
        String::from_utf8_lossy(&o.stdout),
        stderr(o)
    );
    let e = stderr(o);
    assert_eq!(e.trim_end().lines().count(), 1, "one line: {e:?}");
    e
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[test]
fn during_grace_old_and_new_log_in_and_after_it_only_the_new_one() {
    let s = Setup::new();
    ok(&s.init(&[]));
    let first = s.file("current").expect("init mints the first credential");
    assert!(s.redis.logs_in(&first));
    assert_eq!(s.file("old"), None);
    assert_eq!(
        std::fs::read_to_string(s.root.join("mint.log"))
            .unwrap()
            .trim(),
        "db",
        "PKI_CRED_NAME"
    );
    for f in ["current", "state.json"] {
        assert_eq!(
            mode(&Path::new(&s.dir).join("creds/db").join(f)),
            0o600,
            "{f}"
        );
    }
    assert_eq!(mode(&Path::new(&s.dir).join(".cred-capture")), 0o700);

    // Not due yet: nothing runs.
    ok(&s.reconcile("2026-01-01T01:00:00Z", &[]));
    assert_eq!(s.file("current").as_deref(), Some(first.as_str()));
    assert_eq!(s.mint_runs(), 1);

    // Due: the old one is kept, a new one minted; both log in.
    ok(&s.reconcile(DUE, &[]));
    let second = s.file("current").unwrap();
    assert_ne!(second, first);
    assert_eq!(s.file("old").as_deref(), Some(first.as_str()));
    assert_eq!(mode(&Path::new(&s.dir).join("creds/db/old")), 0o600);
    assert!(s.redis.logs_in(&first) && s.redis.logs_in(&second));
    let st = s.status(IN_GRACE);
    assert_eq!(st["credentials"][0]["state"], "grace");
    assert_eq!(st["credentials"][0]["old"]["until"], GRACE_END);

    ok(&s.reconcile(IN_GRACE, &[]));
    assert!(s.redis.logs_in(&first), "still in grace");

    // Grace over: the old one is revoked, only the new one works.
    ok(&s.reconcile(GRACE_END, &[]));
    assert!(!s.redis.logs_in(&first));
    assert!(s.redis.logs_in(&second));
    assert_eq!(s.file("old"), None);
    assert_eq!(s.redis.cred_users().len(), 1);
    assert_eq!(s.mint_runs(), 2);
    // Nothing of the credentials stays in the capture directory.
    let leftovers: Vec<_> = std::fs::read_dir(Path::new(&s.dir).join(".cred-capture/db"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with('.'))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    let st = s.status(GRACE_END);
    assert_eq!(st["schema_version"], 1);
    let c = &st["credentials"][0];
    assert_eq!(c["state"], "idle");
    assert_eq!(c["current"]["rotation"], 2);
    assert_eq!(c["history"][0]["revoked_at"], GRACE_END);
    assert!(
        !st.to_string().contains(&second),
        "status never prints a credential"
    );
}

/// Runs `pki cred reconcile` in the background with its pid where the
/// hooks can find it.
fn spawn_reconcile(s: &Setup, now: &str) -> Child {
    let child = s
        .command(&["cred", "reconcile", &s.dir, "--now", now])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::fs::write(s.root.join("pki.pid"), child.id().to_string()).unwrap();
    child
}

fn converge_and_check(s: &Setup, now: &str) {
    ok(&s.reconcile(now, &[]));
    ok(&s.reconcile(GRACE_END, &[]));
    let current = s.file("current").unwrap();
    assert!(s.redis.logs_in(&current));
    assert_eq!(s.file("old"), None);
    let users = s.redis.cred_users();
    assert_eq!(
        users.len(),
        1,
        "exactly one live credential, no leak: {users:?}"
    );
    assert!(users.contains(current.split(':').next().unwrap()));
}

#[test]
fn kill_9_while_the_mint_hook_sleeps_adopts_what_it_printed_without_minting_again() {
    let s = Setup::new();
    ok(&s.init(&[]));
    let first = s.file("current").unwrap();
    s.knob("mint-sleeps", true);
    let mut pki = spawn_reconcile(&s, DUE);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !s.root.join("mint-sleeping").exists() {
        assert!(Instant::now() < deadline, "the mint hook did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    pki.kill().unwrap(); // SIGKILL
    pki.wait().unwrap();
    // The hook lives on in its own process group; wake it while a new
    // pki waits for it on the capture file's lock.
    let waker = {
        let knob = s.root.join("mint-sleeps");
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            std::fs::remove_file(knob).unwrap();
        })
    };
    ok(&s.reconcile(DUE, &[]));
    waker.join().unwrap();
    assert_eq!(
        s.mint_runs(),
        2,
        "the mint hook never ran twice for one rotation"
    );
    let second = s.file("current").unwrap();
    assert_ne!(second, first);
    assert!(s.redis.logs_in(&first) && s.redis.logs_in(&second));
    converge_and_check(&s, DUE);
}

#[test]
fn kill_9_at_each_hook_point_resumes_and_converges_without_a_leak() {
    for knob in [
        "mint-kills-pki-before-print",
        "mint-kills-pki-after-print",
        "revoke-kills-pki",
    ] {
        let s = Setup::new();
        ok(&s.init(&[]));
        if knob.starts_with("mint") {
            s.knob(knob, true);
            let mut pki = spawn_reconcile(&s, DUE);
            let status = pki.wait().unwrap();
            assert_eq!(status.code(), None, "{knob}: pki was killed");
            s.knob(knob, false);
            ok(&s.reconcile(DUE, &[]));
            assert_eq!(s.mint_runs(), 2, "{knob}: adopted, not minted again");
            assert_eq!(s.redis.cred_users().len(), 2, "{knob}");
        } else {
            ok(&s.reconcile(DUE, &[]));
            s.knob(knob, true);
            let mut pki = spawn_reconcile(&s, GRACE_END);
            assert_eq!(pki.wait().unwrap().code(), None, "{knob}: pki was killed");
            s.knob(knob, false);
            // The old one is gone from Redis but still recorded: revoking
            // it again must succeed.
            assert!(s.file("old").is_some());
        }
        converge_and_check(&s, DUE);
    }
}

#[test]
fn a_failed_store_write_at_every_step_changes_nothing_and_the_next_run_converges() {
    let s = Setup::new();
    ok(&s.init(&[]));
    // A rotation is four committed steps: keep old, start mint, record the
    // mint, record the revocation. Fail each one in turn, then let it pass.
    let mut steps_done = 0;
    let mut now = DUE;
    while steps_done < 4 {
        if steps_done == 3 {
            now = GRACE_END;
        }
        let before = s.snapshot();
        s.block_next_write(true);
        let o = s.reconcile(now, &["--max-steps", "1"]);
        s.block_next_write(false);
        let e = refused(&o);
        assert!(e.contains(".gen-"), "{e}");
        assert_eq!(
            s.snapshot(),
            before,
            "step {steps_done}: the store is unchanged"
        );
        ok(&s.reconcile(now, &["--max-steps", "1"]));
        assert_ne!(s.snapshot(), before, "step {steps_done} committed");
        steps_done += 1;
        assert!(s.mint_runs() <= 2, "never a second mint for rotation 2");
        assert!(
            s.redis.cred_users().len() <= 2,
            "never more than old and new"
        );
    }
    assert_eq!(s.mint_runs(), 2);
    converge_and_check(&s, GRACE_END);
}

#[test]
fn a_hanging_or_failing_hook_is_killed_recorded_retried_with_backoff_and_reported() {
    let s = Setup::new();
    ok(&s.init(&[]));
    let first = s.file("current").unwrap();

    assert_eq!(s.check(T0), 0, "nothing due");
    assert_eq!(s.check(DUE), 3, "a step is due");
    s.knob("mint-hangs", true);
    let started = Instant::now();
    let o = s.reconcile(DUE, &["--hook-timeout", "1s"]);
    let e = recorded(&o);
    assert!(started.elapsed() < Duration::from_secs(30));
    assert!(e.contains("timed out after 1s"), "{e}");
    assert!(e.contains("retry after 2026-01-01T02:00:30Z"), "{e}");
    let st = s.status(DUE);
    let c = &st["credentials"][0];
    assert_eq!(c["state"], "failing");
    assert_eq!(c["failure"]["action"], "mint");
    assert_eq!(c["failure"]["failures"], 1);
    assert_eq!(c["next_at"], "2026-01-01T02:00:30Z");
    assert_eq!(c["health"], "failing");
    assert_eq!(s.check(DUE), 4, "a hook is failing");
    // The hook's process group was killed: no sleeping hook is left.
    let ps = Command::new("pgrep")
        .args(["-f", "sleep 1000"])
        .output()
        .unwrap();
    assert!(ps.stdout.is_empty(), "hook left running");

    // Within the backoff nothing runs.
    s.knob("mint-hangs", false);
    s.knob("mint-fails", true);
    ok(&s.reconcile("2026-01-01T02:00:10Z", &[]));
    assert_eq!(s.mint_runs(), 2);
    // Then it retries; a failing hook doubles the wait and says why.
    let e = recorded(&s.reconcile("2026-01-01T02:00:30Z", &[]));
    assert!(e.contains("exited with status 3: cloud API said no"), "{e}");
    assert!(e.contains("retry after 2026-01-01T02:01:30Z"), "{e}");
    let text = String::from_utf8(
        s.pki(&["cred", "status", &s.dir, "--now", "2026-01-01T02:00:31Z"])
            .stdout,
    )
    .unwrap();
    assert!(
        text.contains("cloud API said no") && text.contains("2 in a row"),
        "{text}"
    );
    assert_eq!(
        s.file("current").as_deref(),
        Some(first.as_str()),
        "current untouched"
    );

    // A hook that prints nothing is a failure too, and changes no credential.
    s.knob("mint-fails", false);
    s.knob("mint-prints-nothing", true);
    let e = recorded(&s.reconcile("2026-01-01T02:01:30Z", &[]));
    assert!(e.contains("printed nothing"), "{e}");
    assert_eq!(s.file("current").as_deref(), Some(first.as_str()));
    s.knob("mint-prints-nothing", false);
    ok(&s.reconcile("2026-01-01T02:03:30Z", &[]));
    let second = s.file("current").unwrap();
    assert_ne!(second, first);

    // A failing revoke keeps the old credential and retries.
    s.knob("revoke-fails", true);
    let e = recorded(&s.reconcile("2026-01-01T02:13:30Z", &[]));
    assert!(
        e.contains("revoke") && e.contains("revocation API down"),
        "{e}"
    );
    assert!(s.redis.logs_in(&first), "not revoked");
    assert_eq!(s.file("old").as_deref(), Some(first.as_str()));
    s.knob("revoke-fails", false);
    s.knob("revoke-hangs", true);
    let e = recorded(&s.reconcile("2026-01-01T02:14:00Z", &["--hook-timeout", "1s"]));
    assert!(e.contains("revoke hook timed out"), "{e}");
    s.knob("revoke-hangs", false);
    let o = s.reconcile("2026-01-01T02:20:00Z", &[]);
    ok(&o);
    assert_eq!(stderr(&o), "", "a success reports no failure");
    assert!(!s.redis.logs_in(&first));
    assert_eq!(s.redis.cred_users().len(), 1);
    assert_eq!(s.check("2026-01-01T02:20:00Z"), 0);
}

#[test]
fn bad_input_is_one_line_exit_1_and_changes_nothing() {
    let s = Setup::new();
    ok(&s.init(&[]));
    let before = s.snapshot();
    let mint = format!("{}/mint.sh", s.root.display());
    let init = |name: &str, expire: &str, grace: &str| {
        s.pki(&[
            "cred",
            "init",
            &s.dir,
            name,
            "--expire",
            expire,
            "--grace",
            grace,
            "--mint-cmd",
            &mint,
            "--revoke-cmd",
            "true",
            "--now",
            T0,
        ])
    };
    let e = refused(&s.reconcile(DUE, &["nosuch"]));
    assert!(e.contains("no credential \"nosuch\""), "{e}");
    // A malformed DUR is bad usage (exit 2), as everywhere in the CLI.
    for (expire, grace, flag) in [("ten days", "10m", "--expire"), ("2h", "5 min", "--grace")] {
        let o = init("other", expire, grace);
        assert_eq!(o.status.code(), Some(2), "{flag}: {}", stderr(&o));
        assert!(stderr(&o).contains(flag), "{flag}: {}", stderr(&o));
    }
    for (name, expire, grace, expect) in [
        ("other", "2h", "2h", "must be shorter than the expiry"),
        ("Bad/Name", "2h", "10m", "invalid credential name"),
        ("db", "2h", "10m", "already exists"),
    ] {
        let e = refused(&init(name, expire, grace));
        assert!(e.contains(expect), "{expect}: {e}");
    }
    assert!(!Path::new(&s.dir).join("creds/other").exists());
    let e = refused(&s.pki(&[
        "cred",
        "reconcile",
        &s.root.join("nothing-here").display().to_string(),
    ]));
    assert!(e.contains("nothing-here"), "{e}");
    assert_eq!(s.snapshot(), before);
    assert_eq!(s.mint_runs(), 1);

    // A first mint that fails: the credential is recorded (exit 0), the
    // failure is one line on stderr, and there is no current credential
    // until a reconcile succeeds.
    s.knob("mint-prints-nothing", true);
    let o = init("empty", "2h", "10m");
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let e = stderr(&o);
    assert_eq!(e.trim_end().lines().count(), 1, "{e}");
    assert!(
        e.contains("cred empty: mint") && e.contains("printed nothing"),
        "{e}"
    );
    assert!(Path::new(&s.dir).join("creds/empty/state.json").exists());
    assert!(!Path::new(&s.dir).join("creds/empty/current").exists());
    assert_eq!(s.snapshot(), before, "the other credential is untouched");
    s.knob("mint-prints-nothing", false);
    ok(&s.reconcile("2026-01-01T00:00:30Z", &["empty"]));
    assert!(Path::new(&s.dir).join("creds/empty/current").exists());
}

/// The ACL user of a `user:password` credential.
fn user(credential: &str) -> &str {
    credential.split(':').next().unwrap()
}

#[test]
fn a_mint_that_fails_or_hangs_after_minting_has_its_credential_revoked_before_the_retry() {
    for knob in ["mint-fails-after-minting", "mint-hangs-after-minting"] {
        let s = Setup::new();
        ok(&s.init(&[]));
        let first = s.file("current").unwrap();
        s.knob(knob, true);
        // The stray's revocation fails at first: it stays recorded, and
        // no new mint runs while it may be live.
        s.knob("revoke-fails", true);
        let o = s.reconcile(DUE, &["--hook-timeout", "1s"]);
        let lines = recorded_lines(&o);
        assert_eq!(lines.len(), 2, "{knob}: {lines:?}");
        assert!(
            lines[0].contains("mint of rotation 2 failed"),
            "{knob}: {lines:?}"
        );
        assert!(
            lines[1].contains("revoke of the stray credential of rotation 2 failed"),
            "{knob}: {lines:?}"
        );
        s.knob(knob, false);
        let stray = s.minted()[1].clone();
        assert!(s.redis.logs_in(&stray), "{knob}: the hook did mint");
        let st = s.status(DUE);
        let c = &st["credentials"][0];
        assert_eq!(c["strays"][0]["rotation"], 2, "{knob}: {st}");
        assert_eq!(c["strays"][0]["failure"]["action"], "revoke-stray");
        assert!(!st.to_string().contains(user(&stray)), "never printed");
        let stray_file = Path::new(&s.dir).join("creds/db/stray-2-1");
        assert_eq!(std::fs::read_to_string(&stray_file).unwrap(), stray);
        assert_eq!(mode(&stray_file), 0o600);
        assert_eq!(s.file("current").as_deref(), Some(first.as_str()));
        // Past both backoffs (30s): the stray's revocation is retried and
        // fails again; still no mint while it may be live.
        let lines = recorded_lines(&s.reconcile("2026-01-01T02:00:31Z", &[]));
        assert_eq!(lines.len(), 1, "{knob}: {lines:?}");
        assert!(lines[0].contains("(2 in a row)"), "{knob}: {lines:?}");
        assert_eq!(
            s.mint_runs(),
            2,
            "{knob}: no mint while a stray may be live"
        );
        assert_eq!(s.check("2026-01-01T02:00:45Z"), 4);
        // The revocation works again: the stray is revoked, then the mint
        // retried, in one run.
        s.knob("revoke-fails", false);
        let o = s.reconcile("2026-01-01T02:01:31Z", &[]);
        ok(&o);
        assert_eq!(stderr(&o), "");
        assert!(!s.redis.logs_in(&stray), "{knob}: the stray is revoked");
        assert!(s.revoked().contains(&stray));
        assert!(!stray_file.exists());
        let second = s.file("current").unwrap();
        assert_ne!(second, first);
        assert_ne!(second, stray);
        // During the grace the old and the new credential log in, and only
        // they exist.
        assert!(s.redis.logs_in(&first) && s.redis.logs_in(&second));
        let live: BTreeSet<String> = [user(&first), user(&second)].map(str::to_string).into();
        assert_eq!(s.redis.cred_users(), live, "{knob}");
        ok(&s.reconcile("2026-01-01T02:12:00Z", &[]));
        assert!(!s.redis.logs_in(&first) && !s.redis.logs_in(&stray));
        assert!(s.redis.logs_in(&second));
        assert_eq!(s.redis.cred_users().len(), 1, "{knob}: nothing leaked");
        assert_eq!(s.check("2026-01-01T02:12:00Z"), 0);
    }
}

#[test]
fn kill_9_after_a_failed_mint_printed_adopts_the_failure_and_revokes_what_it_printed() {
    let s = Setup::new();
    ok(&s.init(&[]));
    let first = s.file("current").unwrap();
    // The hook prints, pki dies, then the hook fails: the next run adopts
    // the failure with what it printed.
    s.knob("mint-kills-pki-after-print", true);
    s.knob("mint-fails-after-minting", true);
    let mut pki = spawn_reconcile(&s, DUE);
    assert_eq!(pki.wait().unwrap().code(), None, "pki was killed");
    s.knob("mint-kills-pki-after-print", false);
    s.knob("mint-fails-after-minting", false);
    let stray = s.minted()[1].clone();
    let e = recorded(&s.reconcile(DUE, &[]));
    assert!(e.contains("exited with status 5"), "{e}");
    assert_eq!(s.mint_runs(), 2, "adopted, not minted again");
    assert!(!s.redis.logs_in(&stray), "revoked in the same run");
    assert!(s.redis.logs_in(&first));
    ok(&s.reconcile("2026-01-01T02:01:00Z", &[]));
    assert_eq!(s.mint_runs(), 3);
    ok(&s.reconcile("2026-01-01T02:12:00Z", &[]));
    let current = s.file("current").unwrap();
    assert!(s.redis.logs_in(&current));
    let users = s.redis.cred_users();
    assert_eq!(users, BTreeSet::from([user(&current).to_string()]));
}

#[test]
fn hook_text_with_terminal_escapes_is_stored_and_printed_escaped_and_bad_names_refused() {
    let s = Setup::new();
    ok(&s.init(&[]));
    s.knob("mint-fails-escapes", true);
    let o = s.reconcile(DUE, &[]);
    let e = recorded(&o);
    let clean = |text: &str| {
        !text
            .chars()
            .any(|c| c.is_control() && c != '\n' || c == '\u{202e}')
    };
    assert!(clean(&e), "{e:?}");
    assert!(e.contains("\\u{1b}[2J"), "{e}");
    let state = std::fs::read_to_string(Path::new(&s.dir).join("creds/db/state.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&state).unwrap();
    let message = doc["failure"]["message"].as_str().unwrap();
    assert!(clean(message), "stored: {message:?}");
    for args in [
        vec!["cred", "status", s.dir.as_str(), "--now", DUE],
        vec!["cred", "status", s.dir.as_str(), "--json", "--now", DUE],
    ] {
        let o = s.pki(&args);
        ok(&o);
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(clean(&text), "{args:?}: {text:?}");
        assert!(!text.contains("\\u001b"), "{args:?}: {text}");
        assert_eq!(
            text.lines().filter(|l| l.contains("fake line")).count(),
            1,
            "{text}"
        );
    }
    // Names with control characters never get that far.
    let mint = format!("{}/mint.sh", s.root.display());
    for name in ["db\u{1b}[2J", "db\nfake", "db\r"] {
        let e = refused(&s.pki(&[
            "cred",
            "init",
            &s.dir,
            name,
            "--expire",
            "2h",
            "--grace",
            "10m",
            "--mint-cmd",
            &mint,
            "--revoke-cmd",
            "true",
            "--now",
            T0,
        ]));
        assert!(clean(&e) && e.contains("invalid credential name"), "{e:?}");
        let e = refused(&s.reconcile(DUE, &[name]));
        assert!(clean(&e), "{e:?}");
    }
}

// ---- Two reconcilers, late reports ----

/// The credential document as the store holds it, read without the CLI.
fn load_from_etcd(server: &etcd::Etcd, prefix: &str) -> pki_rotate::CredentialState {
    let driver = pki_rotate::Driver::new(server.store(prefix));
    driver
        .load::<pki_rotate::CredentialEngine>("creds/db")
        .unwrap()
        .0
}

/// The ACL users of the credentials the document records: current, old
/// and strays to revoke.
fn recorded_users(doc: &pki_rotate::CredentialState) -> BTreeSet<String> {
    let value = |v: &pki_rotate::CredentialSecret| {
        let text = String::from_utf8_lossy(v.as_bytes()).into_owned();
        user(text.lines().next().unwrap_or_default()).to_string()
    };
    doc.current
        .iter()
        .chain(doc.old.iter())
        .map(|c| value(&c.value))
        .chain(doc.strays.iter().map(|s| value(&s.value)))
        .collect()
}

/// What the hooks did, checked against Redis and the document: every
/// credential minted is revoked or live, never both; every live one is
/// recorded; at most two are live.
fn check_no_leak(s: &Setup, doc: &pki_rotate::CredentialState, context: &str) {
    let minted: BTreeSet<String> = s.minted().iter().map(|c| user(c).to_string()).collect();
    let revoked: BTreeSet<String> = s.revoked().iter().map(|c| user(c).to_string()).collect();
    let live = s.redis.cred_users();
    assert_eq!(
        minted.len(),
        s.minted().len(),
        "{context}: a credential minted twice?"
    );
    assert_eq!(
        minted,
        revoked.union(&live).cloned().collect::<BTreeSet<_>>(),
        "{context}: minted = revoked + live"
    );
    assert!(revoked.is_disjoint(&live), "{context}: revoked yet live");
    assert!(live.len() <= 2, "{context}: {live:?}");
    let recorded = recorded_users(doc);
    assert!(
        live.is_subset(&recorded),
        "{context}: live {live:?}, recorded {recorded:?}"
    );
}

/// Runs `pki cred reconcile URL db --now NOW` for each URL at once.
fn race(s: &Setup, urls: &[&str], now: &str) -> Vec<Output> {
    let children: Vec<Child> = urls
        .iter()
        .map(|url| {
            s.command(&["cred", "reconcile", url, "db", "--now", now])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect()
}

#[test]
fn two_reconcilers_on_one_etcd_store_under_two_url_spellings_mint_once_and_leak_nothing() {
    let server = etcd::Etcd::start();
    let s = Setup::new();
    let ip = server.url("p");
    let name = ip.replace("127.0.0.1", "localhost");
    let mint = format!("{}/mint.sh", s.root.display());
    let revoke = format!("{}/revoke.sh", s.root.display());
    ok(&s.pki(&[
        "cred",
        "init",
        &ip,
        "db",
        "--expire",
        "2h",
        "--grace",
        "10m",
        "--mint-cmd",
        &mint,
        "--revoke-cmd",
        &revoke,
        "--now",
        T0,
    ]));
    // Both hooks would run at once: each mint takes half a second.
    s.knob("mint-slow", true);
    let mut owners_told_to_wait = 0;
    for round in 1..=3i64 {
        let due = format!("2026-01-01T{:02}:00:00Z", 2 * round);
        let grace_end = format!("2026-01-01T{:02}:10:00Z", 2 * round);
        let urls = if round % 2 == 0 {
            [ip.as_str(), name.as_str()]
        } else {
            [name.as_str(), ip.as_str()]
        };
        for o in race(&s, &urls, &due) {
            ok(&o);
            let out = String::from_utf8_lossy(&o.stdout);
            owners_told_to_wait += usize::from(out.contains("minted by another reconciler"));
        }
        let doc = load_from_etcd(&server, "p");
        check_no_leak(&s, &doc, &format!("round {round}, in the grace"));
        assert_eq!(
            s.mint_runs(),
            1 + round as usize,
            "round {round}: one mint per rotation, whoever won"
        );
        assert_eq!(doc.current.as_ref().unwrap().rotation, 1 + round as u64);
        // Both at the end of the grace: both may revoke (idempotent).
        for o in race(&s, &urls, &grace_end) {
            ok(&o);
        }
        let doc = load_from_etcd(&server, "p");
        check_no_leak(&s, &doc, &format!("round {round}, after the grace"));
        assert!(doc.old.is_none() && doc.strays.is_empty() && doc.mint.is_none());
        assert_eq!(s.redis.cred_users().len(), 1, "round {round}");
    }
    // At least once the loser saw the winner's recorded mint and left it
    // alone (the hooks take long enough for the race to be real).
    assert!(owners_told_to_wait >= 1, "the race never happened");
}

#[test]
fn a_capture_whose_report_never_landed_is_recorded_and_revoked_not_deleted() {
    let s = Setup::new();
    ok(&s.init(&[]));
    // A credential the mint hook made for attempt 1/1, whose report lost
    // to another one: it is only in the capture file.
    let lost = "cred-lostreport:0123456789abcdef";
    assert_eq!(
        s.redis.cli(&[
            "ACL",
            "SETUSER",
            user(lost),
            "on",
            ">0123456789abcdef",
            "~*",
            "+@all"
        ]),
        "OK"
    );
    assert!(s.redis.logs_in(lost));
    let capture = Path::new(&s.dir).join(".cred-capture/db");
    std::fs::write(capture.join("1-1.out"), format!("{lost}\n")).unwrap();
    std::fs::write(capture.join("1-1.status"), "0\n").unwrap();
    let o = s.reconcile("2026-01-01T01:00:00Z", &[]);
    ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("reported after the document moved on") && out.contains("revoked the stray"),
        "{out}"
    );
    assert!(!s.redis.logs_in(lost), "revoked, not forgotten");
    assert!(s.revoked().iter().any(|r| r == lost));
    assert!(!capture.join("1-1.out").exists());
    assert_eq!(s.redis.cred_users().len(), 1);
    assert_eq!(s.mint_runs(), 1);
}

#[test]
fn the_capture_directory_lock_and_owner_are_private_whatever_the_umask() {
    // A store URL: its captures live under XDG_STATE_HOME, made by pki
    // alone (a directory store refuses to work under umask 000 at all).
    let server = etcd::Etcd::start();
    let s = Setup::new();
    let url = server.url("p");
    let mint = format!("{}/mint.sh", s.root.display());
    let revoke = format!("{}/revoke.sh", s.root.display());
    let state = s.root.join("state");
    let o = Command::new("sh")
        .arg("-c")
        .arg(r#"umask 000; exec "$@""#)
        .arg("sh")
        .arg(env!("CARGO_BIN_EXE_pki"))
        .args([
            "cred",
            "init",
            &url,
            "db",
            "--expire",
            "2h",
            "--grace",
            "10m",
            "--mint-cmd",
            &mint,
            "--revoke-cmd",
            &revoke,
            "--now",
            T0,
        ])
        .env("XDG_STATE_HOME", &state)
        .output()
        .unwrap();
    ok(&o);
    let base = state.join("pki/cred-capture");
    let urls: Vec<_> = std::fs::read_dir(&base)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(urls.len(), 1, "{urls:?}");
    let capture = urls[0].join("db");
    for dir in [
        state.join("pki"),
        base.clone(),
        urls[0].clone(),
        capture.clone(),
    ] {
        assert_eq!(mode(&dir), 0o700, "{}", dir.display());
    }
    for f in [".lock", ".owner"] {
        assert_eq!(mode(&capture.join(f)), 0o600, "{f}");
    }
    let owner = std::fs::read_to_string(capture.join(".owner")).unwrap();
    assert!(
        pki_rotate::credential::validate_owner(owner.trim()).is_ok(),
        "{owner:?}"
    );
}

// ---- Capped mint output ----

#[test]
fn a_mint_hook_that_floods_its_output_is_capped_failed_and_what_it_printed_is_revoked() {
    let s = Setup::new();
    ok(&s.init(&[]));
    let first = s.file("current").unwrap();
    // 100 MB after the credential.
    std::fs::write(s.root.join("mint-floods"), "100000000").unwrap();
    let started = Instant::now();
    let e = recorded_lines(&s.reconcile(DUE, &[]));
    assert!(started.elapsed() < Duration::from_secs(60));
    assert!(
        e[0].contains("printed more than 64 KiB (--max-output)"),
        "{e:?}"
    );
    // What it printed up to the cap was revoked through the revoke hook,
    // in the same run; the current credential is untouched.
    let flooded = s.minted()[1].clone();
    assert!(!s.redis.logs_in(&flooded), "revoked");
    let revoked = std::fs::read_to_string(s.root.join("revoke.log")).unwrap();
    assert!(revoked.contains(&flooded));
    assert_eq!(s.file("current").as_deref(), Some(first.as_str()));
    for entry in std::fs::read_dir(Path::new(&s.dir).join("creds/db")).unwrap() {
        let len = entry.unwrap().metadata().unwrap().len();
        assert!(len <= 64 * 1024, "nothing over the cap is stored: {len}");
    }
    let capture_bytes: u64 = std::fs::read_dir(Path::new(&s.dir).join(".cred-capture/db"))
        .unwrap()
        .map(|e| e.unwrap().metadata().unwrap().len())
        .sum();
    assert!(capture_bytes <= 64 * 1024 + 4096, "{capture_bytes}");
    // A smaller cap counts too; within it the mint works.
    std::fs::write(s.root.join("mint-floods"), "2000").unwrap();
    let e = recorded_lines(&s.reconcile("2026-01-01T02:00:30Z", &["--max-output", "1K"]));
    assert!(e[0].contains("more than 1 KiB"), "{e:?}");
    let o = s.reconcile("2026-01-01T02:01:30Z", &[]);
    ok(&o);
    let second = s.file("current").unwrap();
    assert!(second.starts_with("cred-") && second.len() > 2000);
    // Bad sizes are bad usage.
    let o = s.reconcile(DUE, &["--max-output", "lots"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    s.knob("mint-floods", false);
    ok(&s.reconcile("2026-01-01T02:12:00Z", &[]));
    check_no_leak_dir(&s);
}

/// `check_no_leak` for the directory store of `s`.
fn check_no_leak_dir(s: &Setup) {
    let store = pki_rotate::FsStore::open(Path::new(&s.dir)).unwrap();
    let doc = pki_rotate::Driver::new(store)
        .load::<pki_rotate::CredentialEngine>("creds/db")
        .unwrap()
        .0;
    check_no_leak(s, &doc, "directory store");
}

#[test]
fn a_mint_hook_that_prints_megabytes_into_etcd_is_capped_and_later_reconciles_work() {
    let server = etcd::Etcd::start();
    let s = Setup::new();
    let url = server.url("p");
    let mint = format!("{}/mint.sh", s.root.display());
    let revoke = format!("{}/revoke.sh", s.root.display());
    ok(&s.pki(&[
        "cred",
        "init",
        &url,
        "db",
        "--expire",
        "2h",
        "--grace",
        "10m",
        "--mint-cmd",
        &mint,
        "--revoke-cmd",
        &revoke,
        "--now",
        T0,
    ]));
    std::fs::write(s.root.join("mint-floods"), "4000000").unwrap();
    let o = s.pki(&["cred", "reconcile", &url, "--now", DUE]);
    let e = recorded_lines(&o);
    assert!(e[0].contains("printed more than 64 KiB"), "{e:?}");
    s.knob("mint-floods", false);
    for now in ["2026-01-01T02:01:00Z", "2026-01-01T02:12:00Z"] {
        let o = s.pki(&["cred", "reconcile", &url, "--now", now]);
        ok(&o);
        assert_eq!(stderr(&o), "", "{now}");
    }
    let doc = load_from_etcd(&server, "p");
    assert_eq!(doc.current.as_ref().unwrap().rotation, 2);
    check_no_leak(&s, &doc, "etcd");
    assert_eq!(s.redis.cred_users().len(), 1);
}
