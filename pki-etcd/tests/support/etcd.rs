//! A real etcd server for tests: started on 127.0.0.1 with free ports and
//! a temporary data directory, killed when dropped.
//!
//! The server is Debian's `etcd-server` (the `etcd` binary on PATH, or
//! the one `PKI_ETCD_BIN` names). Without it the tests fail saying how to
//! install it: they never pass by skipping. [`Etcd::start_tls`] starts one
//! that speaks only TLS, with client certificates when asked.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_etcd::client::{Client, GetOptions};
use pki_etcd::{EtcdOptions, EtcdStore, EtcdUrl};
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a started etcd may take to answer its health check.
const START_LIMIT: Duration = Duration::from_secs(30);

/// The certificate an etcd serves with and, with `client_ca`, the CA
/// bundle it verifies client certificates against (`--client-cert-auth`).
#[derive(Debug, Clone)]
pub struct ServerTls {
    /// `--cert-file`: the server's certificate chain, PEM.
    pub cert: PathBuf,
    /// `--key-file`.
    pub key: PathBuf,
    /// `--trusted-ca-file` with `--client-cert-auth`, when given.
    pub client_ca: Option<PathBuf>,
}

/// One etcd server.
pub struct Etcd {
    dir: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
    /// Serves `/health` in plaintext whatever the client port speaks.
    metrics_port: u16,
    tls: Option<ServerTls>,
    /// How the helpers here (`dump`, `put`…) reach the server: its TLS
    /// settings and, once authentication is on, a user allowed everything.
    admin: EtcdOptions,
    child: Option<Child>,
}

fn binary() -> String {
    std::env::var("PKI_ETCD_BIN").unwrap_or_else(|_| "etcd".to_string())
}

// Shared with the Kubernetes store's test servers (pki-kube includes the
// same file).
#[path = "free_port.rs"]
mod free_port;
pub use free_port::free_port;

impl Etcd {
    /// Starts a fresh server and waits until it is healthy.
    pub fn start() -> Etcd {
        Etcd::start_with(None, EtcdOptions::default())
    }

    /// Starts a fresh server that speaks TLS only, with the certificate of
    /// `tls`; the helpers here connect with `admin` (its CA bundle and,
    /// when the server asks for one, a client certificate).
    pub fn start_tls(tls: ServerTls, admin: EtcdOptions) -> Etcd {
        Etcd::start_with(Some(tls), admin)
    }

    fn start_with(tls: Option<ServerTls>, admin: EtcdOptions) -> Etcd {
        let mut dir = tempfile::Builder::new()
            .prefix("pki-etcd-test")
            .tempdir()
            .unwrap();
        let mut last_error = String::new();
        // A port taken between choosing and binding it makes etcd exit:
        // choose again.
        for _ in 0..3 {
            let mut etcd = Etcd {
                client_port: free_port(),
                peer_port: free_port(),
                metrics_port: free_port(),
                tls: tls.clone(),
                admin: admin.clone(),
                child: None,
                dir,
            };
            match etcd.launch() {
                Ok(()) => return etcd,
                Err(e) => {
                    last_error = e;
                    dir = etcd.take_dir();
                }
            }
        }
        panic!("etcd did not start: {last_error}");
    }

    fn take_dir(mut self) -> tempfile::TempDir {
        self.stop();
        let placeholder = tempfile::tempdir().unwrap();
        std::mem::replace(&mut self.dir, placeholder)
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("etcd.log")
    }

