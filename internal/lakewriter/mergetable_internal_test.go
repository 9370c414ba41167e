package lakewriter

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// mergeTable drives one silver or gold.workareas table through
// buildCommit and Commit the way applyTable does, without a database: the
// MERGE tests and BenchmarkMergeSteadyState use it.
type mergeTable struct {
	tb   testing.TB
	d    *Drainer
	st   store.Store
	w    *delta.Writer
	key  tables.TableKey
	seq  int64
	at   time.Time
	body []byte
}

func newMergeTable(tb testing.TB, kind tables.Kind, d *Drainer, st store.Store) *mergeTable {
	r := newRegistry(st, registryOptions{MaxOpen: 10})
	key := tables.TableKey{Tenant: uuid.New(), Kind: kind}
	w, err := r.writer(context.Background(), key, createMissing)
	require.NoError(tb, err)
	return &mergeTable{tb: tb, d: d, st: st, w: w, key: key, at: time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC), body: make([]byte, 200)}
}

// name is the key of row j of file f: files hold disjoint key ranges.
func mergeName(f, j int) string { return fmt.Sprintf("k-%02d-%02d", f, j) }

// insert is the item of a new key: a workarea's first change, a claim's
// promotion.
func (m *mergeTable) insert(name string) *item { return m.item(name, true, journal.StatePromoted) }

// change is the item of a change to a key already in the table: a change
// of the workarea's claim from promoted to state, a retract to state.
func (m *mergeTable) change(name, state string) *item { return m.item(name, false, state) }

func (m *mergeTable) item(name string, insert bool, state string) *item {
	m.seq++
	it := &item{seq: m.seq, journalSeq: m.seq, table: m.key, recordedAt: m.at.Add(time.Duration(m.seq) * time.Millisecond)}
	switch m.key.Kind {
	case tables.Workareas:
		it.op = journal.OpMaterialize
		it.lin = &journal.LineagePayload{WorkareaID: name, StateBefore: journal.StateHeld, StateAfter: state, Writer: "w-a"}
		if !insert {
			it.lin.StateBefore = journal.StatePromoted
		}
	default:
		it.artifact, it.version = name, 1
		if insert {
			it.op = journal.OpMaterialize
			it.row = tables.SilverRow{ArtifactID: it.artifact, Version: 1, TenantID: m.key.Tenant.String(), WorkareaID: "wa",
				Writer: "w-a", Principal: "p", Provenance: "{}", PlaintextDigest: "d1", CiphertextDigest: "d2",
				Body: m.body, State: state, PromotedBy: "p", SubmittedSeq: m.seq, PromotedSeq: m.seq,
				JournalSeq: m.seq, OutboxSeq: m.seq, UpdatedAt: it.recordedAt}.Row()
		} else {
			it.op = journal.OpRetract
			it.retract = &retract{state: state, updatedAt: it.recordedAt}
		}
	}
	return it
}

// build builds the commit of todo (no poison expected).
func (m *mergeTable) build(todo []*item) (delta.Commit, commitStats) {
	c, stats, poison, err := m.d.buildCommit(context.Background(), m.w, m.key, todo)
	require.NoError(m.tb, err)
	require.Empty(m.tb, poison)
	c.Txn = &delta.Txn{AppID: tables.AppID, Version: m.seq}
	return c, stats
}

// commit builds and commits todo, and tells mergeRows, as applyTable does.
func (m *mergeTable) commit(todo ...*item) delta.Commit {
	c, stats := m.build(todo)
	_, err := m.w.Commit(context.Background(), c)
	require.NoError(m.tb, err)
	m.d.mergeRows.committed(m.key, &c, stats.written)
	return c
}

// rows reads the table's rows from the store (a fresh snapshot), in key
// order.
func (m *mergeTable) rows() []pq.Row {
	ctx := context.Background()
	root, err := m.key.Store(m.st)
	require.NoError(m.tb, err)
	snap, err := delta.Load(ctx, root)
	require.NoError(m.tb, err)
	var rows []pq.Row
	require.NoError(m.tb, snap.Scan(ctx, root, delta.ScanOptions{}, func(_ *delta.Add, b []pq.Row) error {
		rows = append(rows, b...)
		return nil
	}))
	sort.Slice(rows, func(i, j int) bool { return fmt.Sprint(rows[i][:2]) < fmt.Sprint(rows[j][:2]) })
	return rows
}
