package outbox_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/testdb"
)

// The lake writer's continuity check reads the identity as the
// least-privileged roles too (the lake writer's, the auditor's): nothing it
// reads needs a superuser.
func TestReadIdentity_PlainRole_NoSuperuserNeeded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	conn := db.Conn(t)
	_, err := conn.Exec(ctx, `CREATE ROLE cont_plain_reader LOGIN; GRANT USAGE ON SCHEMA oml TO cont_plain_reader;
GRANT SELECT ON ALL TABLES IN SCHEMA oml TO cont_plain_reader; GRANT SELECT ON ALL SEQUENCES IN SCHEMA oml TO cont_plain_reader`)
	require.NoError(t, err)
	pool := testdb.OpenPool(t, db.ConnString("cont_plain_reader", ""))
	id, err := outbox.ReadIdentity(ctx, pool)
	require.NoError(t, err)
	require.NotEmpty(t, id.SystemIdentifier)
	require.Positive(t, id.Timeline)
}
