package delta

import "sync"

// Every table of a kind has the same schema string, and parsing it was
// about an eighth of the CPU of loading a small table's snapshot (oml
// doctor loads 21,000 of them a run). So snapshot loads share one parse
// per distinct string. The parsed *StructType is shared between
// snapshots: read-only, as every parsed schema already is (nothing
// changes a StructType after ParseSchema builds it). Only successes are
// kept; a lake with more distinct schemas than maxSharedSchemas (other
// engines' tables) just parses the others each time.
//
// The string itself is shared too: a table's metadata keeps its schema
// string (about 1.3 KB) for as long as its snapshot lives, and a writer
// holding thousands of open tables of four kinds kept thousands of copies
// of four strings (5 MB of the lake writer's heap at 10,000 tenants).
var sharedSchemas struct {
	mu sync.Mutex
	m  map[string]sharedSchema
}

type sharedSchema struct {
	s  string // the first copy seen, kept for every later one
	st *StructType
}

const maxSharedSchemas = 64

// parseSchemaShared returns s parsed, and the shared copy of s (s itself
// when it is not kept) for the caller to keep instead of its own.
func parseSchemaShared(s string) (string, *StructType, error) {
	sharedSchemas.mu.Lock()
	e, ok := sharedSchemas.m[s]
	sharedSchemas.mu.Unlock()
	if ok {
		return e.s, e.st, nil
	}
	st, err := ParseSchema(s)
	if err != nil {
		return s, nil, err
	}
	sharedSchemas.mu.Lock()
	defer sharedSchemas.mu.Unlock()
	if sharedSchemas.m == nil {
		sharedSchemas.m = map[string]sharedSchema{}
	}
	if len(sharedSchemas.m) < maxSharedSchemas {
		sharedSchemas.m[s] = sharedSchema{s: s, st: st}
	}
	return s, st, nil
}
