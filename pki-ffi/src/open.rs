//! `pki_store_open`: the store a location names, with options as JSON like
//! every other input: an etcd store's TLS material, client certificate,
//! user and timeouts, the store key that seals private material, and the
//! PKCS#11 module and PIN that reach the tokens holding CA keys.

use crate::abi::{bytes_in, into_handle, opt_bytes, os_rng};
use crate::error::{Failure, pki_result};
use crate::store::{Backing, pki_store};
use pki_core::{Pkcs11Module, Pkcs11Pin, Pkcs11Tokens, TokenAccess};
use pki_etcd::{EtcdOptions, EtcdTls, EtcdUrl, EtcdUser};
use pki_rotate::{SealingKeys, StoreKey, request};
use serde::Deserialize;
use std::ffi::c_char;
use std::path::Path;
use std::sync::Arc;
use zeroize::Zeroizing;

/// The options of `pki_store_open`. Each piece of etcd TLS material is
/// given either as PEM text (`*_pem`) or as a file the library reads
/// (`*_file`), never both; the password likewise (`password` or
/// `password_file`, whose final line break is dropped), and the store key
/// (`store_key`, the text of a key file, or `store_key_file`).
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct StoreOptions {
    /// The store key that seals private material (`pki store-key new`).
    store_key: Option<Zeroizing<String>>,
    store_key_file: Option<String>,
    /// The CA bundle that verifies the servers (required for `etcds://`).
    ca_pem: Option<String>,
    ca_file: Option<String>,
    /// The client certificate chain and its key (both or neither).
    cert_pem: Option<String>,
    cert_file: Option<String>,
    key_pem: Option<Zeroizing<String>>,
    key_file: Option<String>,
    /// An etcd user and its password.
    user: Option<String>,
    password: Option<Zeroizing<String>>,
    password_file: Option<String>,
    connect_timeout_seconds: Option<u64>,
    request_timeout_seconds: Option<u64>,
    /// The kubeconfig a `kube://` store reads (else kubectl's: `KUBECONFIG`
    /// or `~/.kube/config`, then the in-cluster service account).
    kubeconfig_file: Option<String>,
    /// The PKCS#11 module that reaches the tokens holding CA keys (the
    /// CLI's `PKI_PKCS11_MODULE`), and its user PIN: a file holding it
    /// (`PKI_PKCS11_PIN_FILE`) or the text.
    pkcs11_module: Option<String>,
    pkcs11_pin_file: Option<String>,
    pkcs11_pin: Option<Zeroizing<String>>,
}

/// The most a PIN file may hold: a PIN is a line of text.
const MAX_PIN_FILE: u64 = 4096;

/// The field of a pair given as text: `ca_pem`, `store_key`.
fn text_field(what: &str) -> String {
    if what == "store_key" {
        what.to_string()
    } else {
        format!("{what}_pem")
    }
}

/// Text or the bytes of a file; `what` names the pair in errors.
fn pem_or_file(
    pem: Option<&str>,
    file: Option<&str>,
    what: &str,
) -> Result<Option<Zeroizing<Vec<u8>>>, Failure> {
    match (pem, file) {
        (Some(_), Some(_)) => Err(Failure::invalid(format!(
            "give `{}` or `{what}_file`, not both",
            text_field(what)
        ))),
        (Some(pem), None) => Ok(Some(Zeroizing::new(pem.as_bytes().to_vec()))),
        // Bounded, and never waiting on a FIFO (see pki_rotate::input).
        (None, Some(file)) => {
            pki_rotate::input::read_file(Path::new(file), pki_rotate::input::DEFAULT_MAX_INPUT)
                .map(|b| Some(Zeroizing::new(b)))
                .map_err(|e| Failure::invalid(format!("`{what}_file`: cannot read {e}")))
        }
        (None, None) => Ok(None),
    }
}

