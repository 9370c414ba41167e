package doctor_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/doctor"
)

// BenchmarkDoctor_HealthyDemo100Tenants is the speed target: one
// doctor run (every check but --deep) on a healthy system with 100 tenants,
// their tables drained and their heads witnessed, after a first run stored
// the verified heads (the steady state of a doctor run every minute).
//
//	go test -run '^$' -bench Doctor -benchtime 20x ./internal/doctor/
func BenchmarkDoctor_HealthyDemo100Tenants(b *testing.B) {
	d := setup(b, 100)
	d.load(b, 10, 0, 3)
	d.drain(b, nil)
	d.witnessAll(b)
	opts := d.options(nil)
	rep := doctor.Run(context.Background(), opts)
	require.Equal(b, doctor.StatusWarn, rep.Status, "%+v", rep.Checks) // replication: a single node
	b.ResetTimer()
	for b.Loop() {
		rep = doctor.Run(context.Background(), opts)
	}
	b.StopTimer()
	require.Equal(b, doctor.StatusWarn, rep.Status)
	for _, c := range rep.Checks {
		b.ReportMetric(c.DurationSeconds*1e3, "ms-"+c.ID)
	}
}
