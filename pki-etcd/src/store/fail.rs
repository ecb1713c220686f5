//! Why a request to etcd failed, and whether it may have been applied
//! anyway: what separates "nothing changed" from "the outcome is unknown".

use crate::client::Error;
use crate::url::EtcdUrl;
use pki_rotate::RotateError;
use std::time::Duration;

/// What a backend error says: what the store was doing and what happened.
/// One line, whatever the transport said.
#[derive(Debug)]
pub(super) struct Failure {
    doing: String,
    detail: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.doing, self.detail)
    }
}

impl std::error::Error for Failure {}

/// Why one request failed.
pub(super) enum Fail {
    Etcd(crate::client::Error),
    Timeout(Duration),
    Hook(std::io::Error),
    Other(String),
}

impl Fail {
    /// Whether the request may have reached etcd and been applied although
    /// it failed: anything but a refusal etcd answered with, or a request
    /// that was never sent (a hook, a connection that could not be made).
    /// When in doubt, yes: claiming that nothing changed must be certain.
    pub(super) fn may_have_been_applied(&self) -> bool {
        use tonic::Code;
        match self {
            Fail::Hook(_) | Fail::Other(_) => false,
            Fail::Timeout(_) => true,
            Fail::Etcd(Error::GRpcStatus(s)) => match s.code() {
                // etcd checked the request and refused it (too large, too
                // many operations, not allowed): it was not applied.
                Code::InvalidArgument
                | Code::PermissionDenied
                | Code::Unauthenticated
                | Code::FailedPrecondition
                | Code::OutOfRange
                | Code::Unimplemented => false,
                // etcd's own "request timed out" and "leader changed" are
                // Unavailable too, and a proposal behind them may still be
                // applied: only a connection never made is certain.
                Code::Unavailable => !crate::client::never_sent(s),
                _ => true,
            },
            // A channel that could not be set up sent nothing.
            Fail::Etcd(Error::TransportError(_) | Error::InvalidArgs(_)) => false,
        }
    }

    pub(super) fn is_compacted(&self) -> bool {
        matches!(self, Fail::Etcd(Error::GRpcStatus(s)) if s.message().contains("compacted"))
    }

    pub(super) fn describe(&self) -> String {
        let text = match self {
            Fail::Etcd(Error::GRpcStatus(s)) => {
                // The status's own Display carries metadata; its sources
                // say what the transport saw (connection refused…).
                let mut text = format!("{:?}: {}", s.code(), s.message());
                extend_with_sources(&mut text, std::error::Error::source(s));
                text
            }
            Fail::Etcd(Error::TransportError(e)) => {
                format!("transport error: {}", chain(e))
            }
            Fail::Etcd(e) => e.to_string(),
            Fail::Timeout(d) => format!("no answer from etcd within {d:?}"),
            Fail::Hook(e) => format!("hook: {e}"),
            Fail::Other(s) => s.clone(),
        };
        text.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    }
}

/// `e` and its sources, each level once: transports wrap the same message
/// at several levels.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    extend_with_sources(&mut text, e.source());
    text
}

fn extend_with_sources(text: &mut String, mut source: Option<&dyn std::error::Error>) {
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
}

pub(super) fn backend_error(url: &EtcdUrl, doing: impl Into<String>, fail: Fail) -> RotateError {
    RotateError::Store(pki_rotate::StoreError::Backend {
        store: url.to_string(),
        source: Box::new(Failure {
            doing: doing.into(),
            detail: fail.describe(),
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use tonic::{Code, Status};

    fn status(code: Code, source: Option<std::io::ErrorKind>) -> Fail {
        let mut s = Status::new(code, "test");
        if let Some(kind) = source {
            s.set_source(Arc::new(std::io::Error::from(kind)));
        }
        Fail::Etcd(Error::GRpcStatus(s))
    }

    #[test]
    fn only_a_refusal_or_a_request_never_sent_is_certain_not_to_have_landed() {
        use std::io::ErrorKind::{ConnectionRefused, ConnectionReset};
        let cases = [
            // No answer: it may have been applied, or be applied later.
            (Fail::Timeout(Duration::from_secs(1)), true),
            (status(Code::Cancelled, None), true),
            (status(Code::DeadlineExceeded, None), true),
            (status(Code::Unknown, Some(ConnectionReset)), true),
            (status(Code::Unavailable, Some(ConnectionReset)), true),
            // etcd's "request timed out" and "leader changed".
            (status(Code::Unavailable, None), true),
            (status(Code::Internal, None), true),
            // Never sent: a hook, a connection that could not be made.
            (Fail::Hook(std::io::Error::other("stop")), false),
            (status(Code::Unavailable, Some(ConnectionRefused)), false),
            // etcd answered with a refusal.
            (status(Code::InvalidArgument, None), false),
            (status(Code::PermissionDenied, None), false),
            (status(Code::FailedPrecondition, None), false),
        ];
        for (fail, may) in cases {
            assert_eq!(fail.may_have_been_applied(), may, "{}", fail.describe());
        }
    }
}
