package lakecmd_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/testkit/clitest"
	"github.com/omlhq/oml/internal/workload"
)

type lineageDoc struct {
	ArtifactID string `json:"artifact_id"`
	Tables     []struct {
		TenantID     string `json:"tenant_id"`
		Tenant       string `json:"tenant"`
		DeltaVersion int64  `json:"delta_version"`
		TxnVersion   *int64 `json:"txn_version"`
	} `json:"tables"`
	Changes []struct {
		TenantID     string    `json:"tenant_id"`
		Version      int32     `json:"version"`
		JournalSeq   int64     `json:"journal_seq"`
		EventType    string    `json:"event_type"`
		EventHash    string    `json:"event_hash"`
		RecordedAt   time.Time `json:"recorded_at"`
		Actor        string    `json:"actor"`
		StateBefore  string    `json:"state_before"`
		StateAfter   string    `json:"state_after"`
		WorkareaID   string    `json:"workarea_id"`
		ToWorkareaID *string   `json:"to_workarea_id"`
		Writer       string    `json:"writer"`
		OutboxSeq    *int64    `json:"outbox_seq"`
	} `json:"changes"`
}

func lineageJSON(t *testing.T, e *clitest.Env, vars map[string]string, args ...string) (cliutil.ExitCode, lineageDoc, string) {
	t.Helper()
	code, out, stderr := e.Run(t, vars, append([]string{"lake", "lineage", "-o", "json"}, args...)...)
	var doc lineageDoc
	if code != cliutil.ExitUsage {
		require.NoError(t, json.Unmarshal([]byte(out), &doc), "stdout: %s stderr: %s", out, stderr)
	}
	return code, doc, stderr
}

func submitted(t *testing.T, artifact string, version int, writer string) journal.Event {
	t.Helper()
	body := []byte(fmt.Sprintf("ciphertext of %s v%d", artifact, version))
	sum := sha256.Sum256(body)
	ev, err := journal.NewClaimSubmitted(journal.ClaimSubmitted{ArtifactID: artifact, Version: version, WorkareaID: "wa-1",
		Writer: writer, Principal: "p", Provenance: "human", PlaintextDigest: hex.EncodeToString(sum[:]),
		CiphertextDigest: hex.EncodeToString(sum[:])}, body, make([]byte, 32))
	require.NoError(t, err)
	return ev
}