    /// The data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn launch(&mut self) -> Result<(), String> {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path())
            .unwrap();
        let scheme = if self.tls.is_some() { "https" } else { "http" };
        let client = format!("{scheme}://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let mut command = Command::new(binary());
        if let Some(tls) = &self.tls {
            command
                .arg(format!("--cert-file={}", tls.cert.display()))
                .arg(format!("--key-file={}", tls.key.display()));
            if let Some(ca) = &tls.client_ca {
                command
                    .arg(format!("--trusted-ca-file={}", ca.display()))
                    .arg("--client-cert-auth");
            }
        }
        let spawned = command
            .arg("--name=pki-test")
            .arg(format!(
                "--listen-metrics-urls=http://127.0.0.1:{}",
                self.metrics_port
            ))
            .arg(format!("--data-dir={}", self.data_dir().display()))
            .arg(format!("--listen-client-urls={client}"))
            .arg(format!("--advertise-client-urls={client}"))
            .arg(format!("--listen-peer-urls={peer}"))
            .arg(format!("--initial-advertise-peer-urls={peer}"))
            .arg(format!("--initial-cluster=pki-test={peer}"))
            .arg("--heartbeat-interval=20")
            .arg("--election-timeout=200")
            .arg("--logger=zap")
            .arg("--log-level=warn")
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn();
        let child = match spawned {
            Ok(child) => child,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
                "the pki-etcd tests need a real etcd server and `{}` is not installed: \
                 install Debian's etcd-server package (`apt-get install etcd-server`), \
                 or set PKI_ETCD_BIN to an etcd 3.4+ binary",
                binary()
            ),
            Err(e) => panic!("cannot run {}: {e}", binary()),
        };
        self.child = Some(child);
        let deadline = Instant::now() + START_LIMIT;
        while Instant::now() < deadline {
            if let Some(status) = self.child.as_mut().unwrap().try_wait().unwrap() {
                self.child = None;
                return Err(format!("etcd exited with {status}: {}", self.log_tail()));
            }
            // Healthy, and still running: a server that could not bind
            // one of its ports exits, and until it has, another server
            // on that port may have answered.
            if self.healthy() && self.child.as_mut().unwrap().try_wait().unwrap().is_none() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        self.stop();
        Err(format!(
            "etcd was not healthy within {START_LIMIT:?}: {}",
            self.log_tail()
        ))
    }

    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    /// Whether `/health` answers `"health":"true"`.
    fn healthy(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.metrics_port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let request = format!(
            "GET /health HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            self.metrics_port
        );
        if s.write_all(request.as_bytes()).is_err() {
            return false;
        }
        let mut answer = String::new();
        let _ = s.read_to_string(&mut answer);
        answer.contains("\"health\":\"true\"")
    }

