//! Store URLs: `kube://[CONTEXT@]NAMESPACE/NAME`.

use std::fmt;
use std::str::FromStr;

/// The scheme of a Kubernetes store URL.
pub const SCHEME: &str = "kube://";

/// The longest store NAME: it is a label value (`pki.invalid/store`), and
/// Kubernetes caps those at 63 characters.
pub const MAX_NAME_LEN: usize = 63;

/// Where a Kubernetes store lives: a kubeconfig context (None: the current
/// one, or the in-cluster service account), a namespace, and the store's
/// name, which every object of the store starts with and carries as a
/// label.
///
/// Written `kube://[CONTEXT@]NAMESPACE/NAME`. NAMESPACE and NAME are
/// DNS-1123 labels (1 to 63 of `[a-z0-9-]`, starting and ending with a
/// letter or digit), as Kubernetes requires of namespaces and label
/// values. CONTEXT is everything before the last `@` (a context name may
/// hold `/` and `:`, as EKS's `arn:aws:eks:…:cluster/NAME` does), not
/// empty and without control characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct KubeUrl {
    context: Option<String>,
    namespace: String,
    name: String,
}

/// A store URL that cannot be used. A program that takes URLs from its
/// users reports this as bad usage, unlike a server that cannot be reached.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UrlError {
    /// The text does not start with `kube://`.
    #[error("\"{}\" is not a Kubernetes store URL: expected kube://[CONTEXT@]NAMESPACE/NAME", .url.escape_debug())]
    NotKube {
        /// The text given.
        url: String,
    },
    /// The URL lacks its namespace or its name, or has more segments.
    #[error("invalid Kubernetes store URL \"{}\": {reason} (expected kube://[CONTEXT@]NAMESPACE/NAME)", .url.escape_debug())]
    Shape {
        /// The text given.
        url: String,
        /// What is wrong.
        reason: &'static str,
    },
    /// The context before `@` is empty or holds control characters.
    #[error("invalid kubeconfig context \"{}\": {reason}", .context.escape_debug())]
    Context {
        /// The context as written.
        context: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The namespace or the name is not a DNS-1123 label.
    #[error("invalid {what} \"{}\": {reason}", .value.escape_debug())]
    Label {
        /// `namespace` or `store name`.
        what: &'static str,
        /// The value as written.
        value: String,
        /// What is wrong with it.
        reason: &'static str,
    },
}

/// Whether `text` is meant as a Kubernetes store URL (starts with
/// `kube://`), so that a caller can route it here and report a malformed
/// one as such rather than as a directory.
pub fn is_kube_url(text: &str) -> bool {
    text.starts_with(SCHEME)
}

impl KubeUrl {
    /// A URL from its parts, each checked as [`KubeUrl::parse`] checks it.
    ///
    /// # Errors
    ///
    /// - [`UrlError::Context`] when `context` is empty or holds a control
    ///   character;
    /// - [`UrlError::Label`] when `namespace` or `name` is not a DNS-1123
    ///   label.
    pub fn new(
        context: Option<&str>,
        namespace: &str,
        name: &str,
    ) -> std::result::Result<Self, UrlError> {
        if let Some(context) = context {
            check_context(context)?;
        }
        check_label("namespace", namespace)?;
        check_label("store name", name)?;
        Ok(KubeUrl {
            context: context.map(str::to_string),
            namespace: namespace.to_string(),
            name: name.to_string(),
        })
    }

    /// Parses `kube://[CONTEXT@]NAMESPACE/NAME`.
    ///
    /// # Errors
    ///
    /// - [`UrlError::NotKube`] when `url` does not start with `kube://`;
    /// - [`UrlError::Shape`] when the namespace or the name is missing, or more
    ///   than NAMESPACE/NAME follows the context;
    /// - the errors of [`KubeUrl::new`] for the parts.
    pub fn parse(url: &str) -> std::result::Result<Self, UrlError> {
        let Some(rest) = url.strip_prefix(SCHEME) else {
            return Err(UrlError::NotKube { url: url.into() });
        };
        let shape = |reason| UrlError::Shape {
            url: url.into(),
            reason,
        };
        let (context, path) = match rest.rsplit_once('@') {
            Some((context, path)) => (Some(context), path),
            None => (None, rest),
        };
        let Some((namespace, name)) = path.split_once('/') else {
            return Err(shape("no NAME after the namespace"));
        };
        if namespace.is_empty() {
            return Err(shape("no namespace"));
        }
        if name.is_empty() {
            return Err(shape("no store name"));
        }
        if name.contains('/') {
            return Err(shape("more than NAMESPACE/NAME after the context"));
        }
        KubeUrl::new(context, namespace, name)
    }

    /// The kubeconfig context, None for the current one.
    pub fn context(&self) -> Option<&str> {
        self.context.as_deref()
    }

    /// The namespace every object of the store is in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The store's name: every object's name starts with it, and its
    /// `pki.invalid/store` label is it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The store as the cluster knows it, `kube://NAMESPACE/NAME`: the URL
    /// without its kubeconfig context, which says how one client reaches
    /// the API server, not which store it is (two replicas, or `pki
    /// status` and the controller, may name different contexts for the
    /// same cluster). What the controller writes on the objects it owns.
    pub fn identity(&self) -> String {
        format!("{SCHEME}{}/{}", self.namespace, self.name)
    }

