//! A token the user logged in to: its keys are generated, found and
//! destroyed here.

use super::errors::Doing;
use super::key::{P256_OID, P384_OID, Pkcs11Key, sign_mechanism};
use super::session::Shared;
use super::uri::{Pkcs11ObjectType, Pkcs11Uri};
use crate::error::{Error, Result};
use crate::key::KeyAlgorithm;
use cryptoki::mechanism::Mechanism;
use cryptoki::object::{Attribute, AttributeType, ObjectClass, ObjectHandle};
use cryptoki::types::Ulong;
use std::fmt;

/// A PKCS#11 token with a session logged in as the user, from
/// [`crate::Pkcs11Module::login`]. Clones share the session, and so do the
/// keys it gives; the session closes when the last of them is dropped.
#[derive(Clone)]
pub struct Pkcs11Token {
    shared: Shared,
}

impl fmt::Debug for Pkcs11Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Pkcs11Token({:?})", self.shared.label())
    }
}

/// The attributes that name a key object, as a message shows them.
fn describe(id: &[u8], label: Option<&str>) -> String {
    Pkcs11Uri {
        object: label.map(str::to_owned),
        id: Some(id.to_vec()),
        ..Pkcs11Uri::default()
    }
    .describe_object()
}

impl Pkcs11Token {
    pub(super) fn new(shared: Shared) -> Self {
        Pkcs11Token { shared }
    }

    /// The token's label.
    pub fn label(&self) -> &str {
        self.shared.label()
    }

    /// Generates a key pair of `algorithm` inside the token: token objects
    /// (they outlive the session) with CKA_ID `id` and CKA_LABEL `label`,
    /// the private key sensitive, not extractable and for signing only.
    ///
    /// Refuses an empty `id` and an `id` that an object of the token
    /// already has ([`Error::Pkcs11KeyExists`]): a rerun after a crash
    /// finds that key with [`Pkcs11Token::find_key`] and adopts or destroys
    /// it, and never makes a second one beside it.
    ///
    /// # Errors
    ///
    /// - [`Error::Pkcs11KeyExists`] when an object of the token already has
    ///   `id`;
    /// - [`Error::Pkcs11UnsupportedMechanism`] when the token offers no
    ///   mechanism to generate or to sign with a key of `algorithm`;
    /// - [`Error::Pkcs11TokenFull`] when the token has no room left;
    /// - [`Error::Pkcs11`] for an empty `id` and any other failure of the
    ///   token.
    pub fn generate_key(
        &self,
        algorithm: KeyAlgorithm,
        id: &[u8],
        label: &str,
    ) -> Result<Pkcs11Key> {
        let what = format!("generating a {algorithm} key");
        let (generate, generate_name) = if algorithm.is_rsa() {
            (Mechanism::RsaPkcsKeyPairGen, "CKM_RSA_PKCS_KEY_PAIR_GEN")
        } else {
            (Mechanism::EccKeyPairGen, "CKM_EC_KEY_PAIR_GEN")
        };
        let doing = Doing::new(self.label(), &what)
            .mechanism(generate_name)
            .object(describe(id, Some(label)));
        if id.is_empty() {
            return Err(doing.other("the key's id (CKA_ID) must not be empty"));
        }
        for (mechanism, name) in [
            (generate.mechanism_type(), generate_name),
            sign_mechanism(algorithm),
        ] {
            if !self.shared.offers(mechanism) {
                return Err(Error::Pkcs11UnsupportedMechanism {
                    token: self.label().to_owned(),
                    mechanism: name.to_owned(),
                });
            }
        }
        let existing = self
            .shared
            .with(|s| s.find_objects(&[Attribute::Id(id.to_vec())]))
            .map_err(|e| doing.error(e))?;
        if !existing.is_empty() {
            return Err(Error::Pkcs11KeyExists {
                token: self.label().to_owned(),
                object: describe(id, None),
            });
        }
        let (public, private) = templates(algorithm, id, label)?;
        let (_, handle) = self
            .shared
            .with(|s| s.generate_key_pair(&generate, &public, &private))
            .map_err(|e| doing.error(e))?;
        Pkcs11Key::load(&self.shared, handle)
    }

