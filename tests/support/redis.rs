//! A Redis server on 127.0.0.1 for each `pki cred` test, and hooks that mint
//! and revoke its ACL users: every check of "works" or "revoked" is a real
//! `AUTH` against it, and `ACL USERS` tells whether any credential leaked.
//! The checks of a command's output and of a whole run (no leak) are here
//! too.
//!
//! Times are pinned with `--now` from 2026-01-01 (T0): expiry 2h, grace 10m.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::cli::stderr;
use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const T0: &str = "2026-01-01T00:00:00Z";
pub const DUE: &str = "2026-01-01T02:00:00Z";
pub const IN_GRACE: &str = "2026-01-01T02:05:00Z";
pub const GRACE_END: &str = "2026-01-01T02:10:00Z";

pub fn require(tool: &str, package: &str) {
    let found = Command::new("sh")
        .arg("-c")
        .arg(format!("command -v {tool}"))
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        found,
        "{tool} is not installed; install it with `apt-get install {package}` (Debian) or run scripts/test.sh: the credential tests mint Redis ACL users"
    );
}

pub struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    pub fn start(dir: &Path) -> Redis {
        require("redis-server", "redis-server");
        require("redis-cli", "redis-tools");
        // Never a port an etcd of this process was given.
        let port = super::etcd::free_port();
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

    pub fn cli(&self, args: &[&str]) -> String {
        let o = Command::new("redis-cli")
            .args(["-h", "127.0.0.1", "-p", &self.port.to_string()])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&o.stdout).trim().to_string()
    }

    /// The ACL users the hooks created and not deleted.
    pub fn cred_users(&self) -> BTreeSet<String> {
        self.cli(&["ACL", "USERS"])
            .lines()
            .filter(|u| u.starts_with("cred-"))
            .map(str::to_string)
            .collect()
    }

    /// Whether `user:password` logs in.
    pub fn logs_in(&self, credential: &str) -> bool {
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
pub struct Setup {
    _tmp: tempfile::TempDir,
    pub root: PathBuf,
    pub dir: String,
    pub redis: Redis,
}

impl Setup {
    pub fn new() -> Setup {
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

    pub fn knob(&self, name: &str, on: bool) {
        let path = self.root.join(name);
        if on {
            std::fs::write(path, "").unwrap();
        } else {
            let _ = std::fs::remove_file(path);
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = super::cli::command(args);
        // Where captures of a store URL go: inside the test directory.
        c.env("XDG_STATE_HOME", self.root.join("state"));
        c
    }

    pub fn pki(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    pub fn init(&self, extra: &[&str]) -> Output {
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

    pub fn reconcile(&self, now: &str, extra: &[&str]) -> Output {
        let mut args = vec!["cred", "reconcile", &self.dir, "--now", now];
        args.extend_from_slice(extra);
        self.pki(&args)
    }

    pub fn file(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(Path::new(&self.dir).join("creds/db").join(name))
            .ok()
            .map(|s| s.trim().to_string())
    }

    pub fn status(&self, now: &str) -> serde_json::Value {
        let o = self.pki(&["cred", "status", &self.dir, "--json", "--now", now]);
        ok(&o);
        serde_json::from_slice(&o.stdout).unwrap()
    }

    /// Every credential the mint hook created, in order.
    pub fn minted(&self) -> Vec<String> {
        std::fs::read_to_string(self.root.join("minted.log"))
            .map(|s| s.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }

    pub fn revoked(&self) -> Vec<String> {
        std::fs::read_to_string(self.root.join("revoke.log"))
            .map(|s| s.lines().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// `pki cred status --check`'s exit status at `now`.
    pub fn check(&self, now: &str) -> i32 {
        let o = self.pki(&["cred", "status", &self.dir, "--check", "--now", now]);
        o.status.code().unwrap()
    }

    pub fn mint_runs(&self) -> usize {
        std::fs::read_to_string(self.root.join("mint.log"))
            .map(|s| s.lines().count())
            .unwrap_or(0)
    }

    /// Every file and its bytes under the store's current generation.
    pub fn snapshot(&self) -> Vec<(String, Vec<u8>)> {
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
    pub fn block_next_write(&self, on: bool) {
        use std::os::unix::fs::PermissionsExt;
        let link = std::fs::read_link(Path::new(&self.dir).join(".data")).unwrap();
        let live = Path::new(&self.dir).join(link);
        let mode = if on { 0o777 } else { 0o700 };
        std::fs::set_permissions(live, std::fs::Permissions::from_mode(mode)).unwrap();
    }
}

pub fn ok(o: &Output) {
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
pub fn recorded(o: &Output) -> String {
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
pub fn recorded_lines(o: &Output) -> Vec<String> {
    assert_eq!(o.status.code(), Some(0), "stderr: {}", stderr(o));
    let lines: Vec<String> = stderr(o).lines().map(str::to_string).collect();
    assert!(
        lines.iter().all(|l| l.starts_with("pki: cred db: ")),
        "{lines:?}"
    );
    lines
}

/// Exit 1 with exactly one line on stderr.
pub fn refused(o: &Output) -> String {
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

/// The ACL user of a `user:password` credential.
pub fn user(credential: &str) -> &str {
    credential.split(':').next().unwrap()
}

/// The ACL users of the credentials the document records: current, old
/// and strays to revoke.
pub fn recorded_users(doc: &pki_rotate::CredentialState) -> BTreeSet<String> {
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
pub fn check_no_leak(s: &Setup, doc: &pki_rotate::CredentialState, context: &str) {
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
