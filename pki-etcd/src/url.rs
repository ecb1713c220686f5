//! Store URLs: `etcd://HOST:PORT/PREFIX` and, over TLS,
//! `etcds://HOST:PORT/PREFIX`.

use std::fmt;
use std::str::FromStr;

/// The scheme of a plaintext etcd store URL.
pub const SCHEME: &str = "etcd://";

/// The scheme of an etcd store URL reached over TLS.
pub const TLS_SCHEME: &str = "etcds://";

/// etcd's client port, used when a URL names none.
pub const DEFAULT_PORT: u16 = 2379;

/// Where an etcd store lives: one or more endpoints and the key prefix every
/// key of the store lives under.
///
/// Written `etcd://HOST:PORT/PREFIX`, or `etcds://HOST:PORT/PREFIX` when
/// the servers speak TLS; several endpoints of one cluster are separated by
/// commas (`etcds://10.0.0.1:2379,10.0.0.2:2379/pki/prod`).
/// HOST is a name, an IPv4 address or a bracketed IPv6 address; PORT
/// defaults to 2379. PREFIX is required: `/`-separated segments of
/// `[A-Za-z0-9._-]`, none empty and none starting with `.`, so there is no
/// leading, trailing or doubled slash. The store's keys are `PREFIX/<key>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EtcdUrl {
    endpoints: Vec<String>,
    prefix: String,
    tls: bool,
}

/// A store URL, endpoint or prefix that cannot be used. A program that
/// takes URLs from its users reports this as bad usage, unlike a server
/// that cannot be reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    /// The text does not start with `etcd://` or `etcds://`.
    #[error("\"{}\" is not an etcd store URL: expected etcd://HOST:PORT/PREFIX or etcds://HOST:PORT/PREFIX", .url.escape_debug())]
    NotEtcd {
        /// The text given.
        url: String,
    },
    /// The URL lacks its endpoint or its key prefix.
    #[error("invalid etcd store URL \"{}\": {reason} (expected etcd://HOST:PORT/PREFIX)", .url.escape_debug())]
    Incomplete {
        /// The text given.
        url: String,
        /// What is missing.
        reason: &'static str,
    },
    /// An endpoint (`HOST:PORT`) is malformed.
    #[error("invalid etcd endpoint \"{}\": {reason}", .endpoint.escape_debug())]
    Endpoint {
        /// The endpoint as written.
        endpoint: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The key prefix is malformed.
    #[error("invalid etcd key prefix \"{}\": {reason}", .prefix.escape_debug())]
    Prefix {
        /// The prefix as written.
        prefix: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

impl EtcdUrl {
    /// A plaintext URL from its parts: endpoints as `HOST:PORT` (or `HOST`,
    /// for port 2379) and the key prefix. [`EtcdUrl::with_tls`] makes it a
    /// TLS one.
    ///
    /// # Errors
    ///
    /// [`UrlError::Endpoint`] when `endpoints` is empty or one is malformed
    /// (bad host, port or brackets), and [`UrlError::Prefix`] when `prefix`
    /// breaks the rules above.
    pub fn new<E: AsRef<str>>(endpoints: &[E], prefix: &str) -> Result<Self, UrlError> {
        if endpoints.is_empty() {
            return Err(UrlError::Endpoint {
                endpoint: String::new(),
                reason: "at least one HOST:PORT is needed",
            });
        }
        let endpoints = endpoints
            .iter()
            .map(|e| parse_endpoint(e.as_ref()))
            .collect::<Result<Vec<_>, _>>()?;
        validate_prefix(prefix)?;
        Ok(EtcdUrl {
            endpoints,
            prefix: prefix.to_string(),
            tls: false,
        })
    }

    /// The same store reached over TLS (`etcds://`) or not (`etcd://`).
    pub fn with_tls(mut self, tls: bool) -> Self {
        self.tls = tls;
        self
    }

    /// Parses `etcd://HOST:PORT[,HOST:PORT…]/PREFIX` and the same with
    /// `etcds://`.
    ///
    /// # Errors
    ///
    /// - [`UrlError::NotEtcd`] when `url` does not start with `etcd://` or
    ///   `etcds://`;
    /// - [`UrlError::Incomplete`] when it names no `HOST:PORT` or no key
    ///   prefix;
    /// - the errors of [`EtcdUrl::new`] for the endpoints and the prefix.
    pub fn parse(url: &str) -> Result<Self, UrlError> {
        let (rest, tls) = strip_scheme(url).ok_or_else(|| UrlError::NotEtcd {
            url: url.to_string(),
        })?;
        let incomplete = |reason| UrlError::Incomplete {
            url: url.to_string(),
            reason,
        };
        let (authority, prefix) = rest
            .split_once('/')
            .ok_or_else(|| incomplete("it names no key prefix"))?;
        if authority.is_empty() {
            return Err(incomplete("it names no HOST:PORT"));
        }
        if prefix.is_empty() {
            return Err(incomplete("it names no key prefix"));
        }
        let endpoints: Vec<&str> = authority.split(',').collect();
        Ok(EtcdUrl::new(&endpoints, prefix)?.with_tls(tls))
    }

    /// Whether the servers are reached over TLS (`etcds://`).
    pub fn tls(&self) -> bool {
        self.tls
    }

    /// The endpoints, as `HOST:PORT`.
    pub fn endpoints(&self) -> &[String] {
        &self.endpoints
    }

    /// The key prefix, without a trailing slash.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }
}

impl fmt::Display for EtcdUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let scheme = if self.tls { TLS_SCHEME } else { SCHEME };
        write!(f, "{scheme}{}/{}", self.endpoints.join(","), self.prefix)
    }
}

