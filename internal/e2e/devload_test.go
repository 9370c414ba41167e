package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/testdb"
)

// The README's `dev load` run twice: the second run continues the workload
// with new claims (new rounds) instead of colliding with the first's
// artifact ids, with and without --seed.
func TestBinary_DevLoadTwice_ContinuesWithNewClaims(t *testing.T) {
	t.Parallel()
	e := deployment(t)
	type loadOut struct {
		FirstRound int `json:"first_round"`
		Stats      struct {
			Claims int `json:"claims"`
		} `json:"stats"`
	}
	load := func(args ...string) loadOut {
		t.Helper()
		r := e.bin(t, append([]string{"dev", "load", "--tenants", "2", "--claims", "4", "-o", "json"}, args...)...)
		require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
		var out loadOut
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &out), r.stdout)
		require.Equal(t, 8, out.Stats.Claims)
		return out
	}
	require.Equal(t, 0, load("--seed", "42").FirstRound)
	require.Equal(t, 1, load("--seed", "42").FirstRound)
	require.Equal(t, 2, load("--seed", "42").FirstRound)
	require.Equal(t, 0, load().FirstRound, "another seed has rounds of its own")
	require.Equal(t, 1, load().FirstRound)

	r := e.bin(t, "dev", "load", "--tenants", "2", "--claims", "4", "--seed", "42")
	require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
	require.Contains(t, r.stdout, "from round 3 (seed 42)")

	var n int
	db := testdb.OpenPool(t, e[cliutil.EnvDatabaseURL])
	require.NoError(t, db.QueryRow(context.Background(), `SELECT count(*) FROM oml.claims`).Scan(&n))
	require.Equal(t, 6*8, n, "every run submitted new claims")
	e.ok(t, "lake", "drain", "--once")
	e.ok(t, "chain", "verify")
}

// Ctrl-C on `dev load --duration` stops it between transactions, prints
// what was written and exits non-zero saying "interrupted": a script must
// not take a cut-short workload for a finished one.
func TestBinary_DevLoadInterrupted_SaysInterruptedExit1(t *testing.T) {
	t.Parallel()
	e := deployment(t)
	cmd := exec.Command(omlBinary(t), "dev", "load", "--tenants", "1", "--claims", "50", "--duration", "10m", "--rate", "200")
	cmd.Env = e.environ()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	require.NoError(t, cmd.Start())
	// Wait for the first committed claims, then interrupt.
	db := testdb.OpenPool(t, e[cliutil.EnvDatabaseURL])
	require.Eventually(t, func() bool {
		var n int
		_ = db.QueryRow(context.Background(), `SELECT count(*) FROM oml.claims`).Scan(&n)
		return n > 0
	}, 2*time.Minute, 50*time.Millisecond)
	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	err := cmd.Wait()
	var ee *exec.ExitError
	require.ErrorAs(t, err, &ee, "stdout %s stderr %s", out.String(), errOut.String())
	require.Equal(t, int(cliutil.ExitFindings), ee.ExitCode())
	require.Contains(t, errOut.String(), "interrupted:")
	require.Contains(t, out.String(), "claims", "the summary of what was written")
	e.ok(t, "chain", "verify")
}
