//! Starting a signer from an imported CA, and keeping the signer's own
//! rotation away from it.

use super::{ExternalCa, import_checks};
use crate::engines::signer::{OverriddenCheck, SignerState};
use crate::model::error::{Result, RotateError};
use pki_core::{Bundle, CaImport};
use time::OffsetDateTime;

impl SignerState {
    /// A signer whose CA is `import`: the key must match and the CA must
    /// verify up to the root of its chain (or be self-signed) and be valid
    /// at `now`. The bundle holds the root; serving chains carry the CA
    /// and the intermediates.
    ///
    /// # Errors
    ///
    /// Those of [`SignerPolicy::validate`](crate::SignerPolicy::validate);
    /// [`SignerError::ValidationFailed`](crate::SignerError::ValidationFailed)
    /// listing the checks `import` fails (a key that does not match, no CA, a
    /// chain that does not verify, not valid at `now`…); a
    /// [`RotateError::Core`] when the import does not make a CA or its chain
    /// does not validate.
    pub fn import(
        import: &CaImport,
        policy: crate::engines::signer::SignerPolicy,
        now: OffsetDateTime,
    ) -> Result<Self> {
        policy.validate()?;
        // The checks of every supplied CA that hold whatever the store
        // holds (validate and rotate --to run the same): what can never
        // verify is refused before it is written.
        let failed: Vec<OverriddenCheck> = import_checks(import, std::iter::empty(), now)
            .into_iter()
            .filter(|c| !c.ok)
            .map(|c| OverriddenCheck {
                name: c.name,
                detail: c.detail,
            })
            .collect();
        if !failed.is_empty() {
            return Err(RotateError::Signer(crate::SignerError::ValidationFailed {
                failed,
                forced: false,
            }));
        }
        let ca = import.authority()?;
        let validated = import.validate(now)?;
        let root = validated.root().clone();
        let mut state = SignerState {
            policy,
            ca,
            bridge: None,
            bridge_chain: Vec::new(),
            bundle: Bundle::from_certs([root]),
            previous: None,
            forced_rotation_reason: None,
            leaves: Default::default(),
            history: Vec::new(),
            external: Some(ExternalCa {
                imported_at: now,
                chain: import.chain.clone(),
            }),
            published: Vec::new(),
            consumers: Default::default(),
            token_keys: None,
        };
        // An imported key in a token is the operator's object: signed
        // with, never destroyed.
        state.token_keys = state
            .ca
            .key
            .token()
            .map(|key| crate::engines::token_keys::TokenKeys::imported(key.uri()));
        state.note_published(now);
        Ok(state)
    }
}
