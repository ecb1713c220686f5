//! A real Kubernetes API server for tests: etcd 3.6 and kube-apiserver
//! started on free 127.0.0.1 ports in a temporary directory, with RBAC on,
//! token authentication and no anonymous access, stopped when dropped.
//!
//! The binaries come from `PKI_KUBE_APISERVER` and `PKI_KUBE_ETCD` when
//! both are set, else from `scripts/kube-tools.sh` (run once per test
//! process), which builds them with Go into a cache folder the first time
//! and then only prints their paths. When they can be neither found nor
//! built, the test fails with one line that says what to install or run:
//! it never passes by skipping.
//!
//! The server knows two users, each with a kubeconfig of its own: the
//! admin (group `system:masters`, allowed everything) and `pki-reader`,
//! authenticated but granted nothing, so RBAC refuses it with 403. A third
//! kubeconfig holds both, as contexts named after the users.
//!
//! Each server process runs under a small `sh` watchdog that holds a pipe
//! from the test process: when the [`KubeServer`] is dropped (the test
//! ended or panicked) or the test process dies however it dies, the pipe
//! closes and the watchdog kills the server, so no server outlives its
//! test. Only std, tempfile, pki-core, rustls and getrandom are used, so
//! the tests of other crates can include this file by `#[path]`, as they
//! do pki-etcd's `etcd.rs`.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::fs::File;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

/// How long a started server may take to answer `/readyz` (it takes about
/// 3 s on 2 idle cores; much longer on a machine busy compiling).
const START_LIMIT: Duration = Duration::from_secs(90);

/// The user of the admin kubeconfig, in `system:masters`.
pub const ADMIN: &str = "pki-admin";
/// The user of the unprivileged kubeconfig: authenticated, no role.
pub const READER: &str = "pki-reader";

/// Paths of the two server binaries.
#[derive(Debug, Clone)]
pub struct Tools {
    pub apiserver: PathBuf,
    pub etcd: PathBuf,
}

/// The binaries, found or built once per test process; a failure is one
/// line saying what to do.
pub fn tools() -> &'static Tools {
    static TOOLS: OnceLock<Result<Tools, String>> = OnceLock::new();
    match TOOLS.get_or_init(find_tools) {
        Ok(tools) => tools,
        Err(message) => panic!("{message}"),
    }
}

fn find_tools() -> Result<Tools, String> {
    let from_env = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
    if let (Some(apiserver), Some(etcd)) =
        (from_env("PKI_KUBE_APISERVER"), from_env("PKI_KUBE_ETCD"))
    {
        let tools = Tools {
            apiserver: apiserver.into(),
            etcd: etcd.into(),
        };
        for path in [&tools.apiserver, &tools.etcd] {
            if !path.is_file() {
                return Err(format!(
                    "{} (from PKI_KUBE_APISERVER/PKI_KUBE_ETCD) does not exist: \
                     unset both to build them with scripts/kube-tools.sh",
                    path.display()
                ));
            }
        }
        return Ok(tools);
    }
    let script = kube_tools_script()?;
    let cached = Command::new("bash")
        .arg(&script)
        .arg("--check")
        .stdin(Stdio::null())
        .output()
        .is_ok_and(|output| output.status.success());
    if !cached {
        // Shown with the test's output if it fails; the harness also
        // says when a test runs for over 60 seconds.
        eprintln!(
            "building kube-apiserver and etcd 3.6 with {} (about 6 minutes, once)",
            script.display()
        );
    }
    let output = Command::new("bash")
        .arg(&script)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        // The script's last line says what is missing.
        let last = stderr.lines().last().unwrap_or("no message");
        return Err(format!(
            "the kube:// tests need kube-apiserver and etcd 3.6, and {} failed: {last}",
            script.display()
        ));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let mut lines = stdout.lines();
    match (lines.next(), lines.next()) {
        (Some(apiserver), Some(etcd)) => Ok(Tools {
            apiserver: apiserver.into(),
            etcd: etcd.into(),
        }),
        _ => Err(format!(
            "{} printed no paths: {stdout}{stderr}",
            script.display()
        )),
    }
}

/// `scripts/kube-tools.sh` of this workspace, found above the crate that
/// includes this file.
fn kube_tools_script() -> Result<PathBuf, String> {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .ancestors()
        .map(|dir| dir.join("scripts/kube-tools.sh"))
        .find(|path| path.is_file())
        .ok_or_else(|| {
            format!(
                "scripts/kube-tools.sh not found above {}: set PKI_KUBE_APISERVER and \
                 PKI_KUBE_ETCD to kube-apiserver and etcd 3.6 binaries",
                manifest_dir.display()
            )
        })
}