impl FromStr for EtcdUrl {
    type Err = UrlError;
    fn from_str(s: &str) -> Result<Self, UrlError> {
        EtcdUrl::parse(s)
    }
}

/// Whether `text` is meant as an etcd store URL (it starts with
/// `etcd://` or `etcds://`), so that a program can tell it from a
/// directory before parsing it.
pub fn is_etcd_url(text: &str) -> bool {
    strip_scheme(text).is_some()
}

/// The text after the scheme, and whether the scheme is `etcds://`.
fn strip_scheme(text: &str) -> Option<(&str, bool)> {
    [(SCHEME, false), (TLS_SCHEME, true)]
        .into_iter()
        .find_map(|(scheme, tls)| {
            let head = text.get(..scheme.len())?;
            head.eq_ignore_ascii_case(scheme)
                .then(|| (&text[scheme.len()..], tls))
        })
}

fn parse_endpoint(endpoint: &str) -> Result<String, UrlError> {
    let bad = |reason| UrlError::Endpoint {
        endpoint: endpoint.to_string(),
        reason,
    };
    if endpoint.contains('@') {
        return Err(bad(
            "credentials in the URL are not supported (pass them in the store options)",
        ));
    }
    let (host, port) = if let Some(rest) = endpoint.strip_prefix('[') {
        let (v6, after) = rest
            .split_once(']')
            .ok_or_else(|| bad("an IPv6 address needs its closing ']'"))?;
        v6.parse::<std::net::Ipv6Addr>()
            .map_err(|_| bad("not an IPv6 address between '[' and ']'"))?;
        let port = match after {
            "" => None,
            p => Some(
                p.strip_prefix(':')
                    .ok_or_else(|| bad("expected ':' and a port after ']'"))?,
            ),
        };
        (&endpoint[..v6.len() + 2], port)
    } else {
        match endpoint.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (endpoint, None),
        }
    };
    if host.is_empty() {
        return Err(bad("the host is empty"));
    }
    if !host.starts_with('[')
        && !host
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_'))
    {
        return Err(bad(
            "a host may only hold letters, digits, '-', '_' and '.'",
        ));
    }
    let port = match port {
        None => DEFAULT_PORT,
        Some(p) => {
            if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad("the port must be a decimal number"));
            }
            match p.parse::<u16>() {
                Ok(n) if n > 0 => n,
                _ => return Err(bad("the port must be between 1 and 65535")),
            }
        }
    };
    Ok(format!("{host}:{port}"))
}

