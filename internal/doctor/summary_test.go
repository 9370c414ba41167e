package doctor_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"github.com/google/uuid"
	"github.com/omlhq/oml/internal/chainverify"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakesummary"
	"github.com/omlhq/oml/internal/lakewriter"
)

// lakeChecks are the checks built on the lake read the summary serves.
var lakeChecks = []string{doctor.IDOutbox, doctor.IDContinuity, doctor.IDFork, doctor.IDDelta}

// requireSameFindings: got reports what want does on every check built on
// the lake read (the outbox summary says how old the oldest prunable row
// is: it ages between runs).
func requireSameFindings(t *testing.T, got, want doctor.Report) {
	t.Helper()
	for _, id := range lakeChecks {
		g, w := check(t, got, id), check(t, want, id)
		require.Equalf(t, w.Status, g.Status, "%s: %s %v", id, g.Summary, g.Details)
		if id != doctor.IDOutbox {
			require.Equal(t, w.Summary, g.Summary, id)
		}
		require.Equal(t, w.Details, g.Details, id)
	}
}

// withAndWithoutSummary runs doctor on the summary the earlier runs left,
// then reading every table in full, and requires the same findings.
func withAndWithoutSummary(t *testing.T, b *bundle, tune func(*doctor.Thresholds)) doctor.Report {
	t.Helper()
	rep := doctor.Run(context.Background(), b.options(tune))
	full := b.options(tune)
	full.NoSummary = true
	requireSameFindings(t, rep, doctor.Run(context.Background(), full))
	return rep
}

func healthyWithSummary(t *testing.T) *bundle {
	t.Helper()
	b := setup(t, 3)
	b.load(t, 6, 0, 21)
	b.drain(t, nil)
	b.witnessAll(t)
	first := b.doctor(t, nil) // reads every table and stores the summary
	d := check(t, first, doctor.IDDelta)
	require.Equal(t, "absent", d.Data["summary_state"])
	require.Zero(t, d.Data["tables_from_summary"])
	return b
}

// The steady state: a second run reads in full only the scrub's share of
// the tables, lists the others' logs, and reports exactly what a run
// reading every table reports.
func TestDoctor_Summary_SecondRunReadsOnlyTheScrubsShare(t *testing.T) {
	t.Parallel()
	b := healthyWithSummary(t)
	counted := store.NewFaulty(b.lake)
	opts := b.options(nil)
	opts.Lake = func(context.Context) (store.Store, error) { return counted, nil }
	rep := doctor.Run(context.Background(), opts)
	full := b.options(nil)
	full.NoSummary = true
	requireSameFindings(t, rep, doctor.Run(context.Background(), full))

	d := check(t, rep, doctor.IDDelta)
	require.Equal(t, "ok", d.Data["summary_state"])
	keys := d.Data["tables_from_summary"].(int) + d.Data["tables_read"].(int)
	require.Equal(t, (1+3)*len(tables.Kinds), keys) // the provider and every tenant, every kind
	scrub := (keys + lakesummary.ScrubShare - 1) / lakesummary.ScrubShare
	require.Equal(t, scrub, d.Data["tables_read"], "only the scrub's share is read in full")
	require.Equal(t, scrub, d.Data["tables_scrubbed"])
	require.NotNil(t, d.Data["oldest_full_read_at"])
	loads, _ := reads(counted.Trace())
	require.LessOrEqual(t, len(loads), scrub)
}

// newestCommitKey is the lake key of a table's newest commit file.
func newestCommitKey(t *testing.T, lake store.Store, table string) string {
	t.Helper()
	objs, err := lake.List(context.Background(), table+"/"+delta.LogDir, "")
	require.NoError(t, err)
	var key string
	for _, o := range objs {
		if strings.HasSuffix(o.Key, ".json") && !strings.HasSuffix(o.Key, "_last_checkpoint") {
			key = o.Key
		}
	}
	require.NotEmpty(t, key)
	return key
}

