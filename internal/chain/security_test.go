package chain_test

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
)

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// asApp runs fn in a transaction as oml_app acting for tenant (empty: no
// tenant set), rolled back afterwards.
func asApp(t *testing.T, b *bundle, tenantID string, fn func(tx pgx.Tx) error) error {
	t.Helper()
	ctx := context.Background()
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL ROLE oml_app")
	require.NoError(t, err)
	if tenantID != "" {
		_, err = tx.Exec(ctx, "SELECT set_config('oml.tenant_id', $1, true)", tenantID)
		require.NoError(t, err)
	}
	return fn(tx)
}

func TestJournal_AppRoleCannotUpdateDeleteOrTruncate(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	tn := b.tenant(t, "app")
	for _, stmt := range []string{
		"UPDATE oml.journal SET event_type = 'x'",
		"DELETE FROM oml.journal",
		"TRUNCATE oml.journal",
	} {
		err := asApp(t, b, tn.String(), func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, stmt)
			return err
		})
		require.Error(t, err, stmt)
		require.Equal(t, "42501", pgCode(err), "%s: want permission denied, got %v", stmt, err)
		require.Contains(t, err.Error(), "permission denied", stmt)
	}
}

func TestJournal_OwnerIsRefusedByTheTrigger(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	tn := b.tenant(t, "owner")
	for _, stmt := range []string{
		"UPDATE oml.journal SET event_type = 'x' WHERE tenant_id = $1",
		"DELETE FROM oml.journal WHERE tenant_id = $1",
		"TRUNCATE oml.journal",
	} {
		args := []any{tn}
		if stmt == "TRUNCATE oml.journal" {
			args = nil
		}
		_, err := b.pool.Exec(ctx, stmt, args...)
		require.Error(t, err, stmt)
		require.Contains(t, err.Error(), "oml.journal is append-only", stmt)
	}
	require.Equal(t, 1, checkChain(t, ctx, b.pool, b.key, tn))
}

func TestRLS_AppRoleSeesOnlyItsTenantsRows(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a, c := b.tenant(t, "a"), b.tenant(t, "c")
	_, err := chain.Append(ctx, b.pool, b.key, a, submit(t, "x", 1, "w", "human"), promote("x", 1, "r"))
	require.NoError(t, err)
	_, err = chain.Append(ctx, b.pool, b.key, c, submit(t, "y", 1, "w", "human"))
	require.NoError(t, err)

	count := func(tx pgx.Tx, table string) (n int) {
		require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n))
		return n
	}
	require.NoError(t, asApp(t, b, a.String(), func(tx pgx.Tx) error {
		require.Equal(t, 3, count(tx, "oml.journal"))
		require.Equal(t, 1, count(tx, "oml.chain_heads"))
		require.Equal(t, 1, count(tx, "oml.tenants"))
		require.Equal(t, 1, count(tx, "oml.claims"))
		require.Equal(t, 1, count(tx, "oml.claim_bodies"))
		require.Equal(t, 1, count(tx, "oml.claim_keys"))
		require.Equal(t, 6, count(tx, "oml.outbox")) // 3 bronze + 1 materialize + 1 gold.lineage + 1 gold.workareas (the promotion)
		var other int
		require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM oml.journal WHERE tenant_id = $1", c).Scan(&other))
		require.Zero(t, other)
		return nil
	}))
	// No tenant set: nothing, never everything.
	require.NoError(t, asApp(t, b, "", func(tx pgx.Tx) error {
		require.Zero(t, count(tx, "oml.journal"))
		require.Zero(t, count(tx, "oml.claims"))
		return nil
	}))
	// Writing another tenant's row is refused by the policy.
	err = asApp(t, b, a.String(), func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO oml.claim_bodies (tenant_id, artifact_id, version, ciphertext) VALUES ($1, 'z', 1, 'x')`, c)
		return err
	})
	require.Error(t, err)
	require.Contains(t, err.Error(), "row-level security")
}

func TestAppendTx_WorksAsTheAppRole(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	tn := b.tenant(t, "asapp")
	require.NoError(t, asApp(t, b, "", func(tx pgx.Tx) error {
		recs, err := chain.AppendTx(ctx, tx, b.key, tn,
			submit(t, "x", 1, "w", "human"), promote("x", 1, "r"),
			journal.MustNew(journal.ClaimErased{ArtifactID: "x", By: "dpo"}))
		require.NoError(t, err)
		require.Len(t, recs, 3)
		return nil
	}))
}

func TestAppendTx_RestoresTheCallersTenantSetting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	a, c := b.tenant(t, "a"), b.tenant(t, "c")
	require.NoError(t, asApp(t, b, a.String(), func(tx pgx.Tx) error {
		_, err := chain.AppendTx(ctx, tx, b.key, c, submit(t, "x", 1, "w", "human"))
		require.NoError(t, err)
		var cur string
		require.NoError(t, tx.QueryRow(ctx, "SELECT current_setting('oml.tenant_id')").Scan(&cur))
		require.Equal(t, a.String(), cur)
		return nil
	}))
}

// The append path's outbox rows go in with oml.append_journal, which checks
// them against its own arguments (append_writes_its_outbox), so the outbox
// trigger's probe of the journal is not called for them, while a direct
// INSERT in the same transaction still calls it. Calls are counted, not
// timed: what the skip saves is BenchmarkAppendEnforcement's to measure.
func TestAppendTx_OwnOutboxRowsSkipTheOutboxTrigger_ADirectInsertDoesNot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t)
	tn := b.tenant(t, "own-outbox")
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SET LOCAL track_functions = 'pl'")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SET LOCAL ROLE oml_app")
	require.NoError(t, err)
	_, err = tx.Exec(ctx, "SELECT set_config('oml.tenant_id', $1, true)", tn.String())
	require.NoError(t, err)
	calls := func() int64 {
		var n int64
		require.NoError(t, tx.QueryRow(ctx,
			`SELECT coalesce(pg_stat_get_xact_function_calls('oml.outbox_require_event()'::regprocedure), 0)`).Scan(&n))
		return n
	}
	recs, err := chain.AppendTx(ctx, tx, b.key, tn, submit(t, "a", 1, "w", "agent"), submit(t, "b", 1, "w", "agent"))
	require.NoError(t, err)
	var rows int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM oml.outbox WHERE tenant_id = $1 AND journal_seq = ANY($2)`,
		tn, []int64{int64(recs[0].Seq), int64(recs[1].Seq)}).Scan(&rows))
	require.Positive(t, rows, "the append wrote its outbox rows")
	require.Zero(t, calls(), "append_journal's own outbox rows are not re-checked")

	_, err = tx.Exec(ctx, `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, payload) VALUES ($1, $2, 'gold.lineage', 'materialize', '{}')`,
		tn, int64(recs[1].Seq))
	require.NoError(t, err)
	require.Equal(t, int64(1), calls(), "a direct insert is checked")
}