/// The keys private material is sealed with, from the `store_key` option
/// (a key file's text) or `store_key_file`: none without either.
pub(crate) fn sealing_keys(text: Option<&str>, file: Option<&str>) -> Result<SealingKeys, Failure> {
    Ok(match pem_or_file(text, file, "store_key")? {
        Some(bytes) => SealingKeys::single(StoreKey::from_file("option `store_key`", &bytes)?),
        None => SealingKeys::none(),
    })
}

impl StoreOptions {
    /// Whether any etcd option is given.
    fn names_etcd(&self) -> bool {
        self.names_etcd_access()
            || self.connect_timeout_seconds.is_some()
            || self.request_timeout_seconds.is_some()
    }

    /// Whether any of etcd's TLS or user options is given (the timeouts
    /// are a `kube://` store's too).
    fn names_etcd_access(&self) -> bool {
        self.ca_pem.is_some()
            || self.ca_file.is_some()
            || self.cert_pem.is_some()
            || self.cert_file.is_some()
            || self.key_pem.is_some()
            || self.key_file.is_some()
            || self.user.is_some()
            || self.password.is_some()
            || self.password_file.is_some()
    }

    /// The keys private material is sealed with: none without a store key.
    fn sealing_keys(&self) -> Result<SealingKeys, Failure> {
        sealing_keys(
            self.store_key.as_deref().map(String::as_str),
            self.store_key_file.as_deref(),
        )
    }

    /// The tokens of the PKCS#11 module the options name (None: no
    /// module, and then no PIN either), the module loaded now so that a
    /// wrong path fails here rather than at the first signature.
    fn tokens(&self) -> Result<Option<Arc<dyn TokenAccess>>, Failure> {
        let pin = match (&self.pkcs11_pin, &self.pkcs11_pin_file) {
            (Some(_), Some(_)) => {
                return Err(Failure::invalid(
                    "parameter `options`: give `pkcs11_pin` or `pkcs11_pin_file`, not both",
                ));
            }
            (Some(text), None) => Some(Pkcs11Pin::from_file_contents(text.as_bytes())?),
            (None, Some(file)) => {
                let bytes = Zeroizing::new(
                    pki_rotate::input::read_file(Path::new(file), MAX_PIN_FILE).map_err(|e| {
                        Failure::invalid(format!("`pkcs11_pin_file`: cannot read {e}"))
                    })?,
                );
                Some(Pkcs11Pin::from_file_contents(&bytes)?)
            }
            (None, None) => None,
        };
        let Some(module) = &self.pkcs11_module else {
            if pin.is_some() {
                return Err(Failure::invalid(
                    "parameter `options`: a PKCS#11 PIN needs its module (`pkcs11_module`)",
                ));
            }
            return Ok(None);
        };
        let module = Pkcs11Module::open(Path::new(module))?;
        Ok(Some(Arc::new(Pkcs11Tokens::new(module, pin))))
    }

