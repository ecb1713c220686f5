//! The spare: the generation a commit replaced, kept up to date with the
//! live one so the next commit touches only what changed.

use super::commit::{Source, Target};
use super::manifest::Current;
use super::safety::{Kind, read_regular};
use super::write::{link_or_copy, make_dir};
use super::{FsStore, SPARE, SPARE_MARK, io, reason};
use crate::model::error::Result;
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;

impl FsStore {
    /// Whether a spare exists that is not a mirror of generation `current`.
    pub(super) fn spare_is_stale(&self, current: Option<u64>) -> bool {
        let spare = self.root.join(SPARE);
        if fs::symlink_metadata(&spare).is_err() {
            return false;
        }
        // Every run asks this: only the first line is parsed.
        let number = self.spare_mark_text().and_then(|text| Mark::number(&text));
        match (number, current) {
            (Some(mark), Some(n)) => mark != n,
            _ => true,
        }
    }

    /// The directories the spare's mark lists, when it lists them.
    pub(super) fn spare_dirs(&self) -> Option<BTreeSet<String>> {
        Mark::dirs(&self.spare_mark_text()?)
    }

    fn spare_mark_text(&self) -> Option<String> {
        let (bytes, _) = read_regular(&self.root.join(SPARE).join(SPARE_MARK))
            .ok()
            .flatten()?;
        String::from_utf8(bytes.to_vec()).ok()
    }

    /// Removes the spare; `leftover`: an interrupted run left it, so the
    /// removal is reported.
    pub(super) fn remove_spare(&self, leftover: bool) {
        let spare = self.root.join(SPARE);
        let gone = self.step(&format!("remove {SPARE}")).and_then(|()| {
            match fs::symlink_metadata(&spare) {
                Ok(m) if m.is_dir() => fs::remove_dir_all(&spare),
                Ok(_) => fs::remove_file(&spare),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e),
            }
            .map_err(io(&spare))
        });
        match gone {
            Ok(()) if leftover => self.notice(format!(
                "removed {} (left by an interrupted run)",
                spare.display()
            )),
            Ok(()) => {}
            Err(e) => self.notice(format!(
                "warning: {}: could not remove this out-of-date copy of the store ({}); it may \
                 still hold old private keys, and the next run retries",
                spare.display(),
                reason(&e)
            )),
        }
    }

    /// Once generation `number` is live and on disk, the previous one is no
    /// longer needed, but it holds private keys the new one replaced. It
    /// becomes the spare: renamed away (readers holding its name start over,
    /// as when it was deleted), then brought up to date with the new one by
    /// replacing only what this commit changed, so that it holds no key the
    /// live generation does not. Anything failing here deletes it instead.
    pub(super) fn retire(&self, previous: &Current, live: &Path, number: u64, target: &Target<'_>) {
        self.retire_with(previous, |spare| {
            self.mirror(spare, previous, live, number, target)
        });
    }

    /// [`FsStore::retire`], bringing the spare up to date with `update`.
    pub(super) fn retire_with(&self, previous: &Current, update: impl FnOnce(&Path) -> Result<()>) {
        let name = previous.name();
        let spare = self.root.join(SPARE);
        if fs::symlink_metadata(&spare).is_ok() {
            self.remove_spare(false);
        }
        let renamed = self
            .step(&format!("remove {name}"))
            .and_then(|()| fs::rename(&previous.dir, &spare).map_err(io(&spare)));
        if let Err(e) = renamed {
            self.notice(format!(
                "warning: {}: could not remove this old generation ({}); it still holds \
                 private keys, and the next run retries",
                previous.dir.display(),
                reason(&e)
            ));
            return;
        }
        if let Err(e) = self.step("update spare").and_then(|()| update(&spare)) {
            self.notice(format!(
                "warning: {}: could not bring this copy of the store up to date ({}); \
                 removing it",
                spare.display(),
                reason(&e)
            ));
            self.remove_spare(false);
        }
    }

    /// Brings `spare` (a copy of `previous`) up to date with `live`.
    pub(super) fn mirror(
        &self,
        spare: &Path,
        previous: &Current,
        live: &Path,
        number: u64,
        target: &Target<'_>,
    ) -> Result<()> {
        let mut gone: Vec<&String> = previous
            .tree
            .iter()
            .filter(|(relative, e)| match e.kind {
                Kind::Dir => !target.dirs.contains(relative.as_str()),
                _ => !target.files.contains_key(relative.as_str()),
            })
            .map(|(relative, _)| relative)
            .collect();
        gone.sort_by(|a, b| b.cmp(a));
        let mut linked = Vec::new();
        let mut touched = std::collections::BTreeSet::from([spare.to_path_buf()]);
        let parent = |path: &Path| path.parent().unwrap_or(spare).to_path_buf();
        for relative in gone {
            let path = spare.join(relative);
            touched.insert(parent(&path));
            match fs::symlink_metadata(&path) {
                Ok(m) if m.is_dir() => fs::remove_dir_all(&path),
                Ok(_) => fs::remove_file(&path),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(e),
            }
            .map_err(io(&path))?;
        }
        for dir in &target.dirs {
            if previous.tree.get(dir).is_none_or(|e| e.kind != Kind::Dir) {
                let path = spare.join(dir);
                if fs::symlink_metadata(&path).is_err() {
                    make_dir(&path)?;
                    touched.insert(parent(&path));
                }
            }
        }
        for (relative, source) in &target.files {
            let unchanged = matches!(source, Source::Link)
                && previous
                    .tree
                    .get(relative.as_str())
                    .is_some_and(|e| e.kind == Kind::File);
            if unchanged {
                continue;
            }
            let path = spare.join(relative);
            if fs::symlink_metadata(&path).is_ok() {
                fs::remove_file(&path).map_err(io(&path))?;
            }
            link_or_copy(&live.join(relative), &path)?;
            touched.insert(parent(&path));
            linked.push(path);
        }
        // Every directory gets its stamp, not only those changed: an older
        // build's generation has none.
        touched.extend(target.dirs.iter().map(|d| spare.join(d)));
        // On disk before its mark: a commit of changes trusts a marked
        // spare without walking it (see `incremental`).
        self.mark_spare(spare, number, &linked, &touched, Some(&target.dirs))
    }
}

