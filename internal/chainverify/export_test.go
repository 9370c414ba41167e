package chainverify

// SetAnchorChunk sets how many anchors one statement compares, for a test
// of several chunks (not parallel: the setting is the package's), and
// returns the restore.
func SetAnchorChunk(n int) (restore func()) {
	old := anchorChunk
	anchorChunk = n
	return func() { anchorChunk = old }
}
