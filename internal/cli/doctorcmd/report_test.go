package doctorcmd_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cli/doctorcmd"
	"github.com/omlhq/oml/internal/doctor"
)

func fixedReport() doctor.Report {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mk := func(id, title string, s doctor.Status, summary string, details ...string) doctor.Result {
		return doctor.Result{ID: id, Title: title, Status: s, Summary: summary, Details: details, Data: map[string]any{},
			Runbook: doctor.Runbook(id), CheckedAt: at, DurationSeconds: 0.01}
	}
	rep := doctor.Report{Status: doctor.StatusFail, StartedAt: at, DurationSeconds: 0.2345, Counts: map[doctor.Status]int{}, Checks: []doctor.Result{
		mk(doctor.IDDatabase, "database reachable, schema current", doctor.StatusOK, "PostgreSQL 17.2 reachable, schema at version 4 (current)"),
		mk(doctor.IDLag, "frontier lag", doctor.StatusFail, "120000 row(s) behind (seq gap 120400), oldest waiting 14m2s",
			"frontier 1000 (updated 2026-01-02T02:50:00Z), outbox last seq 121400, stable seq 121400"),
		mk(doctor.IDDeadLetters, "dead letters", doctor.StatusWarn, "2 dead letter(s), oldest 2026-01-02T02:00:00Z (1h4m5s ago): the lake is missing these rows until re-enqueued"),
		mk(doctor.IDReconcile, "reconcile lake against journal", doctor.StatusSkipped, "not run: pass --deep for this slower check"),
	}}
	for _, c := range rep.Checks {
		rep.Counts[c.Status]++
	}
	return rep
}

// TestWriteReport_Golden pins the plain report, with and without colour
// (go test ./internal/cli/doctorcmd -run TestWriteReport_Golden -update).
func TestWriteReport_Golden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		colour bool
	}{{"plain", false}, {"colour", true}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			require.NoError(t, doctorcmd.WriteReport(&b, fixedReport(), tc.colour))
			if !tc.colour {
				require.NotContains(t, b.String(), "\x1b[")
			}
			golden.RequireEqual(t, b.Bytes())
		})
	}
}