// A fault planted after the summary was stored is reported as a run
// reading every table reports it: the summary cannot hide it.
func TestDoctor_Summary_CannotHideAFaultPlantedAfterIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()

	t.Run("a commit rewritten in place", func(t *testing.T) {
		t.Parallel()
		b := healthyWithSummary(t)
		victim := tables.TableKey{Tenant: b.tenants[0], Kind: tables.Bronze}.Path()
		key := newestCommitKey(t, b.lake, victim)
		require.NoError(t, b.lake.Put(ctx, key, strings.NewReader("{this is not a Delta commit"), 27))
		rep := withAndWithoutSummary(t, b, nil)
		c := requireStatus(t, rep, doctor.IDDelta, doctor.StatusFail)
		require.Contains(t, strings.Join(c.Details, "\n"), victim)
		requireStatus(t, rep, doctor.IDContinuity, doctor.StatusFail)
	})

	t.Run("commits past the checkpoint interval", func(t *testing.T) {
		t.Parallel()
		b := healthyWithSummary(t)
		b.load(t, 10, 0, 22)
		b.drain(t, func(o *lakewriter.Options) { o.Limits.Rows, o.CheckpointInterval = 1, 1_000_000 })
		rep := withAndWithoutSummary(t, b, func(th *doctor.Thresholds) { th.CheckpointWarn, th.CheckpointFail = 2, 4 })
		c := requireStatus(t, rep, doctor.IDDelta, doctor.StatusFail)
		require.Contains(t, strings.Join(c.Details, "\n"), "commits since the last checkpoint")
		require.Equal(t, b.lastSeq(t), check(t, rep, doctor.IDContinuity).Data["lake_position"])
	})

	t.Run("the bronze head's data files rewritten or removed", func(t *testing.T) {
		t.Parallel()
		b := healthyWithSummary(t)
		table := tables.TableKey{Tenant: b.tenants[1], Kind: tables.Bronze}.Path()
		objs, err := b.lake.List(ctx, table+"/", "")
		require.NoError(t, err)
		changed := 0
		for _, o := range objs {
			if strings.HasSuffix(o.Key, ".parquet") && !strings.Contains(o.Key, delta.LogDir) {
				// Rewritten: only the fingerprint sees it (the file is
				// still there); the second removed: its stat fails.
				if changed%2 == 0 {
					require.NoError(t, b.lake.Put(ctx, o.Key, strings.NewReader("not parquet"), 11))
				} else {
					require.NoError(t, b.lake.Delete(ctx, o.Key))
				}
				changed++
			}
		}
		require.Positive(t, changed)
		rep := withAndWithoutSummary(t, b, nil)
		c := requireStatus(t, rep, doctor.IDFork, doctor.StatusWarn)
		require.Contains(t, c.Summary, "could not be read")
	})

	t.Run("a checkpoint written, then removed", func(t *testing.T) {
		t.Parallel()
		b := healthyWithSummary(t)
		b.load(t, 6, 0, 23)
		b.drain(t, func(o *lakewriter.Options) { o.Limits.Rows, o.CheckpointInterval = 1, 2 })
		withAndWithoutSummary(t, b, nil) // the checkpoints are in the summary now
		table := tables.TableKey{Tenant: b.tenants[2], Kind: tables.Bronze}.Path()
		objs, err := b.lake.List(ctx, table+"/"+delta.LogDir, "")
		require.NoError(t, err)
		removed := 0
		for _, o := range objs {
			if strings.Contains(o.Key, ".checkpoint.") {
				require.NoError(t, b.lake.Delete(ctx, o.Key))
				removed++
			}
		}
		require.Positive(t, removed)
		rep := withAndWithoutSummary(t, b, nil)
		require.Positive(t, check(t, rep, doctor.IDDelta).Data["tables_read"])
	})

	t.Run("a summary that is garbage", func(t *testing.T) {
		t.Parallel()
		b := healthyWithSummary(t)
		require.NoError(t, b.lake.Put(ctx, lakesummary.Key, strings.NewReader("garbage"), 7))
		key := newestCommitKey(t, b.lake, tables.TableKey{Tenant: b.tenants[0], Kind: tables.Silver}.Path())
		require.NoError(t, b.lake.Put(ctx, key, strings.NewReader("{}"), 2))
		rep := withAndWithoutSummary(t, b, nil)
		d := requireStatus(t, rep, doctor.IDDelta, doctor.StatusFail)
		require.Contains(t, d.Data["summary_state"], "invalid")
		require.Zero(t, d.Data["tables_from_summary"])
	})

	t.Run("a summary edited without its hash", func(t *testing.T) {
		t.Parallel()
		b := healthyWithSummary(t)
		data, err := b.lake.Get(ctx, lakesummary.Key)
		require.NoError(t, err)
		data = bytes.Replace(data, []byte("\t1\t"), []byte("\t0\t"), 1)
		require.NoError(t, b.lake.Put(ctx, lakesummary.Key, bytes.NewReader(data), int64(len(data))))
		d := check(t, withAndWithoutSummary(t, b, nil), doctor.IDDelta)
		require.Contains(t, d.Data["summary_state"], "invalid")
	})
}

