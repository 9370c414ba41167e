package lakewriter

import "time"

// Batches that grow with their fan-out. Every table a batch touches costs
// one commit (a data file, a log entry, their fsyncs) whatever its row
// count, so a steady trickle over many tenants cut every --max-wait is one
// tiny file per table per batch: 10,000 tenants writing 2,000 events/s
// touch nearly as many tables as there are rows. When the batch due after
// --max-wait holds fewer than fanoutRowsPerTable rows per table, the loop
// lets it fill for up to fanoutWaitFactor × --max-wait (the lag target:
// 4 s by default), still within --batch-rows and --batch-bytes (a full
// batch is cut at once). `--once` drains a backlog and never waits.

const (
	// fanoutRowsPerTable is the fill below which a due batch waits.
	fanoutRowsPerTable = 2
	// fanoutWaitFactor bounds that wait, in --max-wait.
	fanoutWaitFactor = 4
)

// cutDue decides, for a batch that is not full and has waited age ≥
// maxWait, whether to cut it now: n rows over tables tables.
func cutDue(n, tables int, age, maxWait time.Duration) bool {
	if age >= fanoutWaitFactor*maxWait || tables == 0 {
		return true
	}
	return n >= fanoutRowsPerTable*tables
}