    /// The private key object `uri` names: by its `id`, its `object`
    /// label, or both (at least one is needed). A URI that names a token
    /// must name this one; `type`, when given, must be `private`.
    ///
    /// No such object is [`Error::Pkcs11KeyNotFound`], and only that: any
    /// other failure of the search is another error, so a caller can tell
    /// "the key is gone" from "the token could not be asked".
    ///
    /// # Errors
    ///
    /// - [`Error::Pkcs11KeyNotFound`] when no private key object matches;
    /// - [`Error::Pkcs11KeyAmbiguous`] when more than one does;
    /// - [`Error::Pkcs11`] when the URI names another token, a `type` other
    ///   than `private`, or neither `id` nor `object`, and when the search or
    ///   reading the key fails.
    pub fn find_key(&self, uri: &Pkcs11Uri) -> Result<Pkcs11Key> {
        let object = uri.describe_object();
        let doing = Doing::new(self.label(), "finding a private key").object(object.clone());
        if let Some(token) = &uri.token
            && token != self.label()
        {
            return Err(doing.other(&format!(
                "the URI names token \"{}\"; log in to that token to find its keys",
                token.escape_debug()
            )));
        }
        if uri
            .object_type
            .is_some_and(|t| t != Pkcs11ObjectType::Private)
        {
            return Err(
                doing.other("a signing key's URI names a private key: type=private, or no type")
            );
        }
        if uri.id.is_none() && uri.object.is_none() {
            return Err(doing.other("the URI names no key object: give id= or object="));
        }
        let mut template = vec![Attribute::Class(ObjectClass::PRIVATE_KEY)];
        if let Some(id) = &uri.id {
            template.push(Attribute::Id(id.clone()));
        }
        if let Some(label) = &uri.object {
            template.push(Attribute::Label(label.as_bytes().to_vec()));
        }
        let found = self
            .shared
            .with(|s| s.find_objects(&template))
            .map_err(|e| doing.error(e))?;
        match found.as_slice() {
            [handle] => Pkcs11Key::load(&self.shared, *handle),
            [] => Err(Error::Pkcs11KeyNotFound {
                token: self.label().to_owned(),
                object,
            }),
            many => Err(Error::Pkcs11KeyAmbiguous {
                token: self.label().to_owned(),
                object,
                count: many.len(),
            }),
        }
    }

    /// The URIs of every private key object of the token (token, object
    /// label, type and id), in the token's order: what a check that the
    /// token holds exactly the keys a document names compares.
    ///
    /// # Errors
    ///
    /// [`Error::Pkcs11`] (or another `Pkcs11…` variant) when the token cannot
    /// list its objects or read their attributes.
    pub fn private_keys(&self) -> Result<Vec<Pkcs11Uri>> {
        let doing = Doing::new(self.label(), "listing private keys");
        let handles = self
            .shared
            .with(|s| s.find_objects(&[Attribute::Class(ObjectClass::PRIVATE_KEY)]))
            .map_err(|e| doing.error(e))?;
        let mut uris = Vec::with_capacity(handles.len());
        for handle in handles {
            let attributes = self
                .shared
                .with(|s| s.get_attributes(handle, &[AttributeType::Id, AttributeType::Label]))
                .map_err(|e| doing.error(e))?;
            let mut uri = Pkcs11Uri {
                token: Some(self.label().to_owned()),
                object_type: Some(Pkcs11ObjectType::Private),
                ..Pkcs11Uri::default()
            };
            for attribute in attributes {
                match attribute {
                    Attribute::Id(id) if !id.is_empty() => uri.id = Some(id),
                    Attribute::Label(label) if !label.is_empty() => {
                        uri.object = String::from_utf8(label).ok();
                    }
                    _ => {}
                }
            }
            uris.push(uri);
        }
        Ok(uris)
    }

