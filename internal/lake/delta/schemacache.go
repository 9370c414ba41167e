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
var sharedSchemas struct {
	mu sync.Mutex
	m  map[string]*StructType
}

const maxSharedSchemas = 64

func parseSchemaShared(s string) (*StructType, error) {
	sharedSchemas.mu.Lock()
	st, ok := sharedSchemas.m[s]
	sharedSchemas.mu.Unlock()
	if ok {
		return st, nil
	}
	st, err := ParseSchema(s)
	if err != nil {
		return nil, err
	}
	sharedSchemas.mu.Lock()
	defer sharedSchemas.mu.Unlock()
	if sharedSchemas.m == nil {
		sharedSchemas.m = map[string]*StructType{}
	}
	if len(sharedSchemas.m) < maxSharedSchemas {
		sharedSchemas.m[s] = st
	}
	return st, nil
}
