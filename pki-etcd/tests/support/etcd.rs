//! A real etcd server for tests: started on 127.0.0.1 with free ports and
//! a temporary data directory, killed when dropped.
//!
//! The server is Debian's `etcd-server` (the `etcd` binary on PATH, or
//! the one `PKI_ETCD_BIN` names). Without it the tests fail saying how to
//! install it: they never pass by skipping.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use pki_etcd::{EtcdOptions, EtcdStore};
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a started etcd may take to answer its health check.
const START_LIMIT: Duration = Duration::from_secs(30);

/// One etcd server.
pub struct Etcd {
    dir: tempfile::TempDir,
    client_port: u16,
    peer_port: u16,
    child: Option<Child>,
}

fn binary() -> String {
    std::env::var("PKI_ETCD_BIN").unwrap_or_else(|_| "etcd".to_string())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Etcd {
    /// Starts a fresh server and waits until it is healthy.
    pub fn start() -> Etcd {
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
        let client = format!("http://127.0.0.1:{}", self.client_port);
        let peer = format!("http://127.0.0.1:{}", self.peer_port);
        let spawned = Command::new(binary())
            .arg("--name=pki-test")
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
            if self.healthy() {
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
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.client_port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
        let request = format!(
            "GET /health HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nConnection: close\r\n\r\n",
            self.client_port
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

    /// `etcd://127.0.0.1:PORT/PREFIX`.
    pub fn url(&self, prefix: &str) -> String {
        format!("etcd://{}/{prefix}", self.endpoint())
    }

    /// A store under `prefix` with short timeouts.
    pub fn store(&self, prefix: &str) -> EtcdStore {
        EtcdStore::connect(&[self.endpoint()], prefix, quick_options()).unwrap()
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
        dump_keys(&self.endpoint(), prefix)
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

/// Runs `f` with a client of its own (not the store under test) on a
/// runtime of its own.
fn with_client<T>(endpoint: &str, f: impl AsyncFnOnce(&mut etcd_client::Client) -> T) -> T {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut client = etcd_client::Client::connect([format!("http://{endpoint}")], None)
            .await
            .unwrap();
        f(&mut client).await
    })
}

/// Every key under `prefix/` (every key when `prefix` is empty) with its
/// value and create revision, read by a client of its own (not through the
/// store under test).
pub fn dump_keys(endpoint: &str, prefix: &str) -> Vec<(String, Vec<u8>, i64)> {
    with_client(endpoint, async |client| {
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
            let options = etcd_client::GetOptions::new()
                .with_range(end.clone())
                .with_limit(1000);
            let response = client.get(from.clone(), Some(options)).await.unwrap();
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
    })
}

/// Writes `value` at `key` directly, bypassing the store.
pub fn put_raw(endpoint: &str, key: &str, value: &[u8]) {
    with_client(endpoint, async |client| {
        client.put(key, value, None).await.unwrap();
    });
}

/// Deletes `key` directly, bypassing the store.
pub fn delete_raw(endpoint: &str, key: &str) {
    with_client(endpoint, async |client| {
        client.delete(key, None).await.unwrap();
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
