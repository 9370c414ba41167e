package lakewriter_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/workload"
)

// A forged journal row whose payload is not UTF-8 never reaches bronze's
// payload string column: the outbox row citing it is poison, dead-lettered
// with the reason, and every other row is drained.
func TestDrain_ForgedJournalRowWithInvalidUTF8_IsPoisonNotALakeRow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	b.load(t, workload.Config{Claims: 4, Seed: 21})
	id := b.tenants[0]
	var outboxSeq, journalSeq int64
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT seq, journal_seq FROM oml.outbox
WHERE tenant_id = $1 AND target = 'bronze.events' ORDER BY seq DESC LIMIT 1`, id).Scan(&outboxSeq, &journalSeq))
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	for _, s := range []string{
		`ALTER TABLE oml.journal DISABLE TRIGGER USER`,
		fmt.Sprintf(`UPDATE oml.journal SET payload = '\xfffe7b7d'::bytea WHERE tenant_id = '%s' AND seq = %d`, id, journalSeq),
		`ALTER TABLE oml.journal ENABLE TRIGGER USER`,
	} {
		_, err := tx.Exec(ctx, s)
		require.NoError(t, err, s)
	}
	require.NoError(t, tx.Commit(ctx))

	lake := store.NewMem()
	o := b.opts(lake)
	o.PoisonBudget = 1
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	sum := b.drainAll(t, d)
	require.Contains(t, sum.DeadLettered, outboxSeq)
	var errText string
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT error FROM oml.dead_letter WHERE outbox_seq = $1`, outboxSeq).Scan(&errText))
	require.Contains(t, errText, "payload that is not valid UTF-8")

	rows := readBronze(t, lake, id)
	require.NotEmpty(t, rows)
	for _, r := range rows {
		require.NotEqual(t, journalSeq, r.Seq, "the forged event reached bronze")
	}
}
