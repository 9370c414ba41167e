package schema_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// Prune marks written before trust_prune_mark get the event they pruned
// through: the event before the first row still in the outbox above the
// mark (a table whose prune stopped inside an event names the one before
// it), or the chain's last event when every row of the table went.
func TestMigratePruneMark_ExistingMarksNameTheirEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, mark := migratedUpTo(t, "trust_prune_mark")
	plantProviderEvent(t, pool)
	for s := 2; s <= 5; s++ {
		_, err := pool.Exec(ctx, `
INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
SELECT '00000000-0000-0000-0000-000000000000', $1::bigint, (SELECT hash FROM oml.journal WHERE tenant_id = '00000000-0000-0000-0000-000000000000' AND seq = $1::bigint - 1),
       sha256($1::bigint::text::bytea), decode(repeat('00', 64), 'hex'), 'filler', 'tenant.created', '{}', now()`, s)
		require.NoError(t, err)
	}
	row := func(target, op string, jseq int64, art string) (s int64) {
		t.Helper()
		require.NoError(t, pool.QueryRow(ctx, `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version)
VALUES ('00000000-0000-0000-0000-000000000000', $1, $2, $3, nullif($4, ''), CASE WHEN $4 = '' THEN NULL ELSE 1 END) RETURNING seq`,
			jseq, target, op, art).Scan(&s))
		return s
	}
	// silver: events 2, 3, 3, 4; pruned through the first row of event 3.
	s2, s3a := row("silver.claims", "retract", 2, "a"), row("silver.claims", "retract", 3, "b")
	row("silver.claims", "retract", 3, "c")
	row("silver.claims", "retract", 4, "d")
	// bronze: events 2..5, all pruned.
	var bronzeLast int64
	for j := int64(2); j <= 5; j++ {
		bronzeLast = row("bronze.events", "append", j, "")
	}
	_, err := pool.Exec(ctx, `DELETE FROM oml.outbox WHERE seq IN ($1, $2) OR target = 'bronze.events'`, s2, s3a)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO oml.outbox_pruned (tenant_id, target, through_seq, rows_pruned) VALUES
  ('00000000-0000-0000-0000-000000000000', 'silver.claims', $1, 2),
  ('00000000-0000-0000-0000-000000000000', 'bronze.events', $2, 4)`, s3a, bronzeLast)
	require.NoError(t, err)

	_, err = pool.Exec(ctx, mark.SQL)
	require.NoError(t, err)
	got := map[string]int64{}
	rows, err := pool.Query(ctx, `SELECT target, through_journal_seq FROM oml.outbox_pruned`)
	require.NoError(t, err)
	for rows.Next() {
		var target string
		var j int64
		require.NoError(t, rows.Scan(&target, &j))
		got[target] = j
	}
	require.NoError(t, rows.Err())
	require.Equal(t, map[string]int64{"silver.claims": 2, "bronze.events": 5}, got)
}
