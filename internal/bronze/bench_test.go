package bronze_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/lake/store"
)

// BenchmarkReadHead is the fork check's bronze cost per tenant on a file
// lake: load the table's log, pick the file holding the newest seq by its
// statistics, read two columns of it.
func BenchmarkReadHead(b *testing.B) {
	ctx := context.Background()
	lake, err := store.NewFile(b.TempDir())
	require.NoError(b, err)
	d := drainedInBatches(b, lake, 200, 9, 50)
	b.ResetTimer()
	for b.Loop() {
		if _, ok, err := bronze.ReadHead(ctx, lake, d.Tenants[0]); err != nil || !ok {
			b.Fatal(err, ok)
		}
	}
}
