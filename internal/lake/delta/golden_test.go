package delta

import (
	"context"
	"encoding/json"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
)

// goldenEntry is one table of the third-party conformance corpus
// (MANIFEST.json; see the corpus README for the field meanings).
type goldenEntry struct {
	Dir                    string              `json:"dir"`
	Protocol               Protocol            `json:"protocol"`
	Version                *int64              `json:"version"`
	ActiveFiles            *int                `json:"active_files"`
	Rows                   *int64              `json:"rows"`
	Txn                    map[string]int64    `json:"txn"`
	Expect                 string              `json:"expect"`
	RefuseReason           string              `json:"refuse_reason"`
	MinimalWriterMayCommit bool                `json:"minimal_writer_may_commit"`
	ExpectedRowsSample     []map[string]any    `json:"expected_rows_sample"`
	ExpectedRowsNote       string              `json:"expected_rows_note"`
	PartitionColumns       []string            `json:"partition_columns"`
	PartitionValues        map[string][]string `json:"partition_values"`
	Tombstones             int                 `json:"tombstones"`
	CheckpointUsed         *struct {
		Version int64  `json:"version"`
		Kind    string `json:"kind"`
	} `json:"checkpoint_used"`
	DataFilesPresent bool `json:"data_files_present"`
}

// goldenDir finds the corpus: $OML_GOLDEN_DIR, else testdata/golden or
// ../shared/golden relative to the module root. The corpus is only ever
// read in place; writer tests copy a table first.
func goldenDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("OML_GOLDEN_DIR"); d != "" {
		return d
	}
	wd, err := os.Getwd()
	require.NoError(t, err)
	root := wd
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			t.Fatalf("no go.mod above %s", wd)
		}
		root = parent
	}
	for _, c := range []string{filepath.Join(root, "testdata", "golden"), filepath.Join(root, "..", "shared", "golden")} {
		if _, err := os.Stat(filepath.Join(c, "MANIFEST.json")); err == nil {
			return c
		}
	}
	msg := "the Delta conformance corpus (MANIFEST.json) is not in testdata/golden or ../shared/golden; set OML_GOLDEN_DIR"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg) // CI must prove conformance, never skip it
	}
	t.Skip(msg)
	return ""
}

func loadManifest(t testing.TB) (string, []goldenEntry) {
	dir := goldenDir(t)
	b, err := os.ReadFile(filepath.Join(dir, "MANIFEST.json"))
	require.NoError(t, err)
	var entries []goldenEntry
	require.NoError(t, json.Unmarshal(b, &entries))
	require.NotEmpty(t, entries)
	return dir, entries
}

func goldenStore(t testing.TB, dir string) store.Store {
	st, err := store.NewFile(dir)
	require.NoError(t, err)
	return st
}

// TestGoldenLog checks every corpus table at the log level: version, live
// files, txn, partition values, tombstones for readable tables; a refusal
// naming the feature for the others.
func TestGoldenLog(t *testing.T) {
	t.Parallel()
	dir, entries := loadManifest(t)
	for _, e := range entries {
		t.Run(e.Dir, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			snap, err := Load(ctx, goldenStore(t, filepath.Join(dir, e.Dir)))
			switch e.Expect {
			case "refuse":
				require.Error(t, err)
				require.Nil(t, snap, "a refused table must not return a snapshot")
				assertRefusalNamesReason(t, e, err)
				return
			case "read":
			default:
				t.Fatalf("unknown expect %q", e.Expect)
			}
			require.NoError(t, err)
			require.NotNil(t, e.Version)
			require.Equal(t, *e.Version, snap.Version())
			require.Equal(t, *e.ActiveFiles, snap.NumFiles())
			require.Equal(t, e.Tombstones, snap.NumTombstones())
			got := map[string]int64{}
			for k, v := range snap.Txns() {
				got[k] = v.Version
			}
			want := e.Txn
			if want == nil {
				want = map[string]int64{}
			}
			require.Equal(t, want, got)
			if len(e.PartitionColumns) > 0 {
				require.Equal(t, e.PartitionColumns, snap.PartitionColumns())
			}
			require.Equal(t, normalizePartitionValues(e.PartitionValues), distinctPartitionValues(snap))
			if e.CheckpointUsed != nil && e.CheckpointUsed.Kind != "" {
				require.Equal(t, e.CheckpointUsed.Version, snap.CheckpointVersion(), "checkpoint used")
			}
		})
	}
}

func assertRefusalNamesReason(t *testing.T, e goldenEntry, err error) {
	t.Helper()
	msg := err.Error()
	switch {
	case strings.Contains(e.RefuseReason, "contiguous"):
		require.ErrorIs(t, err, ErrCorruptLog)
		require.Contains(t, msg, "not contiguous")
	default:
		require.ErrorIs(t, err, ErrUnsupported)
		var ue *UnsupportedError
		require.True(t, errors.As(err, &ue))
		// The error names the reader features, or the reader version when
		// there are none.
		if len(e.Protocol.ReaderFeatures) > 0 {
			for _, f := range e.Protocol.ReaderFeatures {
				require.Contains(t, msg, f)
			}
		} else if e.Protocol.MinReaderVersion == 2 {
			require.Contains(t, msg, "columnMapping")
		} else {
			require.Contains(t, msg, "readerVersion")
		}
	}
}

func normalizePartitionValues(m map[string][]string) map[string][]string {
	out := map[string][]string{}
	for k, vs := range m {
		c := append([]string(nil), vs...)
		sort.Strings(c)
		out[k] = c
	}
	return out
}