// TestLakeLineage_HistoryFromTheLake_TimeTravelReturnsTheEarlierHistory: an
// artifact promoted, drained, then demoted, reassigned and erased, drained
// again. `oml lake lineage` prints its four changes from gold.lineage with
// the journal's seqs and event hashes (JSON and table); --as-of the first
// drain's table version, or a time between the drains, returns the
// promotion only; a version with no --tenant is a usage error (2), an
// artifact with no lineage is exit 1, a version the log lacks is exit 2;
// a tenant id needs no database.
func TestLakeLineage_HistoryFromTheLake_TimeTravelReturnsTheEarlierHistory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := clitest.New(t, "acme", "zeta")
	acme := e.Tenants["acme"]
	appendTo := func(evs ...journal.Event) {
		_, err := chain.Append(ctx, e.Pool, e.Key, acme, evs...)
		require.NoError(t, err)
	}
	drain := func() {
		code, _, stderr := e.Run(t, nil, "lake", "drain", "--once", "--log-level", "error")
		require.Equal(t, cliutil.ExitOK, code, stderr)
	}
	appendTo(submitted(t, "art-1", 1, "alice"), journal.MustNew(journal.ClaimPromoted{ArtifactID: "art-1", Version: 1, By: "bob"}),
		submitted(t, "held-1", 1, "alice"))
	drain()
	code, first, stderr := lineageJSON(t, e, nil, "art-1", "--tenant", "acme")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Len(t, first.Changes, 1)
	require.Len(t, first.Tables, 1)
	v1 := first.Tables[0].DeltaVersion
	// The commit time of that version, as oml lake history shows it.
	code, out, stderr := e.Run(t, nil, "lake", "history", "acme/gold/lineage", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var hist struct {
		Commits []struct {
			Version int64     `json:"version"`
			Time    time.Time `json:"time"`
		} `json:"commits"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &hist))
	var v1At time.Time
	for _, c := range hist.Commits {
		if c.Version == v1 {
			v1At = c.Time
		}
	}
	require.False(t, v1At.IsZero())

	appendTo(journal.MustNew(journal.ClaimDemoted{ArtifactID: "art-1", Version: 1, By: "carol", Reason: "wrong"}),
		journal.MustNew(journal.ClaimReassigned{ArtifactID: "art-1", Version: 1, By: "ops", ToWorkareaID: "wa-9"}))
	appendTo(journal.MustNew(journal.ClaimErased{ArtifactID: "art-1", By: "dpo", Reason: "gdpr"}))
	drain()

	code, doc, stderr := lineageJSON(t, e, nil, "art-1", "--tenant", "acme")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var got []string
	for _, c := range doc.Changes {
		var hash []byte
		var typ string
		require.NoError(t, e.Pool.QueryRow(ctx, `SELECT hash, event_type FROM oml.journal WHERE tenant_id = $1 AND seq = $2`, acme, c.JournalSeq).Scan(&hash, &typ))
		require.Equal(t, hex.EncodeToString(hash), c.EventHash, "seq %d", c.JournalSeq)
		require.Equal(t, typ, c.EventType)
		require.NotNil(t, c.OutboxSeq)
		require.Equal(t, acme.String(), c.TenantID)
		got = append(got, fmt.Sprintf("%s %s->%s by %s", c.EventType, c.StateBefore, c.StateAfter, c.Actor))
	}
	require.Equal(t, []string{
		"claim.promoted held->promoted by bob",
		"claim.demoted promoted->demoted by carol",
		"claim.reassigned demoted->reassigned by ops",
		"claim.erased reassigned->erased by dpo",
	}, got)
	require.Equal(t, "wa-9", *doc.Changes[2].ToWorkareaID)
	require.Equal(t, "alice", doc.Changes[0].Writer)

	code, out, stderr = e.Run(t, nil, "lake", "lineage", "art-1", "--tenant", "acme")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, out, "held -> promoted")
	require.Contains(t, out, "alice -> bob")
	require.Contains(t, out, "wa-1 -> wa-9")

	// lake status --tables and lake inspect show gold like the others.
	code, out, stderr = e.Run(t, nil, "lake", "status", "--tables", "-o", "json")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	var st struct {
		Tables []struct {
			Table  string `json:"table"`
			Kind   string `json:"kind"`
			Exists bool   `json:"exists"`
		} `json:"tables"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &st))
	shown, areas := false, false
	for _, tb := range st.Tables {
		if tb.Table == acme.String()+"/gold/lineage" {
			shown = tb.Exists && tb.Kind == journal.TargetGoldLineage
		}
		if tb.Table == acme.String()+"/gold/workareas" {
			areas = tb.Exists && tb.Kind == journal.TargetGoldWorkareas
		}
	}
	require.True(t, shown, "lake status --tables lists acme's gold/lineage: %s", out)
	require.True(t, areas, "lake status --tables lists acme's gold/workareas: %s", out)
	code, out, stderr = e.Run(t, nil, "lake", "inspect", "acme/gold/lineage")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, out, "event_hash")
	code, out, stderr = e.Run(t, nil, "lake", "inspect", "acme/gold/workareas")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, out, "simulation_ended")
	require.Contains(t, out, "writers")
	code, out, stderr = e.Run(t, nil, "lake", "status", "--tables")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Contains(t, out, "gold/workareas")

	// Time travel: the table as the first drain left it.
	for _, asOf := range []string{fmt.Sprint(v1), v1At.Format(time.RFC3339Nano)} {
		code, old, stderr := lineageJSON(t, e, nil, "art-1", "--tenant", "acme", "--as-of", asOf)
		require.Equal(t, cliutil.ExitOK, code, stderr)
		require.Len(t, old.Changes, 1, "--as-of %s", asOf)
		require.Equal(t, "promoted", old.Changes[0].StateAfter)
		require.Equal(t, v1, old.Tables[0].DeltaVersion)
	}

	// Every tenant, and a tenant id without a database.
	code, all, stderr := lineageJSON(t, e, nil, "art-1")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Len(t, all.Changes, 4)
	noDB := map[string]string{cliutil.EnvLakeURL: e.Lake}
	code, byID, stderr := lineageJSON(t, e, noDB, "art-1", "--tenant", acme.String(), "--version", "1")
	require.Equal(t, cliutil.ExitOK, code, stderr)
	require.Len(t, byID.Changes, 4)

	// Errors.
	code, none, stderr := lineageJSON(t, e, nil, "held-1", "--tenant", "acme")
	require.Equal(t, cliutil.ExitFindings, code)
	require.Empty(t, none.Changes)
	require.Contains(t, stderr, "no lineage for artifact held-1")
	code, _, stderr = e.Run(t, nil, "lake", "lineage", "art-1", "--as-of", "3")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "--tenant")
	code, _, stderr = e.Run(t, nil, "lake", "lineage", "art-1", "--tenant", "acme", "--as-of", "999")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "--as-of 999")
	code, _, stderr = e.Run(t, nil, "lake", "lineage", "art-1", "--as-of", v1At.Add(-24*time.Hour).Format(time.RFC3339))
	require.Equal(t, cliutil.ExitUsage, code, "a time before the first commit")
	require.Contains(t, stderr, "before")
	code, _, stderr = e.Run(t, nil, "lake", "lineage", "art-1", "--as-of", "yesterday")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "RFC 3339")
	code, _, stderr = e.Run(t, map[string]string{cliutil.EnvLakeURL: e.Lake}, "lake", "lineage", "art-1")
	require.Equal(t, cliutil.ExitUsage, code)
	require.Contains(t, stderr, "--database-url")
}

