//! A PKCS#11 module (a shared library) and logging in to one of its
//! tokens.

use super::errors::{Doing, one_line};
use super::pin::Pkcs11Pin;
use super::session::Shared;
use super::token::Pkcs11Token;
use super::uri::Pkcs11Uri;
use crate::error::{Error, Result};
use cryptoki::context::{CInitializeArgs, CInitializeFlags, Pkcs11};
use cryptoki::error::{Error as CkError, RvError};
use cryptoki::session::UserType;
use cryptoki::slot::{Slot, TokenInfo};
use cryptoki::types::AuthPin;
use std::fmt;
use std::path::{Path, PathBuf};

/// A loaded and initialised PKCS#11 module, such as
/// `/usr/lib/softhsm/libsofthsm2.so`. Clones share it.
///
/// The path is an argument: pki-core reads no environment (the command
/// line takes it from `PKI_PKCS11_MODULE` or the URI's `module-path`).
/// Opening the same module twice in one process is fine: the second
/// initialisation finds the module initialised and shares it. The module
/// is never finalised, since other handles of the process may still use it.
#[derive(Clone)]
pub struct Pkcs11Module {
    context: Pkcs11,
    path: PathBuf,
}

impl fmt::Debug for Pkcs11Module {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pkcs11Module({})", self.path.display())
    }
}

impl Pkcs11Module {
    /// Loads the module at `path` and initialises it (with OS locking, so
    /// that the module may be called from several threads).
    /// [`Error::Pkcs11Module`] when there is no file there or it is not a
    /// PKCS#11 module.
    ///
    /// # Errors
    ///
    /// [`Error::Pkcs11Module`] when there is no file at `path`, it cannot be
    /// loaded as a PKCS#11 module, or its `C_Initialize` fails.
    pub fn open(path: &Path) -> Result<Self> {
        let refuse = |reason: String| Error::Pkcs11Module {
            path: path.display().to_string(),
            reason,
        };
        if !path.exists() {
            return Err(refuse("no such file".into()));
        }
        let context = Pkcs11::new(path).map_err(|e| refuse(load_reason(&e)))?;
        match context.initialize(CInitializeArgs::new(CInitializeFlags::OS_LOCKING_OK)) {
            Ok(()) | Err(CkError::Pkcs11(RvError::CryptokiAlreadyInitialized, _)) => {}
            Err(e) => {
                return Err(refuse(format!(
                    "C_Initialize failed: {}",
                    one_line(&e.to_string())
                )));
            }
        }
        Ok(Pkcs11Module {
            context,
            path: path.to_path_buf(),
        })
    }

    /// The module's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The labels of the module's initialised tokens.
    ///
    /// # Errors
    ///
    /// The module's refusal to list its slots or tokens, as an
    /// [`Error::Pkcs11`] (or another `Pkcs11…` variant).
    pub fn token_labels(&self) -> Result<Vec<String>> {
        Ok(self
            .tokens()?
            .into_iter()
            .map(|(_, info)| info.label().to_owned())
            .collect())
    }

    /// Every slot with an initialised token, with the token's information.
    fn tokens(&self) -> Result<Vec<(Slot, TokenInfo)>> {
        let doing = Doing::new("(any)", "listing tokens");
        let slots = self
            .context
            .get_slots_with_initialized_token()
            .map_err(|e| doing.error(e))?;
        let mut out = Vec::with_capacity(slots.len());
        for slot in slots {
            let info = self
                .context
                .get_token_info(slot)
                .map_err(|e| doing.error(e))?;
            out.push((slot, info));
        }
        Ok(out)
    }

    /// Opens a session with the token `uri` names (by `token`,
    /// `manufacturer`, `serial` and `model`, those given; a URI naming
    /// none picks the only token) and logs in as the user with `pin`.
    ///
    /// [`Error::Pkcs11TokenNotFound`] when no token (or more than one)
    /// matches; [`Error::Pkcs11WrongPin`] when the token refuses the PIN.
    /// A token this process is logged in to already accepts the login.
    ///
    /// # Errors
    ///
    /// - [`Error::Pkcs11TokenNotFound`] when no token, or more than one,
    ///   matches `uri`;
    /// - [`Error::Pkcs11WrongPin`] when the token refuses the PIN;
    /// - [`Error::Pkcs11`] (or another `Pkcs11…` variant) when the module
    ///   cannot list tokens, open a session, log in for another reason (a
    ///   locked PIN, a removed token) or list mechanisms.
    pub fn login(&self, uri: &Pkcs11Uri, pin: &Pkcs11Pin) -> Result<Pkcs11Token> {
        let tokens = self.tokens()?;
        let matching: Vec<&(Slot, TokenInfo)> = tokens
            .iter()
            .filter(|(_, info)| matches(uri, info))
            .collect();
        let [(slot, info)] = matching.as_slice() else {
            return Err(Error::Pkcs11TokenNotFound {
                wanted: wanted(uri, matching.len()),
                available: available(&tokens),
            });
        };
        let label = info.label().to_owned();
        let doing = Doing::new(&label, "logging in");
        let session = self
            .context
            .open_rw_session(*slot)
            .map_err(|e| doing.error(e))?;
        let secret = AuthPin::new(pin.expose().into());
        match session.login(UserType::User, Some(&secret)) {
            Ok(()) | Err(CkError::Pkcs11(RvError::UserAlreadyLoggedIn, _)) => {}
            Err(e) => return Err(doing.error(e)),
        }
        let mechanisms = self
            .context
            .get_mechanism_list(*slot)
            .map_err(|e| Doing::new(&label, "listing mechanisms").error(e))?;
        Ok(Pkcs11Token::new(Shared::new(session, label, mechanisms)))
    }
}

/// Whether the token `info` has every token attribute `uri` gives.
fn matches(uri: &Pkcs11Uri, info: &TokenInfo) -> bool {
    let same = |wanted: &Option<String>, have: &str| wanted.as_deref().is_none_or(|w| w == have);
    same(&uri.token, info.label())
        && same(&uri.manufacturer, info.manufacturer_id())
        && same(&uri.serial, info.serial_number())
        && same(&uri.model, info.model())
}

/// The token attributes looked for, as the error shows them.
fn wanted(uri: &Pkcs11Uri, matching: usize) -> String {
    let mut parts = Vec::new();
    for (name, value) in [
        ("token", &uri.token),
        ("manufacturer", &uri.manufacturer),
        ("serial", &uri.serial),
        ("model", &uri.model),
    ] {
        if let Some(value) = value {
            parts.push(format!("{name}=\"{}\"", value.escape_debug()));
        }
    }
    let named = if parts.is_empty() {
        "(the URI names none)".to_owned()
    } else {
        parts.join(" ")
    };
    if matching > 1 {
        format!("{named} alone: {matching} tokens match")
    } else {
        named
    }
}

/// The tokens' labels, as the error shows them.
fn available(tokens: &[(Slot, TokenInfo)]) -> String {
    if tokens.is_empty() {
        return "none".into();
    }
    tokens
        .iter()
        .map(|(_, info)| format!("\"{}\"", info.label().escape_debug()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Why the loader refused a module, in one line.
fn load_reason(e: &CkError) -> String {
    match e {
        CkError::LibraryLoading(inner) => one_line(&inner.to_string()),
        CkError::MissingSymbol(symbol) => {
            format!("it is not a PKCS#11 module (no {symbol})")
        }
        other => one_line(&other.to_string()),
    }
}
