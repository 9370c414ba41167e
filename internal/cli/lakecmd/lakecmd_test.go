package lakecmd_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cli"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
)

type result struct {
	code   cliutil.ExitCode
	stdout string
	stderr string
}

func run(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	io, _, out, errOut := iostreams.Test()
	code := cli.Run(context.Background(), io, args, func(k string) string { return env[k] })
	return result{code, out.String(), errOut.String()}
}

// makeTable creates TENANT/LAYER/NAME under lake with three commits.
func makeTable(t *testing.T, lake, rel string) {
	t.Helper()
	ctx := context.Background()
	root, err := store.NewFile(lake)
	require.NoError(t, err)
	st := store.MustSub(root, rel)
	schema := &delta.StructType{Fields: []delta.StructField{
		delta.Field("seq", delta.Prim(delta.TypeLong), false),
		delta.Field("day", delta.Prim(delta.TypeDate), true),
	}}
	w, err := delta.CreateTable(ctx, st, delta.TableSpec{Schema: schema, PartitionColumns: []string{"day"}}, delta.Options{})
	require.NoError(t, err)
	for i := int64(1); i <= 2; i++ {
		day := "2026-01-01"
		add, err := w.WriteFile(ctx, map[string]*string{"day": &day}, [][]any{{i}})
		require.NoError(t, err)
		_, err = w.Commit(ctx, delta.Commit{Operation: "WRITE", Adds: []*delta.Add{add},
			OperationMetrics: map[string]any{"numOutputRows": "1"}, Txn: &delta.Txn{AppID: "oml-lakewriter", Version: i * 10}})
		require.NoError(t, err)
	}
}

func TestInspectJSONByTenantLayerName(t *testing.T) {
	t.Parallel()
	lake := t.TempDir()
	makeTable(t, lake, "t1/bronze/events")
	r := run(t, map[string]string{cliutil.EnvLakeURL: "file://" + lake}, "lake", "inspect", "t1/bronze/events", "-o", "json")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.EqualValues(t, 2, got["version"])
	require.EqualValues(t, 2, got["live_files"])
	require.EqualValues(t, 3, got["commits_since_checkpoint"])
	require.Nil(t, got["checkpoint_version"])
	require.Equal(t, []any{"day"}, got["partition_columns"])
	require.Equal(t, map[string]any{"min_reader_version": float64(1), "min_writer_version": float64(2), "reader_features": []any{}, "writer_features": []any{}}, got["protocol"])
	txns := got["txns"].([]any)
	require.Len(t, txns, 1)
	require.Equal(t, "oml-lakewriter", txns[0].(map[string]any)["app_id"])
	require.EqualValues(t, 20, txns[0].(map[string]any)["version"])
	require.NotNil(t, txns[0].(map[string]any)["last_updated"])
}

func TestInspectTableByURLAndVersion(t *testing.T) {
	t.Parallel()
	lake := t.TempDir()
	makeTable(t, lake, "t1/silver/claims")
	r := run(t, nil, "lake", "inspect", "file://"+filepath.Join(lake, "t1/silver/claims"), "--version", "1")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "version:")
	require.Regexp(t, `(?m)^version:\s+1$`, r.stdout)
	require.Regexp(t, `(?m)^live files:\s+1$`, r.stdout)
	require.Contains(t, r.stdout, "oml-lakewriter\t10\t")
	require.Contains(t, r.stdout, "seq\tlong\tfalse\tfalse")
}

