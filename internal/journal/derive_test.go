package journal_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
)

// The rows the append path inserted into oml.outbox and the rows
// DeriveOutbox re-derives from the stored chain are the same, row for row
// and field for field, for every event type a tenant chain and the
// provider chain hold here. (chain.tail_restored and chain.fork_accepted
// and key.revoked are covered by Replay's users in internal/recovery and
// internal/chainverify; they imply one bronze row like every event.)
func TestDeriveOutbox_EqualsTheEmittedRowsForEveryEventType(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	dek := make([]byte, 32)
	require.NoError(t, b.append(t, append(aPromotedTwice(t, dek),
		journal.MustNew(journal.ClaimDemoted{ArtifactID: "a", Version: 2, By: "bob", Reason: "wrong"}),
		submission(t, "s", 1, "sim-agent", "simulation", nil),
		journal.MustNew(journal.ClaimPromoted{ArtifactID: "s", Version: 1, By: "bob"}),
		journal.MustNew(journal.SimulationEnded{SimulationID: "sim-1", By: "ops", Claims: []journal.ClaimRef{{ArtifactID: "s", Version: 1}}}),
		submission(t, "r", 1, "alice", "human", nil),
		journal.MustNew(journal.ClaimPromoted{ArtifactID: "r", Version: 1, By: "bob"}),
		journal.MustNew(journal.ClaimReassigned{ArtifactID: "r", Version: 1, By: "ops", ToWorkareaID: "wa-2"}),
		submission(t, "h", 1, "alice", "human", nil),
		journal.MustNew(journal.ClaimReassigned{ArtifactID: "h", Version: 1, By: "ops", ToWorkareaID: "wa-2"}),
		journal.MustNew(journal.ClaimErased{ArtifactID: "a", By: "dpo"}),
		submission(t, "d", 1, "alice", "human", nil),
		journal.MustNew(journal.ClaimPromoted{ArtifactID: "d", Version: 1, By: "bob"}),
		submission(t, "e", 1, "alice", "human", nil),
		journal.MustNew(journal.ClaimPromoted{ArtifactID: "e", Version: 1, By: "bob"}))...))
	// Two dead letters: one re-enqueued (the copy), one abandoned.
	for i, art := range []string{"d", "e"} {
		var oseq, jseq int64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT seq, journal_seq FROM oml.outbox WHERE tenant_id = $1 AND target = 'silver.claims' AND op = 'materialize' AND artifact_id = $2`,
			b.tn, art).Scan(&oseq, &jseq))
		require.NoError(t, b.append(t, journal.MustNew(journal.MaterializeSkipped{OutboxSeq: oseq, JournalSeq: jseq, Target: journal.TargetSilverClaims,
			Op: journal.OpMaterialize, ArtifactID: art, Version: 1, Attempts: 5, Error: "planted", By: "oml-lakewriter"})))
		var dl int64
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT id FROM oml.dead_letter WHERE outbox_seq = $1`, oseq).Scan(&dl))
		if i == 0 {
			require.NoError(t, b.append(t, journal.MustNew(journal.DeadletterReenqueued{DeadLetterID: dl, OutboxSeq: oseq, By: "ops", Reason: "fixed"})))
		} else {
			require.NoError(t, b.append(t, journal.MustNew(journal.DeadletterAbandoned{DeadLetterID: dl, OutboxSeq: oseq, By: "ops", Reason: "gone for good"})))
		}
	}

	seen := map[journal.Type]bool{}
	for _, tn := range []uuid.UUID{journal.ProviderTenant, b.tn} {
		evs, err := journal.ReadChain(ctx, b.pool, tn)
		require.NoError(t, err)
		for _, e := range evs {
			seen[e.Type] = true
		}
		derived, err := journal.DeriveOutbox(tn, evs)
		require.NoError(t, err)
		emitted := emittedRows(t, b, tn)
		require.Len(t, derived, len(emitted), "tenant %s", tn)
		for i := range derived {
			d, e := derived[i], emitted[i]
			require.Zero(t, d.Seq, "a derived row has no outbox seq")
			require.Equal(t, e.TenantID, d.TenantID)
			require.Equal(t, e.JournalSeq, d.JournalSeq, "row %d", i)
			require.Equal(t, e.Target, d.Target, "row %d", i)
			require.Equal(t, e.Op, d.Op, "row %d", i)
			require.Equal(t, e.ArtifactID, d.ArtifactID, "row %d", i)
			require.Equal(t, e.Version, d.Version, "row %d", i)
			require.JSONEq(t, string(e.Payload), string(d.Payload), "row %d (journal seq %d)", i, d.JournalSeq)
		}
	}
	for _, typ := range []journal.Type{journal.TypeKeyIssued, journal.TypeTenantCreated, journal.TypeTenantGenesis,
		journal.TypeClaimSubmitted, journal.TypeClaimPromoted, journal.TypeClaimDemoted, journal.TypeClaimErased,
		journal.TypeClaimReassigned, journal.TypeSimulationEnded, journal.TypeMaterializeSkipped,
		journal.TypeDeadletterReenqueued, journal.TypeDeadletterAbandoned} {
		require.True(t, seen[typ], "the test's chains hold no %s event", typ)
	}
}

// emittedRows reads tenant's outbox rows as the append path inserted them,
// re-enqueued copies left out, in seq order.
func emittedRows(t *testing.T, b *bundle, tn uuid.UUID) []journal.OutboxRow {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		SELECT o.seq, o.tenant_id, o.journal_seq, o.target, o.op, o.artifact_id, o.version, o.payload::text
		  FROM oml.outbox o
		 WHERE o.tenant_id = $1 AND NOT EXISTS (SELECT 1 FROM oml.dead_letter d WHERE d.new_outbox_seq = o.seq)
		 ORDER BY o.seq`, tn)
	require.NoError(t, err)
	defer rows.Close()
	var out []journal.OutboxRow
	for rows.Next() {
		var o journal.OutboxRow
		var payload string
		require.NoError(t, rows.Scan(&o.Seq, &o.TenantID, &o.JournalSeq, &o.Target, &o.Op, &o.ArtifactID, &o.Version, &payload))
		require.True(t, json.Valid([]byte(payload)))
		o.Payload = []byte(payload)
		out = append(out, o)
	}
	require.NoError(t, rows.Err())
	return out
}
