//! RFC 7512 PKCS#11 URIs: which token and which key object.
//!
//! ```text
//! pk11-URI   = "pkcs11:" pk11-path [ "?" pk11-query ]
//! pk11-path  = [ pk11-pattr *(";" pk11-pattr) ]
//! pk11-query = [ pk11-qattr *("&" pk11-qattr) ]
//! ```
//!
//! pki reads the path attributes that name a token (`token`,
//! `manufacturer`, `serial`, `model`) and a key object (`object`, `type`,
//! `id`), and the query attributes `pin-source` and `module-path`. Every
//! other attribute is refused by name rather than ignored: an attribute
//! pki skipped could have picked another key than the one meant. An
//! attribute given twice is refused too (RFC 7512 §2.3). Values are
//! percent-decoded; `id` is bytes, the others UTF-8 text. A PIN in the URI
//! (`pin-value`) is refused: a key's URI is stored with the CA's documents.

use crate::error::{Error, Result};
use std::fmt;
use std::str::FromStr;

/// `type=`: the class of object a URI names (RFC 7512 §2.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Pkcs11ObjectType {
    /// `private`: a private key (CKO_PRIVATE_KEY), what a CA signs with.
    Private,
    /// `public`: a public key (CKO_PUBLIC_KEY).
    Public,
    /// `cert`: a certificate (CKO_CERTIFICATE).
    Cert,
    /// `secret-key`: a secret key (CKO_SECRET_KEY).
    SecretKey,
    /// `data`: a data object (CKO_DATA).
    Data,
}

impl Pkcs11ObjectType {
    /// The value in a URI.
    pub fn as_str(self) -> &'static str {
        match self {
            Pkcs11ObjectType::Private => "private",
            Pkcs11ObjectType::Public => "public",
            Pkcs11ObjectType::Cert => "cert",
            Pkcs11ObjectType::SecretKey => "secret-key",
            Pkcs11ObjectType::Data => "data",
        }
    }

    fn parse(value: &str) -> Result<Self> {
        Ok(match value {
            "private" => Pkcs11ObjectType::Private,
            "public" => Pkcs11ObjectType::Public,
            "cert" => Pkcs11ObjectType::Cert,
            "secret-key" => Pkcs11ObjectType::SecretKey,
            "data" => Pkcs11ObjectType::Data,
            other => {
                return Err(bad(format!(
                    "type=\"{}\" is not an object type (private, public, cert, secret-key or data)",
                    other.escape_debug()
                )));
            }
        })
    }
}

/// A PKCS#11 URI (RFC 7512) naming a token and a key object in it, such
/// as `pkcs11:token=ca;object=root-2026;id=%01%02?pin-source=file:/run/pin`.
///
/// Plain data: parse one with [`Pkcs11Uri::parse`] (or `str::parse`), or
/// fill the fields and write it with `Display`, which percent-encodes and
/// always reads back to the same value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Pkcs11Uri {
    /// `token=`: the token's label (CK_TOKEN_INFO.label).
    pub token: Option<String>,
    /// `manufacturer=`: the token's manufacturer (manufacturerID).
    pub manufacturer: Option<String>,
    /// `serial=`: the token's serial number (serialNumber).
    pub serial: Option<String>,
    /// `model=`: the token's model.
    pub model: Option<String>,
    /// `object=`: the key object's label (CKA_LABEL).
    pub object: Option<String>,
    /// `type=`: the object's class.
    pub object_type: Option<Pkcs11ObjectType>,
    /// `id=`: the key object's CKA_ID, as bytes.
    pub id: Option<Vec<u8>>,
    /// `?pin-source=`: where the PIN is (`file:/path`). pki-core reads no
    /// file: the caller reads it (see [`Pkcs11Uri::pin_file`]).
    pub pin_source: Option<String>,
    /// `?module-path=`: the PKCS#11 module to load.
    pub module_path: Option<String>,
}

