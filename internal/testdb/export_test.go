package testdb

// SetCloneStrategy swaps the CREATE DATABASE strategy (benchmarks only).
func SetCloneStrategy(s string) (restore func()) {
	old := cloneStrategy
	cloneStrategy = s
	return func() { cloneStrategy = old }
}
