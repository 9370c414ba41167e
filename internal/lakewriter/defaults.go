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
	// runtime's soft memory limit is SoftLimit of it, the heap is
	// collected when it reaches that limit (`oml lake drain` turns the
	// proportional collector off under it, so peak RSS is the budget's
	// whatever the number of tables: docs/lake-writer.md, "A heap sized
	// by the budget"), and OpenTablesShare of it goes to the open table
	// writers' snapshots (Options.OpenTablesBytes).
	DefaultMemory = 256 << 20
	// SoftLimitQuarters is how many quarters of --memory the Go runtime
	// gets as its soft memory limit (SoftLimit; three: 192 MiB of the
	// default 256). The collector runs when the heap reaches it, as
	// often as it must to stay below it, so the limit must leave the GC
	// room above the live heap: the long-lived caches alone (the open
	// tables' quarter, their compact states' eighth, the MERGE rows'
	// sixteenth) can hold 112 MiB of the default budget. With half (128
	// MiB, sessions 13 to 18) a 20,000-tenant drain's live heap sat at
	// 113 MB and the collector ran back to back: 43 user CPU-s against
	// 22.6 with three quarters, at 158 against 216 MiB of peak RSS
	// (docs/lake-writer.md, "The 20,000-tenant regression"). The last
	// quarter holds what the runtime's limit does not count: the binary's
	// code (about 29 MiB of RSS) and little else.
	SoftLimitQuarters = 3
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

// SoftLimit is the Go runtime's soft memory limit for a --memory budget
// (SoftLimitQuarters of it).
func SoftLimit(memory int64) int64 { return memory / 4 * SoftLimitQuarters }