// A port nothing listens on now, never handed out before in this process:
// the etcd test servers' rule, from the same file.
#[path = "../../../pki-etcd/tests/support/free_port.rs"]
mod free_port;
pub use free_port::free_port;

/// A server process under its watchdog (see the module's docs).
struct Watched {
    name: &'static str,
    /// The watchdog, `sh`, whose exit status is the server's.
    child: Child,
    /// The watchdog's end of the lifeline: closing it kills the server.
    lifeline: Option<ChildStdin>,
    log: PathBuf,
}

/// Runs `program args` in the background, killed (SIGKILL) as soon as the
/// watchdog's standard input closes, and waits for it; the watchdog exits
/// with the server's status.
const WATCHDOG: &str = r#"exec 3<&0
"$@" 3<&- </dev/null &
server=$!
(while read -r _ <&3; do :; done; kill -KILL "$server" 2>/dev/null) &
wait "$server""#;

impl Watched {
    fn spawn(name: &'static str, program: &Path, args: &[String], log: PathBuf) -> Watched {
        let out = File::create(&log).unwrap();
        let child = Command::new("sh")
            .arg("-c")
            .arg(WATCHDOG)
            .arg(name)
            .arg(program)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run sh to start {}: {e}", program.display()));
        let mut watched = Watched {
            name,
            child,
            lifeline: None,
            log,
        };
        watched.lifeline = watched.child.stdin.take();
        watched
    }

    /// The exit status, once the server has exited.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().unwrap()
    }

    /// The last lines of the server's log.
    fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(15)..].join("\n")
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        // The watchdog kills the server and then exits with its status.
        drop(self.lifeline.take());
        let _ = self.child.wait();
    }
}

/// The CA, serving certificate and service-account key of one server.
struct ServerFiles {
    ca: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    service_account_key: PathBuf,
    service_account_public: PathBuf,
    tokens: PathBuf,
    admin_token: String,
    reader_token: String,
}

fn random_token() -> String {
    let mut bytes = [0u8; 24];
    getrandom::fill(&mut bytes).unwrap();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl ServerFiles {
    /// Writes them into `dir`, issued with pki-core at today's date (the
    /// server and kube-rs check validity against the clock).
    fn write(dir: &Path) -> ServerFiles {
        use pki_core::{
            CertificateAuthority, CertificateParams, KeyAlgorithm, PrivateKey, Profile,
        };
        use time::{Duration, OffsetDateTime};
        let now = OffsetDateTime::now_utc();
        let mut rng = pki_core::os_rng();
        let ca = CertificateAuthority::generate_root(
            "pki test kube-apiserver CA",
            KeyAlgorithm::EcdsaP256,
            now - Duration::hours(1),
            Duration::days(2),
            &mut rng,
        )
        .unwrap();
        let key = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng).unwrap();
        let mut params =
            CertificateParams::new(Profile::Server, "kube-apiserver", now, Duration::days(1))
                .unwrap();
        params.dns_names = vec!["localhost".into()];
        params.ip_addresses = vec!["127.0.0.1".parse().unwrap()];
        let cert = params
            .signed_by(&key.public_key().unwrap(), &ca, &mut rng)
            .unwrap();
        let service_account = PrivateKey::generate(KeyAlgorithm::EcdsaP256, &mut rng).unwrap();
        let write = |name: &str, bytes: &[u8]| {
            let path = dir.join(name);
            std::fs::write(&path, bytes).unwrap();
            path
        };
        let admin_token = random_token();
        let reader_token = random_token();
        // token,user,uid,"group,..."
        let tokens = format!(
            "{admin_token},{ADMIN},{ADMIN},\"system:masters\"\n{reader_token},{READER},{READER}\n"
        );
        ServerFiles {
            ca: write("ca.crt", ca.cert.to_pem().as_bytes()),
            cert: write("apiserver.crt", cert.to_pem().as_bytes()),
            key: write("apiserver.key", key.to_pkcs8_pem().unwrap().as_bytes()),
            service_account_key: write(
                "service-account.key",
                service_account.to_pkcs8_pem().unwrap().as_bytes(),
            ),
            // --service-account-key-file takes no PKCS#8 private key.
            service_account_public: write(
                "service-account.pub",
                pki_core::pem::encode("PUBLIC KEY", &service_account.public_key_der().unwrap())
                    .as_bytes(),
            ),
            tokens: write("tokens.csv", tokens.as_bytes()),
            admin_token,
            reader_token,
        }
    }
}

/// One etcd and one kube-apiserver, alive until dropped.
pub struct KubeServer {
    // Fields drop in order: the API server before its etcd, both before
    // their directory.
    apiserver: Watched,
    etcd: Watched,
    port: u16,
    files: ServerFiles,
    admin_kubeconfig: PathBuf,
    reader_kubeconfig: PathBuf,
    kubeconfig: PathBuf,
    started_in: Duration,
    dir: tempfile::TempDir,
}

