//! Free loopback ports for the test servers (etcd, kube-apiserver).

use std::net::TcpListener;
use std::sync::Mutex;

/// A port nothing listens on now, never handed out before in this process.
///
/// Tests run as threads of one process, each starting servers on ports
/// chosen this way, and the kernel may hand a port just released to the
/// next caller. A server that cannot bind its port exits and is started
/// again on others; but while it starts, a health check on a port it
/// shares with another test's server is answered by that server, and
/// the test goes on with a server that is gone. So a port is handed out
/// once per process (servers of other processes still get one that
/// cannot bind, and exit).
pub fn free_port() -> u16 {
    static HANDED_OUT: Mutex<std::collections::BTreeSet<u16>> =
        Mutex::new(std::collections::BTreeSet::new());
    loop {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        if HANDED_OUT
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(port)
        {
            return port;
        }
    }
}
