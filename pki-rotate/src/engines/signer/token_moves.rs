//! The signer's CA keys in a token through its rotations (see
//! [`crate::engines::token_keys`]): which key moves a plan decides, and
//! how apply makes them.

use super::{Event, SignerState};
use crate::engines::token_keys::TokenKeys;
use crate::model::error::Result;
use pki_core::{CaKey, KeyAlgorithm, PrivateKey};
use rand_core::CryptoRng;
use time::OffsetDateTime;

/// The key moves a plan decides besides a rotation's own.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KeyMoves {
    /// The previous CA is no longer trusted: its key object retires.
    pub retire_previous: bool,
    /// The document lists retired key objects: they are destroyed.
    pub destroy_retiring: bool,
}

impl KeyMoves {
    /// Whether there is no move to make.
    pub fn is_empty(&self) -> bool {
        !self.retire_previous && !self.destroy_retiring
    }
}

/// The key moves due at `now`: a previous key whose CA is no longer
/// trusted (its bridge ended, or it was distrusted at once) retires, and
/// the keys already retired are destroyed.
pub(super) fn plan(state: &SignerState, now: OffsetDateTime) -> KeyMoves {
    let Some(keys) = &state.token_keys else {
        return KeyMoves::default();
    };
    let previous_trusted = state
        .previous
        .as_ref()
        .and_then(|p| p.trusted_until)
        .is_some_and(|until| now < until);
    KeyMoves {
        retire_previous: keys.previous.is_some() && !previous_trusted,
        destroy_retiring: !keys.retiring.is_empty(),
    }
}

/// When the previous key retires: the end of its CA's trust (None
/// without a previous key in a token).
pub(super) fn wake(state: &SignerState) -> Option<OffsetDateTime> {
    state.token_keys.as_ref()?.previous.as_ref()?;
    state.previous.as_ref()?.trusted_until
}

/// Makes the moves of `moves` on `next`: the keys the stored document
/// lists as retiring are destroyed first, then the previous key retires.
pub(super) fn apply(
    next: &mut SignerState,
    moves: KeyMoves,
    events: &mut Vec<Event>,
) -> Result<()> {
    let Some(keys) = &mut next.token_keys else {
        return Ok(());
    };
    if moves.destroy_retiring {
        events.extend(keys.destroy_retiring()?.into_iter().map(Event::from));
    }
    if moves.retire_previous {
        events.extend(keys.retire_previous().map(Event::from));
    }
    Ok(())
}

/// Records the new key of a rotation about to happen when the CA keys are
/// in a token and no key is recorded yet: true when it did, and the
/// rotation waits for the next round (after this intent is committed).
pub(super) fn intend<R: CryptoRng + ?Sized>(
    next: &mut SignerState,
    rng: &mut R,
    events: &mut Vec<Event>,
) -> Result<bool> {
    let generation = next.history.len() + 2;
    let Some(keys) = &mut next.token_keys else {
        return Ok(false);
    };
    if keys.pending.is_some() {
        return Ok(false);
    }
    let name = next
        .ca
        .cert
        .common_name()
        .unwrap_or_else(|| "pki-signer".to_string());
    let label = crate::engines::token_keys::key_label(&name, generation);
    events.push(keys.intend(&label, rng)?.into());
    Ok(true)
}

/// The key of the rotation's new CA: the recorded token key, made or
/// adopted now, or a new key in this process.
pub(super) fn new_key<R: CryptoRng + ?Sized>(
    keys: Option<&TokenKeys>,
    algorithm: KeyAlgorithm,
    rng: &mut R,
) -> Result<CaKey> {
    match keys.map(|keys| keys.make_pending(algorithm)).transpose()? {
        Some(Some(key)) => Ok(key.into()),
        // The intent is recorded in the round before; without one (a
        // document that never had it) none is made here.
        Some(None) => Err(crate::RotateError::corrupt(
            "signer",
            "a rotation of a CA key in a token has no recorded key to make",
        )),
        None => Ok(PrivateKey::generate(algorithm, rng)?.into()),
    }
}

/// After the rotation to `new`: the token's record follows it.
pub(super) fn rotated(next: &mut SignerState, previous_trusted: bool, events: &mut Vec<Event>) {
    let Some(new) = next.ca.key.token().cloned() else {
        return;
    };
    if let Some(keys) = &mut next.token_keys {
        events.extend(
            keys.rotated(&new, previous_trusted)
                .into_iter()
                .map(Event::from),
        );
    }
}
