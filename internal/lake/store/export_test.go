package store

// SetFileDirHooks installs test hooks on f: beforeSyncNewDir runs after f
// creates a directory and before it fsyncs the parent (returning an error
// stands for a failed fsync); waitingForDir runs when a write of f starts
// waiting for another write's creation of dir. Set them before f is used.
func SetFileDirHooks(f *File, beforeSyncNewDir func(dir string) error, waitingForDir func(dir string)) {
	f.beforeSyncNewDir = beforeSyncNewDir
	f.waitingForDir = waitingForDir
}

// PublishByLink makes f's PutIfAbsent take the link(2) path, as on a
// filesystem without renameat2's RENAME_NOREPLACE.
func PublishByLink(f *File) { f.linkOnly.Store(true) }