    fn etcd(&self) -> Result<EtcdOptions, Failure> {
        let ca = pem_or_file(self.ca_pem.as_deref(), self.ca_file.as_deref(), "ca")?;
        let cert = pem_or_file(self.cert_pem.as_deref(), self.cert_file.as_deref(), "cert")?;
        let key = pem_or_file(
            self.key_pem.as_deref().map(String::as_str),
            self.key_file.as_deref(),
            "key",
        )?;
        let tls = match (ca, cert, key) {
            (Some(ca), Some(cert), Some(key)) => {
                Some(EtcdTls::new(ca.to_vec()).with_identity(cert.to_vec(), key.to_vec()))
            }
            (Some(ca), None, None) => Some(EtcdTls::new(ca.to_vec())),
            (None, None, None) => None,
            (None, _, _) => {
                return Err(Failure::invalid(
                    "a client certificate needs the CA bundle (`ca_pem` or `ca_file`)",
                ));
            }
            _ => {
                return Err(Failure::invalid(
                    "a client certificate needs both its chain (`cert_*`) and its key (`key_*`)",
                ));
            }
        };
        let user = match (&self.user, &self.password, &self.password_file) {
            (None, None, None) => None,
            (Some(user), Some(password), None) => Some(EtcdUser::new(user, password.as_str())),
            (Some(user), None, Some(file)) => Some(
                EtcdUser::from_password_file(user, Path::new(file))
                    .map_err(|e| Failure::invalid(format!("`password_file`: {e}")))?,
            ),
            (Some(_), Some(_), Some(_)) => {
                return Err(Failure::invalid(
                    "give `password` or `password_file`, not both",
                ));
            }
            (Some(_), None, None) => {
                return Err(Failure::invalid(
                    "`user` needs `password` or `password_file`",
                ));
            }
            (None, _, _) => {
                return Err(Failure::invalid("a password needs its `user`"));
            }
        };
        let mut options = EtcdOptions {
            tls,
            user,
            ..EtcdOptions::default()
        };
        for (given, field, name) in [
            (
                self.connect_timeout_seconds,
                &mut options.connect_timeout,
                "connect",
            ),
            (
                self.request_timeout_seconds,
                &mut options.request_timeout,
                "request",
            ),
        ] {
            match given {
                Some(0) => {
                    return Err(Failure::invalid(format!(
                        "`{name}_timeout_seconds` must be positive"
                    )));
                }
                Some(s) => *field = std::time::Duration::from_secs(s),
                None => {}
            }
        }
        Ok(options)
    }
}

