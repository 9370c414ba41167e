package outbox_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/testdb"
)

// TestEarlierCopies_NoStatisticsOnABulkLoadedOutbox_ProbesTheIdentityIndex
// plans EarlierCopies' query over an outbox that has rows but no
// statistics yet (a bulk load autovacuum has not analyzed), then again
// after ANALYZE. Both plans must probe outbox_implied_once: the
// outbox_tenant_target_seq index would read every earlier row of the
// row's table for each batch row, and made a 10,000-row batch take 15 s.
func TestEarlierCopies_NoStatisticsOnABulkLoadedOutbox_ProbesTheIdentityIndex(t *testing.T) {
	ctx := context.Background()
	pool := testdb.New(t).Pool(t)
	const rows = 3000
	// One table's rows, each citing its own event (the chain's own check
	// is off: the events are filler, the plan is the subject).
	_, err := pool.Exec(ctx, `ALTER TABLE oml.outbox SET (autovacuum_enabled = false);
ALTER TABLE oml.journal DISABLE TRIGGER journal_extends_chain`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
SELECT '00000000-0000-0000-0000-000000000000', s, decode(repeat('00', 32), 'hex'), sha256(s::text::bytea),
       decode(repeat('00', 64), 'hex'), 'filler', 'key.issued', '{}', now()
FROM generate_series(2, $1) s`, rows)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `
INSERT INTO oml.outbox (tenant_id, journal_seq, target, op)
SELECT '00000000-0000-0000-0000-000000000000', s, 'bronze.events', 'append' FROM generate_series(1, $1) s`, rows)
	require.NoError(t, err)
	var batch []int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT array_agg(seq) FROM oml.outbox WHERE seq > $1`, rows/2).Scan(&batch))

	// planUses reads the plan's scans of the outbox: whether the batch rows
	// are read by primary key and their copies probed on the identity
	// index, and whether anything scans the outbox otherwise.
	planUses := func() (identity, tableScan bool) {
		var plan []struct {
			Plan planNode `json:"Plan"`
		}
		var raw []byte
		require.NoError(t, pool.QueryRow(ctx, `EXPLAIN (FORMAT JSON) `+outbox.EarlierCopiesQuery, batch).Scan(&raw))
		require.NoError(t, json.Unmarshal(raw, &plan))
		used := map[string]bool{}
		plan[0].Plan.walk(func(n planNode) {
			if n.Relation == "outbox" {
				used[n.Type+" "+n.Index] = true
			}
		})
		identity = used["Index Scan outbox_pkey"] && used["Index Scan outbox_implied_once"]
		return identity, len(used) != 2
	}
	identity, tableScan := planUses()
	require.True(t, identity && !tableScan, "without statistics each batch row must be read by its key and probed on the identity index, never by a scan of the outbox or of a table's rows")

	_, err = pool.Exec(ctx, `ANALYZE oml.outbox`)
	require.NoError(t, err)
	identity, tableScan = planUses()
	require.True(t, identity && !tableScan, "with statistics each batch row must be read by its key and probed on the identity index")

	got, err := outbox.EarlierCopies(ctx, pool, batch)
	require.NoError(t, err)
	require.Empty(t, got, "every row cites its own event: none copies another")
}

// planNode is a node of EXPLAIN (FORMAT JSON)'s plan.
type planNode struct {
	Type     string     `json:"Node Type"`
	Relation string     `json:"Relation Name"`
	Index    string     `json:"Index Name"`
	Plans    []planNode `json:"Plans"`
}

func (n planNode) walk(fn func(planNode)) {
	fn(n)
	for _, c := range n.Plans {
		c.walk(fn)
	}
}
