//! Why a request to the API server failed, and whether it may have been
//! applied anyway: what separates "nothing changed" from "the outcome is
//! unknown", and the one line a refused account gets.

use crate::url::KubeUrl;
use pki_rotate::{RotateError, StoreError};
use std::time::Duration;

/// What a backend error says: one line, whatever the transport said.
#[derive(Debug)]
pub(crate) struct Failure(String);

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Failure {}

/// Why one request failed.
#[derive(Debug)]
pub(crate) enum Fail {
    /// kube-rs's error: the server's answer (a `Status`) or the transport's.
    Kube(kube::Error),
    /// No answer within the request timeout.
    Timeout(Duration),
    /// Anything else (a malformed object, the runtime).
    Other(String),
}

impl Fail {
    /// The HTTP code the server answered with, if it answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            Fail::Kube(kube::Error::Api(status)) => Some(status.code),
            _ => None,
        }
    }

    /// 409: a stale `resourceVersion`, or an object that already exists.
    pub fn is_conflict(&self) -> bool {
        self.code() == Some(409)
    }

    /// 404: no such object.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    /// Whether the request may have reached the server and been applied
    /// although it failed: anything but an answer from the server (which
    /// refused it), or a connection that could not be made. When in doubt,
    /// yes: claiming that nothing changed must be certain.
    pub fn may_have_been_applied(&self) -> bool {
        match self {
            Fail::Kube(kube::Error::Api(_)) => false,
            Fail::Kube(e) => !never_sent(e),
            Fail::Timeout(_) => true,
            Fail::Other(_) => false,
        }
    }

    /// One line: for a refusal, the server's message with its code.
    pub fn describe(&self) -> String {
        let text = match self {
            Fail::Kube(kube::Error::Api(status)) => {
                format!("{} {}: {}", status.code, status.reason, status.message)
            }
            Fail::Kube(e) => chain(e),
            Fail::Timeout(d) => format!("no answer from the API server within {d:?}"),
            Fail::Other(s) => s.clone(),
        };
        text.chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect()
    }
}

/// Whether the transport failed before sending anything: the connection
/// was refused or could not be made (hyper-util's "client error
/// (Connect)").
fn never_sent(e: &kube::Error) -> bool {
    let mut source: Option<&dyn std::error::Error> = Some(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::ConnectionRefused
        {
            return true;
        }
        if s.to_string().starts_with("client error (Connect)") {
            return true;
        }
        source = s.source();
    }
    false
}

/// `e` and its sources, each level once: transports wrap the same message
/// at several levels.
fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

/// What a request was: the verb (as RBAC names it) and the object, so a
/// refusal says what the account lacks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Doing<'a> {
    pub verb: &'static str,
    pub name: &'a str,
}

/// The error for a failed request. A 403 names the verb and resource the
/// account may not use, in one line:
/// `kube://ns/s: may not get secrets in namespace "ns" (403 Forbidden: …)`.
pub(crate) fn backend_error(url: &KubeUrl, doing: Doing<'_>, fail: &Fail) -> RotateError {
    let text = if fail.code() == Some(403) {
        format!(
            "may not {} secrets in namespace \"{}\" ({})",
            doing.verb,
            url.namespace(),
            fail.describe()
        )
    } else {
        format!(
            "{} secret \"{}\": {}",
            doing.verb,
            doing.name,
            fail.describe()
        )
    };
    backend(url, text)
}

/// A [`StoreError::Backend`] naming the store, on one line whatever
/// `text` holds (kubeconfig errors quote the file).
pub(crate) fn backend(url: &KubeUrl, text: String) -> RotateError {
    let text = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    RotateError::Store(StoreError::Backend {
        store: url.to_string(),
        source: Box::new(Failure(text)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(code: u16) -> Fail {
        Fail::Kube(kube::Error::Api(Box::new(kube::core::Status {
            code,
            reason: "Forbidden".into(),
            message: "secrets \"s.signer\" is forbidden: User \"r\" cannot get resource \"secrets\"\nin API group \"\"".into(),
            ..kube::core::Status::default()
        })))
    }

    #[test]
    fn only_an_answer_or_a_connection_never_made_is_certain_not_to_have_landed() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let reset = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
        let cases = [
            (api(409), false),
            (api(500), false),
            (Fail::Timeout(Duration::from_secs(1)), true),
            (Fail::Kube(kube::Error::Service(Box::new(reset))), true),
            (Fail::Kube(kube::Error::Service(Box::new(refused))), false),
            (Fail::Other("x".into()), false),
        ];
        for (fail, may) in cases {
            assert_eq!(fail.may_have_been_applied(), may, "{}", fail.describe());
        }
    }

    #[test]
    fn a_refusal_is_one_line_naming_the_verb_and_the_resource() {
        let url = KubeUrl::parse("kube://ns/s").unwrap();
        let doing = Doing {
            verb: "get",
            name: "s.signer",
        };
        let message = backend_error(&url, doing, &api(403)).to_string();
        assert!(
            message.starts_with(
                "kube://ns/s: may not get secrets in namespace \"ns\" (403 Forbidden: "
            ),
            "{message}"
        );
        assert!(!message.contains('\n'), "{message}");
        assert!(api(409).is_conflict() && api(404).is_not_found());
        let message = backend(&url, "kubeconfig:\n  line two".into()).to_string();
        assert_eq!(message, "kube://ns/s: kubeconfig:   line two");
    }
}