// TestLakeLineage_RandomWorkload_OutputMatchesTheJournal: after a
// randomized workload with chained changes, the lineage `oml lake lineage`
// prints for each promoted artifact is exactly the journal-implied
// gold.lineage rows (oml.outbox, which journal.CheckFold proves equal to a
// replay of the chain), in journal order.
func TestLakeLineage_RandomWorkload_OutputMatchesTheJournal(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	e := clitest.New(t, "acme")
	acme := e.Tenants["acme"]
	_, err := workload.Run(ctx, e.Pool, e.Key, workload.Config{Tenants: []uuid.UUID{acme}, Claims: 25, Seed: uint64(time.Now().UnixNano()),
		PromoteRatio: 0.8, RetractRatio: 0.7, FollowUpRatio: 0.8})
	require.NoError(t, err)
	require.NoError(t, journal.CheckFold(ctx, e.Pool, acme))
	code, _, stderr := e.Run(t, nil, "lake", "drain", "--once", "--log-level", "error")
	require.Equal(t, cliutil.ExitOK, code, stderr)

	rows, err := e.Pool.Query(ctx, `SELECT artifact_id, string_agg(journal_seq || ' ' || (payload->>'state_before') || '->' || (payload->>'state_after'), ', ' ORDER BY seq)
FROM oml.outbox WHERE tenant_id = $1 AND target = 'gold.lineage' GROUP BY artifact_id ORDER BY artifact_id LIMIT 12`, acme)
	require.NoError(t, err)
	want := map[string]string{}
	for rows.Next() {
		var a, s string
		require.NoError(t, rows.Scan(&a, &s))
		want[a] = s
	}
	require.NoError(t, rows.Err())
	require.NotEmpty(t, want)
	for a, w := range want {
		code, doc, stderr := lineageJSON(t, e, nil, a, "--tenant", "acme")
		require.Equal(t, cliutil.ExitOK, code, stderr)
		var got string
		for i, c := range doc.Changes {
			if i > 0 {
				got += ", "
			}
			got += fmt.Sprintf("%d %s->%s", c.JournalSeq, c.StateBefore, c.StateAfter)
		}
		require.Equal(t, w, got, "artifact %s", a)
	}
}