    /// `127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.client_port)
    }

    /// `etcd://127.0.0.1:PORT/PREFIX`, or `etcds://` for a TLS server.
    pub fn url(&self, prefix: &str) -> String {
        let scheme = if self.tls.is_some() { "etcds" } else { "etcd" };
        format!("{scheme}://{}/{prefix}", self.endpoint())
    }

    /// A store under `prefix` with short timeouts, connected as the
    /// helpers are.
    pub fn store(&self, prefix: &str) -> EtcdStore {
        let options = EtcdOptions {
            tls: self.admin.tls.clone(),
            user: self.admin.user.clone(),
            ..quick_options()
        };
        EtcdStore::open(&EtcdUrl::parse(&self.url(prefix)).unwrap(), options).unwrap()
    }

    /// How the helpers connect (see [`Etcd::start_tls`]).
    pub fn admin(&self) -> &EtcdOptions {
        &self.admin
    }

    /// Connect the helpers with `admin` from now on (after turning
    /// authentication on, or moving to another client certificate).
    pub fn set_admin(&mut self, admin: EtcdOptions) {
        self.admin = admin;
    }

    /// Serve with `tls` from the next restart on.
    pub fn set_tls(&mut self, tls: ServerTls) {
        self.tls = Some(tls);
    }

    /// Runs `f` with a client of the helpers' own (see [`Etcd::admin`]).
    pub fn with_client<T>(&self, f: impl AsyncFnOnce(&Client) -> T) -> T {
        with_client(&self.url("pki"), &self.admin, f)
    }

    /// Kills the server (SIGKILL: no clean shutdown) and waits for it.
    pub fn kill(&mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Starts the server again on the same ports and data directory.
    pub fn restart(&mut self) {
        self.stop();
        if let Err(e) = self.launch() {
            panic!("etcd did not restart: {e}");
        }
    }

    /// Every key under `prefix/` with its value, straight from etcd.
    pub fn dump(&self, prefix: &str) -> Vec<(String, Vec<u8>, i64)> {
        self.with_client(async |client| dump(client, prefix).await)
    }

    /// Where the data lives, for messages.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Timeouts short enough for tests that stop the server.
pub fn quick_options() -> EtcdOptions {
    EtcdOptions {
        connect_timeout: Duration::from_secs(3),
        request_timeout: Duration::from_secs(3),
        ..EtcdOptions::default()
    }
}

/// A store whose write hook kills etcd before the step named in `kill_at`.
pub fn killing_store(
    etcd: &Arc<Mutex<Etcd>>,
    prefix: &str,
    kill_at: &Arc<Mutex<Option<String>>>,
) -> EtcdStore {
    let endpoint = etcd.lock().unwrap().endpoint();
    let options = EtcdOptions {
        max_txn_ops: 8,
        request_timeout: Duration::from_secs(2),
        ..quick_options()
    };
    let mut store = EtcdStore::connect(&[endpoint], prefix, options).unwrap();
    let etcd = etcd.clone();
    let kill_at = kill_at.clone();
    store.set_write_hook(Some(Box::new(move |step| {
        let mut target = kill_at.lock().unwrap();
        if target.as_deref() == Some(step) {
            *target = None;
            etcd.lock().unwrap().kill();
        }
        Ok(())
    })));
    store
}

/// Runs `f` with a client of its own (not the store under test) on a
/// runtime of its own, connected to `url` with `options`.
fn with_client<T>(url: &str, options: &EtcdOptions, f: impl AsyncFnOnce(&Client) -> T) -> T {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let url = EtcdUrl::parse(url).unwrap();
    runtime.block_on(async {
        let client = Client::connect(&url, options).await.unwrap();
        f(&client).await
    })
}

fn plain(endpoint: &str) -> String {
    format!("etcd://{endpoint}/pki")
}

async fn dump(client: &Client, prefix: &str) -> Vec<(String, Vec<u8>, i64)> {
    let (mut from, end) = if prefix.is_empty() {
        (vec![0u8], vec![0u8])
    } else {
        let start = format!("{prefix}/").into_bytes();
        let mut end = start.clone();
        *end.last_mut().unwrap() += 1;
        (start, end)
    };
    // In pages: a large document is more than one answer may carry.
    let mut all = Vec::new();
    loop {
        let options = GetOptions::new().with_range(end.clone()).with_limit(1000);
        let response = client.kv().get(from.clone(), Some(options)).await.unwrap();
        all.extend(response.kvs().iter().map(|kv| {
            (
                kv.key_str().unwrap().to_string(),
                kv.value().to_vec(),
                kv.create_revision(),
            )
        }));
        match response.kvs().last() {
            Some(last) if response.more() => {
                from = last.key().to_vec();
                from.push(0);
            }
            _ => return all,
        }
    }
}

/// Every key under `prefix/` (every key when `prefix` is empty) with its
/// value and create revision, read by a client of its own (not through the
/// store under test) from a plaintext server.
pub fn dump_keys(endpoint: &str, prefix: &str) -> Vec<(String, Vec<u8>, i64)> {
    with_client(&plain(endpoint), &EtcdOptions::default(), async |client| {
        dump(client, prefix).await
    })
}

/// Writes `value` at `key` directly, bypassing the store.
pub fn put_raw(endpoint: &str, key: &str, value: &[u8]) {
    with_client(&plain(endpoint), &EtcdOptions::default(), async |client| {
        client.kv().put(key, value, None).await.unwrap();
    });
}

/// Deletes `key` directly, bypassing the store.
pub fn delete_raw(endpoint: &str, key: &str) {
    with_client(&plain(endpoint), &EtcdOptions::default(), async |client| {
        client.kv().delete(key, None).await.unwrap();
    });
}

/// What the head of document `key` under `prefix` names, in a dump: the
/// blob id of each file (format 2: from the entries of the head's
/// generation; a chunked file's blob ids joined by ","), and every key of
/// the document that the head does not need (blobs no entry names, entries
/// of other generations, attempt markers). Empty maps without a head.
pub fn head_files(
    dump: &[(String, Vec<u8>, i64)],
    prefix: &str,
    key: &str,
) -> (
    std::collections::BTreeMap<String, String>,
    std::collections::BTreeSet<String>,
) {
    let head_key = format!("{prefix}/{key}");
    let Some((_, head, _)) = dump.iter().find(|(k, _, _)| *k == head_key) else {
        return Default::default();
    };
    let head: serde_json::Value = serde_json::from_slice(head).unwrap();
    let own = format!("{head_key}/.");
    let entries = format!(
        "{head_key}/.files/{}/",
        head["generation"].as_str().unwrap()
    );
    let mut files = std::collections::BTreeMap::new();
    let mut needed = std::collections::BTreeSet::new();
    for (k, v, _) in dump {
        let Some(path) = k.strip_prefix(&entries) else {
            continue;
        };
        needed.insert(k.clone());
        let entry: serde_json::Value = serde_json::from_slice(v).unwrap();
        let blobs: Vec<String> = match entry["blob"].as_str() {
            Some(id) => vec![id.to_string()],
            None => entry["chunks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["blob"].as_str().unwrap().to_string())
                .collect(),
        };
        for id in &blobs {
            needed.insert(format!("{head_key}/.blobs/{id}"));
        }
        files.insert(path.to_string(), blobs.join(","));
    }
    let unneeded = dump
        .iter()
        .map(|(k, _, _)| k)
        .filter(|k| k.starts_with(&own) && !needed.contains(*k))
        .cloned()
        .collect();
    (files, unneeded)
}
