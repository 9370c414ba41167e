package outboxprune_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/outboxprune"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/workload"
)

// prunedRow is an outbox row as the journal implies it (its identity and
// payload), read before a prune deletes it.
type prunedRow struct {
	seq, journalSeq int64
	tenant          uuid.UUID
	target, op      string
	artifact        *string
	version         *int32
	payload         string
}

// forgeAsApp inserts r again as the application role acting for r's tenant:
// the row the journal implies, with a new outbox seq.
func (b *bundle) forgeAsApp(t *testing.T, r prunedRow) int64 {
	t.Helper()
	ctx := context.Background()
	var seq int64
	require.NoError(t, pgx.BeginFunc(ctx, b.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL ROLE oml_app`); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `SELECT set_config('oml.tenant_id', $1, true)`, r.tenant.String()); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload)
VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb) RETURNING seq`, r.tenant, r.journalSeq, r.target, r.op, r.artifact, r.version, r.payload).Scan(&seq)
	}), "the application role can insert a copy of a pruned row (nothing left in the outbox for outbox_implied_once to compare with)")
	return seq
}

// TestPrune_ForgedCopyOfAPrunedRow_DeadLetteredAndEveryRowOnce: after
// `oml outbox prune` deleted applied rows, the application role inserts
// them again — a bronze row, a silver materialization and a silver
// retract, each exactly what the journal implies. The lake writer
// dead-letters each copy, saying it copies a pruned row; the workload goes
// on and drains; every journal event is in bronze exactly once, reconcile
// is clean, the dead letters are exactly the copies, a bronze table
// rebuilt from the journal after that is the table it was (the copies are
// not counted as the pruned rows still being there), and every chain
// verifies.
func TestPrune_ForgedCopyOfAPrunedRow_DeadLetteredAndEveryRowOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	lake := newLake(t, "file")
	b.load(t, workload.Config{Claims: 20, Seed: 21, PromoteRatio: 0.8, RetractRatio: 0.5})
	b.DrainAll(t, b.drainer(t, lake, nil))

	// The rows to forge: the first of each kind of tenant 0.
	var victims []prunedRow
	for _, where := range []string{`target = 'bronze.events'`, `op = 'materialize'`, `op = 'retract'`} {
		var r prunedRow
		require.NoError(t, b.Pool.QueryRow(ctx, `SELECT seq, tenant_id, journal_seq, target, op, artifact_id, version, payload::text
FROM oml.outbox WHERE tenant_id = $1 AND `+where+` ORDER BY seq LIMIT 1`, b.Tenants[0]).
			Scan(&r.seq, &r.tenant, &r.journalSeq, &r.target, &r.op, &r.artifact, &r.version, &r.payload), where)
		victims = append(victims, r)
	}
	res := b.prune(t, lake, false)
	require.Positive(t, res.Rows)
	for _, v := range victims {
		var n int
		require.NoError(t, b.Pool.QueryRow(ctx, `SELECT count(*) FROM oml.outbox WHERE seq = $1`, v.seq).Scan(&n))
		require.Zero(t, n, "row %d was pruned", v.seq)
	}

	forged := map[int64]bool{}
	for _, v := range victims {
		forged[b.forgeAsApp(t, v)] = true
	}
	// The workload goes on (rows above the mark, of the same tables).
	b.load(t, workload.Config{Claims: 10, Seed: 22, FirstRound: 1})
	d := b.drainer(t, lake, nil)
	b.DrainAll(t, d)

	for _, tn := range b.Tenants {
		bronze := tableRows(t, lake, tables.TableKey{Tenant: tn, Kind: tables.Bronze}, true)
		var events int
		require.NoError(t, b.Pool.QueryRow(ctx, `SELECT count(*) FROM oml.journal WHERE tenant_id = $1`, tn).Scan(&events))
		require.Len(t, bronze, events, "tenant %s: one bronze row per journal event", tn)
	}
	rows, err := b.Pool.Query(ctx, `SELECT outbox_seq, error FROM oml.dead_letter ORDER BY outbox_seq`)
	require.NoError(t, err)
	dead := map[int64]bool{}
	for rows.Next() {
		var seq int64
		var why string
		require.NoError(t, rows.Scan(&seq, &why))
		require.True(t, forged[seq], "only the forged copies are dead-lettered (row %d: %s)", seq, why)
		require.Contains(t, why, "were applied and then pruned", "row %d", seq)
		dead[seq] = true
	}
	require.NoError(t, rows.Err())
	require.Len(t, dead, len(forged), "every forged copy is dead-lettered")

	b.reconcileLakeClean(t, lake)

	// A rebuild of the tenant's bronze table re-derives the pruned rows,
	// the forged copy's original among them.
	key := tables.TableKey{Tenant: b.Tenants[0], Kind: tables.Bronze}
	want := tableRows(t, lake, key, true)
	deleteTable(t, lake, key)
	_, err = b.drainer(t, lake, nil).DrainOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, want, tableRows(t, lake, key, true), "the rebuilt table is the table it was")
	b.reconcileLakeClean(t, lake)
	// (journal.CheckFold, the other half of reconcileClean, compares the
	// outbox itself with the fold: the dead-lettered copies are in it, so it
	// rightly names them as rows no event implies.)
	require.ErrorContains(t, journal.CheckFold(ctx, b.Pool, b.Tenants[0]), "oml.outbox lacks above its prune mark")
	require.NoError(t, journal.CheckFold(ctx, b.Pool, b.Tenants[1]))
	rep, err := chainverify.VerifyDB(ctx, b.Pool, chainverify.DBOptions{Full: true, NoCheckpoint: true})
	require.NoError(t, err)
	require.Empty(t, rep.Findings, "every chain verifies (the skips journalled for the copies included)")
}

