//! The CLI against a real etcd server on 127.0.0.1 (started by the test):
//! every signer command takes `etcd://HOST:PORT/PREFIX` for DIR, `pki export`
//! writes what it holds in the directory layout, `pki rotate` processes
//! racing at the rotation point rotate once, an unreachable server is one
//! line and exit 1 within a bounded time, a cluster with one endpoint down
//! is used through the others, a forced reason is recorded once however
//! rotations race, and a write whose answer is lost exits 5 and is safe to
//! rerun.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::process::Command;
use support::cli::{fails_with, ok, pki};
use support::{etcd, proxy};

const T0: &str = "2026-01-01T00:00:00Z";
const AFTER_ROTATION_POINT: &str = "2027-02-01T00:00:00Z";

#[test]
fn every_signer_command_works_on_an_etcd_url_and_export_writes_the_layout() {
    let server = etcd::Etcd::start();
    let url = server.url("pki/service-ca");
    ok(&["init", &url, "--now", T0]);
    ok(&["issue", &url, "web", "--dns", "web.ns.svc", "--now", T0]);
    let out = ok(&["rotate", &url, "--now", AFTER_ROTATION_POINT]);
    assert!(out.contains("rotated CA"), "{out}");
    let json: serde_json::Value = serde_json::from_str(&ok(&[
        "status",
        &url,
        "--json",
        "--now",
        AFTER_ROTATION_POINT,
    ]))
    .unwrap();
    assert_eq!(json["rotations"], 1);

    // Every key lives under the prefix.
    let keys = etcd::dump_keys(&server.endpoint(), "");
    assert!(!keys.is_empty());
    assert!(
        keys.iter()
            .all(|(k, _, _)| k.starts_with("pki/service-ca/")),
        "{keys:?}"
    );

    let tmp = tempfile::tempdir().unwrap();
    let exported = tmp.path().join("out");
    ok(&["export", &url, &exported.display().to_string()]);
    let chain = exported.join("certs/web/tls.crt");
    let bundle = exported.join("ca-bundle.crt");
    assert_eq!(
        pki_core::Certificate::all_from_pem(&std::fs::read(&chain).unwrap())
            .unwrap()
            .len(),
        2,
        "leaf + bridge B"
    );
    ok(&[
        "verify",
        "--bundle",
        &bundle.display().to_string(),
        "--chain",
        &chain.display().to_string(),
        "--dns",
        "web.ns.svc",
        "--at",
        AFTER_ROTATION_POINT,
    ]);
    let err = pki(&["init", &url, "--now", T0]);
    assert_eq!(err.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&err.stderr).contains("already exists"));
}

#[test]
fn rotate_processes_racing_at_the_rotation_point_rotate_once() {
    let server = etcd::Etcd::start();
    let url = server.url("race");
    ok(&["init", &url, "--now", T0]);
    ok(&["issue", &url, "web", "--dns", "web.ns.svc", "--now", T0]);
    let children: Vec<_> = (0..4)
        .map(|i| {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_pki"));
            cmd.args(["rotate", &url, "--now", AFTER_ROTATION_POINT]);
            if i % 2 == 0 {
                cmd.args(["--force", "yearly"]);
            }
            std::thread::spawn(move || cmd.output().unwrap())
        })
        .collect();
    for child in children {
        let o = child.join().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let json: serde_json::Value = serde_json::from_str(&ok(&[
        "status",
        &url,
        "--json",
        "--now",
        AFTER_ROTATION_POINT,
    ]))
    .unwrap();
    assert_eq!(json["rotations"], 1, "{json}");
    assert_eq!(json["forced_rotation_reason"], "yearly");
}

#[test]
fn an_unreachable_server_is_one_line_and_exit_1_in_bounded_time() {
    // A port nothing listens on, and no server of this process will.
    let port = etcd::free_port();
    let url = format!("etcd://127.0.0.1:{port}/pki");
    let started = std::time::Instant::now();
    let o = pki(&["status", &url]);
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with("pki: etcd://127.0.0.1:"), "{err}");
}

