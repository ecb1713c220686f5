//! `pki_store_open_etcd`: an etcd store with TLS, a client certificate and
//! a user, its options given as JSON like every other input.

use crate::abi::{bytes_in, into_handle, json_or_default};
use crate::error::{Failure, pki_result};
use crate::store::{Backing, pki_store};
use pki_etcd::{EtcdOptions, EtcdTls, EtcdUrl, EtcdUser};
use serde::Deserialize;
use std::ffi::c_char;
use std::path::Path;
use zeroize::Zeroizing;

/// The options of `pki_store_open_etcd`. Each piece of TLS material is
/// given either as PEM text (`*_pem`) or as a file the library reads
/// (`*_file`), never both; the password likewise (`password` or
/// `password_file`, whose final line break is dropped).
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EtcdOptionsIn {
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
}

/// Text or the bytes of a file; `what` names the pair in errors.
fn pem_or_file(
    pem: Option<&str>,
    file: Option<&str>,
    what: &str,
) -> Result<Option<Zeroizing<Vec<u8>>>, Failure> {
    match (pem, file) {
        (Some(_), Some(_)) => Err(Failure::invalid(format!(
            "give `{what}_pem` or `{what}_file`, not both"
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

impl EtcdOptionsIn {
    fn options(&self) -> Result<EtcdOptions, Failure> {
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

/// Opens the etcd store at `url` (`url_len` bytes, no NUL needed):
/// `etcd://HOST:PORT[,HOST:PORT...]/PREFIX`, or `etcds://...` over TLS,
/// with `options` as JSON (`options_len` bytes; NULL: no options):
///
/// ```json
/// {"ca_file": "/etc/pki/etcd/ca.crt",
///  "cert_file": "/etc/pki/etcd/client.crt", "key_file": "/etc/pki/etcd/client.key",
///  "user": "pki", "password_file": "/etc/pki/etcd/password",
///  "connect_timeout_seconds": 5, "request_timeout_seconds": 5}
/// ```
///
/// Each of the CA bundle, the client certificate and its key is given as
/// PEM text (`ca_pem`, `cert_pem`, `key_pem`) or as a file the library
/// reads (`ca_file`, `cert_file`, `key_file`); the password as `password`
/// or `password_file`. `etcds://` needs the CA bundle; TLS settings with
/// `etcd://` are refused. The server is contacted before this returns,
/// within the connect timeout (5 s by default): a wrong CA, a refused
/// client certificate or a bad password fails here, with one line saying
/// which.
///
/// On success the caller owns `*out_store` and frees it with
/// `pki_store_free`.
///
/// Returns `PKI_RESULT_OK`, `PKI_RESULT_NULL_PARAMETER`,
/// `PKI_RESULT_INVALID_ARGUMENT` (a malformed URL or options, an unreadable
/// file: the message says which), `PKI_RESULT_STORE` (the server cannot be
/// reached or refuses the client) or `PKI_RESULT_PANIC`.
///
/// # Safety
///
/// `url` must be NULL or valid for `url_len` bytes; `options` NULL or
/// valid for `options_len` bytes; `out_store` NULL or valid for one write.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn pki_store_open_etcd(
    url: *const c_char,
    url_len: usize,
    options: *const c_char,
    options_len: usize,
    out_store: *mut *mut pki_store,
) -> pki_result {
    ffi!(out_store => {
        url = bytes_in(url.cast::<u8>(), url_len, "url");
        options = json_or_default::<EtcdOptionsIn>(options, options_len, "options");
    } open(url, &options).map(into_handle))
}

fn open(url: &[u8], options: &EtcdOptionsIn) -> Result<pki_store, Failure> {
    let url = std::str::from_utf8(url)
        .map_err(|_| Failure::invalid("parameter `url`: a store URL must be UTF-8"))?;
    let url = EtcdUrl::parse(url).map_err(|e| Failure::invalid(e.to_string()))?;
    let store = pki_etcd::EtcdStore::open(&url, options.options()?)?;
    Ok(pki_store {
        backing: Backing::Files(Box::new(store)),
    })
}
