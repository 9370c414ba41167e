package lakewriter

import "github.com/omlhq/oml/internal/lake/tables"

// Tables known complete. A table whose txn version is below a batch's
// start may have missed rows before it (it was held for a forked chain or
// a fault of its own, or the lake was restored from an older copy), so
// applyTable probes the outbox for its rows in between before committing
// (gapRows): one indexed round trip per table. At 10,000 tenants nearly
// every table a batch touches is behind the batch start — it was not in
// the batch before — and those probes were a round trip per table commit
// that never found anything.
//
// The drainer therefore remembers, of the tables it knows hold every live
// row of theirs up to the frontier, the txn version they had then, and
// skips the probe only for a table still at that txn version:
//   - after the start-up catch-up (catchUp) every table of the tenants it
//     covered that is not held is complete, at the txn version the scan
//     read (or the one its catch-up commit set);
//   - a table that committed a batch (F, E] is complete at txn version E;
//   - a batch (F, E] leaves a complete table it did not touch complete at
//     the same txn version, because it applies every live row of (F, E] —
//     except the rows of held tenants and tables (dropHeld) and of a table
//     held during the batch (holdTable), which are forgotten here.
//
// A table whose txn version is not the remembered one (its log was
// rewound or restored from an older copy behind the writer's back) is
// probed as before. A restart, or a lost lease, starts from nothing
// (recover clears it).

// isComplete reports whether key is known complete at txn version applied.
func (d *Drainer) isComplete(key tables.TableKey, applied int64) bool {
	d.completeMu.Lock()
	defer d.completeMu.Unlock()
	v, ok := d.complete.get(key)
	return ok && v == applied
}

// markComplete records key as complete at txn version txn.
func (d *Drainer) markComplete(key tables.TableKey, txn int64) {
	d.completeMu.Lock()
	defer d.completeMu.Unlock()
	d.complete.set(key, txn)
}

func (d *Drainer) forgetComplete(keys ...tables.TableKey) {
	d.completeMu.Lock()
	defer d.completeMu.Unlock()
	for _, k := range keys {
		d.complete.remove(k)
	}
}

func (d *Drainer) resetComplete() {
	d.completeMu.Lock()
	defer d.completeMu.Unlock()
	d.complete = tableVersions{}
}