    /// Destroys the key pair with CKA_ID `id`: its private and public key
    /// objects (other objects with that id, such as a certificate, stay).
    /// Returns how many objects were destroyed; none found is
    /// [`Error::Pkcs11KeyNotFound`]. Only ever called when asked: nothing
    /// in pki-core destroys a key on its own.
    ///
    /// # Errors
    ///
    /// [`Error::Pkcs11KeyNotFound`] when no key object has `id`;
    /// [`Error::Pkcs11`] for an empty `id` and when the search or a destruction
    /// fails (objects destroyed before the failure stay destroyed).
    pub fn destroy_key(&self, id: &[u8]) -> Result<usize> {
        let object = describe(id, None);
        let doing = Doing::new(self.label(), "destroying a key").object(object.clone());
        if id.is_empty() {
            return Err(doing.other("the key's id (CKA_ID) must not be empty"));
        }
        let mut handles: Vec<ObjectHandle> = Vec::new();
        for class in [ObjectClass::PRIVATE_KEY, ObjectClass::PUBLIC_KEY] {
            let template = [Attribute::Class(class), Attribute::Id(id.to_vec())];
            let found = self
                .shared
                .with(|s| s.find_objects(&template))
                .map_err(|e| doing.error(e))?;
            handles.extend(found);
        }
        if handles.is_empty() {
            return Err(Error::Pkcs11KeyNotFound {
                token: self.label().to_owned(),
                object,
            });
        }
        for handle in &handles {
            self.shared
                .with(|s| s.destroy_object(*handle))
                .map_err(|e| doing.error(e))?;
        }
        Ok(handles.len())
    }
}

/// The public and private key templates of a new key pair.
fn templates(
    algorithm: KeyAlgorithm,
    id: &[u8],
    label: &str,
) -> Result<(Vec<Attribute>, Vec<Attribute>)> {
    let naming = [
        Attribute::Token(true),
        Attribute::Id(id.to_vec()),
        Attribute::Label(label.as_bytes().to_vec()),
    ];
    let mut public = naming.to_vec();
    public.extend([Attribute::Private(false), Attribute::Verify(true)]);
    match algorithm {
        KeyAlgorithm::EcdsaP256 | KeyAlgorithm::EcdsaP384 => {
            let curve = if algorithm == KeyAlgorithm::EcdsaP256 {
                P256_OID
            } else {
                P384_OID
            };
            let params = der::Encode::to_der(&curve).map_err(Error::crypto)?;
            public.push(Attribute::EcParams(params));
        }
        KeyAlgorithm::Rsa2048 | KeyAlgorithm::Rsa3072 | KeyAlgorithm::Rsa4096 => {
            let bits: u32 = match algorithm {
                KeyAlgorithm::Rsa2048 => 2048,
                KeyAlgorithm::Rsa3072 => 3072,
                _ => 4096,
            };
            public.push(Attribute::ModulusBits(Ulong::from(
                std::os::raw::c_ulong::from(bits),
            )));
            public.push(Attribute::PublicExponent(vec![0x01, 0x00, 0x01]));
        }
    }
    let mut private = naming.to_vec();
    private.extend([
        Attribute::Private(true),
        Attribute::Sensitive(true),
        Attribute::Extractable(false),
        Attribute::Sign(true),
        Attribute::Decrypt(false),
        Attribute::Derive(false),
        Attribute::Unwrap(false),
    ]);
    Ok((public, private))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_private_key_template_is_a_sensitive_unextractable_token_object() {
        for algorithm in [KeyAlgorithm::EcdsaP256, KeyAlgorithm::Rsa4096] {
            let (public, private) = templates(algorithm, &[1, 2], "ca").unwrap();
            for attribute in [
                Attribute::Token(true),
                Attribute::Sensitive(true),
                Attribute::Extractable(false),
                Attribute::Private(true),
                Attribute::Id(vec![1, 2]),
                Attribute::Label(b"ca".to_vec()),
            ] {
                assert!(
                    private
                        .iter()
                        .any(|a| format!("{a:?}") == format!("{attribute:?}")),
                    "{algorithm}: {attribute:?} missing from {private:?}"
                );
            }
            assert!(public.iter().any(|a| matches!(a, Attribute::Token(true))));
        }
    }

    #[test]
    fn describe_names_the_id_in_percent_encoding() {
        assert_eq!(
            describe(&[0xca, 0x01], Some("root")),
            "object=\"root\" id=%CA%01"
        );
    }
}
