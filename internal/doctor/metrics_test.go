package doctor_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/doctor"
)

func TestMetricsFile_ExportsStatusesAndNumericData(t *testing.T) {
	t.Parallel()
	witnessed := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	rep := doctor.Report{
		Status:          doctor.StatusFail,
		Counts:          map[doctor.Status]int{doctor.StatusOK: 1, doctor.StatusWarn: 1, doctor.StatusFail: 1, doctor.StatusSkipped: 1},
		StartedAt:       time.Unix(1_700_000_000, 0),
		DurationSeconds: 0.25,
		Checks: []doctor.Result{
			{ID: doctor.IDLag, Status: doctor.StatusWarn, Data: map[string]any{
				"lag_seconds": 75.5, "backlog_rows": int64(12), "outbox_bytes": int64(4096)}},
			{ID: doctor.IDFork, Status: doctor.StatusFail, Data: map[string]any{
				"findings":          []map[string]any{{"tenant": "x"}, {"tenant": "y"}},
				"newest_witness_at": witnessed, "tenants_witnessed": 3, "untrusted_witnesses": []string{}}},
			{ID: doctor.IDLease, Status: doctor.StatusOK, Data: map[string]any{
				"lease_live": true, "holder": "a string is not exported", "heartbeat_at": (*time.Time)(nil)}},
			{ID: doctor.IDReconcile, Status: doctor.StatusSkipped, Data: map[string]any{
				"counts": map[string]int{"missing-in-lake": 2}}},
		},
	}
	path := filepath.Join(t.TempDir(), "oml_doctor.prom")
	require.NoError(t, doctor.WriteMetricsFile(path, &rep))
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	want := `
# HELP oml_doctor_check_status Each doctor check's status: 0 ok, 1 warn, 2 fail, -1 skipped.
# TYPE oml_doctor_check_status gauge
oml_doctor_check_status{check="fork"} 2
oml_doctor_check_status{check="lag"} 1
oml_doctor_check_status{check="lease"} 0
oml_doctor_check_status{check="reconcile"} -1
`
	g, err := doctor.Gatherer(&rep)
	require.NoError(t, err)
	require.NoError(t, testutil.GatherAndCompare(g, strings.NewReader(want), doctor.MetricCheckStatus))

	text := string(b)
	for _, line := range []string{
		`oml_doctor_check_value{check="lag",key="lag_seconds"} 75.5`,
		`oml_doctor_check_value{check="lag",key="backlog_rows"} 12`,
		`oml_doctor_check_value{check="lag",key="outbox_bytes"} 4096`,
		`oml_doctor_check_value{check="fork",key="findings"} 2`,
		`oml_doctor_check_value{check="fork",key="tenants_witnessed"} 3`,
		`oml_doctor_check_value{check="fork",key="untrusted_witnesses"} 0`,
		`oml_doctor_check_value{check="fork",key="newest_witness_at"} 1.796112e+09`,
		`oml_doctor_check_value{check="lease",key="lease_live"} 1`,
		`oml_doctor_check_value{check="reconcile",key="counts.missing-in-lake"} 2`,
		`oml_doctor_checks{status="fail"} 1`,
		`oml_doctor_last_run_timestamp_seconds 1.7e+09`,
		`oml_doctor_run_duration_seconds 0.25`,
	} {
		require.Contains(t, text, line+"\n")
	}
	require.NotContains(t, text, "holder", "strings are not metrics")
	require.NotContains(t, text, "heartbeat_at", "a nil time is left out")
}