#[test]
fn with_one_of_several_endpoints_down_every_command_works_whatever_the_order() {
    let server = etcd::Etcd::start();
    // Ports nothing listens on, and no server of this process will.
    let down = format!("127.0.0.1:{}", etcd::free_port());
    let also_down = format!("127.0.0.1:{}", etcd::free_port());
    let live = server.endpoint();
    for (n, endpoints) in [format!("{down},{live}"), format!("{live},{down}")]
        .iter()
        .enumerate()
    {
        let url = format!("etcd://{endpoints}/multi{n}");
        ok(&["init", &url, "--now", T0]);
        for name in ["web", "api", "db"] {
            let dns = format!("{name}.ns.svc");
            ok(&["issue", &url, name, "--dns", &dns, "--now", T0]);
        }
        let out = ok(&["rotate", &url, "--now", AFTER_ROTATION_POINT]);
        assert!(out.contains("rotated CA"), "{url}: {out}");
        let status = ok(&["status", &url, "--json", "--now", AFTER_ROTATION_POINT]);
        let json: serde_json::Value = serde_json::from_str(&status).unwrap();
        assert_eq!(json["rotations"], 1, "{url}: {json}");
    }

    // Every endpoint down: one line and exit 1, in bounded time.
    let url = format!("etcd://{down},{also_down}/pki");
    let started = std::time::Instant::now();
    let o = pki(&["status", &url]);
    assert!(started.elapsed() < std::time::Duration::from_secs(15));
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.starts_with(&format!("pki: {url}")), "{err}");
}

/// How every head starts (`{"format":2,"generation":...}`): of a write's
/// requests, only the commit carries these bytes.
const MANIFEST_START: &[u8] = br#"{"format":2,"generation":"#;

#[test]
fn a_rotation_whose_commit_answer_is_lost_exits_5_and_the_rerun_is_nothing_to_do() {
    let server = etcd::Etcd::start();
    let url = server.url("lost");
    ok(&["init", &url, "--now", T0]);
    ok(&["issue", &url, "web", "--dns", "web.ns.svc", "--now", T0]);
    // Through the proxy, etcd applies the commit but its answer, and every
    // answer after it, is lost.
    let proxy = proxy::Proxy::start(&server.endpoint());
    proxy.lose_replies_once_sent(MANIFEST_START);
    let lossy = proxy.url("lost");
    let later = "2026-02-01T00:00:00Z";
    let started = std::time::Instant::now();
    let err = fails_with(5, &["rotate", &lossy, "--force", "r", "--now", later]);
    assert!(started.elapsed() < std::time::Duration::from_secs(30));
    assert!(proxy.losing(), "the commit never went out");
    assert!(
        err.starts_with(&format!("pki: the write of document \"signer\" to {lossy}")),
        "{err}"
    );
    assert!(err.contains("may have landed"), "{err}");
    assert!(err.contains("rerunning the command is safe"), "{err}");

    // It landed: the same command straight to etcd finds the reason
    // recorded, and one rotation it is.
    let out = ok(&["rotate", &url, "--force", "r", "--now", later]);
    assert!(out.contains("nothing to do"), "{out}");
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["status", &url, "--json", "--now", later])).unwrap();
    assert_eq!(json["rotations"], 1, "{json}");
    assert_eq!(json["forced_rotation_reason"], "r", "{json}");
}

/// How many times the history of the store at `url` lists `reason` (as a
/// rotation's reason or as one it satisfied), and how many rotations it has.
fn times_recorded(url: &str, reason: &str, now: &str) -> (usize, usize) {
    let json: serde_json::Value =
        serde_json::from_str(&ok(&["status", url, "--json", "--now", now])).unwrap();
    let history = json["history"].as_array().unwrap();
    let listed = history
        .iter()
        .map(|h| {
            let own = usize::from(h["reason"]["reason"] == reason);
            let satisfied = h["forced_reasons"]
                .as_array()
                .map_or(0, |r| r.iter().filter(|r| *r == reason).count());
            own + satisfied
        })
        .sum();
    (listed, history.len())
}

