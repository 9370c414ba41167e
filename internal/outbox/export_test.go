package outbox

// SetBetweenFenceStatements installs fn as the hook TakeFence runs between
// reading the sequence and taking its xid, and returns a function that
// removes it. Tests that use it must not run in parallel with other fence
// tests of this package (none here does).
func SetBetweenFenceStatements(fn func()) (restore func()) {
	betweenFenceStatements = fn
	return func() { betweenFenceStatements = nil }
}

// BoundsChunk is boundsChunk: the tables one prune-bounds statement takes.
const BoundsChunk = boundsChunk

// EarlierCopiesQuery is EarlierCopies' query, for its plan test.
const EarlierCopiesQuery = earlierCopiesQuery