/// The path attributes RFC 7512 defines that pki does not read.
const UNSUPPORTED_PATH: &[&str] = &[
    "library-manufacturer",
    "library-description",
    "library-version",
    "slot-description",
    "slot-manufacturer",
    "slot-id",
];
/// The path attributes pki reads.
const PATH: &[&str] = &[
    "token",
    "manufacturer",
    "serial",
    "model",
    "object",
    "type",
    "id",
];
const SUPPORTED_PATH: &str = "token, manufacturer, serial, model, object, type, id";
const SUPPORTED_QUERY: &str = "pin-source, module-path";

fn bad(reason: impl Into<String>) -> Error {
    Error::Pkcs11Uri {
        reason: reason.into(),
    }
}

impl Pkcs11Uri {
    /// Reads a PKCS#11 URI. Refuses, naming the attribute: a scheme other
    /// than `pkcs11:`, an attribute pki does not read, one given twice, an
    /// empty value, a character that must be percent-encoded, a bad
    /// percent-escape, text that is not UTF-8, and `pin-value`.
    ///
    /// # Errors
    ///
    /// [`Error::Pkcs11Uri`] for each refusal listed above; the reason names the
    /// attribute and never holds a PIN.
    pub fn parse(input: &str) -> Result<Self> {
        let rest = input
            .get(..7)
            .filter(|scheme| scheme.eq_ignore_ascii_case("pkcs11:"))
            .map(|_| &input[7..])
            .ok_or_else(|| bad("a PKCS#11 URI starts with \"pkcs11:\""))?;
        let (path, query) = match rest.split_once('?') {
            Some((path, query)) => (path, Some(query)),
            None => (rest, None),
        };
        let mut uri = Pkcs11Uri::default();
        for attribute in path.split(';').filter(|a| !a.is_empty()) {
            uri.path_attribute(attribute)?;
        }
        for attribute in query.into_iter().flat_map(|q| q.split('&')) {
            if !attribute.is_empty() {
                uri.query_attribute(attribute)?;
            }
        }
        Ok(uri)
    }

    /// One `name=value` of the path.
    fn path_attribute(&mut self, attribute: &str) -> Result<()> {
        let (name, raw) = split_attribute(attribute)?;
        if UNSUPPORTED_PATH.contains(&name) || name.starts_with("x-") {
            return Err(bad(format!(
                "path attribute \"{}\" is not supported (pki reads {SUPPORTED_PATH})",
                name.escape_debug()
            )));
        }
        if !PATH.contains(&name) {
            return Err(bad(format!(
                "unknown path attribute \"{}\" (pki reads {SUPPORTED_PATH})",
                name.escape_debug()
            )));
        }
        // Only a name pki knows reaches a message below.
        let value = decode(name, raw, Context::Path)?;
        let text = || text(name, &value);
        match name {
            "token" => set(&mut self.token, name, text()?),
            "manufacturer" => set(&mut self.manufacturer, name, text()?),
            "serial" => set(&mut self.serial, name, text()?),
            "model" => set(&mut self.model, name, text()?),
            "object" => set(&mut self.object, name, text()?),
            "type" => set(
                &mut self.object_type,
                name,
                Pkcs11ObjectType::parse(&text()?)?,
            ),
            // "id", the last of PATH.
            _ => set(&mut self.id, name, value),
        }
    }

    /// One `name=value` of the query.
    fn query_attribute(&mut self, attribute: &str) -> Result<()> {
        let (name, raw) = split_attribute(attribute)?;
        match name {
            "pin-value" => Err(bad(
                "a PIN in the URI (pin-value) would be stored with the key's URI: put it in a file and name the file with pin-source=file:/path",
            )),
            "pin-source" | "module-path" => {
                let value = text(name, &decode(name, raw, Context::Query)?)?;
                let field = if name == "pin-source" {
                    &mut self.pin_source
                } else {
                    &mut self.module_path
                };
                set(field, name, value)
            }
            "module-name" => Err(bad(format!(
                "query attribute \"module-name\" is not supported (pki reads {SUPPORTED_QUERY})"
            ))),
            _ => Err(bad(format!(
                "unknown query attribute \"{}\" (pki reads {SUPPORTED_QUERY})",
                name.escape_debug()
            ))),
        }
    }

