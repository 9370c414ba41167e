package lakewriter_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// Tests that pin the exactly-once fences: each fails when the fence it
// names is broken (see the comment on each test for the mutation).

// finalBatchStart returns x such that the outbox rows in (x, last] that are
// not planted poison touch at least n tables, with extra more rows before
// them: the start of a final batch worth crashing in.
func (b *bundle) finalBatchStart(t *testing.T, n, extra int) int64 {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `SELECT seq, tenant_id, target FROM oml.outbox ORDER BY seq DESC`)
	require.NoError(t, err)
	defer rows.Close()
	seen := map[tables.TableKey]bool{}
	var x int64 = -1
	for rows.Next() {
		var seq int64
		var tn uuid.UUID
		var target string
		require.NoError(t, rows.Scan(&seq, &tn, &target))
		if x >= 0 {
			if extra == 0 {
				break
			}
			x, extra = seq-1, extra-1
			continue
		}
		b.poisonMu.Lock()
		planted := b.poison[seq]
		b.poisonMu.Unlock()
		if planted {
			continue
		}
		seen[tables.TableKey{Tenant: tn, Kind: tables.Kind(target)}] = true
		if len(seen) >= n {
			x = seq - 1
		}
	}
	require.NoError(t, rows.Err())
	require.GreaterOrEqualf(t, x, int64(0), "the outbox has rows of fewer than %d tables", n)
	return x
}

// drainTo drains lake up to outbox seq x (the rows before a final batch)
// and checks that the frontier stands there.
func (b *bundle) drainTo(t *testing.T, lake store.Store, x int64) {
	t.Helper()
	o := b.opts(lake)
	o.StopAt = x
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	_, err = d.DrainOnce(context.Background())
	require.NoError(t, err)
	require.Equal(t, x, d.Frontier())
}

// finalBatchOpts drain the rest of the outbox as one batch, one table at
// a time, so a fault or crash at one table's commit leaves the batch's
// other tables committed or not yet started.
func (b *bundle) finalBatchOpts(lake store.Store) lakewriter.Options {
	o := b.opts(lake)
	o.Limits = lakewriterLimits(1_000_000)
	o.Parallel = 1
	return o
}

// tablesIn lists the tables the rows in (from, to] go to, leaving out
// planted poison.
func (b *bundle) tablesIn(t *testing.T, from, to int64) []tables.TableKey {
	t.Helper()
	rows, err := b.pool.Query(context.Background(),
		`SELECT seq, tenant_id, target FROM oml.outbox WHERE seq > $1 AND seq <= $2 ORDER BY seq`, from, to)
	require.NoError(t, err)
	defer rows.Close()
	seen := map[tables.TableKey]bool{}
	var out []tables.TableKey
	for rows.Next() {
		var seq int64
		var tn uuid.UUID
		var target string
		require.NoError(t, rows.Scan(&seq, &tn, &target))
		b.poisonMu.Lock()
		planted := b.poison[seq]
		b.poisonMu.Unlock()
		k := tables.TableKey{Tenant: tn, Kind: tables.Kind(target)}
		if planted || seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, k)
	}
	require.NoError(t, rows.Err())
	return out
}

// txnVersion is a table's lake-writer txn version in the lake (-1: none, or
// no table).
func txnVersion(t *testing.T, lake store.Store, key tables.TableKey) int64 {
	t.Helper()
	st, err := store.Sub(lake, key.Path())
	require.NoError(t, err)
	snap, err := delta.Load(context.Background(), st)
	if errors.Is(err, delta.ErrTableNotFound) {
		return -1
	}
	require.NoError(t, err)
	if v, ok := snap.TxnVersion(tables.AppID); ok {
		return v
	}
	return -1
}

// committedThrough returns the tables of keys whose txn version is ≥ end.
func committedThrough(t *testing.T, lake store.Store, keys []tables.TableKey, end int64) []tables.TableKey {
	t.Helper()
	var out []tables.TableKey
	for _, k := range keys {
		if txnVersion(t, lake, k) >= end {
			out = append(out, k)
		}
	}
	return out
}

