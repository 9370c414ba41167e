package schema_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
)

// An outbox written before trust_copies_and_event_rights may already hold
// copies: a re-enqueued dead letter's copy (legitimate) and a forged second
// copy. The migration marks the first with the dead-lettered row's seq and
// the second with its own, so the unique rule can be built, and holds from
// then on.
func TestMigrateCopies_ExistingCopiesAreMarked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, trust := migratedUpTo(t, "trust_copies_and_event_rights")
	plantProviderEvent(t, pool)
	const row = `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id)
		VALUES ('00000000-0000-0000-0000-000000000000', 1, 'bronze.events', 'append', $1) RETURNING seq`
	seq := func(artifact string) (s int64) {
		require.NoError(t, pool.QueryRow(ctx, row, artifact).Scan(&s))
		return s
	}
	// a: dead-lettered, then re-enqueued as reenq; b and its forged copies.
	a, reenq := seq("a"), seq("a")
	b, forged1, forged2 := seq("b"), seq("b"), seq("b")
	single := seq("c")
	_, err := pool.Exec(ctx, `INSERT INTO oml.dead_letter (outbox_seq, tenant_id, journal_seq, target, op, artifact_id, payload,
		attempts, first_failed_at, last_failed_at, error, skipped_seq, reenqueued_at, reenqueued_seq, new_outbox_seq)
		VALUES ($1, '00000000-0000-0000-0000-000000000000', 1, 'bronze.events', 'append', 'a', '{}', 1, now(), now(), 'x', 1, now(), 1, $2)`, a, reenq)
	require.NoError(t, err)

	_, err = pool.Exec(ctx, trust.SQL)
	require.NoError(t, err, "the migration applies over existing copies")
	copyOf := map[int64]*int64{}
	rows, err := pool.Query(ctx, `SELECT seq, copy_of FROM oml.outbox`)
	require.NoError(t, err)
	for rows.Next() {
		var s int64
		var c *int64
		require.NoError(t, rows.Scan(&s, &c))
		copyOf[s] = c
	}
	require.NoError(t, rows.Err())
	require.Nil(t, copyOf[a])
	require.Equal(t, a, *copyOf[reenq], "the re-enqueued copy names its dead letter's row")
	require.Nil(t, copyOf[b], "the first row of an identity stays the original")
	require.Equal(t, forged1, *copyOf[forged1], "an earlier copy is marked with its own seq")
	require.Equal(t, forged2, *copyOf[forged2])
	require.Nil(t, copyOf[single])
	_, err = pool.Exec(ctx, row, "b")
	requireCode(t, duplicated, err, "a new copy after the migration")
}

// migratedUpTo gives an empty database with every migration before the
// one named applied, as Apply runs them (its bootstrap first), and that
// migration, for a test of how it upgrades the data already there.
func migratedUpTo(t *testing.T, name string) (*pgxpool.Pool, schema.Migration) {
	t.Helper()
	pool := testdb.New(t, testdb.Empty()).Pool(t)
	_, err := pool.Exec(context.Background(), `CREATE SCHEMA oml; CREATE TABLE oml.schema_migrations (version integer PRIMARY KEY,
		name text NOT NULL, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	for _, m := range schema.All() {
		if m.Name == name {
			return pool, m
		}
		_, err := pool.Exec(context.Background(), m.SQL)
		require.NoError(t, err, "migration %03d_%s", m.Version, m.Name)
	}
	t.Fatalf("migration %s is not embedded", name)
	return nil, schema.Migration{}
}