// A summary forged with a valid hash (by someone who can write the lake,
// and so the tables too) lies only until the scrub reads the table again:
// at the latest once its full read is older than lakesummary.MaxAge.
func TestDoctor_Summary_ForgedEntryIsFoundByTheScrub(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	b.load(t, 10, 0, 24)
	b.drain(t, func(o *lakewriter.Options) { o.Limits.Rows, o.CheckpointInterval = 1, 1_000_000 })
	tune := func(th *doctor.Thresholds) { th.CheckpointWarn, th.CheckpointFail = 2, 4 }
	requireStatus(t, b.doctor(t, tune), doctor.IDDelta, doctor.StatusFail) // stores the summary

	// Every table "checkpointed at its version": 0 commits since.
	data, err := b.lake.Get(ctx, lakesummary.Key)
	require.NoError(t, err)
	_, body, _ := bytes.Cut(data, []byte("\n"))
	var forged []string
	for _, line := range strings.Split(strings.TrimSuffix(string(body), "\n"), "\n") {
		f := strings.Split(line, "\t")
		f[7] = f[6] // checkpoint_version = version
		forged = append(forged, strings.Join(f, "\t"))
	}
	nb := []byte(strings.Join(forged, "\n") + "\n")
	sum := sha256.Sum256(nb)
	obj := append([]byte("oml lake summary v1 "+hex.EncodeToString(sum[:])+"\n"), nb...)
	require.NoError(t, b.lake.Put(ctx, lakesummary.Key, bytes.NewReader(obj), int64(len(obj))))

	later := b.options(tune)
	later.Now = func() time.Time { return time.Now().Add(lakesummary.MaxAge + time.Hour) }
	rep := doctor.Run(ctx, later)
	c := requireStatus(t, rep, doctor.IDDelta, doctor.StatusFail)
	require.Contains(t, strings.Join(c.Details, "\n"), "commits since the last checkpoint")
	require.Zero(t, c.Data["tables_from_summary"], "every entry older than MaxAge is read again")
}

// lake status reads the tables through the summary doctor stores
// (lakesummary.StatusReader): after a fault planted behind it, it shows
// what opening every table shows.
func TestLakeStatus_ThroughTheSummary_ShowsAFaultPlantedAfterIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := healthyWithSummary(t)
	status := func(withTables bool) (via, full lakewriter.Status) {
		var err error
		via, err = lakewriter.ReadStatus(ctx, b.pool, lakewriter.StatusOptions{Lake: b.lake, Tables: withTables, ReadTables: lakesummary.StatusReader(b.lake)})
		require.NoError(t, err)
		full, err = lakewriter.ReadStatus(ctx, b.pool, lakewriter.StatusOptions{Lake: b.lake, Tables: withTables})
		require.NoError(t, err)
		return via, full
	}
	via, full := status(true)
	require.Equal(t, full.Tables, via.Tables)
	require.Equal(t, full.Continuity, via.Continuity)
	require.True(t, via.Continuity.OK())

	// More drained (the summary is behind every table now), then one
	// table's newest commit rewritten.
	b.load(t, 3, 0, 25)
	b.drain(t, nil)
	victim := tables.TableKey{Tenant: b.tenants[2], Kind: tables.Silver}.Path()
	key := newestCommitKey(t, b.lake, victim)
	require.NoError(t, b.lake.Put(ctx, key, strings.NewReader("{not a commit"), 13))
	for _, withTables := range []bool{true, false} {
		via, full := status(withTables)
		require.Equal(t, full.Tables, via.Tables)
		require.Equal(t, full.Continuity, via.Continuity)
		require.Equal(t, full.ContinuityError, via.ContinuityError)
		require.Contains(t, via.ContinuityError, victim)
	}
}