    /// The PIN file `pin-source` names: the path of a `file:` URI
    /// (`file:/run/pin` or `file:///run/pin`), or a bare absolute path.
    /// None without `pin-source` or for any other kind of source.
    pub fn pin_file(&self) -> Option<&str> {
        let source = self.pin_source.as_deref()?;
        if let Some(path) = source.strip_prefix("file://") {
            return path.starts_with('/').then_some(path);
        }
        let path = source.strip_prefix("file:").unwrap_or(source);
        path.starts_with('/').then_some(path)
    }

    /// This URI with only the attributes that name the token and the key
    /// object (no `pin-source`, no `module-path`): what a store keeps.
    pub fn without_query(&self) -> Self {
        Pkcs11Uri {
            pin_source: None,
            module_path: None,
            ..self.clone()
        }
    }

    /// This URI with only the attributes that name the token: where a
    /// document's new keys are made, and what one login opens.
    pub fn token_only(&self) -> Self {
        Pkcs11Uri {
            token: self.token.clone(),
            manufacturer: self.manufacturer.clone(),
            serial: self.serial.clone(),
            model: self.model.clone(),
            ..Pkcs11Uri::default()
        }
    }

    /// The private key object `id` labelled `label` in the token this URI
    /// names: the URI a document keeps for a key it made.
    pub fn private_key(&self, id: &[u8], label: &str) -> Self {
        Pkcs11Uri {
            object: Some(label.to_owned()),
            object_type: Some(Pkcs11ObjectType::Private),
            id: Some(id.to_vec()),
            ..self.token_only()
        }
    }

    /// The key object's attributes in a message: `object="ca" id=%01%02`.
    pub fn describe_object(&self) -> String {
        let mut out = Vec::new();
        if let Some(object) = &self.object {
            out.push(format!("object=\"{}\"", object.escape_debug()));
        }
        if let Some(id) = &self.id {
            let mut text = String::from("id=");
            encode_into(&mut text, id, Context::Id);
            out.push(text);
        }
        if out.is_empty() {
            return "(no object or id)".into();
        }
        out.join(" ")
    }
}

/// Splits `name=value` at the first `=` (a value may hold more).
fn split_attribute(attribute: &str) -> Result<(&str, &str)> {
    let (name, value) = attribute.split_once('=').ok_or_else(|| {
        bad(format!(
            "attribute \"{}\" has no value (expected name=value)",
            attribute.escape_debug()
        ))
    })?;
    if value.is_empty() {
        return Err(bad(format!(
            "attribute \"{}\" is empty",
            name.escape_debug()
        )));
    }
    Ok((name, value))
}

fn set<T>(field: &mut Option<T>, name: &str, value: T) -> Result<()> {
    if field.is_some() {
        return Err(bad(format!(
            "attribute \"{name}\" appears more than once (RFC 7512 allows one)"
        )));
    }
    *field = Some(value);
    Ok(())
}

fn text(name: &str, value: &[u8]) -> Result<String> {
    String::from_utf8(value.to_vec())
        .map_err(|_| bad(format!("the value of \"{name}\" is not UTF-8 text")))
}

/// Where a value stands, which decides the characters it may hold
/// unencoded.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Context {
    /// pk11-pchar.
    Path,
    /// pk11-qchar.
    Query,
    /// An `id`: written all percent-encoded.
    Id,
}

/// RFC 3986 unreserved.
fn unreserved(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~')
}

