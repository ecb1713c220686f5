//! `pki rotate`: rotate the CA if due or forced; re-issue stale leaves.

use crate::common::{CliResult, print_events, reconcile_store, when};
use pki_rotate::ForcedRotation;
use std::path::Path;
use time::OffsetDateTime;

pub fn run(dir: &Path, forced: Option<&ForcedRotation>, now: OffsetDateTime) -> CliResult {
    let (state, events) = reconcile_store(dir, now, forced, |_| Ok(()))?;
    if events.is_empty() {
        println!("nothing to do");
    }
    print_events(&events);
    println!(
        "next rotation   {}",
        when(state.rotation_due_at(&state.policy), now)
    );
    Ok(())
}
