package chainverify

// SetAnchorChunk sets how many anchors one statement compares, for a test
// of several chunks (not parallel: the setting is the package's), and
// returns the restore.
func SetAnchorChunk(n int) (restore func()) {
	old := anchorChunk
	anchorChunk = n
	return func() { anchorChunk = old }
}

// ForgetRead drops what c's last read found, so the next call reads the
// chain again (the benchmark's baseline: the cache before fingerprints).
func (c *ProviderTrustCache) ForgetRead() {
	c.mu.Lock()
	c.read = nil
	c.mu.Unlock()
}
