package pq

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// goldenDir finds ../shared/golden beside the module root (the layout of a
// developer checkout and of CI), or $OML_GOLDEN_DIR.
func goldenDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("OML_GOLDEN_DIR"); d != "" {
		return d
	}
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "go.mod not found above the test directory")
		dir = parent
	}
	g := filepath.Join(dir, "..", "shared", "golden")
	if _, err := os.Stat(filepath.Join(g, "MANIFEST.json")); err != nil {
		t.Skipf("golden corpus not found at %s (set OML_GOLDEN_DIR): %v", g, err)
	}
	return g
}

func goldenParquetFiles(t testing.TB) (data, checkpoints []string) {
	root := goldenDir(t)
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".parquet") {
			return nil
		}
		if strings.Contains(p, string(filepath.Separator)+"_delta_log"+string(filepath.Separator)) {
			checkpoints = append(checkpoints, p)
		} else {
			data = append(data, p)
		}
		return nil
	})
	require.NoError(t, err)
	return data, checkpoints
}

func readFileRows(t testing.TB, p string, cols ...string) (*File, []Row) {
	t.Helper()
	fh, err := os.Open(p)
	require.NoError(t, err)
	t.Cleanup(func() { fh.Close() })
	st, err := fh.Stat()
	require.NoError(t, err)
	f, err := Open(fh, st.Size())
	require.NoError(t, err, p)
	rs, err := f.Rows(cols...)
	require.NoError(t, err, p)
	rows, err := rs.ReadAll()
	require.NoError(t, err, p)
	return f, rows
}

func TestGoldenEveryDataFileReads(t *testing.T) {
	t.Parallel()
	data, _ := goldenParquetFiles(t)
	require.NotEmpty(t, data)
	for _, p := range data {
		f, rows := readFileRows(t, p)
		require.Equal(t, f.NumRows(), int64(len(rows)), p)
	}
}

func TestGoldenEveryCheckpointReads(t *testing.T) {
	t.Parallel()
	_, cps := goldenParquetFiles(t)
	require.NotEmpty(t, cps)
	for _, p := range cps {
		f, rows := readFileRows(t, p)
		require.Equal(t, f.NumRows(), int64(len(rows)), p)
	}
}