/// Opens the store `location` names (`location_len` bytes, no NUL
/// needed), as the CLI's `DIR` argument does, with `options` as JSON
/// (`options_len` bytes; NULL or `{}`: no options):
///
/// - a store URL, `etcd://HOST:PORT[,HOST:PORT...]/PREFIX` or `etcds://…`
///   over TLS (the etcd store: every key lives under `PREFIX/`; writes are
///   compare-and-swap transactions on the document's revision, so
///   controller replicas in several processes may step the same document
///   at once). The server is contacted here, within the connect timeout
///   (5 s by default): an unreachable server, a wrong CA, a refused client
///   certificate or a bad password fails now, with one line saying which;
/// - `kube://[CONTEXT@]NAMESPACE/NAME` (the Kubernetes API server store of
///   pki-kube: each document's head Secret is its commit point,
///   compare-and-swap on its `resourceVersion`), with kubectl's
///   credentials: the `kubeconfig_file` option, else `KUBECONFIG` or
///   `~/.kube/config` (CONTEXT picks a context), else the in-cluster
///   service account. The server is contacted here, within the connect
///   timeout; an account that may not use Secrets there fails on its
///   first read or write of the store (`PKI_RESULT_STORE`), with one line
///   naming the verb and the resource, before anything is written;
/// - `memory:`: a new, empty store in memory, whose documents live as long
///   as the store (tests, and programs that copy documents in and out);
/// - anything else: the directory store at that path, created (mode 0700)
///   when missing. It is the CLI's layout (`signer/tls.crt`,
///   `ca-bundle.crt`, `certs/NAME/…`, `targets/…`, `keys/…`, `creds/…`);
///   every write switches to a complete new generation in one atomic
///   rename, under an exclusive lock. (A directory whose name looks like a
///   URL or is `memory:` is reached as `./memory:`.)
///
/// The options, every one optional:
///
/// ```json
/// {"store_key_file": "/etc/pki/store.key",
///  "ca_file": "/etc/pki/etcd/ca.crt",
///  "cert_file": "/etc/pki/etcd/client.crt", "key_file": "/etc/pki/etcd/client.key",
///  "user": "pki", "password_file": "/etc/pki/etcd/password",
///  "connect_timeout_seconds": 5, "request_timeout_seconds": 5,
///  "pkcs11_module": "/usr/lib/softhsm/libsofthsm2.so",
///  "pkcs11_pin_file": "/etc/pki/hsm.pin"}
/// ```
///
/// - `store_key_file` (or `store_key`, the file's text): a key file made
///   by `pki store-key new`. Every document's private keys and credentials
///   are sealed under it before they reach the store, and opened when
///   read. Certificates and bundles stay in clear. In a directory store
///   the files consumers read where they are (leaf keys,
///   `keys/active.key`, `creds/NAME/current`) stay in clear (0600); etcd
///   and memory stores seal everything private. Reading a value sealed
///   under another key (or without a key) fails with `PKI_RESULT_STORE`
///   and a one-line message, before anything is written;
/// - for an etcd URL only: the CA bundle, the client certificate and its
///   key as PEM text (`ca_pem`, `cert_pem`, `key_pem`) or as files the
///   library reads (`ca_file`, `cert_file`, `key_file`); an etcd user and
///   its password (`password` or `password_file`); the timeouts.
///   `etcds://` needs the CA bundle; TLS settings with `etcd://` are
///   refused;
/// - for a `kube://` URL only: `kubeconfig_file`, and the timeouts;
/// - `pkcs11_module`, for any store: the PKCS#11 module (a `.so` path)
///   that reaches the tokens holding CA keys, loaded here; with the user
///   PIN as a file (`pkcs11_pin_file`: one line, its final line break
///   dropped) or as text (`pkcs11_pin`), not both. Every document of the
///   store whose CA key is in a token signs, makes and destroys its keys
///   through it (a token is logged in to the first time one of its keys
///   is needed), and a signer or a key ring created with `key_store`
///   makes its keys there. Without it such a document refuses to sign with
///   `PKI_RESULT_PKCS11_NOT_OPEN` before anything is written.
///
/// On success the caller owns `*out_store` and frees it with
/// `pki_store_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (empty, a URL that is not UTF-8 or not a
/// valid store URL, malformed options, etcd options for a location that is
/// not an etcd URL, an unreadable file, a PIN without its module: the
/// message says which), `PKI_RESULT_PKCS11` (the PKCS#11 module cannot be
/// loaded),
/// `PKI_RESULT_STORE` (the directory cannot be created, the server cannot
/// be reached or refuses the client, a store key that is not a pki store
/// key file) or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `location` must be NULL or valid for `location_len` bytes; `options`
/// NULL or valid for `options_len` bytes; `out_store` NULL or valid for
/// one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_store_open(
    location: *const c_char,
    location_len: usize,
    options: *const c_char,
    options_len: usize,
    out_store: *mut *mut pki_store,
) -> pki_result {
    ffi!(out_store => {
        location = bytes_in(location.cast::<u8>(), location_len, "location");
        options = opt_bytes(options.cast::<u8>(), options_len, "options");
    } open(location, options).map(into_handle))
}

fn open(location: &[u8], options: Option<&[u8]>) -> Result<pki_store, Failure> {
    let options: StoreOptions = request::from_json_or_default("parameter `options`", options)?;
    let keys = options.sealing_keys()?;
    let tokens = options.tokens()?;
    if !crate::store::is_url(location) {
        if options.names_etcd() {
            return Err(Failure::invalid(
                "parameter `options`: etcd options need an etcd:// or etcds:// location",
            ));
        }
        if options.kubeconfig_file.is_some() {
            return Err(Failure::invalid(
                "parameter `options`: `kubeconfig_file` needs a kube:// location",
            ));
        }
        return crate::store::open_with(location, keys, tokens);
    }
    let url = std::str::from_utf8(location)
        .map_err(|_| Failure::invalid("parameter `location`: a store URL must be UTF-8"))?;
    let store: Box<dyn pki_rotate::Store + Send + Sync> = if pki_kube::is_kube_url(url) {
        Box::new(open_kube(url, &options)?)
    } else {
        if options.kubeconfig_file.is_some() {
            return Err(Failure::invalid(
                "parameter `options`: `kubeconfig_file` needs a kube:// location",
            ));
        }
        let url = EtcdUrl::parse(url).map_err(|e| Failure::invalid(e.to_string()))?;
        Box::new(pki_etcd::EtcdStore::open(&url, options.etcd()?)?)
    };
    // A kube:// store publishes each leaf's key in its kubernetes.io/tls
    // Secret: leaf keys stay in clear for it, everything else private is
    // sealed (etcd publishes nothing: all sealed).
    let kube = pki_kube::is_kube_url(url);
    let sealed = pki_rotate::SealedStore::new(store, keys, os_rng(), kube)
        .clear_only(pki_rotate::is_published_leaf_key);
    Ok(pki_store {
        backing: Backing::Files(Box::new(sealed)),
        location: url.to_string(),
        tokens,
    })
}

