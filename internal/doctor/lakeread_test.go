package doctor_test

import (
	"context"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/lake/store"
)

// tableLog matches an object of a tenant table's Delta log; the groups are
// the table and the file name.
var tableLog = regexp.MustCompile(`^([0-9a-f-]{36}/[a-z]+/[a-z]+)/_delta_log/(.+)$`)

// reads counts, per table, the snapshot loads (each delta.Load reads the
// _last_checkpoint hint once) and, per commit file, the reads of it.
func reads(trace []store.TraceEntry) (loads map[string]int, commits map[string]int) {
	loads, commits = map[string]int{}, map[string]int{}
	for _, e := range trace {
		m := tableLog.FindStringSubmatch(e.Key)
		if e.Op != store.OpGet || m == nil {
			continue
		}
		switch name := m[2]; {
		case name == "_last_checkpoint":
			loads[m[1]]++
		case regexp.MustCompile(`^\d{20}\.json$`).MatchString(name):
			commits[e.Key]++
		}
	}
	return loads, commits
}

// The shared read (lakeread.go): one doctor run loads each table's
// snapshot once and reads each commit once, whichever checks use it (the
// outbox, continuity, fork and Delta checks each read every table before),
// and what it reports is what the checks found reading on their own —
// the store is only counted through, never changed.
func TestDoctor_ManyTables_OneRunReadsEachTableOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, 6)
	b.load(t, 4, 0, 11)
	b.drain(t, nil)
	b.witnessAll(t)
	before := b.doctor(t, nil) // stores the verified heads, as every later run finds them

	counted := store.NewFaulty(b.lake) // no rules: it only records
	opts := b.options(nil)
	opts.Lake = func(context.Context) (store.Store, error) { return counted, nil }
	opts.NoSummary = true // every table read in full (summary_test.go: what the summary spares)
	rep := doctor.Run(context.Background(), opts)

	for _, id := range []string{doctor.IDOutbox, doctor.IDContinuity, doctor.IDFork, doctor.IDDelta} {
		got, want := check(t, rep, id), check(t, before, id)
		require.Equalf(t, doctor.StatusOK, got.Status, "%s: %s %v", id, got.Summary, got.Details)
		if id != doctor.IDOutbox { // its summary says how old the oldest prunable row is: it ages
			require.Equal(t, want.Summary, got.Summary, id)
		}
		require.Equal(t, want.Details, got.Details, id)
	}
	tablesChecked, _ := check(t, rep, doctor.IDDelta).Data["tables"].(int)
	require.GreaterOrEqual(t, tablesChecked, 1+6*2) // the provider's bronze, every tenant's bronze and silver at least

	// Every table is looked for (a table not created yet too), once.
	loads, commits := reads(counted.Trace())
	require.GreaterOrEqual(t, len(loads), tablesChecked)
	for table, n := range loads {
		require.Equalf(t, 1, n, "table %s was loaded %d times in one doctor run", table, n)
	}
	require.NotEmpty(t, commits)
	for key, n := range commits {
		require.Equalf(t, 1, n, "commit %s was read %d times in one doctor run", key, n)
	}
}

// Each run reads the lake anew: a second run after the lake moved on
// reports where the lake is now, not what the first run read.
func TestDoctor_SecondRunAfterMoreWasDrained_ReportsTheNewPositions(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.load(t, 3, 0, 5)
	b.drain(t, nil)
	opts := b.options(nil)
	first := doctor.Run(context.Background(), opts)
	pos := requireStatus(t, first, doctor.IDContinuity, doctor.StatusOK).Data["lake_position"]
	require.Equal(t, b.lastSeq(t), pos)

	b.load(t, 3, 0, 6)
	b.drain(t, nil)
	second := doctor.Run(context.Background(), opts)
	c := requireStatus(t, second, doctor.IDContinuity, doctor.StatusOK)
	require.Equal(t, b.lastSeq(t), c.Data["lake_position"])
	require.Greater(t, c.Data["lake_position"], pos)
	commits := func(rep doctor.Report) int64 {
		n, _ := requireStatus(t, rep, doctor.IDDelta, doctor.StatusOK).Data["max_commits_since_checkpoint"].(int64)
		return n
	}
	require.Greater(t, commits(second), commits(first))
}