#[test]
fn a_recorded_forced_reason_repeated_by_racing_rotations_when_one_is_due_is_listed_once() {
    use pki_rotate::{Driver, SignerEngine, SignerInput};
    let server = etcd::Etcd::start();
    let url = server.url("again");
    let (t1, due) = ("2026-03-01T00:00:00Z", "2027-04-02T00:00:00Z");
    ok(&["init", &url, "--now", T0]);
    // Two forced reasons race at t1: "drill" reads, "audit" rotates before
    // drill's write, so drill is recorded as satisfied by audit's rotation
    // and is the reason the document keeps last.
    let mut store = server.store("again");
    let (hook_url, raced) = (url.clone(), std::sync::atomic::AtomicBool::new(false));
    store.set_write_hook(Some(Box::new(move |step| {
        if step == "read head" && !raced.swap(true, std::sync::atomic::Ordering::SeqCst) {
            ok(&["rotate", &hook_url, "--force", "audit", "--now", t1]);
        }
        Ok(())
    })));
    let input = SignerInput::forced(pki_rotate::ForcedRotation::new("drill"));
    let at =
        time::OffsetDateTime::parse(t1, &time::format_description::well_known::Rfc3339).unwrap();
    let step = Driver::new(&store)
        .step::<SignerEngine, _>("signer", &input, at, &mut pki_core::os_rng())
        .unwrap();
    assert_eq!(step.attempts, 2, "drill lost one write to audit");
    assert_eq!(times_recorded(&url, "audit", t1), (1, 1));
    assert_eq!(times_recorded(&url, "drill", t1), (1, 1));

    // Later a rotation is due, and "audit" is given again by processes that
    // race: one rotates because it is due, the others find audit recorded.
    let children: Vec<_> = (0..6)
        .map(|_| {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_pki"));
            cmd.args(["rotate", &url, "--force", "audit", "--now", due]);
            std::thread::spawn(move || cmd.output().unwrap())
        })
        .collect();
    for child in children {
        let o = child.join().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    assert_eq!(times_recorded(&url, "audit", due), (1, 2));
    // The same reason once more, without a race: still nothing to do.
    let out = ok(&["rotate", &url, "--force", "audit", "--now", due]);
    assert!(out.contains("nothing to do"), "{out}");
    assert_eq!(times_recorded(&url, "audit", due), (1, 2));
}

/// `status --check` on etcd answers from the head's summary, but it also
/// sees a blob rewritten by hand (a leaf's certificate here) without
/// reading the leaves: the blob changed after the head's commit.
#[test]
fn status_check_on_etcd_notices_a_blob_changed_by_hand() {
    let server = etcd::Etcd::start();
    let url = server.url("damaged");
    ok(&["init", &url, "--now", T0]);
    ok(&["issue", &url, "web", "--dns", "web.ns.svc", "--now", T0]);
    let day_later = "2026-01-02T00:00:00Z";
    let out = ok(&["status", &url, "--check", "--now", day_later]);
    assert!(out.contains("health: ok"), "{out}");
    let blobs = etcd::dump_keys(&server.endpoint(), "damaged/signer/.blobs");
    let (blob, _, _) = blobs
        .iter()
        .find(|(_, value, _)| value.windows(17).any(|w| w == b"BEGIN CERTIFICATE"))
        .unwrap_or_else(|| panic!("no certificate among {} blobs", blobs.len()));
    etcd::put_raw(&server.endpoint(), blob, b"garbage");
    let err = fails_with(1, &["status", &url, "--check", "--now", day_later]);
    assert!(err.contains("damaged") || err.contains("SHA-256"), "{err}");
}
