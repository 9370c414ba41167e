package schema_test

import "time"

// Bounds for waiting on a signal (never an assertion about speed).
const (
	testTimeout = 30 * time.Second
	pollEvery   = 5 * time.Millisecond
)