/// Whether `c` may stand unencoded in a value read in `context`:
/// pk11-pchar or pk11-qchar (RFC 7512 §2.3).
fn allowed(c: u8, context: Context) -> bool {
    let res_avail = matches!(
        c,
        b':' | b'[' | b']' | b'@' | b'!' | b'$' | b'\'' | b'(' | b')' | b'*' | b'+' | b',' | b'='
    );
    unreserved(c)
        || res_avail
        || match context {
            Context::Path | Context::Id => c == b'&',
            Context::Query => matches!(c, b'/' | b'?' | b'|'),
        }
}

/// Percent-decodes the value of `name`.
fn decode(name: &str, raw: &str, context: Context) -> Result<Vec<u8>> {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&c) = bytes.get(i) {
        if c == b'%' {
            let digit = |at: usize| bytes.get(at).and_then(|&d| char::from(d).to_digit(16));
            let (Some(high), Some(low)) = (digit(i + 1), digit(i + 2)) else {
                return Err(bad(format!(
                    "the value of \"{name}\" has a bad percent-escape at byte {} (expected % and two hex digits)",
                    i + 1
                )));
            };
            // Two hex digits: at most 0xff.
            out.push(u8::try_from(high * 16 + low).unwrap_or(u8::MAX));
            i += 3;
        } else if allowed(c, context) {
            out.push(c);
            i += 1;
        } else {
            let shown = raw[i..].chars().next().unwrap_or('?');
            return Err(bad(format!(
                "the value of \"{name}\" holds {shown:?}, which must be percent-encoded (as %{c:02X})"
            )));
        }
    }
    Ok(out)
}

/// Appends `value` percent-encoded for `context`: unreserved characters
/// and a few harmless reserved ones as they are, an `id` wholly encoded.
fn encode_into(out: &mut String, value: &[u8], context: Context) {
    for &c in value {
        let plain = match context {
            Context::Id => false,
            Context::Path => unreserved(c) || matches!(c, b':' | b'@' | b'!' | b'*' | b'+' | b','),
            Context::Query => {
                unreserved(c) || matches!(c, b':' | b'@' | b'!' | b'*' | b'+' | b',' | b'/')
            }
        };
        if plain {
            out.push(char::from(c));
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
}

impl fmt::Display for Pkcs11Uri {
    /// The URI with its attributes in a fixed order (token, manufacturer,
    /// serial, model, object, type, id; then pin-source, module-path).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut out = String::from("pkcs11:");
        let mut path: Vec<(&str, &[u8], Context)> = Vec::new();
        for (name, value) in [
            ("token", &self.token),
            ("manufacturer", &self.manufacturer),
            ("serial", &self.serial),
            ("model", &self.model),
            ("object", &self.object),
        ] {
            if let Some(value) = value {
                path.push((name, value.as_bytes(), Context::Path));
            }
        }
        if let Some(kind) = self.object_type {
            path.push(("type", kind.as_str().as_bytes(), Context::Path));
        }
        if let Some(id) = &self.id {
            path.push(("id", id, Context::Id));
        }
        write_attributes(&mut out, &path, ';');
        let mut query: Vec<(&str, &[u8], Context)> = Vec::new();
        for (name, value) in [
            ("pin-source", &self.pin_source),
            ("module-path", &self.module_path),
        ] {
            if let Some(value) = value {
                query.push((name, value.as_bytes(), Context::Query));
            }
        }
        if !query.is_empty() {
            out.push('?');
            write_attributes(&mut out, &query, '&');
        }
        f.write_str(&out)
    }
}

fn write_attributes(out: &mut String, attributes: &[(&str, &[u8], Context)], separator: char) {
    for (i, (name, value, context)) in attributes.iter().enumerate() {
        if i > 0 {
            out.push(separator);
        }
        out.push_str(name);
        out.push('=');
        encode_into(out, value, *context);
    }
}

impl FromStr for Pkcs11Uri {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        Pkcs11Uri::parse(s)
    }
}

#[cfg(test)]
mod tests;
