package lakewriter_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// TestFork_TailLostTenantIsRefusedOthersContinue: after the writer has
// witnessed every tenant's head, one tenant's journal loses its tail (the
// lost-failover case: events deleted, head rewound). The next drain refuses
// to materialize that tenant — naming it, the reason and both heads — while
// the other tenant is drained. When the lost events are restored, the next
// drain catches the held tenant's tables up, and the lake is exact.
func TestFork_TailLostTenantIsRefusedOthersContinue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	victim := b.tenants[0]
	b.load(t, workload.Config{Claims: 10, Seed: 21})
	lake := store.NewMem()
	o := b.opts(lake)
	o.WitnessInterval = time.Nanosecond
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	b.drainAll(t, d)

	var witnessed int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT seq FROM oml.chain_heads WHERE tenant_id = $1`, victim).Scan(&witnessed))
	res, err := chainverify.ForkCheck(ctx, b.pool, lake, nil)
	require.NoError(t, err)
	require.Empty(t, res.Findings)
	require.Contains(t, res.Witnessed, victim, "the writer witnessed the tenant's head after its batch")

	// More work for both tenants, then the victim loses its tail.
	b.load(t, workload.Config{Claims: 10, Seed: 22})
	type row struct {
		seq                      int64
		prev, hash, sig, payload []byte
		keyID, eventType         string
		recordedAt               time.Time
	}
	var lost []row
	rows, err := b.pool.Query(ctx, `SELECT seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at
FROM oml.journal WHERE tenant_id = $1 AND seq >= $2 ORDER BY seq`, victim, witnessed-1)
	require.NoError(t, err)
	for rows.Next() {
		var r row
		require.NoError(t, rows.Scan(&r.seq, &r.prev, &r.hash, &r.sig, &r.keyID, &r.eventType, &r.payload, &r.recordedAt))
		lost = append(lost, r)
	}
	require.NoError(t, rows.Err())
	var headHash []byte
	var headAt time.Time
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT hash, updated_at FROM oml.chain_heads WHERE tenant_id = $1`, victim).Scan(&headHash, &headAt))
	var newHead int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT seq FROM oml.chain_heads WHERE tenant_id = $1`, victim).Scan(&newHead))
	loseTail(t, b.pool, victim, witnessed-2)

	// Two passes while the victim is held: up to the middle of its pending
	// rows, then one batch for the rest. The newest batch in the lake — the
	// one the next writer replays at start — then holds victim rows, and
	// the victim missed rows before it too: the replay must not let the
	// victim's tables jump over those.
	var pending []int64
	prow, err := b.pool.Query(ctx, `SELECT seq FROM oml.outbox WHERE tenant_id = $1 AND seq > $2 ORDER BY seq`, victim, d.Frontier())
	require.NoError(t, err)
	for prow.Next() {
		var s int64
		require.NoError(t, prow.Scan(&s))
		pending = append(pending, s)
	}
	require.NoError(t, prow.Err())
	require.Greater(t, len(pending), 4)
	// And the other tenant writes last, so that batch commits somewhere.
	b.load(t, workload.Config{Tenants: b.tenants[1:], Claims: 3, Seed: 23})
	o2 := o
	o2.Limits = lakewriterLimits(1_000_000)
	o2.StopAt = pending[len(pending)/2]
	d2a, err := lakewriter.New(o2)
	require.NoError(t, err)
	_, err = d2a.DrainOnce(ctx)
	require.NoError(t, err)
	o2.StopAt = 0
	d2, err := lakewriter.New(o2)
	require.NoError(t, err)
	sum, err := d2.DrainOnce(ctx)
	require.NoError(t, err)
	require.Len(t, sum.Refused, 1)
	require.Equal(t, victim, sum.Refused[0].Tenant)
	require.Equal(t, chainverify.ReasonTailLost, sum.Refused[0].Reason)
	require.NotEmpty(t, sum.Refused[0].Evidence, "both heads are given as evidence")
	require.Equal(t, b.lastSeq(t), d2.Frontier(), "the other tenant's rows were drained; the frontier moved on")

	// The other tenant's tables are complete already.
	other := b.tenants[1]
	var want int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM oml.journal WHERE tenant_id = $1`, other).Scan(&want))
	require.Len(t, readBronze(t, lake, other), want)

	// Repair: the lost events come back (re-imported), the head with them.
	for _, r := range lost {
		_, err := b.pool.Exec(ctx, `INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`, victim, r.seq, r.prev, r.hash, r.sig, r.keyID, r.eventType, r.payload, r.recordedAt)
		require.NoError(t, err)
	}
	_, err = b.pool.Exec(ctx, `UPDATE oml.chain_heads SET seq = $2, hash = $3 WHERE tenant_id = $1`, victim, newHead, headHash)
	require.NoError(t, err)

	d3, err := lakewriter.New(o)
	require.NoError(t, err)
	sum, err = d3.DrainOnce(ctx)
	require.NoError(t, err)
	require.Empty(t, sum.Refused)
	b.verifyLake(t, lake)
}

// loseTail makes tenant's journal lose every event after seq keep, its head
// rewound to keep: a failover that lost committed events.
func loseTail(t *testing.T, pool *pgxpool.Pool, tenant uuid.UUID, keep int64) {
	t.Helper()
	ctx := context.Background()
	tamper := func(sql string, args ...any) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		defer tx.Rollback(ctx)
		_, err = tx.Exec(ctx, `ALTER TABLE oml.journal DISABLE TRIGGER journal_append_only_row`)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, sql, args...)
		require.NoError(t, err)
		_, err = tx.Exec(ctx, `ALTER TABLE oml.journal ENABLE TRIGGER journal_append_only_row`)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
	}
	tamper(`DELETE FROM oml.journal WHERE tenant_id = $1 AND seq > $2`, tenant, keep)
	tamper(`UPDATE oml.chain_heads h SET seq = j.seq, hash = j.hash FROM oml.journal j
WHERE h.tenant_id = $1 AND j.tenant_id = $1 AND j.seq = $2`, tenant, keep)
}
