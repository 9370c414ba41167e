package chaincmd_test

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/testdb"
)

// snapshot copies the env's database as it is now (a standby's state) and
// returns the environment pointing oml at the copy.
func (e *env) snapshot(t *testing.T, suffix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	var name string
	require.NoError(t, e.Pool.QueryRow(ctx, `SELECT current_database()`).Scan(&name))
	e.Pool.Reset()
	srv := testdb.Cluster(t)
	conn, err := pgx.Connect(ctx, srv.URL("postgres"))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, name)
	require.NoError(t, err)
	copyName := name + suffix
	if len(copyName) > 63 {
		copyName = copyName[len(copyName)-63:]
	}
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{copyName}.Sanitize()+" TEMPLATE "+pgx.Identifier{name}.Sanitize())
	require.NoError(t, err)
	vars := e.Vars()
	vars[cliutil.EnvDatabaseURL] = srv.URL(copyName)
	return vars
}

func (e *env) drain(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, e.Lake)
	require.NoError(t, err)
	d, err := lakewriter.New(lakewriter.Options{DB: e.Pool, Lake: st, Signer: e.Key, NoLease: true,
		BackoffMin: time.Millisecond, BackoffMax: 5 * time.Millisecond, Poll: 5 * time.Millisecond,
		HorizonTimeout: 20 * time.Second, WitnessInterval: -1})
	require.NoError(t, err)
	_, err = d.DrainOnce(ctx)
	require.NoError(t, err)
}

// claimEvents builds n submissions of new artifacts.
func claimEvents(t *testing.T, n int) []journal.Event {
	t.Helper()
	evs := make([]journal.Event, n)
	for i := range evs {
		body := make([]byte, 32)
		_, _ = rand.Read(body)
		d := sha256.Sum256(body)
		var err error
		evs[i], err = journal.NewClaimSubmitted(journal.ClaimSubmitted{
			ArtifactID: uuid.NewString(), Version: 1, WorkareaID: "wa", Writer: "w", Principal: "p",
			Provenance: "human", PlaintextDigest: hex.EncodeToString(d[:]), CiphertextDigest: hex.EncodeToString(d[:]),
		}, body, make([]byte, 32))
		require.NoError(t, err)
	}
	return evs
}

// TestChainRestoreTailAndAcceptFork_EndToEnd: the standby's copy is taken;
// the old primary appends and drains more. On the copy, verify fails
// (tail-lost, seen by bronze and the witness), witness refuses a head that
// does not extend the earlier witness, restore-tail needs --yes off a
// terminal, its dry run plans, and the restore makes verify clean. On a
// second copy the application wrote over the loss: restore-tail refuses
// (exit 1), accept-fork journals the acceptance, and verify then lists the
// fork as accepted and exits 0.
func TestChainRestoreTailAndAcceptFork_EndToEnd(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := setup(t)
	e.drain(t)
	code, _, stderr := e.run(t, "chain", "witness")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	standby := e.snapshot(t, "_s")
	forked := e.snapshot(t, "_f")

	_, err := chain.Append(ctx, e.Pool, e.Key, e.acme, claimEvents(t, 6)...)
	require.NoError(t, err)
	e.drain(t)
	code, _, stderr = e.run(t, "chain", "witness")
	require.Equal(t, cliutil.ExitOK, code, stderr)

	code, out, _ := e.Run(t, standby, "chain", "verify", "-o", "json")
	require.Equal(t, cliutil.ExitFindings, code)
	require.Contains(t, out, `"tail-lost"`)
	code, _, stderr = e.Run(t, standby, "chain", "witness", "--tenant", "acme")
	require.Equal(t, cliutil.ExitFindings, code)
	require.Contains(t, stderr, "does not extend an earlier witness")

	code, _, stderr = e.Run(t, standby, "chain", "restore-tail")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "pass --yes")
	code, out, stderr = e.Run(t, standby, "chain", "restore-tail", "--dry-run", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var plan struct {
		DryRun  bool `json:"dry_run"`
		Tenants []struct {
			Name   string `json:"name"`
			Status string `json:"status"`
			Events int    `json:"events"`
		} `json:"tenants"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &plan))
	require.True(t, plan.DryRun)
	statuses := map[string]string{}
	for _, r := range plan.Tenants {
		statuses[r.Name] = r.Status
	}
	require.Equal(t, "restorable", statuses["acme"], out)
	require.Equal(t, "intact", statuses["globex"], out)
	code, _, stderr = e.Run(t, standby, "chain", "restore-tail", "--yes", "--by", "oncall")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, stderr, "restored tenant")
	code, _, stderr = e.Run(t, standby, "chain", "verify")
	require.Equal(t, cliutil.ExitOK, code, stderr)

	// The application wrote over the loss on the other copy.
	fpool := testdb.OpenPool(t, forked[cliutil.EnvDatabaseURL])
	_, err = chain.Append(ctx, fpool, e.Key, e.acme, claimEvents(t, 2)...)
	require.NoError(t, err)
	code, _, stderr = e.Run(t, forked, "chain", "restore-tail", "--yes")
	require.Equal(t, cliutil.ExitFindings, code)
	require.Contains(t, stderr, "accept the fork")
	code, _, stderr = e.Run(t, forked, "chain", "accept-fork", "--tenant", "acme")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "--reason is required")
	code, out, stderr = e.Run(t, forked, "chain", "accept-fork", "--tenant", "acme", "--reason", "failover test", "--yes")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, out, "oml lake repair --tenant")
	code, out, stderr = e.Run(t, forked, "chain", "verify", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr+out)
	var doc struct {
		OK       bool `json:"ok"`
		Accepted []struct {
			Finding struct {
				Reason string `json:"reason"`
			} `json:"finding"`
			Reason string `json:"reason"`
		} `json:"accepted_forks"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	require.True(t, doc.OK)
	require.NotEmpty(t, doc.Accepted)
	require.Equal(t, "failover test", doc.Accepted[0].Reason)
	require.True(t, strings.Contains(doc.Accepted[0].Finding.Reason, "fork") || doc.Accepted[0].Finding.Reason == "tail-lost")
	code, out, stderr = e.Run(t, forked, "chain", "head", "--tenant", "acme", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var heads []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &heads))
	require.Equal(t, "accepted", heads[0]["status"])
	code, out, stderr = e.Run(t, forked, "chain", "accept-fork", "--tenant", "acme", "--reason", "again", "--yes")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, out, "already accepted")
}
