//! Garbage collection under the lock: removing old generations (they hold
//! private keys) and whatever else an interrupted run left.

use super::manifest::{Current, generation_name};
use super::write::sync_dir;
use super::{DATA_LINK, FsStore, GEN_PREFIX, io, reason};
use std::collections::BTreeSet;
use std::fs;

impl FsStore {
    /// Under the exclusive lock, finishes what an interrupted run left:
    /// removes the temporary link and every generation but the current one
    /// (they hold private keys), once the switch to the current one is on
    /// disk, removes a spare that an interrupted run left behind (it may
    /// hold old keys), and recreates missing published links. Failures are
    /// warnings: the committed document is intact either way.
    pub(super) fn tidy(&self, current: Option<&Current>) {
        let published = current.map(|c| (c.number, c.top.published()));
        self.tidy_published(published.as_ref().map(|(n, names)| (*n, names)));
    }

    /// [`FsStore::tidy`] knowing only the current generation's number and
    /// the names it publishes (from its index): what a reader that does not
    /// walk the generation has.
    pub(super) fn tidy_published(&self, current: Option<(u64, &BTreeSet<String>)>) {
        let tmp_link = self.root.join(format!("{DATA_LINK}.tmp"));
        if fs::symlink_metadata(&tmp_link).is_ok() {
            let _ = fs::remove_file(&tmp_link);
        }
        if self.spare_is_stale(current.map(|(number, _)| number)) {
            self.remove_spare(true);
        }
        let keep = current
            .map(|(number, _)| generation_name(number))
            .unwrap_or_default();
        let leftovers = self.old_generations(&keep);
        if let Some((number, names)) = current {
            // Only a switch that is on disk makes the older generations
            // garbage; flushing costs a journal commit, so it is done only
            // when there is something to remove.
            if !leftovers.is_empty() {
                if let Err(e) = sync_dir(&self.root) {
                    self.notice(format!(
                        "warning: {}: flushing the directory failed ({}); old generations are kept until it succeeds",
                        self.root.display(),
                        reason(&e)
                    ));
                } else {
                    self.remove_generations(&leftovers, true);
                }
            }
            self.publish(names, number, true);
        } else {
            // No committed generation: anything generation-like is a leftover.
            self.remove_generations(&leftovers, true);
        }
    }

    /// Every generation directory (and temporary one) but `keep`.
    pub(super) fn old_generations(&self, keep: &str) -> Vec<String> {
        let Ok(entries) = fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut names: Vec<String> = entries
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|name| name.starts_with(GEN_PREFIX) && name != keep)
            .collect();
        names.sort();
        names
    }

    /// Removes the generation directories `names`: old generations hold
    /// private keys. `leftover`: they were found before a commit, so each
    /// removal is reported.
    pub(super) fn remove_generations(&self, names: &[String], leftover: bool) {
        let mut removed = false;
        for name in names {
            let path = self.root.join(name);
            let gone = self.step(&format!("remove {name}")).and_then(|()| {
                match fs::symlink_metadata(&path) {
                    Ok(m) if m.is_dir() => fs::remove_dir_all(&path),
                    _ => fs::remove_file(&path),
                }
                .map_err(io(&path))
            });
            match gone {
                Ok(()) => {
                    removed = true;
                    if leftover {
                        self.notice(format!(
                            "removed {} (left by an interrupted run)",
                            path.display()
                        ));
                    }
                }
                Err(e) => self.notice(format!(
                    "warning: {}: could not remove this old generation ({}); it still holds \
                     private keys, and the next run retries",
                    path.display(),
                    reason(&e)
                )),
            }
        }
        if removed {
            let _ = sync_dir(&self.root);
        }
    }
}
