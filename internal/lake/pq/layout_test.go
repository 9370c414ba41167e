package pq

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"testing"

	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/stretchr/testify/require"
)

var updateGolden = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestPhysicalLayoutIsStable pins the Parquet schema pq writes for every model
// type (physical types, logical annotations, list/map group names): this is
// the contract with Spark, delta-rs and DuckDB, so any change must be a
// deliberate one (go test -run TestPhysicalLayoutIsStable -update).
func TestPhysicalLayoutIsStable(t *testing.T) {
	t.Parallel()
	b, _ := writeFile(t, allTypesSchema(), Options{}, nil)
	f, err := Open(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	var out bytes.Buffer
	pqschema.PrintSchema(f.r.MetaData().Schema.Root(), &out, 2)
	golden := filepath.Join("testdata", "alltypes.schema.golden")
	if *updateGolden {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(golden, out.Bytes(), 0o644))
	}
	want, err := os.ReadFile(golden)
	require.NoError(t, err)
	require.Equal(t, string(want), out.String())
}
