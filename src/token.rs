//! The PKCS#11 tokens that hold CA keys, as the environment names them:
//! the module in `PKI_PKCS11_MODULE`, the user PIN in the file
//! `PKI_PKCS11_PIN_FILE` (or `pin-source` in a URI given on the command
//! line). The CLI only opens them; the documents decide what to make,
//! use and destroy (`pki_rotate::engines::token_keys`).

use crate::common::{CliError, CliResult};
use pki_core::{Pkcs11Module, Pkcs11Pin, Pkcs11Tokens, Pkcs11Uri, TokenAccess};
use std::path::Path;
use std::sync::Arc;

/// The environment variable naming the PKCS#11 module.
pub const MODULE_ENV: &str = "PKI_PKCS11_MODULE";
/// The environment variable naming the file that holds the user PIN.
pub const PIN_FILE_ENV: &str = "PKI_PKCS11_PIN_FILE";

/// The tokens of the module the environment names (None when it names
/// none: a document whose keys are in a token then refuses to sign,
/// naming what to set).
pub fn from_env() -> CliResult<Option<Arc<dyn TokenAccess>>> {
    let Some(module) = std::env::var_os(MODULE_ENV) else {
        return Ok(None);
    };
    open(Path::new(&module), None).map(Some)
}

/// The tokens for `uri`, given on the command line (`--key-store`): its
/// `module-path` and `pin-source` when it has them, else the environment's.
pub fn for_uri(uri: &Pkcs11Uri) -> CliResult<Arc<dyn TokenAccess>> {
    let module = match (&uri.module_path, std::env::var_os(MODULE_ENV)) {
        (Some(path), _) => path.into(),
        (None, Some(path)) => path,
        (None, None) => {
            return Err(CliError::new(format!(
                "{uri} names no module: set {MODULE_ENV} to the PKCS#11 module's path (or module-path in the URI)"
            )));
        }
    };
    let pin = uri
        .pin_file()
        .map(|file| read_pin(Path::new(file), "the URI's pin-source"))
        .transpose()?;
    open(Path::new(&module), pin)
}

/// The tokens of `module`, logged in to with `pin`, else with the PIN in
/// the file `PKI_PKCS11_PIN_FILE` names (else none: a login then says
/// where a PIN comes from).
fn open(module: &Path, pin: Option<Pkcs11Pin>) -> CliResult<Arc<dyn TokenAccess>> {
    let pin = match (pin, std::env::var_os(PIN_FILE_ENV)) {
        (Some(pin), _) => Some(pin),
        (None, Some(file)) => Some(read_pin(Path::new(&file), PIN_FILE_ENV)?),
        (None, None) => None,
    };
    let module = Pkcs11Module::open(module)?;
    Ok(Arc::new(Pkcs11Tokens::new(module, pin)))
}

/// The PIN in `file`, which `source` named.
fn read_pin(file: &Path, source: &str) -> CliResult<Pkcs11Pin> {
    let contents = zeroize::Zeroizing::new(std::fs::read(file).map_err(|e| {
        CliError::new(format!(
            "reading the PKCS#11 PIN from {} ({source}): {e}",
            file.display()
        ))
    })?);
    Ok(Pkcs11Pin::from_file_contents(&contents)?)
}

/// A driver over `store` that gives every document it reads the tokens
/// the environment names.
pub fn driver<S: pki_rotate::Store>(store: S) -> CliResult<pki_rotate::Driver<S>> {
    let driver = pki_rotate::Driver::new(store);
    Ok(match from_env()? {
        Some(access) => driver.with_token_access(access),
        None => driver,
    })
}

/// Where the store `dir` is, as a new document's first key ids derive it
/// (`pki_rotate::engines::token_keys::first_key_id`): an absolute
/// directory, or the URL.
pub fn store_location(dir: &crate::common::StoreArg) -> CliResult<String> {
    Ok(match dir {
        crate::common::StoreArg::Dir(path) => std::path::absolute(path)
            .map_err(|e| CliError::new(format!("{}: {e}", path.display())))?
            .display()
            .to_string(),
        crate::common::StoreArg::Url(url) => url.clone(),
    })
}

/// A PKCS#11 URI (RFC 7512) on the command line.
pub fn parse_uri(text: &str) -> Result<Pkcs11Uri, String> {
    Pkcs11Uri::parse(text).map_err(|e| e.to_string())
}
