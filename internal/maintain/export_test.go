package maintain

// SetBeforeEraseCommit installs a hook that runs between an erase-bodies
// rewrite's read and its commit; it returns a function that removes it.
func SetBeforeEraseCommit(f func()) (restore func()) {
	beforeEraseCommit = f
	return func() { beforeEraseCommit = nil }
}
