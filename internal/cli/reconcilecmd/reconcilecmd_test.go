package reconcilecmd_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cli/reconcilecmd"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/testkit/clitest"
	"github.com/omlhq/oml/internal/testkit/runtest"
	"github.com/omlhq/oml/internal/workload"
)

func TestMain(m *testing.M) { testdb.Main(m, testdb.WithTemplate(schema.Migrate)) }

func TestNewCmd_Flags(t *testing.T) {
	t.Parallel()
	runtest.RunFlagCases(t, reconcilecmd.NewCmd, []runtest.FlagCase[reconcilecmd.Options]{
		{Args: "", Check: func(t *testing.T, o *reconcilecmd.Options) { require.Equal(t, "5m0s", o.StaleAfter.String()) }},
		{Args: "--tenant acme --stale-after 1h --skip-bodies --max-findings 5", Check: func(t *testing.T, o *reconcilecmd.Options) {
			require.Equal(t, "acme", o.Tenant)
			require.Equal(t, "1h0m0s", o.StaleAfter.String())
			require.True(t, o.SkipBodies)
			require.Equal(t, 5, o.MaxFindings)
		}},
		{Args: "--max-findings -1", WantErr: "--max-findings"},
		{Args: "--stale-after soon", WantErr: "invalid argument"},
		{Args: "extra", WantErr: "unknown command"},
	})
}

type env struct {
	*clitest.Env
	acme uuid.UUID // the tenant named acme
}

func setup(t *testing.T) *env {
	t.Helper()
	c := clitest.New(t, "acme")
	e := &env{Env: c, acme: c.Tenants["acme"]}
	e.Workload(t, "acme", workload.Config{Claims: 20, PromoteRatio: 0.8, RetractRatio: 0.5, Seed: 51})
	return e
}

// TestReconcile_ExitCodesAndJSON: 0 and "No findings" on a healthy lake,
// the JSON document's shape, 1 with a one-line summary when there is a
// finding, 2 without a lake or with an unknown tenant.
func TestReconcile_ExitCodesAndJSON(t *testing.T) {
	t.Parallel()
	e := setup(t)
	code, _, stderr := e.Run(t, nil, "lake", "drain", "--once", "--log-level", "error")
	require.Equal(t, cliutil.ExitOK, code, stderr)

	code, out, stderr := e.Run(t, nil, "reconcile")
	require.Equal(t, cliutil.ExitOK, code, stderr+out)
	require.Contains(t, out, "No findings: the lake agrees with the journal fold.")

	code, out, stderr = e.Run(t, nil, "reconcile", "--tenant", "acme", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var doc map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	for _, k := range []string{"ok", "frontier", "tenants", "counts", "findings", "truncated", "stats"} {
		require.Contains(t, doc, k)
	}
	require.Equal(t, true, doc["ok"])
	require.Len(t, doc["tenants"], 1)
	counts := doc["counts"].(map[string]any)
	for _, c := range []string{"missing-in-lake", "unexpected-in-lake", "digest-mismatch", "state-mismatch", "duplicate-in-lake",
		"dead-lettered", "stale-frontier", "erased-key-present"} {
		require.EqualValues(t, 0, counts[c], c)
	}
	tables := doc["tenants"].([]any)[0].(map[string]any)["tables"].([]any)
	require.Len(t, tables, 4, "bronze, silver, gold lineage and gold workareas")
	for _, k := range []string{"table", "exists", "version", "txn_version", "cutoff_outbox_seq", "cutoff_journal_seq", "lake_rows", "fold_rows", "files"} {
		require.Contains(t, tables[0], k)
	}

	// An erased artifact's data key put back: exit 1, named.
	_, err := e.Pool.Exec(context.Background(), `
INSERT INTO oml.claim_keys (tenant_id, artifact_id, dek, created_at)
SELECT tenant_id, artifact_id, '\x0000000000000000000000000000000000000000000000000000000000000000'::bytea, now()
  FROM oml.claims WHERE state = 'erased' LIMIT 1`)
	require.NoError(t, err)
	code, out, stderr = e.Run(t, nil, "reconcile")
	require.Equal(t, cliutil.ExitFindings, code)
	require.Contains(t, out, "erased-key-present\tacme\t-\t")
	require.Contains(t, stderr, "reconcile found 1 problem(s): 1 erased-key-present")
	code, out, _ = e.Run(t, nil, "reconcile", "-o", "json")
	require.Equal(t, cliutil.ExitFindings, code)
	var bad struct {
		OK       bool `json:"ok"`
		Findings []struct {
			Class      string `json:"class"`
			TenantID   string `json:"tenant_id"`
			Tenant     string `json:"tenant"`
			ArtifactID string `json:"artifact_id"`
			Seq        int64  `json:"seq"`
			Detail     string `json:"detail"`
		} `json:"findings"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &bad))
	require.False(t, bad.OK)
	require.Len(t, bad.Findings, 1)
	require.Equal(t, "erased-key-present", bad.Findings[0].Class)
	require.Equal(t, e.acme.String(), bad.Findings[0].TenantID)
	require.Equal(t, "acme", bad.Findings[0].Tenant)
	require.Positive(t, bad.Findings[0].Seq)

	code, _, stderr = e.Run(t, map[string]string{"OML_DATABASE_URL": e.URL}, "reconcile")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "no lake is configured")

	code, _, stderr = e.Run(t, nil, "reconcile", "--tenant", "nope")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, `"nope"`)

	code, _, stderr = e.Run(t, map[string]string{"OML_DATABASE_URL": "postgres://u:secret@127.0.0.1:1/x?connect_timeout=2", "OML_LAKE_URL": e.Lake}, "reconcile")
	require.Equal(t, cliutil.ExitUsage, code)
	require.NotContains(t, stderr, "secret")
}

// A corrupt lake file is the lake's fault: a corrupt-file finding (exit 1)
// naming the table, not a connection or configuration error (exit 2). A
// garbage commit file leaves the table uncompared; a garbage data file is
// named and the rest is still compared.
func TestReconcile_CorruptLakeFileIsAFindingExit1(t *testing.T) {
	t.Parallel()
	e := setup(t)
	code, _, stderr := e.Run(t, nil, "lake", "drain", "--once", "--log-level", "error")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	root := strings.TrimPrefix(e.Lake, "file://")

	// A data file of silver overwritten with garbage.
	data, err := filepath.Glob(filepath.Join(root, e.acme.String(), "silver", "claims", "*.parquet"))
	require.NoError(t, err)
	require.NotEmpty(t, data)
	require.NoError(t, os.WriteFile(data[0], []byte("PAR1 not really a parquet file PAR1"), 0o644))
	code, out, stderr := e.Run(t, nil, "reconcile")
	require.Equal(t, cliutil.ExitFindings, code, stderr)
	require.Contains(t, out, "corrupt-file\tacme\tsilver.claims\t")
	require.Contains(t, stderr, "corrupt-file")

	// A commit of bronze overwritten with garbage.
	logs, err := filepath.Glob(filepath.Join(root, e.acme.String(), "bronze", "events", "_delta_log", "*.json"))
	require.NoError(t, err)
	require.NotEmpty(t, logs)
	require.NoError(t, os.WriteFile(logs[len(logs)-1], []byte("{garbage\n"), 0o644))
	code, out, stderr = e.Run(t, nil, "reconcile", "-o", "json")
	require.Equal(t, cliutil.ExitFindings, code, stderr)
	var doc struct {
		Counts map[string]int64 `json:"counts"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.EqualValues(t, 2, doc.Counts["corrupt-file"], out)
}
