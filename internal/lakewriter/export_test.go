package lakewriter

import "context"

// BeforeBatch runs the per-batch continuity check for (from, to] (the
// continuity benchmark measures it).
func (d *Drainer) BeforeBatch(ctx context.Context, from, to int64) error {
	rec, err := d.beforeBatch(ctx, from, to)
	if err == nil {
		d.batchApplied(rec)
	}
	return err
}

// OpenTables reports the table writers the drainer keeps open and how many
// it closed to stay within Options.MaxOpenTables.
func (d *Drainer) OpenTables() (open int, evictions int64) { return d.tables.stats() }

// OnPrefetch sets a hook called when a batch read ahead has been read
// (prefetch.go), on the reading goroutine.
func (d *Drainer) OnPrefetch(fn func(from, to int64, err error)) { d.onPrefetch = fn }
