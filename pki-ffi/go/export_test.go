package pki

// LoadedSnapshot is the snapshot w serves now, as its files were read: a
// test computes from it the fingerprint of what a CA set target loaded.
func LoadedSnapshot(w *Watcher) *Snapshot { return w.current.Load().snapshot }
