//! A TCP proxy in front of etcd that can lose etcd's answers: it always
//! forwards what the client sends (so requests reach etcd and are
//! applied), and once told to, it drops every byte etcd sends back. That
//! is a lost reply: a write that landed, whose answer never comes.

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One proxy on 127.0.0.1, stopped when dropped.
pub struct Proxy {
    port: u16,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    /// Whether etcd's bytes are dropped now (on every connection).
    losing: AtomicBool,
    /// Bytes that, once the client sends them, start losing replies.
    trigger: Mutex<Option<Vec<u8>>>,
    /// After the trigger fires: how long to lose replies before cutting
    /// every open connection and forwarding again (None: lose for good).
    cut_after: Mutex<Option<Duration>>,
    /// Every socket of every connection, to cut them.
    sockets: Mutex<Vec<TcpStream>>,
    stopped: AtomicBool,
    /// Bytes the client sent, and bytes etcd sent back (lost or not).
    sent: AtomicU64,
    received: AtomicU64,
}

impl Shared {
    /// Starts losing replies; with `cut_after`, a timer then cuts every
    /// connection open by then and forwards again.
    fn start_losing(self: &Arc<Self>) {
        if self.losing.swap(true, Ordering::SeqCst) {
            return;
        }
        if let Some(after) = *self.cut_after.lock().unwrap() {
            let shared = self.clone();
            std::thread::spawn(move || {
                std::thread::sleep(after);
                shared.cut();
            });
        }
    }

    /// Closes every open connection (both sides) and forwards again.
    fn cut(&self) {
        let sockets = std::mem::take(&mut *self.sockets.lock().unwrap());
        self.losing.store(false, Ordering::SeqCst);
        for s in sockets {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

impl Proxy {
    /// A proxy to `upstream` (`HOST:PORT`), forwarding everything.
    pub fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared::default());
        let upstream = upstream.to_string();
        let accepting = shared.clone();
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if accepting.stopped.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                {
                    let mut sockets = accepting.sockets.lock().unwrap();
                    sockets.push(client.try_clone().unwrap());
                    sockets.push(server.try_clone().unwrap());
                }
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let up = accepting.clone();
                std::thread::spawn(move || pump_requests(client, server, &up));
                let down = accepting.clone();
                std::thread::spawn(move || pump_replies(s2, c2, &down));
            }
        });
        Proxy { port, shared }
    }

    /// `127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// `etcd://127.0.0.1:PORT/PREFIX`.
    pub fn url(&self, prefix: &str) -> String {
        format!("etcd://{}/{prefix}", self.endpoint())
    }

    /// From now on, drops every byte etcd sends, on every connection.
    pub fn lose_replies(&self) {
        self.shared.start_losing();
    }

    /// Loses replies from the moment the client sends `bytes` (checked
    /// across the chunks of each connection).
    pub fn lose_replies_once_sent(&self, bytes: &[u8]) {
        *self.shared.trigger.lock().unwrap() = Some(bytes.to_vec());
    }

    /// Once replies are being lost, cuts every connection `after` that and
    /// forwards again: the client's pending requests fail, and it connects
    /// again.
    pub fn cut_after(&self, after: Duration) {
        *self.shared.cut_after.lock().unwrap() = Some(after);
    }

    /// Bytes the client has sent through the proxy, and etcd has sent
    /// back: what a store's requests cost on the wire.
    pub fn bytes(&self) -> (u64, u64) {
        (
            self.shared.sent.load(Ordering::SeqCst),
            self.shared.received.load(Ordering::SeqCst),
        )
    }

    /// Whether replies are being lost now.
    pub fn losing(&self) -> bool {
        self.shared.losing.load(Ordering::SeqCst)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.shared.stopped.store(true, Ordering::SeqCst);
        self.shared.cut();
        // Wake the accepting thread so that it sees `stopped`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// Client to etcd: always forwarded; watches for the trigger.
fn pump_requests(mut from: TcpStream, mut to: TcpStream, shared: &Arc<Shared>) {
    let mut buf = vec![0u8; 64 * 1024];
    // The end of the previous chunk, so that a trigger split across two
    // chunks is still seen.
    let mut seen: Vec<u8> = Vec::new();
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        shared.sent.fetch_add(n as u64, Ordering::SeqCst);
        // Checked before forwarding, so that etcd cannot answer first.
        let trigger = shared.trigger.lock().unwrap().clone();
        if let Some(trigger) = trigger {
            seen.extend_from_slice(&buf[..n]);
            if seen.windows(trigger.len()).any(|w| w == trigger.as_slice()) {
                *shared.trigger.lock().unwrap() = None;
                shared.start_losing();
            }
            let keep = seen.len().saturating_sub(trigger.len());
            seen.drain(..keep);
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// etcd to the client: forwarded unless replies are being lost.
fn pump_replies(mut from: TcpStream, mut to: TcpStream, shared: &Shared) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        shared.received.fetch_add(n as u64, Ordering::SeqCst);
        if shared.losing.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
}
