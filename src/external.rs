//! What `init --import`, `rotate --to`, `rotate --renew-same-key` and
//! `validate` share: reading a CA from files, and the service-account key
//! sets the validation compares.

use crate::common::{
    CliError, CliResult, SIGNER, StoreArg, os_rng, print_events, read_capped, when,
};
use pki_core::CaImport;
use pki_rotate::{
    Driver, ExternalEngine, ExternalInput, Replacement, ServiceAccountKeys, SignerEngine,
    SignerPolicy, SignerState, SignerView, Store,
};
use std::path::{Path, PathBuf};
use time::OffsetDateTime;

/// A CA given as files: the CA file (certificates, maybe the key), a
/// separate key file, a chain file; each read up to `max_input_size` bytes.
pub struct CaFiles {
    pub ca: PathBuf,
    pub key: Option<PathBuf>,
    pub chain: Option<PathBuf>,
    /// The CA's key as an object in a PKCS#11 token (`--key-uri`), instead
    /// of a key in the files.
    pub key_uri: Option<pki_core::Pkcs11Uri>,
    pub max_input_size: u64,
}

impl CaFiles {
    pub fn read(&self) -> CliResult<CaImport> {
        let read = |path: &Path| read_capped(path, self.max_input_size);
        let ca = read(&self.ca)?;
        let key = self.key.as_deref().map(read).transpose()?;
        let chain = self.chain.as_deref().map(read).transpose()?;
        let key = key.map(zeroize::Zeroizing::new);
        let mut import =
            CaImport::parse(&ca, key.as_deref().map(|k| k.as_slice()), chain.as_deref())
                .map_err(|e| CliError::new(format!("{}: {e}", self.describe())))?;
        if let Some(uri) = &self.key_uri {
            import.key = Some(self.token_key(&import, uri)?);
        }
        Ok(import)
    }

    /// The CA's key as the object `uri` names in a token (the files must
    /// then hold no key of their own).
    fn token_key(
        &self,
        import: &CaImport,
        uri: &pki_core::Pkcs11Uri,
    ) -> CliResult<pki_core::CaKey> {
        if import.key.is_some() {
            return Err(CliError::new(format!(
                "{} holds a private key, and --key-uri names one in a token: give one of them",
                self.describe()
            )));
        }
        let access = crate::token::for_uri(uri)?;
        let object = access.find_key(uri)?;
        Ok(pki_core::TokenKey::of_object(uri, object)?.into())
    }

    fn describe(&self) -> String {
        let mut s = self.ca.display().to_string();
        if let Some(k) = &self.key {
            s.push_str(&format!(" (key {})", k.display()));
        }
        if let Some(c) = &self.chain {
            s.push_str(&format!(" (chain {})", c.display()));
        }
        s
    }
}

/// The key ring's current public keys (when the store keeps one under
/// `keys`), and the proposed set from `proposed`.
pub fn service_account_keys(
    dir: &StoreArg,
    proposed: Option<&Path>,
    max_input_size: u64,
) -> CliResult<ServiceAccountKeys> {
    let proposed = proposed_keys(proposed, max_input_size)?;
    with_current_keys(dir, proposed)
}

/// The proposed key set from `--service-account-keys FILE`, if given.
pub fn proposed_keys(
    proposed: Option<&Path>,
    max_input_size: u64,
) -> CliResult<Option<Vec<Vec<u8>>>> {
    proposed
        .map(|path| {
            ServiceAccountKeys::keys_from_pem(&read_capped(path, max_input_size)?)
                .map_err(|e| CliError::new(format!("{}: {e}", path.display())))
        })
        .transpose()
}

/// The key ring's current public keys beside the `proposed` set.
pub fn with_current_keys(
    dir: &StoreArg,
    proposed: Option<Vec<Vec<u8>>>,
) -> CliResult<ServiceAccountKeys> {
    let current = ServiceAccountKeys::from_store(&dir.open()?, None)?.current;
    Ok(ServiceAccountKeys { current, proposed })
}

/// `pki init DIR --import FILE`: a signer whose CA is the imported one.
pub fn init(
    dir: &StoreArg,
    files: &CaFiles,
    policy: SignerPolicy,
    now: OffsetDateTime,
) -> CliResult {
    let import = files.read()?;
    let state = SignerState::import(&import, policy, now)
        .map_err(|e| CliError::new(format!("{}: {e}", files.describe())))?;
    let store = dir.open_or_create()?;
    if store.get(SIGNER)?.is_some() {
        return Err(
            pki_rotate::RotateError::Store(pki_rotate::StoreError::AlreadyInitialized(
                dir.to_string(),
            ))
            .into(),
        );
    }
    Driver::new(store).create::<SignerEngine>(SIGNER, &state)?;
    let ca = &state.ca.cert;
    crate::outln!("imported CA {} ({}) into {}", ca.id(), ca.subject(), dir);
    crate::outln!("  issued by       {}", ca.issuer());
    crate::outln!("  valid until     {}", when(ca.not_after(), now));
    crate::outln!(
        "  reload interval {}",
        crate::common::reload_interval_text(&state.policy.rotation)
    );
    if let Some(root) = state.bundle.certs().first() {
        crate::outln!(
            "  clients trust   {} ({})",
            dir.published(pki_rotate::signer::document::CA_BUNDLE),
            root.subject()
        );
    }
    Ok(())
}

/// `pki rotate DIR --to FILE`: validate, then rotate to the supplied CA and
/// re-issue every leaf, in one write.
pub fn rotate_to(
    dir: &StoreArg,
    files: &CaFiles,
    service_account_file: Option<&Path>,
    force: Option<String>,
    json: bool,
    now: OffsetDateTime,
) -> CliResult {
    let import = files.read()?;
    let service_accounts = service_account_keys(dir, service_account_file, files.max_input_size)?;
    let input = ExternalInput::Replace(Box::new(Replacement {
        import,
        force,
        service_accounts,
    }));
    let store = dir.open()?;
    let step = crate::token::driver(store)?
        .step::<ExternalEngine, _>(SIGNER, &input, now, &mut os_rng())
        .map_err(|e| CliError::with_override_hint(e, "--force REASON"))?
        .map_document(SignerView::into_signer);
    if json {
        return crate::rotate::print_json(&step);
    }
    print_events(&step.events);
    if let Some(record) = step.document.history.last() {
        for check in &record.overridden {
            crate::outln!("overridden check {}: {}", check.name, check.detail);
        }
    }
    Ok(())
}

/// `pki rotate DIR --renew-same-key`.
pub fn renew(dir: &StoreArg, json: bool, now: OffsetDateTime) -> CliResult {
    let store = dir.open()?;
    let step = crate::token::driver(store)?
        .step::<ExternalEngine, _>(SIGNER, &ExternalInput::RenewSameKey, now, &mut os_rng())?
        .map_document(SignerView::into_signer);
    if json {
        return crate::rotate::print_json(&step);
    }
    print_events(&step.events);
    let ca = &step.document.ca.cert;
    crate::outln!("CA valid until  {}", when(ca.not_after(), now));
    Ok(())
}
