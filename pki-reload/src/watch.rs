//! Deciding when to reload: a stamp of the files (cheap to take) and a
//! gate that lets one handshake at a time look, at most once an interval.

use crate::ReloadError;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// What identifies a file's content without reading it: a directory
/// store's commit gives a changed file a new inode; an in-place rewrite
/// changes the size or the modification time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FileStamp {
    device: u64,
    inode: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

/// The stamps of a reloader's files, in order.
pub(crate) type Stamp = Vec<FileStamp>;

fn file_stamp(path: &Path) -> Result<FileStamp, ReloadError> {
    let meta = std::fs::metadata(path).map_err(|e| ReloadError::io(path, e))?;
    #[cfg(unix)]
    let (device, inode) = {
        use std::os::unix::fs::MetadataExt;
        (meta.dev(), meta.ino())
    };
    #[cfg(not(unix))]
    let (device, inode) = (0, 0);
    Ok(FileStamp {
        device,
        inode,
        len: meta.len(),
        modified: meta.modified().ok(),
    })
}

/// The stamps of `paths` (links followed, as a consumer's open does).
pub(crate) fn stamp(paths: &[PathBuf]) -> Result<Stamp, ReloadError> {
    paths.iter().map(|p| file_stamp(p)).collect()
}

/// Material loaded from files, with what it was loaded from.
pub(crate) struct Loaded<T> {
    pub value: Arc<T>,
    pub stamp: Stamp,
}

/// The current material and the bookkeeping of when to look again.
pub(crate) struct Watched<T> {
    current: RwLock<Arc<T>>,
    gate: Mutex<Gate>,
    interval: Duration,
    error: Mutex<Option<ReloadError>>,
    generation: std::sync::atomic::AtomicU64,
}

struct Gate {
    checked: Instant,
    stamp: Stamp,
}

impl<T> Watched<T> {
    pub fn new(first: Loaded<T>, interval: Duration) -> Self {
        Watched {
            current: RwLock::new(first.value),
            gate: Mutex::new(Gate {
                checked: Instant::now(),
                stamp: first.stamp,
            }),
            interval,
            error: Mutex::new(None),
            generation: std::sync::atomic::AtomicU64::new(1),
        }
    }

    /// The material in use, without looking at the files.
    pub fn current(&self) -> Arc<T> {
        match self.current.read() {
            Ok(guard) => guard.clone(),
            // A panic while swapping cannot leave a half-written Arc.
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// How many loads succeeded (1 after the first).
    pub fn generation(&self) -> u64 {
        self.generation.load(std::sync::atomic::Ordering::Acquire)
    }

    /// The last reload's error, cleared by a successful one.
    pub fn last_error(&self) -> Option<ReloadError> {
        self.error.lock().ok().and_then(|e| e.clone())
    }

    /// Looks at the files when the interval has passed (or `force`), and
    /// reloads with `load` when their stamp changed. Another thread
    /// already looking is not waited for. Returns whether it swapped.
    pub fn check(
        &self,
        paths: &[PathBuf],
        force: bool,
        load: impl FnOnce() -> Result<Loaded<T>, ReloadError>,
    ) -> Result<bool, ReloadError> {
        let mut gate = if force {
            match self.gate.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            }
        } else {
            match self.gate.try_lock() {
                Ok(g) => g,
                Err(_) => return Ok(false),
            }
        };
        let now = Instant::now();
        if !force && now.duration_since(gate.checked) < self.interval {
            return Ok(false);
        }
        gate.checked = now;
        let result = stamp(paths).and_then(|s| {
            if s == gate.stamp {
                return Ok(None);
            }
            load().map(Some)
        });
        let swapped = match result {
            Ok(None) => false,
            Ok(Some(loaded)) => {
                gate.stamp = loaded.stamp;
                match self.current.write() {
                    Ok(mut c) => *c = loaded.value,
                    Err(p) => *p.into_inner() = loaded.value,
                }
                self.generation
                    .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
                true
            }
            Err(e) => {
                if let Ok(mut slot) = self.error.lock() {
                    *slot = Some(e.clone());
                }
                return Err(e);
            }
        };
        if let Ok(mut slot) = self.error.lock() {
            *slot = None;
        }
        Ok(swapped)
    }
}