    /// Whether `marker`, a store URL written on an object, names this
    /// store: the same namespace and name, whatever context either names
    /// (markers written with a context before [`identity`](Self::identity)
    /// left it out still match).
    pub fn is_same_store(&self, marker: &str) -> bool {
        KubeUrl::parse(marker)
            .is_ok_and(|other| other.namespace == self.namespace && other.name == self.name)
    }
}

fn check_context(context: &str) -> std::result::Result<(), UrlError> {
    let bad = |reason| {
        Err(UrlError::Context {
            context: context.into(),
            reason,
        })
    };
    if context.is_empty() {
        return bad("is empty (leave out the @ for the current context)");
    }
    if context.len() > 253 {
        return bad("is longer than 253 bytes");
    }
    if context.chars().any(char::is_control) {
        return bad("holds a control character");
    }
    Ok(())
}

/// Checks a DNS-1123 label: 1 to 63 of `[a-z0-9-]`, a letter or digit at
/// both ends.
pub(crate) fn check_label(what: &'static str, value: &str) -> std::result::Result<(), UrlError> {
    let bad = |reason| {
        Err(UrlError::Label {
            what,
            value: value.into(),
            reason,
        })
    };
    if value.is_empty() || value.len() > MAX_NAME_LEN {
        return bad("must be 1 to 63 characters");
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return bad("may only hold a-z, 0-9 and '-'");
    }
    if value.starts_with('-') || value.ends_with('-') {
        return bad("must start and end with a letter or digit");
    }
    Ok(())
}

impl fmt::Display for KubeUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(SCHEME)?;
        if let Some(context) = &self.context {
            write!(f, "{context}@")?;
        }
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

impl FromStr for KubeUrl {
    type Err = UrlError;
    fn from_str(s: &str) -> std::result::Result<Self, Self::Err> {
        KubeUrl::parse(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_is_the_same_whatever_context_names_it() {
        let with = KubeUrl::parse("kube://admin@pki/ca").unwrap();
        let without = KubeUrl::parse("kube://pki/ca").unwrap();
        assert_eq!(with.identity(), "kube://pki/ca");
        assert_eq!(without.identity(), "kube://pki/ca");
        for marker in [
            "kube://pki/ca",
            "kube://admin@pki/ca",
            "kube://other@pki/ca",
        ] {
            assert!(with.is_same_store(marker), "{marker}");
            assert!(without.is_same_store(marker), "{marker}");
        }
        for marker in [
            "kube://pki/cb",
            "kube://pkj/ca",
            "kube://admin@ca",
            "pki/ca",
            "",
        ] {
            assert!(!with.is_same_store(marker), "{marker}");
        }
    }

    #[test]
    fn a_url_names_its_context_namespace_and_name_and_prints_as_written() {
        let cases = [
            (
                "kube://pki-system/service-ca",
                None,
                "pki-system",
                "service-ca",
            ),
            ("kube://admin@pki/ca", Some("admin"), "pki", "ca"),
            (
                "kube://arn:aws:eks:eu-west-1:1:cluster/prod@ns/s0",
                Some("arn:aws:eks:eu-west-1:1:cluster/prod"),
                "ns",
                "s0",
            ),
            ("kube://a@b@ns/x", Some("a@b"), "ns", "x"),
        ];
        for (text, context, namespace, name) in cases {
            let url = KubeUrl::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(url.context(), context, "{text}");
            assert_eq!(url.namespace(), namespace, "{text}");
            assert_eq!(url.name(), name, "{text}");
            assert_eq!(url.to_string(), text);
            assert_eq!(text.parse::<KubeUrl>().ok(), Some(url));
        }
    }

    #[test]
    fn a_malformed_url_is_a_typed_error_naming_what_is_wrong() {
        let long = "a".repeat(64);
        let cases: Vec<(String, &str)> = vec![
            ("etcd://h/p".into(), "not a Kubernetes store URL"),
            ("kube://".into(), "no NAME"),
            ("kube://ns".into(), "no NAME"),
            ("kube:///name".into(), "no namespace"),
            ("kube://ns/".into(), "no store name"),
            ("kube://ns/a/b".into(), "more than NAMESPACE/NAME"),
            ("kube://@ns/a".into(), "context \"\": is empty"),
            ("kube://c\u{7}@ns/a".into(), "control character"),
            ("kube://NS/a".into(), "namespace \"NS\": may only hold"),
            ("kube://ns/a_b".into(), "store name \"a_b\": may only hold"),
            ("kube://ns/-a".into(), "must start and end"),
            ("kube://ns-/a".into(), "must start and end"),
            (format!("kube://ns/{long}"), "1 to 63"),
            ("kube://ns/a\u{e9}".into(), "may only hold"),
        ];
        for (text, expected) in cases {
            let error = KubeUrl::parse(&text).expect_err(&text);
            let message = error.to_string();
            assert!(message.contains(expected), "{text}: {message}");
            assert!(!message.contains('\n'), "{message}");
        }
        assert!(is_kube_url("kube://x"));
        assert!(!is_kube_url("etcd://x"));
    }

    proptest::proptest! {
        /// No text panics the parser, and what it accepts prints back as
        /// it was written.
        #[test]
        fn any_text_parses_or_is_refused_without_panic(text in "\\PC{0,80}", tail in "[a-z0-9@/:-]{0,40}") {
            for candidate in [text.clone(), format!("kube://{text}"), format!("kube://{tail}")] {
                if let Ok(url) = KubeUrl::parse(&candidate) {
                    proptest::prop_assert_eq!(url.to_string(), candidate.clone());
                    proptest::prop_assert_eq!(KubeUrl::parse(&url.to_string()).ok(), Some(url));
                }
            }
        }
    }
}