fn validate_prefix(prefix: &str) -> Result<(), UrlError> {
    let bad = |reason| {
        Err(UrlError::Prefix {
            prefix: prefix.to_string(),
            reason,
        })
    };
    if prefix.is_empty() {
        return bad("a key prefix is required");
    }
    if prefix.len() > 512 {
        return bad("must be at most 512 bytes");
    }
    for segment in prefix.split('/') {
        if segment.is_empty() {
            return bad("must not start or end with '/' or hold '//'");
        }
        if segment.starts_with('.') {
            return bad("segments must not start with '.'");
        }
        if !segment
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        {
            return bad("may only hold A-Z, a-z, 0-9, '-', '_', '.' and '/'");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn urls_parse_into_endpoints_and_prefix() {
        let u = EtcdUrl::parse("etcd://127.0.0.1:2379/pki").unwrap();
        assert_eq!(u.endpoints(), ["127.0.0.1:2379"]);
        assert_eq!(u.prefix(), "pki");
        assert_eq!(u.to_string(), "etcd://127.0.0.1:2379/pki");

        let u = EtcdUrl::parse("ETCD://a.example:1,[::1]:2,b/pki/prod.v1").unwrap();
        assert_eq!(u.endpoints(), ["a.example:1", "[::1]:2", "b:2379"]);
        assert_eq!(u.prefix(), "pki/prod.v1");
        assert_eq!(u, u.to_string().parse().unwrap());
        assert!(is_etcd_url("etcd://x/y") && !is_etcd_url("/var/lib/pki"));
        assert!(!u.tls());

        let u = EtcdUrl::parse("etcds://a:1,b:2/pki").unwrap();
        assert!(u.tls() && is_etcd_url("ETCDS://a/p"));
        assert_eq!(u.endpoints(), ["a:1", "b:2"]);
        assert_eq!(u.to_string(), "etcds://a:1,b:2/pki");
        assert_eq!(u, u.to_string().parse().unwrap());
        assert_eq!(
            EtcdUrl::new(&["a:1"], "p")
                .unwrap()
                .with_tls(true)
                .to_string(),
            "etcds://a:1/p"
        );
    }

    #[test]
    fn malformed_urls_are_url_errors_saying_what_is_wrong() {
        for (url, expect) in [
            ("/var/lib/pki", "not an etcd store URL"),
            ("http://h:1/p", "not an etcd store URL"),
            ("etcdss://h:1/p", "not an etcd store URL"),
            ("etcds://h:1", "names no key prefix"),
            ("etcd://h:1", "names no key prefix"),
            ("etcd://h:1/", "names no key prefix"),
            ("etcd://h:1/pki/", "must not start or end with '/'"),
            ("etcd://h:1//pki", "must not start or end with '/'"),
            ("etcd://h:1/a//b", "hold '//'"),
            ("etcd://h:1/a/../b", "must not start with '.'"),
            ("etcd://h:1/a b", "may only hold"),
            ("etcd://h:1/a?x=1", "may only hold"),
            ("etcd:///pki", "\"etcd:///pki\": it names no HOST:PORT"),
            ("etcd://:2379/pki", "the host is empty"),
            ("etcd://h:/pki", "decimal number"),
            ("etcd://h:x/pki", "decimal number"),
            ("etcd://h:0/pki", "between 1 and 65535"),
            ("etcd://h:65536/pki", "between 1 and 65535"),
            ("etcd://u:p@h:1/pki", "credentials"),
            ("etcd://[::1/pki", "closing ']'"),
            ("etcd://[zz]:1/pki", "not an IPv6 address"),
            ("etcd://h:1,,h:2/pki", "the host is empty"),
        ] {
            let err = EtcdUrl::parse(url).unwrap_err().to_string();
            assert!(err.contains(expect), "{url}: {err}");
        }
        assert!(EtcdUrl::new::<&str>(&[], "p").is_err());
    }
}
