//! Which endpoint of a cluster a request goes to: one channel per endpoint,
//! the one that answered last first, and the others in turn while a
//! connection cannot be made.
//!
//! tonic's balanced channel sends each request to any endpoint it deems
//! ready, and a lazily connected endpoint that is down counts as ready
//! until a request to it fails: with one member of three down, a third of
//! the requests failed, and a command that makes a dozen failed nearly
//! always. Here a request moves on to the next endpoint only when the
//! connection to one could not be made, so nothing was sent and trying
//! elsewhere cannot apply it twice; any other failure (no answer in time,
//! a connection lost mid-request, etcd's own refusal) is the request's
//! answer, as with one endpoint.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The endpoints of one cluster, in the URL's order, and the one to try
/// first.
pub(super) struct Route<T> {
    endpoints: Vec<T>,
    preferred: AtomicUsize,
}

impl<T: Clone> Route<T> {
    /// Every endpoint's channel, in order: at least one.
    pub(super) fn new(endpoints: Vec<T>) -> Self {
        Route {
            endpoints,
            preferred: AtomicUsize::new(0),
        }
    }

    /// The endpoint requests go to first (watches are opened on it).
    pub(super) fn preferred(&self) -> usize {
        self.preferred.load(Ordering::Relaxed) % self.endpoints.len().max(1)
    }

    /// Sends with `send` on the preferred endpoint and, while the
    /// connection to one could not be made, on each other in turn; the
    /// first endpoint that is reached becomes the preferred one. The
    /// answer is the first one not about a connection, or the last
    /// endpoint's failure.
    pub(super) async fn send<R, F, Fut>(&self, send: F) -> Result<R, tonic::Status>
    where
        F: Fn(T) -> Fut,
        Fut: Future<Output = Result<R, tonic::Status>>,
    {
        let count = self.endpoints.len();
        let first = self.preferred();
        let mut tried = 0;
        loop {
            let at = (first + tried) % count;
            let Some(endpoint) = self.endpoints.get(at) else {
                return Err(tonic::Status::unavailable("the store names no endpoint"));
            };
            match send(endpoint.clone()).await {
                Err(status) if never_sent(&status) && tried + 1 < count => tried += 1,
                answer => {
                    if !matches!(&answer, Err(status) if never_sent(status)) {
                        self.preferred.store(at, Ordering::Relaxed);
                    }
                    return answer;
                }
            }
        }
    }
}

/// Whether `status` says that the connection to the endpoint could not be
/// made (refused, unreachable, no answer to the connection itself, a TLS
/// handshake that failed): then the request was never sent.
pub(crate) fn never_sent(status: &tonic::Status) -> bool {
    let mut next = std::error::Error::source(status);
    while let Some(e) = next {
        if e.downcast_ref::<tonic::ConnectError>().is_some() {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionRefused
                    | std::io::ErrorKind::HostUnreachable
                    | std::io::ErrorKind::NetworkUnreachable
                    | std::io::ErrorKind::AddrNotAvailable
            )
        {
            return true;
        }
        next = e.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::Mutex;
    use tonic::{Code, Status};

    fn refused() -> Status {
        let mut s = Status::unavailable("tcp connect error");
        let io = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        s.set_source(Arc::new(tonic::ConnectError(Box::new(io))));
        s
    }

    fn reset() -> Status {
        let mut s = Status::unavailable("connection reset");
        s.set_source(Arc::new(std::io::Error::from(
            std::io::ErrorKind::ConnectionReset,
        )));
        s
    }

    /// Sends to endpoints named by numbers, each answering as `answers`
    /// says; returns the answer and the endpoints tried, in order.
    fn run(
        route: &Route<usize>,
        answers: &[fn() -> Result<&'static str, Status>],
    ) -> (Result<&'static str, Code>, Vec<usize>) {
        let tried = Mutex::new(Vec::new());
        let answer = futures_util::FutureExt::now_or_never(route.send(|at| {
            tried.lock().unwrap_or_else(|e| e.into_inner()).push(at);
            std::future::ready(answers[at]())
        }))
        .unwrap_or_else(|| Err(Status::internal("pending")));
        let tried = tried.into_inner().unwrap_or_else(|e| e.into_inner());
        (answer.map_err(|s| s.code()), tried)
    }

    #[test]
    fn a_request_moves_on_only_from_endpoints_it_could_not_connect_to() {
        let route = Route::new(vec![0, 1, 2]);
        let (answer, tried) = run(&route, &[|| Err(refused()), || Ok("b"), || Ok("c")]);
        assert_eq!((answer, tried), (Ok("b"), vec![0, 1]));
        // The endpoint that answered is tried first from now on.
        let (answer, tried) = run(&route, &[|| Ok("a"), || Ok("b"), || Ok("c")]);
        assert_eq!((answer, tried), (Ok("b"), vec![1]));
        // A request that may have been sent is not sent again elsewhere.
        let (answer, tried) = run(&route, &[|| Ok("a"), || Err(reset()), || Ok("c")]);
        assert_eq!((answer, tried), (Err(Code::Unavailable), vec![1]));
        // Every endpoint down: the last one's failure, each tried once.
        let down: fn() -> Result<&'static str, Status> = || Err(refused());
        let (answer, tried) = run(&route, &[down; 3]);
        assert_eq!((answer, tried), (Err(Code::Unavailable), vec![1, 2, 0]));
    }

    #[test]
    fn only_a_connection_never_made_counts_as_never_sent() {
        assert!(never_sent(&refused()));
        assert!(!never_sent(&reset()));
        assert!(!never_sent(&Status::unavailable(
            "etcdserver: leader changed"
        )));
        assert!(!never_sent(&Status::deadline_exceeded("Timeout expired")));
    }
}