// reconcileLakeClean runs the audit of the lake against the journal fold
// and requires no finding but dead letters.
func (b *bundle) reconcileLakeClean(t *testing.T, lake store.Store) {
	t.Helper()
	rep, err := reconcile.Run(context.Background(), b.Pool, lake, reconcile.Options{StaleAfter: -1})
	require.NoError(t, err)
	for _, f := range rep.Findings {
		if f.Class != reconcile.DeadLettered {
			t.Errorf("reconcile finding: %s %s %s seq %d %s v%d: %s", f.Class, f.Tenant, f.Table, f.Seq, f.ArtifactID, f.Version, f.Detail)
		}
	}
}

// TestPrune_ReenqueueAfterPrune_KeptDeadLetterAppliesForgedCopyStaysRefused:
// a re-enqueued copy is judged by the row it copies. A legitimate dead
// letter that prune kept inside the pruned prefix (its event is at or below
// the table's mark) is repaired and re-enqueued after the prune: its copy is
// applied. A forged copy of a pruned row, dead-lettered, stops the next
// prune of its table (StopRefusedCopy), so the mark stays below it; then
// re-enqueued by the owner, its copy is refused again, for the same reason.
func TestPrune_ReenqueueAfterPrune_KeptDeadLetterAppliesForgedCopyStaysRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	lake := newLake(t, "file")
	res := b.load(t, workload.Config{Claims: 30, Seed: 21, Poison: 2})
	b.DrainAll(t, b.drainer(t, lake, nil))
	p0 := res.Poison[0]
	require.Equal(t, workload.PoisonDigestMismatch, p0.Kind)
	var victim prunedRow
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT seq, tenant_id, journal_seq, target, op, artifact_id, version, payload::text
FROM oml.outbox WHERE tenant_id = $1 AND target = 'bronze.events' ORDER BY seq LIMIT 1`, p0.Tenant).
		Scan(&victim.seq, &victim.tenant, &victim.journalSeq, &victim.target, &victim.op, &victim.artifact, &victim.version, &victim.payload))
	b.prune(t, lake, false)

	var p0Journal, mark int64
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT o.journal_seq, p.through_journal_seq FROM oml.outbox o
JOIN oml.outbox_pruned p ON p.tenant_id = o.tenant_id AND p.target = o.target WHERE o.seq = $1`, p0.OutboxSeq).Scan(&p0Journal, &mark))
	require.LessOrEqual(t, p0Journal, mark, "the kept dead letter is inside the pruned prefix")

	forged := b.forgeAsApp(t, victim)
	b.DrainAll(t, b.drainer(t, lake, nil))
	letter := func(outboxSeq int64) (id int64) {
		t.Helper()
		require.NoError(t, b.Pool.QueryRow(ctx, `SELECT id FROM oml.dead_letter WHERE outbox_seq = $1`, outboxSeq).Scan(&id))
		return id
	}
	forgedLetter := letter(forged)

	// More work, drained: a prune now stops at the refused copy (were the
	// mark to move past it, its re-enqueue would no longer be refused).
	b.load(t, workload.Config{Claims: 5, Seed: 23, FirstRound: 1})
	b.DrainAll(t, b.drainer(t, lake, nil))
	bounds, err := outboxprune.Bounds(ctx, b.Pool, lake)
	require.NoError(t, err)
	var bound outbox.TableBound
	for _, bd := range bounds {
		if bd.Tenant == victim.tenant && bd.Target == victim.target {
			bound = bd
		}
	}
	require.Greater(t, bound.TxnVersion, forged, "the table has applied rows after the refused copy")
	b.prune(t, lake, false)
	var through, after int64
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT through_seq FROM oml.outbox_pruned WHERE tenant_id = $1 AND target = $2`,
		victim.tenant, victim.target).Scan(&through))
	require.Less(t, through, forged, "the mark stays below the refused copy")
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT count(*) FROM oml.outbox WHERE tenant_id = $1 AND target = $2 AND seq > $3`,
		victim.tenant, victim.target, forged).Scan(&after))
	require.Positive(t, after, "the applied rows after it are kept")
	dry, err := outbox.Prune(ctx, b.Pool, b.Pool, outbox.PruneOptions{Tables: []outbox.TableBound{bound}, DryRun: true})
	require.NoError(t, err)
	require.Empty(t, dry.Tables, "nothing of the table is prunable past it")

	_, err = b.Pool.Exec(ctx, `UPDATE oml.claim_bodies SET ciphertext = $4 WHERE tenant_id = $1 AND artifact_id = $2 AND version = $3`,
		p0.Tenant, p0.ArtifactID, p0.Version, p0.Body)
	require.NoError(t, err)
	rr, err := deadletter.Reenqueue(ctx, b.Pool, b.Key, []int64{letter(p0.OutboxSeq), forgedLetter}, deadletter.Options{By: "test"})
	require.NoError(t, err)
	var copies []int64
	for _, r := range rr {
		require.Equal(t, deadletter.OutcomeReenqueued, r.Outcome, "%+v", r)
		var c int64
		require.NoError(t, b.Pool.QueryRow(ctx, `SELECT new_outbox_seq FROM oml.dead_letter WHERE id = $1`, r.ID).Scan(&c))
		copies = append(copies, c)
	}
	b.DrainAll(t, b.drainer(t, lake, nil))

	var n int
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT count(*) FROM oml.dead_letter WHERE outbox_seq = $1`, copies[0]).Scan(&n))
	require.Zero(t, n, "the repaired dead letter's copy is applied")
	silver := readSilverKeys(t, lake, p0.Tenant)
	require.Equal(t, 1, silver[fmt.Sprintf("%s/%d", p0.ArtifactID, p0.Version)], "the repaired claim is in silver once")
	var why string
	require.NoError(t, b.Pool.QueryRow(ctx, `SELECT error FROM oml.dead_letter WHERE outbox_seq = $1`, copies[1]).Scan(&why))
	require.Contains(t, why, "were applied and then pruned", "the forged row's re-enqueued copy is refused again")

	for _, tn := range b.Tenants {
		var events int
		require.NoError(t, b.Pool.QueryRow(ctx, `SELECT count(*) FROM oml.journal WHERE tenant_id = $1`, tn).Scan(&events))
		require.Len(t, tableRows(t, lake, tables.TableKey{Tenant: tn, Kind: tables.Bronze}, true), events, "tenant %s: one bronze row per journal event", tn)
	}
	b.reconcileLakeClean(t, lake)
}

// readSilverKeys counts a tenant's silver.claims rows per artifact/version.
func readSilverKeys(t *testing.T, lake store.Store, tn uuid.UUID) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, r := range tableRows(t, lake, tables.TableKey{Tenant: tn, Kind: tables.Silver}, true) {
		parts := strings.SplitN(r, "|", 3)
		out[parts[0]+"/"+parts[1]]++
	}
	return out
}