/// The spare's mark, `.spare/.mirrors`: the generation the spare mirrors,
/// and the list of its directories, so that checking their stamps needs
/// no listing of ten thousand leaves (see `stamp`):
///
/// ```text
/// 12
/// dirs <SHA-256 of the lines below>
/// certs
/// certs/web
/// …
/// ```
///
/// A mark of one line (an older build's) has no list: the spare is then
/// walked. A list that does not match its digest is not believed.
pub(super) struct Mark;

impl Mark {
    /// The generation a mark's text names.
    fn number(text: &str) -> Option<u64> {
        text.split('\n').next()?.trim().parse().ok()
    }

    /// The directories a mark's text lists, when it lists them whole.
    fn dirs(text: &str) -> Option<BTreeSet<String>> {
        let (_, rest) = text.split_once('\n')?;
        let (header, list) = rest.split_once('\n')?;
        let digest = header.strip_prefix("dirs ")?;
        (super::safety::digest(list.as_bytes()) == digest)
            .then(|| list.lines().map(str::to_string).collect())
    }

    /// The mark's text.
    pub(super) fn text(number: u64, dirs: Option<&BTreeSet<String>>) -> String {
        let Some(dirs) = dirs else {
            return number.to_string();
        };
        let list: String = dirs.iter().map(|d| format!("{d}\n")).collect();
        format!(
            "{number}\ndirs {}\n{list}",
            super::safety::digest(list.as_bytes())
        )
    }
}
