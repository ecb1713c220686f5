//! `pki rotate`: rotate the CA if due or forced; re-issue stale leaves.

use crate::common::{CliResult, print_events, reconcile_store, when};
use pki_rotate::ForcedRotation;
use std::path::Path;
use time::OffsetDateTime;

pub fn run(dir: &Path, force: Option<&str>, now: OffsetDateTime) -> CliResult {
    let forced = force.map(ForcedRotation::new);
    let (state, events) = reconcile_store(dir, now, forced.as_ref(), |_| Ok(()))?;
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