func distinctPartitionValues(s *Snapshot) map[string][]string {
	sets := map[string]map[string]bool{}
	for _, a := range s.Files() {
		for k, v := range a.PartitionValues {
			if sets[k] == nil {
				sets[k] = map[string]bool{}
			}
			if v == nil {
				sets[k]["<null>"] = true
			} else {
				sets[k][*v] = true
			}
		}
	}
	out := map[string][]string{}
	for k, set := range sets {
		for v := range set {
			out[k] = append(out[k], v)
		}
		sort.Strings(out[k])
	}
	return out
}

// TestGoldenRows reads the data of every readable corpus table whose data
// files are present: the row count, and the expected rows as a multiset
// (all of them when the note says so, else every sample row is present).
func TestGoldenRows(t *testing.T) {
	t.Parallel()
	dir, entries := loadManifest(t)
	for _, e := range entries {
		if e.Expect != "read" || !e.DataFilesPresent {
			continue
		}
		t.Run(e.Dir, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st := goldenStore(t, filepath.Join(dir, e.Dir))
			snap, err := Load(ctx, st)
			require.NoError(t, err)
			var got []map[string]any
			fields := snap.Schema().Fields
			require.NoError(t, snap.Scan(ctx, st, ScanOptions{}, func(_ *Add, rows []pq.Row) error {
				for _, r := range rows {
					m := map[string]any{}
					for i, f := range fields {
						m[f.Name] = JSONValue(r[i], f.Type)
					}
					got = append(got, m)
				}
				return nil
			}))
			require.NotNil(t, e.Rows)
			require.Len(t, got, int(*e.Rows))
			all := strings.HasPrefix(e.ExpectedRowsNote, "all ")
			remaining := append([]map[string]any(nil), got...)
			for _, want := range e.ExpectedRowsSample {
				idx := -1
				for i, g := range remaining {
					if rowMatches(want, g) {
						idx = i
						break
					}
				}
				require.NotEqual(t, -1, idx, "expected row %v not found in %v", want, got)
				remaining = append(remaining[:idx], remaining[idx+1:]...)
			}
			if all {
				require.Empty(t, remaining, "rows beyond the expected ones")
			}
		})
	}
}

// rowMatches compares the columns of an expected corpus row with a scanned
// row (numbers by value, decimals by value, nested values recursively).
func rowMatches(want, got map[string]any) bool {
	for k, wv := range want {
		if s, ok := wv.(string); ok && strings.HasPrefix(s, "partition string") {
			continue // the corpus marks this value as ambiguous
		}
		gv, ok := got[k]
		if !ok || !valueMatches(wv, gv) {
			return false
		}
	}
	return true
}

func valueMatches(want, got any) bool {
	switch w := want.(type) {
	case nil:
		return got == nil
	case float64:
		g, ok := got.(float64)
		return ok && g == w
	case string:
		g, ok := got.(string)
		if !ok {
			return false
		}
		if g == w {
			return true
		}
		// Decimals: "0E-10" is Java's spelling of 0 at scale 10.
		wr, ok1 := new(big.Rat).SetString(w)
		gr, ok2 := new(big.Rat).SetString(g)
		return ok1 && ok2 && wr.Cmp(gr) == 0
	case bool:
		return got == w
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for i := range w {
			if !valueMatches(w[i], g[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok || len(g) != len(w) {
			return false
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok || !valueMatches(wv, gv) {
				return false
			}
		}
		return true
	}
	return false
}

// TestGoldenAppendRoundTrip appends, to a copy of every corpus table oml may
// write and whose data is present, a second copy of all its rows (written
// by oml, partition by partition), and checks that the table then reads as
// every original row twice: oml's writer handles every type and partition
// value those engines used, and its files read back through the same path.
func TestGoldenAppendRoundTrip(t *testing.T) {
	t.Parallel()
	dir, entries := loadManifest(t)
	for _, e := range entries {
		if e.Expect != "read" || !e.MinimalWriterMayCommit || !e.DataFilesPresent {
			continue
		}
		t.Run(e.Dir, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			st, err := store.NewFile(copyTable(t, filepath.Join(dir, e.Dir)))
			require.NoError(t, err)
			w, err := OpenWriter(ctx, st, Options{})
			require.NoError(t, err)
			snap := w.Snapshot()
			fields := snap.Schema().Fields
			render := func(s *Snapshot) []string {
				var out []string
				require.NoError(t, s.Scan(ctx, st, ScanOptions{}, func(_ *Add, rows []pq.Row) error {
					for _, r := range rows {
						m := map[string]any{}
						for i, f := range fields {
							m[f.Name] = JSONValue(r[i], f.Type)
						}
						b, err := json.Marshal(m)
						require.NoError(t, err)
						out = append(out, string(b))
					}
					return nil
				}))
				sort.Strings(out)
				return out
			}
			before := render(snap)
			var adds []*Add
			require.NoError(t, snap.Scan(ctx, st, ScanOptions{}, func(f *Add, rows []pq.Row) error {
				add, err := w.WriteFile(ctx, f.PartitionValues, snap.DataRows(rows))
				if err != nil {
					return err
				}
				adds = append(adds, add)
				return nil
			}))
			_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: adds})
			require.NoError(t, err)
			after, err := Load(ctx, st)
			require.NoError(t, err)
			for _, a := range adds {
				requireStatsHold(t, after, st, a)
			}
			want := append(append([]string(nil), before...), before...)
			sort.Strings(want)
			require.Equal(t, want, render(after))
		})
	}
}