// After every table was checkpointed past the lake writer's commit (what
// oml lake maintain does), a snapshot no longer holds the commit that set
// the txn version; the summary keeps its record, so a steady-state run
// reads no commit of the tables it serves (the continuity check used to
// read each table's last commits on every run), and reports what a run
// reading every table reports.
func TestDoctor_Summary_KeepsTheRecordOfACheckpointedTable(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := healthyWithSummary(t)
	for _, id := range append([]uuid.UUID{chainverify.ProviderTenant}, b.tenants...) {
		for _, k := range tables.Kinds {
			st, err := tables.TableKey{Tenant: id, Kind: k}.Store(b.lake)
			require.NoError(t, err)
			if _, err := delta.Checkpoint(ctx, st); err != nil && !errors.Is(err, delta.ErrTableNotFound) {
				require.NoError(t, err)
			}
		}
	}
	b.doctor(t, nil) // every log changed: read in full, records looked up once
	counted := store.NewFaulty(b.lake)
	opts := b.options(nil)
	opts.Lake = func(context.Context) (store.Store, error) { return counted, nil }
	rep := doctor.Run(ctx, opts)
	full := b.options(nil)
	full.NoSummary = true
	requireSameFindings(t, rep, doctor.Run(ctx, full))
	requireStatus(t, rep, doctor.IDContinuity, doctor.StatusOK)
	d := check(t, rep, doctor.IDDelta)
	_, commits := reads(counted.Trace())
	require.LessOrEqual(t, len(commits), d.Data["tables_read"].(int), "commits read: %v", commits)
}

// The lake summary is stored in the background while the checks use the
// read: a run still returns only once it is stored (a slow write too), and
// a write that fails is the delta check's detail, as when the read waited
// for it.
func TestDoctor_Summary_StoredInTheBackground_StoredBeforeTheRunReturnsAndFailureReported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, 3, 0, 17)
	b.drain(t, nil)

	slow := store.NewFaulty(b.lake, store.Rule{Ops: []store.OpKind{store.OpPut}, Key: lakesummary.Key, Kind: store.FaultDelay, Delay: 300 * time.Millisecond})
	opts := b.options(nil)
	opts.Lake = func(context.Context) (store.Store, error) { return slow, nil }
	rep := doctor.Run(ctx, opts)
	d := requireStatus(t, rep, doctor.IDDelta, doctor.StatusOK)
	require.Nil(t, d.Data["summary_write_error"])
	_, err := b.lake.Stat(ctx, lakesummary.Key)
	require.NoError(t, err, "the summary is stored when the run returns")

	failing := store.NewFaulty(b.lake, store.Rule{Ops: []store.OpKind{store.OpPut}, Key: lakesummary.Key, Kind: store.FaultError})
	opts.Lake = func(context.Context) (store.Store, error) { return failing, nil }
	require.NoError(t, b.lake.Delete(ctx, lakesummary.Key)) // every table read again: a summary to store
	d = check(t, doctor.Run(ctx, opts), doctor.IDDelta)
	require.Contains(t, d.Data["summary_write_error"], "cannot store the lake summary")
	require.Contains(t, strings.Join(d.Details, "\n"), "the lake summary could not be stored")
}
