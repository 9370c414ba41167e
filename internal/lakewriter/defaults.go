package lakewriter

import "time"

// The lake writer's defaults, named once: New fills a zero Option with
// them and `oml lake drain` shows them as its flags' defaults, so the two
// cannot drift apart. (DefaultMaxOpenTables is in registry.go and
// DefaultMaxOutage in faults.go, beside what they bound.)
const (
	// DefaultBatchRows and DefaultBatchBytes bound a batch when it is
	// first cut (--batch-rows, --batch-bytes).
	DefaultBatchRows  = 10000
	DefaultBatchBytes = 64 << 20
	// DefaultMaxWait is how long a small backlog waits for more rows
	// before a batch is cut (--max-wait).
	DefaultMaxWait = time.Second
	// DefaultPoll is the loop's idle polling interval.
	DefaultPoll = 250 * time.Millisecond
	// DefaultPoisonBudget is the failed attempts before a poison row is
	// dead-lettered (--poison-budget).
	DefaultPoisonBudget = 5
	// DefaultParallel (--parallel 0) means: as many tables committed,
	// and opened at start, at once as suit the store (store.Concurrency,
	// asked per batch: on a file lake store.FileConcurrency per file and
	// store.FileGroupConcurrency in rounds, store.S3Concurrency on S3).
	DefaultParallel = 0
	// DefaultBackoffMin and DefaultBackoffMax bound the wait between
	// retries after an outage or a poison row.
	DefaultBackoffMin = 200 * time.Millisecond
	DefaultBackoffMax = 30 * time.Second
	// DefaultHorizonTimeout is how long DrainOnce waits for open
	// transactions to end (--horizon-timeout).
	DefaultHorizonTimeout = time.Minute
	// DefaultDurableTimeout is how long DrainOnce waits for the standbys
	// to flush the stable prefix (--durable-timeout).
	DefaultDurableTimeout = time.Minute
	// DefaultLeaseTTL is the lease lifetime (--lease-ttl).
	DefaultLeaseTTL = 30 * time.Second
	// DefaultForkCheckInterval is how often the loop checks the chains
	// against their witnessed heads.
	DefaultForkCheckInterval = time.Minute
	// DefaultContinuityRecheck is how often the loop checks again after
	// refusing to write on a database behind the lake.
	DefaultContinuityRecheck = 30 * time.Second
	// DefaultWitnessInterval is how often, at most, a tenant's head is
	// witnessed after a batch touched it.
	DefaultWitnessInterval = 10 * time.Second
	// DefaultMemory is the lake writer's memory budget (--memory): the Go
	// runtime's soft memory limit is SoftLimitShare of it, and
	// OpenTablesShare of it goes to the open table writers' snapshots
	// (Options.OpenTablesBytes).
	DefaultMemory = 256 << 20
	// SoftLimitShare is the divisor of --memory given to the Go runtime as
	// its soft memory limit (half). Below a limit it does not reach, the
	// GC lets the heap grow to twice the live heap (GOGC=100), so peak RSS
	// followed the live heap twice over as the tenant count grew (183 MiB
	// at 10,000 tenants against 90 at 1,000, of which the live heap was
	// under half: docs/lake-writer.md, memory). The other half of the
	// budget holds what the runtime's limit does not count — the binary's
	// code (about 29 MiB of RSS), memory freed and not yet returned — and
	// the room the GC needs not to run back to back (a limit of 96 MiB
	// tripled the collections of a 10,000-tenant drain, about +9 CPU-s).
	SoftLimitShare = 2
	// OpenTablesShare is the divisor of --memory that bounds the open
	// table writers (a quarter: the batch itself, its decoded rows and the
	// Parquet buffers need the rest).
	OpenTablesShare = 4
	// MergeRowsShare is the divisor of --memory that bounds the rows of
	// the data files MERGEs wrote, kept so that the next MERGE of the
	// table need not read them back (Options.MergeRowsBytes; a sixteenth,
	// 16 MiB of the default budget). They are live heap, inside the
	// runtime's half beside the open tables' quarter.
	MergeRowsShare = 16
)