// isDataCommit matches the PUT of a table's commit after its creation.
func isDataCommit(_ store.OpKind, key string) bool {
	return strings.Contains(key, "/"+delta.LogDir) && strings.HasSuffix(key, ".json") &&
		!strings.HasSuffix(key, delta.CommitKey(0))
}

// The last batch's commit to a table times out without landing: the store
// reports the outcome as unknown and the read-back finds nothing. The
// writer must not count it as landed; with no restart after it (it is the
// final batch), the lake must still hold every row when DrainOnce returns.
// Mutations this catches: the read-back's "not found" taken as landed
// (delta.Writer.put), the writer giving up as if landed, the lake writer
// treating an AmbiguousCommitError as committed.
func TestDrain_AmbiguousCommitThatDidNotLand_FinalBatchStillLands(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		times int // ambiguous attempts in a row
	}{
		{"read-back-settles-it", 1},
		{"writer-gives-up-and-reopens", 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			b := setup(t, 2)
			b.load(t, workload.Config{Claims: 10, Seed: 51, RetractRatio: 0.4})
			last := b.lastSeq(t)
			x := b.finalBatchStart(t, 2, 3)
			faulty := store.NewFaulty(store.NewMem())

			b.drainTo(t, faulty, x)

			// The final batch's first table commit: not applied, reported
			// as timed out (ambiguous), tc.times attempts in a row.
			faulty.SetRules(store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent}, Match: isDataCommit,
				Times: tc.times, Kind: store.FaultTimeout, Delay: time.Millisecond})
			// One table at a time: the faults all hit one commit.
			d, err := lakewriter.New(b.finalBatchOpts(faulty))
			require.NoError(t, err)
			sum, err := d.DrainOnce(ctx)
			require.NoError(t, err)
			require.Equal(t, last, d.Frontier())
			require.Equal(t, x, sum.StartFrontier)
			injected := 0
			for _, e := range faulty.Trace() {
				if e.Outcome == "injected-timeout" {
					injected++
				}
			}
			require.Equal(t, tc.times, injected, "the ambiguous commits were injected")

			// No restart: what this writer reported done must be in the lake.
			for _, k := range b.tablesIn(t, x, last) {
				require.Equalf(t, last, txnVersion(t, faulty, k), "table %s holds the final batch", k)
			}
			b.verifyLake(t, faulty)
		})
	}
}

