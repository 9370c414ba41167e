package recovery

import (
	"sync"
	"testing"
)

var hookMu sync.Mutex

// SetTestHook sets the crash hook for one test (tests using it must not
// run in parallel with other restores of the same package... they share
// the hook, so the hook is held by one test at a time).
func SetTestHook(t *testing.T, h func(point string) error) {
	t.Helper()
	testHook = h
}
