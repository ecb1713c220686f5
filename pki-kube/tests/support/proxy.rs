//! A TCP proxy in front of the API server that can lose replies: while
//! [`Proxy::swallow`] is on, what the server sends is read and dropped, so
//! a request reaches the server and is applied but its answer never
//! comes back (what a connection lost after sending does).

#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// The proxy; it stops accepting when dropped.
pub struct Proxy {
    port: u16,
    swallow: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
}

impl Proxy {
    /// A proxy on a free 127.0.0.1 port to `upstream` (`HOST:PORT`).
    pub fn start(upstream: &str) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let swallow = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let upstream = upstream.to_string();
        let (swallow_, stop_) = (swallow.clone(), stop.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                if stop_.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(&upstream) else {
                    continue;
                };
                let never = Arc::new(AtomicBool::new(false));
                pipe(
                    client.try_clone().unwrap(),
                    server.try_clone().unwrap(),
                    never,
                );
                pipe(server, client, swallow_.clone());
            }
        });
        Proxy {
            port,
            swallow,
            stop,
        }
    }

    /// `127.0.0.1:PORT`.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Drop what the server sends (true) or pass it on again (false).
    pub fn swallow(&self, on: bool) {
        self.swallow.store(on, Ordering::SeqCst);
    }

    /// The flag itself, for a hook that runs where the proxy is not.
    pub fn swallow_flag(&self) -> Arc<AtomicBool> {
        self.swallow.clone()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so it sees the flag.
        let _ = TcpStream::connect(self.address());
    }
}

/// Copies `from` to `to` on a thread of its own, dropping what it reads
/// while `swallow` is on.
fn pipe(mut from: TcpStream, mut to: TcpStream, swallow: Arc<AtomicBool>) {
    std::thread::spawn(move || {
        let mut buffer = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buffer) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if swallow.load(Ordering::SeqCst) {
                        continue;
                    }
                    if to.write_all(&buffer[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Write);
    });
}