func TestHistoryOneLinePerCommitNewestFirst(t *testing.T) {
	t.Parallel()
	lake := t.TempDir()
	makeTable(t, lake, "t1/gold/lineage")
	env := map[string]string{cliutil.EnvLakeURL: "file://" + lake}
	r := run(t, env, "lake", "history", "t1/gold/lineage")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	require.Len(t, lines, 4) // header + 3 commits
	require.True(t, strings.HasPrefix(lines[1], "2\t"))
	require.Contains(t, lines[1], "WRITE\t+1 -0\tnumOutputRows=1\toml-lakewriter=20")
	require.True(t, strings.HasPrefix(lines[3], "0\t"))
	require.Contains(t, lines[3], "CREATE TABLE")

	r = run(t, env, "lake", "history", "t1/gold/lineage", "-o", "json", "--limit", "1")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	var doc struct {
		Commits []struct {
			Version   int64  `json:"version"`
			Operation string `json:"operation"`
			Txns      []struct {
				AppID   string `json:"app_id"`
				Version int64  `json:"version"`
			} `json:"txns"`
		} `json:"commits"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &doc))
	require.Len(t, doc.Commits, 1)
	require.Equal(t, int64(2), doc.Commits[0].Version)
	require.Equal(t, "oml-lakewriter", doc.Commits[0].Txns[0].AppID)
}

func TestMissingTableIsOneLineExit2(t *testing.T) {
	t.Parallel()
	lake := t.TempDir()
	for _, args := range [][]string{
		{"lake", "inspect", "file://" + filepath.Join(lake, "nope")},
		{"lake", "history", "file://" + filepath.Join(lake, "nope")},
		{"lake", "inspect", "t/bronze/events", "--lake", "file://" + lake},
	} {
		r := run(t, nil, args...)
		require.Equal(t, cliutil.ExitUsage, r.code)
		require.Empty(t, r.stdout)
		require.Equal(t, 1, strings.Count(r.stderr, "\n"), r.stderr)
		require.Contains(t, r.stderr, "no Delta table at")
	}
}

func TestTableArgumentErrors(t *testing.T) {
	t.Parallel()
	r := run(t, nil, "lake", "inspect", "t/bronze/events")
	require.Equal(t, cliutil.ExitUsage, r.code)
	require.Contains(t, r.stderr, "OML_LAKE_URL")
	r = run(t, nil, "lake", "inspect", "just-a-name")
	require.Equal(t, cliutil.ExitUsage, r.code)
	require.Contains(t, r.stderr, "TENANT/LAYER/NAME")
	r = run(t, nil, "lake", "history", "ftp://x/y")
	require.Equal(t, cliutil.ExitUsage, r.code)
}

func TestInspectRefusedTableNamesFeature(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "..", "..", "shared", "golden", "delta__dv-partitioned-with-checkpoint")
	if _, err := os.Stat(dir); err != nil {
		t.Skip("conformance corpus not found next to the module")
	}
	abs, err := filepath.Abs(dir)
	require.NoError(t, err)
	r := run(t, nil, "lake", "inspect", "file://"+abs)
	require.Equal(t, cliutil.ExitFindings, r.code, "a refused table is what inspect found: exit 1")
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "deletionVectors")
}

func TestInspectFiles(t *testing.T) {
	t.Parallel()
	lake := t.TempDir()
	makeTable(t, lake, "t1/bronze/events")
	env := map[string]string{cliutil.EnvLakeURL: "file://" + lake}
	r := run(t, env, "lake", "inspect", "t1/bronze/events", "--files", "-o", "json")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	var got struct {
		Files []struct {
			Path            string             `json:"path"`
			PartitionValues map[string]*string `json:"partition_values"`
			Size            int64              `json:"size"`
			Records         int64              `json:"records"`
		} `json:"files"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.Len(t, got.Files, 2)
	require.Equal(t, "2026-01-01", *got.Files[0].PartitionValues["day"])
	require.Equal(t, int64(1), got.Files[0].Records)
	require.True(t, strings.HasPrefix(got.Files[0].Path, "day=2026-01-01/part-"))

	r = run(t, env, "lake", "inspect", "t1/bronze/events", "--files")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "FILE\tPARTITION\tBYTES\tRECORDS\tMODIFIED")
	require.Contains(t, r.stdout, `day="2026-01-01"`)
	// Without --files the JSON has no files key.
	r = run(t, env, "lake", "inspect", "t1/bronze/events", "-o", "json")
	require.NotContains(t, r.stdout, `"files"`)
}

