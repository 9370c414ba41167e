package store

import "context"

// Whether anything is stored under a prefix, in one request. The lake
// writer's start-up scan reads every table of every tenant (on S3 a GET of
// _last_checkpoint and a LIST of _delta_log/ each, 8 requests a tenant);
// on a lake where most tenants have no table yet, one LIST of at most one
// key per tenant answers the same for all four of its tables. Only stores
// that can answer in one bounded request say they can: on a file lake a
// List of a tenant that exists walks its whole tree.

// anyUnder is implemented by stores that answer AnyUnder in one bounded
// request (and by wrappers, which ask what they wrap).
type anyUnder interface {
	anyUnder(ctx context.Context, prefix string) (found, known bool, err error)
}

// AnyUnder reports whether some object's key starts with prefix (a
// directory-style prefix ending in '/'). known is false when the store
// cannot tell in one request (the caller reads what it needs the usual
// way); found is true whenever the answer is not certainly "nothing", so a
// caller that skips reads on !found skips them only for an empty prefix.
func AnyUnder(ctx context.Context, s Store, prefix string) (found, known bool, err error) {
	if err := validatePrefix(prefix); err != nil {
		return true, false, err
	}
	if a, ok := s.(anyUnder); ok {
		return a.anyUnder(ctx, prefix)
	}
	return true, false, nil
}

func (s *subStore) anyUnder(ctx context.Context, prefix string) (bool, bool, error) {
	return AnyUnder(ctx, s.inner, s.prefix+prefix)
}

// anyUnder of the fault injector is a List to its rules (faults injected
// into List hit it too) and asks the store it wraps.
func (f *Faulty) anyUnder(ctx context.Context, prefix string) (found, known bool, err error) {
	err = f.do(ctx, OpList, prefix, func() (err error) {
		found, known, err = AnyUnder(ctx, f.inner, prefix)
		return err
	})
	if err != nil {
		return true, false, err
	}
	return found, known, nil
}

// anyUnder of the in-memory store is a List (one call), so the crash and
// fault suites run the same scan as a lake on S3.
func (m *Mem) anyUnder(ctx context.Context, prefix string) (bool, bool, error) {
	objs, err := m.List(ctx, prefix, "")
	if err != nil {
		return true, false, err
	}
	return len(objs) > 0, true, nil
}
