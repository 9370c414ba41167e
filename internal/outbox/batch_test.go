package outbox_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/testdb"
)

func readBatch(t *testing.T, pool *pgxpool.Pool, from, to int64, scope *outbox.Scope) []outbox.BatchRow {
	t.Helper()
	var out []outbox.BatchRow
	require.NoError(t, outbox.ReadBatch(context.Background(), pool, from, to, scope, func(r *outbox.BatchRow) error {
		out = append(out, *r)
		return nil
	}))
	return out
}

func seqsOf(rows []outbox.BatchRow) []int64 {
	out := []int64{}
	for _, r := range rows {
		out = append(out, r.Seq)
	}
	return out
}

// The batch read returns the range in seq order with each row's journal
// event and dead-letter mark; a scope keeps one table's rows, and its keys
// (by journal seq, or by claim for silver) narrow them further, an empty
// key list selecting nothing.
func TestReadBatch_ScopeAndKeysSelectTheTablesRows(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t).Pool(t)
	plantEvents(t, pool, 3)
	ret := rowsOf(t, pool, 2, 3) // silver retracts of a0 v1 (event 2), a1 v1 (event 3)
	app := insert(t, ctx, pool)  // a bronze append citing event 1
	_, err := pool.Exec(ctx, `INSERT INTO oml.dead_letter (outbox_seq, tenant_id, journal_seq, target, op, artifact_id, version, payload,
  attempts, first_failed_at, last_failed_at, error, skipped_seq)
VALUES ($1, $2, 3, 'silver.claims', 'retract', 'a1', 1, '{}', 1, now(), now(), 'planted', 1)`, ret[1], provider)
	require.NoError(t, err)

	all := readBatch(t, pool, 0, app, nil)
	require.Equal(t, []int64{ret[0], ret[1], app}, seqsOf(all))
	require.Equal(t, []bool{false, true, false}, []bool{all[0].Dead, all[1].Dead, all[2].Dead}, "the dead-lettered row is read, marked")
	r := all[0]
	require.Equal(t, provider, r.Tenant)
	require.Equal(t, int64(2), r.JournalSeq)
	require.Equal(t, "silver.claims", r.Target)
	require.Equal(t, "retract", r.Op)
	require.Equal(t, "a0", r.ArtifactID)
	require.Equal(t, int32(1), r.Version)
	require.NotNil(t, r.Event)
	require.Equal(t, "tenant.created", r.Event.Type)
	require.Len(t, r.Event.Hash, 32)
	require.Nil(t, r.Body, "a retract has no held body")
	require.Equal(t, []int64{ret[1]}, seqsOf(readBatch(t, pool, ret[0], ret[1], nil)), "from is exclusive, to inclusive")

	silver := &outbox.Scope{Tenant: provider, Target: "silver.claims"}
	require.Equal(t, []int64{ret[0], ret[1]}, seqsOf(readBatch(t, pool, 0, app, silver)))
	silver.Only = &outbox.Keys{ByClaim: true, ArtifactIDs: []string{"a1"}, Versions: []int32{1}}
	require.Equal(t, []int64{ret[1]}, seqsOf(readBatch(t, pool, 0, app, silver)))
	silver.Only = &outbox.Keys{ByClaim: true}
	require.Empty(t, readBatch(t, pool, 0, app, silver), "no claims select no rows")

	bronze := &outbox.Scope{Tenant: provider, Target: "bronze.events"}
	require.Equal(t, []int64{app}, seqsOf(readBatch(t, pool, 0, app, bronze)))
	bronze.Only = &outbox.Keys{JournalSeqs: []int64{1}}
	require.Equal(t, []int64{app}, seqsOf(readBatch(t, pool, 0, app, bronze)))
	bronze.Only = &outbox.Keys{JournalSeqs: []int64{2}}
	require.Empty(t, readBatch(t, pool, 0, app, bronze))
	bronze.Only = &outbox.Keys{}
	require.Empty(t, readBatch(t, pool, 0, app, bronze), "no journal seqs select no rows")
}

// Implied rows come back in the order given, with seq 0, their journal
// events joined, and no event for a seq the chain lacks.
func TestReadImplied_OrderGivenEventsJoined(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t).Pool(t)
	plantEvents(t, pool, 3)
	var got []outbox.BatchRow
	require.NoError(t, outbox.ReadImplied(ctx, pool, provider, "silver.claims", []outbox.Implied{
		{JournalSeq: 3, Op: "retract", ArtifactID: "x", Version: 2, Payload: `{"state": "demoted"}`},
		{JournalSeq: 99, Op: "retract", ArtifactID: "y", Version: 1, Payload: `{}`},
		{JournalSeq: 2, Op: "retract", Payload: `{}`},
	}, func(r *outbox.BatchRow) error {
		got = append(got, *r)
		return nil
	}))
	require.Len(t, got, 3)
	require.Equal(t, []int64{3, 99, 2}, []int64{got[0].JournalSeq, got[1].JournalSeq, got[2].JournalSeq})
	for _, r := range got {
		require.Zero(t, r.Seq)
		require.False(t, r.Dead)
		require.Equal(t, provider, r.Tenant)
		require.Equal(t, "silver.claims", r.Target)
	}
	require.NotNil(t, got[0].Event)
	require.Equal(t, "x", got[0].ArtifactID)
	require.Equal(t, int32(2), got[0].Version)
	require.JSONEq(t, `{"state": "demoted"}`, got[0].Payload)
	require.Nil(t, got[1].Event, "event 99 is not in the chain")
	require.NotNil(t, got[2].Event)
	require.Equal(t, "", got[2].ArtifactID, "no artifact reads back as empty")
	require.Zero(t, got[2].Version)
}
