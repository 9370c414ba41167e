package lakewriter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// Whose fault an error is decides what the writer does with it
// (docs/lake-writer.md, "Whose fault"):
//
//   - a row's: poison (rows.go, check.go, poison.go) — retried within its
//     budget, then dead-lettered;
//   - one table's (a corrupt commit, a log missing behind a checkpoint, a
//     data file that is gone or not Parquet, a table oml did not create):
//     that table is held — its rows wait, every other table goes on, the
//     hold is named in logs, metrics, the drain summary, `oml lake status`
//     and `oml doctor`, and the table is caught up once it reads again;
//   - the configuration's (credentials the store refuses, no such bucket):
//     DrainOnce stops at once with the store's one-sentence error (exit 2);
//     the long-running loop reports it and backs off;
//   - anything else is an outage: wait and retry, as long as it lasts in the
//     loop, and at most MaxOutage in DrainOnce (then an *OutageError).
type fault int

const (
	faultOutage fault = iota
	faultTable
	faultConfig
)

func classify(err error) fault {
	var schemaErr *SchemaError
	var pruneErr *ThroughPruneMarkError
	switch {
	case errors.Is(err, store.ErrConfig):
		return faultConfig
	case errors.Is(err, delta.ErrCorruptLog), errors.Is(err, delta.ErrCorruptData),
		errors.Is(err, delta.ErrUnsupported), errors.Is(err, delta.ErrVersionNotFound),
		// A file the table's log lists and the store lacks.
		errors.Is(err, store.ErrNotFound),
		errors.As(err, &schemaErr),
		// A table below its outbox prune mark (through.go).
		errors.As(err, &pruneErr):
		return faultTable
	}
	return faultOutage
}

// DefaultMaxOutage is how long DrainOnce waits out an outage (the database
// or the store failing every attempt) before it gives up.
const DefaultMaxOutage = 5 * time.Minute

// OutageError is DrainOnce giving up after an outage outlasted MaxOutage.
type OutageError struct {
	Step   string        // what it was trying to do
	Waited time.Duration // how long it retried
	Err    error         // the last failure
}

func (e *OutageError) Error() string {
	return fmt.Sprintf("gave up after waiting %s for the %s step to succeed (last error: %v); nothing was lost, run the drain again when the outage is over",
		e.Waited.Round(time.Second), e.Step, e.Err)
}

func (e *OutageError) Unwrap() error { return e.Err }

// SchemaError is a table at an oml path whose columns are not oml's.
type SchemaError struct{ msg string }

func (e *SchemaError) Error() string { return e.msg }

// TableHold is a table the writer holds for a fault of its own.
type TableHold struct {
	Table  string      `json:"table"` // <tenant>/<layer>/<name>
	Tenant uuid.UUID   `json:"tenant_id"`
	Kind   tables.Kind `json:"kind"`
	Reason string      `json:"reason"`
	Since  time.Time   `json:"held_at"`
	Holder string      `json:"holder,omitempty"`
}

// HoldPrefix is where the writer records its table holds under the lake
// root, one object per held table (outside every Delta table), so `oml lake
// status` and `oml doctor` see them from another process. The Delta logs
// stay the authority; a hold only says "this table is not being written".
const HoldPrefix = "_oml_holds/"

func holdKey(k tables.TableKey) string {
	return HoldPrefix + k.Tenant.String() + "/" + string(k.Kind) + ".json"
}