// A throttled read of a silver data file while a retract is merged into
// it is an outage, never the retract's own fault: the batch is retried, the
// retract is applied, nothing is dead-lettered and silver shows the claim
// as retracted, not as promoted.
// Mutation this catches: the MERGE scan's read error taken as "the key is
// not in the table", which makes the retract poison.
func TestOutage_ReadFailsDuringSilverMergeScan_RetractIsNotPoison(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	tn := b.tenants[0]
	b.load(t, workload.Config{Claims: 12, Seed: 61, PromoteRatio: 1, RetractRatio: 0.5})

	// The last retract whose promotion comes in an earlier batch: the merge
	// has to read the silver file that holds the promoted row.
	var retractSeq int64
	var artifact string
	var version int32
	require.NoError(t, b.pool.QueryRow(ctx, `
SELECT r.seq, r.artifact_id, r.version FROM oml.outbox r
JOIN oml.outbox m ON m.target = 'silver.claims' AND m.op = 'materialize' AND m.tenant_id = r.tenant_id AND m.artifact_id = r.artifact_id AND m.version = r.version
WHERE r.target = 'silver.claims' AND r.op = 'retract' AND r.tenant_id = $1 AND m.seq < r.seq
ORDER BY r.seq DESC LIMIT 1`, tn).Scan(&retractSeq, &artifact, &version))
	var foldState string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT state FROM oml.claims WHERE tenant_id = $1 AND artifact_id = $2 AND version = $3`,
		tn, artifact, version).Scan(&foldState))
	require.NotEqual(t, "promoted", foldState)

	faulty := store.NewFaulty(store.NewMem())
	o := b.opts(faulty)
	o.StopAt = retractSeq - 1
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	_, err = d.DrainOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, "promoted", silverState(t, faulty, tn, artifact, version), "promoted before the retract's batch")

	silverData := func(_ store.OpKind, key string) bool {
		return strings.HasPrefix(key, tn.String()+"/silver/claims/") && !strings.Contains(key, delta.LogDir) &&
			strings.HasSuffix(key, ".parquet")
	}
	faulty.SetRules(store.Rule{Ops: []store.OpKind{store.OpOpen, store.OpGet}, Match: silverData,
		Times: 3, Kind: store.FaultError, Err: errors.New("503 Slow Down (injected throttling)")})
	o = b.opts(faulty)
	o.PoisonBudget = 1 // an outage taken for poison would dead-letter at once
	o.Limits = lakewriterLimits(1_000_000)
	d, err = lakewriter.New(o)
	require.NoError(t, err)
	sum, err := d.DrainOnce(ctx)
	require.NoError(t, err)
	injected := 0
	for _, e := range faulty.Trace() {
		if e.Outcome == "injected-error" {
			injected++
		}
	}
	require.NotZero(t, injected, "the reads of the silver file failed")
	require.Emptyf(t, sum.DeadLettered, "the retract is outbox row %d", retractSeq)
	var attempts int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM oml.outbox_attempts`).Scan(&attempts))
	require.Zero(t, attempts, "a read outage must not spend any row's retry budget")
	require.Equal(t, foldState, silverState(t, faulty, tn, artifact, version), "silver shows the retract")
	require.Equal(t, 3, injected, "every injected failure was retried")
	require.Equal(t, b.lastSeq(t), d.Frontier())
	b.verifyLake(t, faulty)
}

// silverState reads one claim's state from silver ("" if absent).
func silverState(t *testing.T, lake store.Store, tn uuid.UUID, artifact string, version int32) string {
	t.Helper()
	for _, r := range readSilver(t, lake, tn) {
		if r.ArtifactID == artifact && r.Version == version {
			return r.State
		}
	}
	return ""
}

// The final batch is interrupted after exactly one of its tables
// committed; nothing is written after it. The restarted writer must finish
// that batch from the bounds recorded in the Delta log (or catch the other
// tables up to the frontier): no later batch will do it.
// Mutation this catches: recovery's replay of the recorded bounds and its
// catch-up both removed.
func TestCrash_FinalBatchPartlyCommitted_RestartFinishesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 12, Seed: 41, RetractRatio: 0.5})
	lake := store.NewMem()
	last := b.lastSeq(t)
	x := b.finalBatchStart(t, 3, 0)

	b.drainTo(t, lake, x)

	hook, fired := crashAfter(lakewriter.AfterTableCommit, 1)
	o := b.finalBatchOpts(lake)
	o.Crash = hook
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	_, err = d.DrainOnce(ctx)
	require.ErrorIs(t, err, lakewriter.ErrCrashed)
	require.True(t, fired())
	touched := b.tablesIn(t, x, last)
	require.GreaterOrEqual(t, len(touched), 3)
	require.Len(t, committedThrough(t, lake, touched, last), 1, "exactly one table of the final batch committed")

	b.drainInto(t, lake)
	require.ElementsMatch(t, touched, committedThrough(t, lake, touched, last), "every table of the final batch holds it")
	b.verifyLake(t, lake)
}

// maxTxn is the newest lake-writer txn version over every table of the
// deployment (-1: none).
func (b *bundle) maxTxn(t *testing.T, lake store.Store) int64 {
	t.Helper()
	out := int64(-1)
	for _, tn := range append([]uuid.UUID{journal.ProviderTenant}, b.tenants...) {
		for _, k := range tables.Kinds {
			out = max(out, txnVersion(t, lake, tables.TableKey{Tenant: tn, Kind: k}))
		}
	}
	return out
}
