//! The root's published links (`signer -> .data/signer`, …): checking
//! that each is the store's own, and creating the missing ones.

use super::safety::{check_owner_and_mode, describe, effective_uid};
use super::write::sync_dir;
use super::{DATA_LINK, FsStore, io, reason};
use crate::model::error::{Result, RotateError};
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

impl FsStore {
    /// Checks the root's published names: each must be the store's own
    /// link `NAME -> .data/NAME` (or missing, which a run holding the lock
    /// repairs). Anything else there is what consumers read instead of the
    /// committed files, so it is refused naming the path.
    pub(super) fn check_published<'a>(
        &self,
        published: &BTreeSet<String>,
        extra: impl Iterator<Item = &'a str>,
    ) -> Result<()> {
        let mut names = published.clone();
        names.extend(extra.map(str::to_string));
        self.check_published_names(&names)
    }

    /// [`FsStore::check_published`] for the names a generation publishes.
    pub(super) fn check_published_names(&self, names: &BTreeSet<String>) -> Result<()> {
        for name in names {
            let path = self.root.join(name);
            let expected = Path::new(DATA_LINK).join(name);
            match fs::symlink_metadata(&path) {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(RotateError::io(&path, e)),
                Ok(meta) => {
                    let ours = meta.file_type().is_symlink()
                        && fs::read_link(&path).is_ok_and(|t| t == expected);
                    if !ours {
                        return Err(RotateError::Store(crate::StoreError::DamagedStore {
                            found: describe(&path),
                            path,
                            expected: format!("its link to {}", expected.display()),
                            advice: "this is not the store's link, and consumers read it instead \
                                of the committed files: move it away (the next pki command \
                                recreates the link)"
                                .into(),
                        }));
                    }
                    check_owner_and_mode(&path, &meta, effective_uid())?;
                }
            }
        }
        Ok(())
    }

    /// Creates the root links (`signer -> .data/signer`, …) that are
    /// missing. `repair`: they were found missing before a commit (a crash
    /// or a hand), so each is reported.
    pub(super) fn publish(&self, names: &BTreeSet<String>, number: u64, repair: bool) {
        let mut created = false;
        for name in names {
            let link = self.root.join(name);
            if fs::symlink_metadata(&link).is_ok() {
                continue;
            }
            let made = self.step(&format!("publish {name}")).and_then(|()| {
                std::os::unix::fs::symlink(format!("{DATA_LINK}/{name}"), &link).map_err(io(&link))
            });
            match made {
                Ok(()) => {
                    created = true;
                    if repair {
                        self.notice(format!("repaired {} (was missing)", link.display()));
                    }
                }
                Err(e) => self.notice(format!(
                    "warning: {}: generation {number} is live, but this link to it could not be \
                     created ({}): consumers do not see it until the next pki command repairs it",
                    link.display(),
                    reason(&e)
                )),
            }
        }
        if created && let Err(e) = sync_dir(&self.root) {
            self.notice(format!(
                "warning: {}: flushing the directory after publishing failed ({})",
                self.root.display(),
                reason(&e)
            ));
        }
    }
}
