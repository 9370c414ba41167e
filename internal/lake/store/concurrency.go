package store

// How many requests at once suit a store. A local file system is bound by
// the CPU and the disk's fsyncs, shared with PostgreSQL on the same
// machine: a few at once keep both cores busy and more only queue up. S3
// is bound by latency (tens of milliseconds a request, nearly all of it
// waiting), so many at once are what makes it fast. The lake writer sizes
// its concurrent table commits and its start-up table reads with this
// (`oml lake drain --parallel` overrides it). A file store in group-sync
// mode (SyncGroup) shares one syncfs among the writes waiting at the time,
// so more commits in flight make each flush serve more of them: on the
// 100-tenant drain of docs/lake-writer.md, 32 at once took 0.92 s (median
// of 10) against 1.21 s at 4 and 1.02 s at 16, per file 1.11-1.23 s at
// any of 4, 16, 32.
const (
	FileConcurrency      = 4
	FileGroupConcurrency = 32
	S3Concurrency        = 32
)

// concurrent is implemented by the stores that know their best
// concurrency (and by wrappers, which ask what they wrap).
type concurrent interface{ Concurrency() int }

// Concurrency is how many requests at once suit s (FileConcurrency for a
// store that does not say).
func Concurrency(s Store) int {
	if c, ok := s.(concurrent); ok {
		if n := c.Concurrency(); n > 0 {
			return n
		}
	}
	return FileConcurrency
}

// Concurrency of a local file system (see FileConcurrency and
// FileGroupConcurrency): that of the mode in effect, which in sync=auto
// can change between two calls (and a call may start a retry of rounds,
// autoSync.useGroup).
func (f *File) Concurrency() int {
	if f.syncFor(true) == SyncGroup {
		return FileGroupConcurrency
	}
	return FileConcurrency
}

// Concurrency of S3 (see S3Concurrency).
func (s *S3) Concurrency() int { return S3Concurrency }

// Concurrency is the concurrency of the store under the prefix.
func (s *subStore) Concurrency() int { return Concurrency(s.inner) }

// Concurrency is the concurrency of the store faults are injected into.
func (f *Faulty) Concurrency() int { return Concurrency(f.inner) }
