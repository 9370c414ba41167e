package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
)

// On a single node (the test cluster), --durable-on 1 can never be
// satisfied: the --once pass ends after --durable-timeout, cuts nothing,
// says which standby it waited for (none streams) and exits 0 (lag, not
// loss); the default auto drains everything. lake status judges the stable
// prefix the same way, and chain witness publishes nothing under 1.
func TestDurableOn_SingleNode_OneWaitsBoundedAutoDrains(t *testing.T) {
	t.Parallel()
	e := deployment(t)
	e.ok(t, "dev", "load", "--tenants", "2", "--claims", "5", "--seed", "3")

	r := e.run(t, "lake", "drain", "--once", "--durable-on", "1", "--durable-timeout", "200ms", "-o", "json")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	var sum struct {
		StartFrontier  int64 `json:"start_frontier"`
		EndFrontier    int64 `json:"end_frontier"`
		Batches        int   `json:"batches"`
		DurabilityHeld bool  `json:"durability_held"`
		Durability     struct {
			Policy  string `json:"policy"`
			Durable bool   `json:"durable"`
			Missing int    `json:"missing"`
			Reason  string `json:"reason"`
		} `json:"durability"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &sum))
	require.True(t, sum.DurabilityHeld)
	require.Zero(t, sum.Batches)
	require.Equal(t, sum.StartFrontier, sum.EndFrontier)
	require.Equal(t, "1", sum.Durability.Policy)
	require.Equal(t, 1, sum.Durability.Missing)
	require.Contains(t, sum.Durability.Reason, "none is streaming")

	r = e.run(t, "lake", "drain", "--once", "--durable-on", "1", "--durable-timeout", "100ms")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Regexp(t, `(?m)^durability:\s+waiting for 1 streaming standby\(s\) to flush WAL up to \S+; none is streaming`, r.stdout)

	status := e.ok(t, "lake", "status", "--durable-on", "1")
	require.Regexp(t, `(?m)^durability:\s+--durable-on 1: waiting for 1 streaming standby`, status)

	// Witnessing under 1 publishes nothing and says why.
	r = e.run(t, "chain", "witness", "--durable-on", "1", "--durable-timeout", "100ms")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stderr, "nothing witnessed: waiting for 1 streaming standby(s)")
	lake := strings.TrimPrefix(e[cliutil.EnvLakeURL], "file://")
	_, err := os.Stat(filepath.Join(lake, "_oml_witness"))
	require.True(t, os.IsNotExist(err), "no witness was written")

	// auto on a single node: nothing to wait for.
	e.ok(t, "lake", "drain", "--once")
	var st struct {
		Frontier   int64 `json:"frontier"`
		LastSeq    int64 `json:"last_seq"`
		Durability struct {
			Policy  string `json:"policy"`
			Durable bool   `json:"durable"`
		} `json:"durability"`
	}
	require.NoError(t, json.Unmarshal([]byte(e.ok(t, "lake", "status", "-o", "json")), &st))
	require.Equal(t, st.LastSeq, st.Frontier)
	require.Equal(t, "auto", st.Durability.Policy)
	require.True(t, st.Durability.Durable)
	require.Contains(t, e.ok(t, "lake", "status"), "no standby is streaming")
	out := e.ok(t, "chain", "witness")
	require.Contains(t, out, "witnessed")
}

func TestDurableOn_BadValueIsOneLineExit2(t *testing.T) {
	t.Parallel()
	e := deployment(t)
	for _, args := range [][]string{
		{"lake", "drain", "--once", "--durable-on", "0"},
		{"lake", "drain", "--durable-on", "sometimes"},
		{"lake", "status", "--durable-on", "-2"},
		{"chain", "witness", "--durable-on", "all"},
		{"lake", "drain", "--once", "--durable-timeout", "0s"},
	} {
		r := e.run(t, args...)
		require.Equal(t, cliutil.ExitUsage, r.code, "%v: %s", args, r.stderr)
		require.Empty(t, r.stdout)
		require.Contains(t, r.stderr, "--durable-")
	}
}
