package lakewriter

import (
	"context"
	"time"

	"github.com/omlhq/oml/internal/outbox"
)

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

// A pending batch waits from when its oldest row was written, not from
// when the loop first saw it. The loop sees new rows only between
// batches, so rows written while a batch committed have waited as long as
// that batch took; counted from then, they waited --max-wait more (and the
// fan-out's wait, up to the lag target, more again) on top of it, and at
// 10,000 tenants, where a batch commits for seconds, that was the lag's
// larger part. Counted from the oldest row, a batch whose rows waited
// --max-wait already is due at once, and a trickle into an idle writer
// waits as before.

// pendingSince is when the batch pending past the frontier started
// waiting: the age of its oldest row, as the database reads it (one
// indexed probe, outbox.Lag), back from now.
func (d *Drainer) pendingSince(ctx context.Context) time.Time {
	_, age, err := outbox.Lag(ctx, d.db, d.frontier.Load())
	return waitedSince(time.Now(), age, err)
}

// waitedSince is now less the oldest pending row's age in seconds; now
// when that age is unknown (the probe failed: the old rule) or not
// positive (the clocks of two statements).
func waitedSince(now time.Time, ageSeconds float64, err error) time.Time {
	if err != nil || ageSeconds <= 0 {
		return now
	}
	return now.Add(-time.Duration(ageSeconds * float64(time.Second)))
}