impl KubeServer {
    /// Starts a fresh etcd and API server and waits until `/readyz`
    /// answers 200 (RBAC's bootstrap roles are in place by then).
    pub fn start() -> KubeServer {
        let tools = tools();
        let dir = tempfile::Builder::new()
            .prefix("pki-kube-test")
            .tempdir()
            .unwrap();
        let files = ServerFiles::write(dir.path());
        let mut last_error = String::new();
        // A port taken between choosing and binding it makes a server
        // exit: choose again.
        for attempt in 0..3 {
            match Launch::new(tools, dir.path(), &files, attempt).run() {
                Ok((etcd, apiserver, port, started_in)) => {
                    let write = |name: &str, users: &[(&str, &str)]| {
                        let path = dir.path().join(name);
                        std::fs::write(&path, kubeconfig(port, &files.ca, users)).unwrap();
                        path
                    };
                    let admin = (ADMIN, files.admin_token.as_str());
                    let reader = (READER, files.reader_token.as_str());
                    return KubeServer {
                        admin_kubeconfig: write("admin.kubeconfig", &[admin]),
                        reader_kubeconfig: write("reader.kubeconfig", &[reader]),
                        kubeconfig: write("kubeconfig", &[admin, reader]),
                        apiserver,
                        etcd,
                        port,
                        files,
                        started_in,
                        dir,
                    };
                }
                Err(e) => last_error = e,
            }
        }
        panic!("kube-apiserver did not start: {last_error}");
    }

    /// `https://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("https://127.0.0.1:{}", self.port)
    }

    /// A kubeconfig whose one context (named after the user, namespace
    /// `default`) is the admin's.
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// A kubeconfig whose one context is the unprivileged user's.
    pub fn reader_kubeconfig(&self) -> &Path {
        &self.reader_kubeconfig
    }

    /// A kubeconfig with both users' contexts, named after them (`pki-admin`,
    /// the current one, and `pki-reader`), for `kube://CONTEXT@...`.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The CA bundle that verifies the server's certificate.
    pub fn ca(&self) -> &Path {
        &self.files.ca
    }

    /// The admin's bearer token (`system:masters`), for clients that do
    /// not read kubeconfigs (the Go tests' own REST calls).
    pub fn admin_token(&self) -> &str {
        &self.files.admin_token
    }

    /// How long the server took from its start to answering `/readyz`.
    pub fn started_in(&self) -> Duration {
        self.started_in
    }

    /// The process ids of the API server's and etcd's watchdogs.
    pub fn pids(&self) -> (u32, u32) {
        (self.apiserver.pid(), self.etcd.pid())
    }

    /// The temporary directory holding the data, certificates and logs.
    pub fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// One attempt at starting etcd and the API server on fresh ports.
struct Launch<'a> {
    tools: &'a Tools,
    dir: &'a Path,
    files: &'a ServerFiles,
    attempt: u32,
    etcd_client: u16,
    etcd_peer: u16,
    port: u16,
}

impl<'a> Launch<'a> {
    fn new(tools: &'a Tools, dir: &'a Path, files: &'a ServerFiles, attempt: u32) -> Self {
        Launch {
            tools,
            dir,
            files,
            attempt,
            etcd_client: free_port(),
            etcd_peer: free_port(),
            port: free_port(),
        }
    }

    fn etcd_args(&self) -> Vec<String> {
        let client = format!("http://127.0.0.1:{}", self.etcd_client);
        let peer = format!("http://127.0.0.1:{}", self.etcd_peer);
        vec![
            "--name=pki-kube-test".into(),
            format!(
                "--data-dir={}",
                self.dir.join(format!("etcd{}", self.attempt)).display()
            ),
            format!("--listen-client-urls={client}"),
            format!("--advertise-client-urls={client}"),
            format!("--listen-peer-urls={peer}"),
            format!("--initial-advertise-peer-urls={peer}"),
            format!("--initial-cluster=pki-kube-test={peer}"),
            // A test's data dies with it: no fsync, a short election.
            "--unsafe-no-fsync".into(),
            "--heartbeat-interval=20".into(),
            "--election-timeout=200".into(),
            "--log-level=warn".into(),
        ]
    }