// 106752 days does not fit in a time.Duration: it used to wrap to a
// negative retention (every removed file "expired"). It is a usage error.
func TestVacuum_RetainTooLongForADurationIsAUsageError(t *testing.T) {
	t.Parallel()
	lake := "file://" + t.TempDir()
	for _, retain := range []string{"106752d", "99999999999999999999d", "9223372036854775807d"} {
		r := run(t, nil, "lake", "vacuum", "--lake", lake, "--tenant", "00000000-0000-0000-0000-000000000001", "--retain", retain, "--dry-run")
		require.Equal(t, cliutil.ExitUsage, r.code, "%s: %s", retain, r.stderr)
		require.Contains(t, r.stderr, "longer than the longest retention", retain)
	}
	r := run(t, nil, "lake", "vacuum", "--lake", lake, "--retain", "-1d", "--dry-run")
	require.Equal(t, cliutil.ExitUsage, r.code)
	require.Contains(t, r.stderr, "not a number of days")
}

// makeTimedTable writes a table whose commits are stamped t0, t0+1h, t0+2h.
func makeTimedTable(t *testing.T, lake, rel string, t0 time.Time) {
	t.Helper()
	ctx := context.Background()
	root, err := store.NewFile(lake)
	require.NoError(t, err)
	st := store.MustSub(root, rel)
	now := t0
	schema := &delta.StructType{Fields: []delta.StructField{delta.Field("seq", delta.Prim(delta.TypeLong), false)}}
	w, err := delta.CreateTable(ctx, st, delta.TableSpec{Schema: schema}, delta.Options{Now: func() time.Time { return now }})
	require.NoError(t, err)
	for i := int64(1); i <= 2; i++ {
		now = t0.Add(time.Duration(i) * time.Hour)
		add, err := w.WriteFile(ctx, map[string]*string{}, [][]any{{i}})
		require.NoError(t, err)
		_, err = w.Commit(ctx, delta.Commit{Operation: "WRITE", Adds: []*delta.Add{add}})
		require.NoError(t, err)
	}
}

func TestInspectAsOf_PicksLatestCommitAtOrBefore_EarlierIsExit2(t *testing.T) {
	t.Parallel()
	lake := t.TempDir()
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	makeTimedTable(t, lake, "t1/silver/claims", t0)
	env := map[string]string{cliutil.EnvLakeURL: "file://" + lake}

	r := run(t, env, "lake", "inspect", "t1/silver/claims", "--as-of", "2026-03-01T13:30:00Z")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^version:\s+1 \(as of 2026-03-01T13:30:00Z\)$`, r.stdout)
	require.Regexp(t, `(?m)^live files:\s+1$`, r.stdout)

	// Another zone, exactly the second commit's time: version 2.
	r = run(t, env, "lake", "inspect", "t1/silver/claims", "--as-of", "2026-03-01T15:00:00+01:00", "-o", "json")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	var got map[string]any
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &got))
	require.EqualValues(t, 2, got["version"])
	require.EqualValues(t, 2, got["live_files"])
	require.Equal(t, "2026-03-01T14:00:00Z", got["as_of"])

	r = run(t, env, "lake", "inspect", "t1/silver/claims", "--as-of", "2026-03-01T12:00:00Z")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^version:\s+0 `, r.stdout)

	r = run(t, env, "lake", "inspect", "t1/silver/claims", "--as-of", "2026-03-01T11:59:59Z")
	require.Equal(t, cliutil.ExitUsage, r.code, r.stderr)
	require.Empty(t, r.stdout)
	require.Contains(t, r.stderr, "before")
	require.Contains(t, r.stderr, "oldest commit")

	r = run(t, env, "lake", "inspect", "t1/silver/claims", "--as-of", "yesterday")
	require.Equal(t, cliutil.ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "RFC 3339")

	r = run(t, env, "lake", "inspect", "t1/silver/claims", "--as-of", "2026-03-01T13:30:00Z", "--version", "1")
	require.Equal(t, cliutil.ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, "not both")
}