/// The `kube://` store `url` names, with the kubeconfig and the timeouts
/// of `options`; etcd's TLS and user options are refused.
fn open_kube(url: &str, options: &StoreOptions) -> Result<pki_kube::KubeStore, Failure> {
    let url = pki_kube::KubeUrl::parse(url).map_err(|e| Failure::invalid(e.to_string()))?;
    if options.names_etcd_access() {
        return Err(Failure::invalid(
            "parameter `options`: etcd options need an etcd:// or etcds:// location",
        ));
    }
    let kube = kube_options(
        options.kubeconfig_file.as_deref(),
        options.connect_timeout_seconds,
        options.request_timeout_seconds,
    );
    Ok(pki_kube::KubeStore::open(&url, kube)?)
}

/// How a `kube://` store reaches the API server: the `kubeconfig_file`
/// option (else kubectl's), and the timeouts given (else the defaults).
pub(crate) fn kube_options(
    kubeconfig: Option<&str>,
    connect_timeout_seconds: Option<u64>,
    request_timeout_seconds: Option<u64>,
) -> pki_kube::KubeOptions {
    let mut kube = pki_kube::KubeOptions {
        kubeconfig: kubeconfig.map(Into::into),
        ..pki_kube::KubeOptions::default()
    };
    if let Some(s) = connect_timeout_seconds {
        kube.connect_timeout = std::time::Duration::from_secs(s);
    }
    if let Some(s) = request_timeout_seconds {
        kube.request_timeout = std::time::Duration::from_secs(s);
    }
    kube
}

#[cfg(test)]
mod pkcs11_option_tests {
    use super::open;
    use crate::error::pki_result::*;

    /// The code and message `options` are refused with on a memory store.
    fn refused(options: &str) -> (crate::error::pki_result, String) {
        match open(b"memory:", Some(options.as_bytes())) {
            Ok(_) => panic!("{options} was accepted"),
            Err(f) => (f.code, f.message),
        }
    }

    #[test]
    fn a_pin_needs_its_module_and_comes_one_way_only() {
        let (code, message) = refused(r#"{"pkcs11_pin": "1234"}"#);
        assert_eq!(code, PKI_RESULT_INVALID_ARGUMENT);
        assert!(message.contains("pkcs11_module"), "{message}");
        let (code, message) = refused(
            r#"{"pkcs11_module": "/nowhere.so", "pkcs11_pin": "1", "pkcs11_pin_file": "/p"}"#,
        );
        assert_eq!(code, PKI_RESULT_INVALID_ARGUMENT);
        assert!(message.contains("not both"), "{message}");
        let (code, message) =
            refused(r#"{"pkcs11_module": "/nowhere.so", "pkcs11_pin_file": "/no/such/pin"}"#);
        assert_eq!(code, PKI_RESULT_INVALID_ARGUMENT);
        assert!(message.contains("pkcs11_pin_file"), "{message}");
    }

    #[test]
    fn a_module_that_cannot_be_loaded_fails_at_open_naming_it() {
        let (code, message) = refused(r#"{"pkcs11_module": "/no/such/module.so"}"#);
        assert_eq!(code, PKI_RESULT_PKCS11);
        assert!(message.contains("/no/such/module.so"), "{message}");
    }
}