    fn apiserver_args(&self) -> Vec<String> {
        let f = self.files;
        let path = |p: &Path| p.display().to_string();
        vec![
            format!("--etcd-servers=http://127.0.0.1:{}", self.etcd_client),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--secure-port={}", self.port),
            format!("--cert-dir={}", path(self.dir)),
            format!("--tls-cert-file={}", path(&f.cert)),
            format!("--tls-private-key-file={}", path(&f.key)),
            format!("--token-auth-file={}", path(&f.tokens)),
            "--authorization-mode=RBAC".into(),
            "--anonymous-auth=false".into(),
            // No Service endpoints for this address: the server is alone.
            "--endpoint-reconciler-type=none".into(),
            format!(
                "--service-account-key-file={}",
                path(&f.service_account_public)
            ),
            format!(
                "--service-account-signing-key-file={}",
                path(&f.service_account_key)
            ),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            "--service-cluster-ip-range=10.0.0.0/24".into(),
            "--profiling=false".into(),
        ]
    }

    /// Starts etcd, then (once etcd is healthy, so that a failure names the
    /// server that failed) the API server, and waits for `/readyz`; on
    /// failure both are stopped (dropped) and the error carries the end of
    /// the log of the one that failed.
    fn run(self) -> Result<(Watched, Watched, u16, Duration), String> {
        let started = Instant::now();
        let deadline = started + START_LIMIT;
        let log = |name: &str| self.dir.join(format!("{name}{}.log", self.attempt));
        let mut etcd = Watched::spawn("etcd", &self.tools.etcd, &self.etcd_args(), log("etcd"));
        wait_for(&mut [&mut etcd], deadline, "etcd's /health", || {
            etcd_healthy(self.etcd_client)
        })?;
        let mut apiserver = Watched::spawn(
            "kube-apiserver",
            &self.tools.apiserver,
            &self.apiserver_args(),
            log("kube-apiserver"),
        );
        wait_for(
            &mut [&mut etcd, &mut apiserver],
            deadline,
            "kube-apiserver's /readyz",
            || readyz(self.port, &self.files.ca, &self.files.admin_token),
        )?;
        Ok((etcd, apiserver, self.port, started.elapsed()))
    }
}

/// Polls `ready` until it holds, one of `servers` exits, or `deadline`.
fn wait_for(
    servers: &mut [&mut Watched],
    deadline: Instant,
    what: &str,
    ready: impl Fn() -> bool,
) -> Result<(), String> {
    while Instant::now() < deadline {
        for server in servers.iter_mut() {
            if let Some(status) = server.exited() {
                return Err(format!(
                    "{} exited with {status}:\n{}",
                    server.name,
                    server.log_tail()
                ));
            }
        }
        if ready() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let last = servers.last().expect("a server to wait for");
    Err(format!(
        "no answer from {what} within {START_LIMIT:?}:\n{}",
        last.log_tail()
    ))
}

/// Whether etcd's `GET /health` (plain HTTP on its client port) says it is.
fn etcd_healthy(port: u16) -> bool {
    let Ok(mut tcp) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let request =
        format!("GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n");
    let mut answer = Vec::new();
    tcp.write_all(request.as_bytes()).is_ok()
        && tcp.read_to_end(&mut answer).is_ok()
        && String::from_utf8_lossy(&answer).contains(r#""health":"true""#)
}

/// Whether `GET /readyz` with the admin's token answers 200 OK.
fn readyz(port: u16, ca: &Path, token: &str) -> bool {
    let Ok(mut tcp) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    tcp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut connection = rustls::ClientConnection::new(
        tls_config(ca),
        rustls::pki_types::ServerName::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()),
    )
    .unwrap();
    let mut tls = rustls::Stream::new(&mut connection, &mut tcp);
    let request = format!(
        "GET /readyz HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\
         Authorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    );
    if tls.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = Vec::new();
    // The server closes the connection after answering; an unclean close
    // is still an answer.
    let _ = tls.read_to_end(&mut answer);
    answer.starts_with(b"HTTP/1.1 200 ")
}

/// A rustls client trusting `ca` only (built once per CA file).
fn tls_config(ca: &Path) -> Arc<rustls::ClientConfig> {
    use rustls::pki_types::{CertificateDer, pem::PemObject};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Arc::new(
        rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth(),
    )
}

/// A kubeconfig with one cluster and, for each user, a user (its bearer
/// token) and a context named after it, namespace `default`; the first
/// user's context is the current one.
fn kubeconfig(port: u16, ca: &Path, users: &[(&str, &str)]) -> String {
    let mut text = format!(
        "apiVersion: v1
kind: Config
clusters:
- name: pki-test
  cluster:
    server: https://127.0.0.1:{port}
    certificate-authority: {ca:?}
current-context: {current}
users:
",
        ca = ca.display().to_string(),
        current = users[0].0,
    );
    for (user, token) in users {
        text += &format!("- name: {user}\n  user:\n    token: {token:?}\n");
    }
    text += "contexts:\n";
    for (user, _) in users {
        text += &format!(
            "- name: {user}\n  context:\n    cluster: pki-test\n    user: {user}\n    namespace: default\n"
        );
    }
    text
}
