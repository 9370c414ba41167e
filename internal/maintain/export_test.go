package maintain

// SetBeforeEraseCommit installs a hook that runs between an erase-bodies
// rewrite's read and its commit; it returns a function that removes it.
func SetBeforeEraseCommit(f func()) (restore func()) {
	beforeEraseCommit = f
	return func() { beforeEraseCommit = nil }
}

// SetBeforeSteps installs a hook that runs between measuring a table and
// its first step in Run; SetBeforeCheckpoint one that runs right before
// Run's checkpoint step. Each returns a function that removes it.
func SetBeforeSteps(f func(Table)) (restore func()) {
	beforeSteps = f
	return func() { beforeSteps = nil }
}

func SetBeforeCheckpoint(f func(Table)) (restore func()) {
	beforeCheckpoint = f
	return func() { beforeCheckpoint = nil }
}

// MeasureSnapshot measures an already loaded snapshot (Run's path).
var MeasureSnapshot = measureSnapshot

// ErrLeanSnapshot is what measuring a lean snapshot fails with.
var ErrLeanSnapshot = errLeanSnapshot