// holdTable holds key for err (a table fault): its rows are left out from
// now on and the hold is recorded in the lake.
func (d *Drainer) holdTable(ctx context.Context, key tables.TableKey, err error) {
	d.tables.forget(key)
	d.forgetComplete(key) // its rows are left out from now on (complete.go)
	d.heldMu.Lock()
	if d.heldTables == nil {
		d.heldTables = map[tables.TableKey]TableHold{}
	}
	h, was := d.heldTables[key]
	if !was {
		h = TableHold{Table: key.Path(), Tenant: key.Tenant, Kind: key.Kind, Reason: err.Error(), Since: time.Now().UTC(), Holder: d.opts.Holder}
		d.heldTables[key] = h
	}
	d.heldMu.Unlock()
	d.stateChanged() // prefetch.go
	if was {
		return
	}
	d.opts.Metrics.tablesHeld(d.heldTableCount())
	d.log.Error("holding a table that cannot be read or written for a fault of its own; other tables continue. Repair or move it away; see docs/runbooks/delta.md",
		"table", key.String(), "error", err)
	b, _ := json.Marshal(h)
	if perr := d.opts.Lake.Put(ctx, holdKey(key), strings.NewReader(string(b)), int64(len(b))); perr != nil {
		d.log.Warn("could not record the table hold in the lake (status and doctor will not show it)", "table", key.String(), "error", perr)
	}
}

// releaseTable ends a hold (the table reads again) and removes its record.
func (d *Drainer) releaseTable(ctx context.Context, key tables.TableKey) {
	d.heldMu.Lock()
	_, was := d.heldTables[key]
	delete(d.heldTables, key)
	d.heldMu.Unlock()
	d.stateChanged() // prefetch.go
	if err := d.opts.Lake.Delete(ctx, holdKey(key)); err != nil {
		d.log.Warn("could not remove the table hold's record from the lake", "table", key.String(), "error", err)
	}
	if was {
		d.opts.Metrics.tablesHeld(d.heldTableCount())
		d.log.Info("held table reads again; catching it up", "table", key.String())
	}
}

func (d *Drainer) heldTableCount() int {
	d.heldMu.Lock()
	defer d.heldMu.Unlock()
	return len(d.heldTables)
}

func (d *Drainer) isHeldTable(key tables.TableKey) bool {
	d.heldMu.Lock()
	defer d.heldMu.Unlock()
	_, ok := d.heldTables[key]
	return ok
}

// HeldTables returns the tables currently held, by table path.
func (d *Drainer) HeldTables() []TableHold {
	d.heldMu.Lock()
	defer d.heldMu.Unlock()
	out := make([]TableHold, 0, len(d.heldTables))
	for _, h := range d.heldTables {
		out = append(out, h)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Table < out[j].Table })
	return out
}

// recheckHeldTables retries every held table, and the tables whose hold
// records are in the lake from an earlier run: a table that opens again is
// released (the catch-up that follows brings it up to the frontier) and
// returned.
func (d *Drainer) recheckHeldTables(ctx context.Context) (released []tables.TableKey, _ error) {
	recorded, err := ReadHolds(ctx, d.opts.Lake)
	if err != nil {
		return nil, err
	}
	keys := map[tables.TableKey]bool{}
	for _, h := range recorded {
		keys[tables.TableKey{Tenant: h.Tenant, Kind: h.Kind}] = true
	}
	for _, h := range d.HeldTables() {
		keys[tables.TableKey{Tenant: h.Tenant, Kind: h.Kind}] = true
	}
	for key := range keys {
		d.tables.forget(key)
		_, err := d.tables.writer(ctx, key, leaveMissing)
		switch {
		case err == nil:
			d.releaseTable(ctx, key)
			released = append(released, key)
		case classify(err) == faultTable:
			d.holdTable(ctx, key, err)
		default:
			return released, err
		}
	}
	return released, nil
}

// ReadHolds lists the table holds recorded in the lake.
func ReadHolds(ctx context.Context, lake store.Store) ([]TableHold, error) {
	objs, err := lake.List(ctx, HoldPrefix, "")
	if err != nil {
		return nil, fmt.Errorf("list the lake writer's table holds: %w", err)
	}
	var out []TableHold
	for _, o := range objs {
		b, err := lake.Get(ctx, o.Key)
		if errors.Is(err, store.ErrNotFound) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("read table hold %s: %w", o.Key, err)
		}
		var h TableHold
		if json.Unmarshal(b, &h) != nil || h.Table == "" {
			continue // not one of ours
		}
		out = append(out, h)
	}
	return out, nil
}
