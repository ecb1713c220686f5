//! `pki cred` asks for exactly the actions of `tests/data/cred-trace.txt`,
//! the trace the C ABI's test (pki-ffi/src/cred.rs) follows too: the CLI's
//! reconcile loop and `pki_document_step` (with `PKI_KIND_CRED`) run the same advance, and this shows
//! it from outside. The hooks log what they are asked to do and take their
//! outcome (ok, fail, fail-printed) from a queue the test fills per run.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

const TRACE: &str = include_str!("data/cred-trace.txt");

/// One run of the trace: its time, and its lines (`mint 1 1 ok`…, then
/// `wait UNTIL REASON`).
struct Run {
    at: String,
    lines: Vec<Vec<String>>,
}

fn runs() -> Vec<Run> {
    let mut runs: Vec<Run> = Vec::new();
    for line in TRACE.lines() {
        let line = line.split('#').next().unwrap().trim();
        let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
        match words.first().map(String::as_str) {
            None => {}
            Some("at") => runs.push(Run {
                at: words[1].clone(),
                lines: Vec::new(),
            }),
            Some(_) => runs.last_mut().expect("an `at` first").lines.push(words),
        }
    }
    runs
}

fn ok(o: &Output) -> String {
    assert!(
        o.status.success(),
        "exit {:?}\nstdout: {}\nstderr: {}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The wait line of a run's output, as the trace writes it.
fn wait_of(stdout: &str) -> String {
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("cred db: waiting "))
        .unwrap_or_else(|| panic!("no wait in {stdout}"));
    let (why, rest) = line.split_once(": ").unwrap();
    let until = rest.split_whitespace().next().unwrap();
    let reason = match why {
        "until the credential expires" => "expiry",
        "until the grace period ends" => "grace",
        "until the failed step may be retried" => "backoff",
        other => panic!("unknown wait: {other}"),
    };
    format!("wait {until} {reason}")
}

#[test]
fn the_cli_asks_for_the_actions_of_the_shared_trace() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path();
    let r = root.display();
    // Each hook takes the first outcome of the queue and logs its action.
    let mint = format!(
        r#"#!/bin/sh
outcome=$(head -n 1 {r}/queue); sed -i 1d {r}/queue
echo "mint $PKI_CRED_ROTATION $PKI_CRED_ATTEMPT" >> {r}/actions
case "$outcome" in
  ok) echo "cred-$PKI_CRED_ROTATION-$PKI_CRED_ATTEMPT" ;;
  fail-printed) echo "stray-$PKI_CRED_ROTATION-$PKI_CRED_ATTEMPT"; exit 1 ;;
  *) exit 1 ;;
esac
"#
    );
    let revoke = format!(
        r#"#!/bin/sh
IFS= read -r cred
outcome=$(head -n 1 {r}/queue); sed -i 1d {r}/queue
case "$cred" in
  stray-*) echo "revoke-stray $(echo "$cred" | cut -d- -f2) $(echo "$cred" | cut -d- -f3)" >> {r}/actions ;;
  *) echo "revoke $(echo "$cred" | cut -d- -f2)" >> {r}/actions ;;
esac
[ "$outcome" = ok ]
"#
    );
    for (name, text) in [("mint.sh", mint), ("revoke.sh", revoke)] {
        let path = root.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let dir = root.join("store").display().to_string();
    let mint = root.join("mint.sh").display().to_string();
    let revoke = root.join("revoke.sh").display().to_string();
    for (i, run) in runs().iter().enumerate() {
        let outcomes: Vec<&str> = run
            .lines
            .iter()
            .filter(|l| l[0] != "wait")
            .map(|l| l.last().unwrap().as_str())
            .collect();
        let queue: String = outcomes.iter().map(|o| format!("{o}\n")).collect();
        std::fs::write(root.join("queue"), queue).unwrap();
        let _ = std::fs::remove_file(root.join("actions"));
        let mut args = vec!["cred"];
        if i == 0 {
            args.extend([
                "init",
                &dir,
                "db",
                "--expire",
                "2h",
                "--grace",
                "10m",
                "--mint-cmd",
                &mint,
                "--revoke-cmd",
                &revoke,
            ]);
        } else {
            args.extend(["reconcile", &dir]);
        }
        args.extend(["--now", &run.at]);
        let stdout = ok(&Command::new(env!("CARGO_BIN_EXE_pki"))
            .args(&args)
            .output()
            .unwrap());
        let mut asked: Vec<String> = std::fs::read_to_string(root.join("actions"))
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        asked.push(wait_of(&stdout));
        let expected: Vec<String> = run
            .lines
            .iter()
            .map(|l| {
                let words = if l[0] == "wait" {
                    &l[..]
                } else {
                    &l[..l.len() - 1]
                };
                words.join(" ")
            })
            .collect();
        assert_eq!(asked, expected, "the run at {}: {stdout}", run.at);
        assert!(
            Path::new(&root.join("queue")).metadata().unwrap().len() == 0,
            "the run at {} ran fewer hooks than the trace",
            run.at
        );
    }
}
