package schema_test

// The threat model of docs/security.md, one test (or subtest) per row,
// against a real database set up as an operator would: a non-superuser
// owner login that ran the migrations, and a login per job role granted
// oml_app, oml_lakewriter or oml_auditor. Every attack runs logged in as
// the role the row names; the superuser pool is only the test's own
// instrument (planting poison, tampering behind everyone's back).

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/workload"
)

// SQLSTATEs the attacks end in.
const (
	denied     = "42501" // insufficient_privilege: no grant, or append_journal's tenant check
	offChain   = "23514" // check_violation: journal_extends_chain, tenants/signing_keys_backed_by_event
	noEvent    = "23503" // foreign_key_violation: outbox_names_journal_event
	duplicated = "23505" // unique_violation: journal_pkey
)

type deployment struct {
	db                              *testdb.DB
	su                              *pgxpool.Pool // the test's instrument, never the attacker
	owner, app, lakewriter, auditor *pgxpool.Pool
	key                             *keys.Key
	a, b                            uuid.UUID
	lake                            store.Store
}

// newDeployment migrates an empty database as a non-superuser owner (the
// job roles made beforehand by a superuser, as migration 001/004 ask when
// the owner may not create roles), initialises it, creates tenants a and b,
// and opens one pool per job login.
func newDeployment(t *testing.T) *deployment {
	t.Helper()
	ctx := context.Background()
	db := testdb.New(t, testdb.Empty())
	su := db.Pool(t)
	for _, r := range []string{"oml_app", "oml_lakewriter", "oml_auditor"} {
		_, err := su.Exec(ctx, `DO $$ BEGIN EXECUTE format('CREATE ROLE %I NOLOGIN', '`+r+`');
		                        EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL; END $$`)
		require.NoError(t, err)
	}
	login := func(grant string) string {
		var rnd [6]byte
		_, _ = rand.Read(rnd[:])
		name := "login_" + hex.EncodeToString(rnd[:])
		_, err := su.Exec(ctx, "CREATE ROLE "+name+" LOGIN NOSUPERUSER NOCREATEROLE PASSWORD 'pw'")
		require.NoError(t, err)
		if grant != "" {
			_, err = su.Exec(ctx, "GRANT "+grant+" TO "+name)
			require.NoError(t, err)
		}
		t.Cleanup(func() { // best effort: roles are cluster-wide
			_, _ = su.Exec(context.Background(), "DROP OWNED BY "+name+"; DROP ROLE "+name)
		})
		return name
	}
	owner := login("")
	_, err := su.Exec(ctx, "GRANT CREATE ON DATABASE "+pgx.Identifier{db.Name}.Sanitize()+" TO "+owner)
	require.NoError(t, err)
	var super bool
	conn, err := pgx.Connect(ctx, db.ConnString(owner, "pw"))
	require.NoError(t, err)
	require.NoError(t, conn.QueryRow(ctx, "SELECT rolsuper FROM pg_roles WHERE rolname = current_user").Scan(&super))
	require.False(t, super)
	require.NoError(t, schema.Migrate(ctx, conn))
	require.NoError(t, conn.Close(ctx))

	d := &deployment{db: db, su: su, lake: store.NewMem()}
	d.owner = testdb.OpenPool(t, db.ConnString(owner, "pw"))
	d.app = testdb.OpenPool(t, db.ConnString(login("oml_app"), "pw"))
	d.lakewriter = testdb.OpenPool(t, db.ConnString(login("oml_lakewriter"), "pw"))
	d.auditor = testdb.OpenPool(t, db.ConnString(login("oml_auditor"), "pw"))
	d.key, err = keys.Generate()
	require.NoError(t, err)
	_, err = tenant.Init(ctx, d.owner, d.key)
	require.NoError(t, err)
	for i, name := range []string{"alpha", "beta"} {
		tn, _, err := tenant.Create(ctx, d.owner, d.key, name)
		require.NoError(t, err)
		if i == 0 {
			d.a = tn.ID
		} else {
			d.b = tn.ID
		}
	}
	return d
}

// workload runs a normal application workload, logged in as oml_app.
func (d *deployment) workload(t *testing.T, seed uint64) {
	t.Helper()
	_, err := workload.Run(context.Background(), d.app, d.key, workload.Config{
		Tenants: []uuid.UUID{d.a, d.b}, Claims: 4, PromoteRatio: 0.75, RetractRatio: 0.5, Seed: seed})
	require.NoError(t, err)
}

// drain runs one lake drain (oml lake drain --once), logged in as
// oml_lakewriter, and requires it to reach the outbox's end.
func (d *deployment) drain(t *testing.T) lakewriter.Summary {
	t.Helper()
	ctx := context.Background()
	w, err := lakewriter.New(lakewriter.Options{DB: d.lakewriter, Lake: d.lake, Signer: d.key,
		PoisonBudget: 1, HorizonTimeout: 20 * time.Second, BackoffMin: time.Millisecond, BackoffMax: 10 * time.Millisecond})
	require.NoError(t, err)
	var last int64
	require.NoError(t, d.su.QueryRow(ctx, "SELECT coalesce(max(seq), 0) FROM oml.outbox").Scan(&last))
	sum, err := w.DrainOnce(ctx)
	require.NoError(t, err)
	// (A dead letter's materialize.skipped adds rows after the target.)
	require.GreaterOrEqual(t, sum.EndFrontier, last, "the drain reached the end of the outbox")
	return sum
}

// reconcile runs oml reconcile, logged in as oml_auditor.
func (d *deployment) reconcile(t *testing.T) *reconcile.Report {
	t.Helper()
	rec, err := reconcile.Run(context.Background(), d.auditor, d.lake, reconcile.Options{})
	require.NoError(t, err)
	return rec
}

// deadLetter is the one dead letter poisoned made.
type deadLetter struct {
	id, outboxSeq int64
	tenant        uuid.UUID
}

// poisoned plants one poison row (a deployment's workload ran) and drains:
// the lake writer, under its own login, dead-letters it and journals the
// skip; the dead letter is that row.
func (d *deployment) poisoned(t *testing.T) deadLetter {
	t.Helper()
	ctx := context.Background()
	planted, err := workload.PlantPoison(ctx, d.su, 1, 7)
	require.NoError(t, err)
	require.Len(t, planted, 1)
	sum := d.drain(t)
	require.Len(t, sum.DeadLettered, 1, "the lake writer role dead-lettered the poison row and journalled it")
	var dl deadLetter
	require.NoError(t, d.su.QueryRow(ctx, `SELECT id, outbox_seq, tenant_id FROM oml.dead_letter`).Scan(&dl.id, &dl.outboxSeq, &dl.tenant))
	require.Equal(t, planted[0].Tenant, dl.tenant)
	return dl
}

// verify runs oml chain verify --full, logged in as oml_auditor.
func (d *deployment) verify(t *testing.T) chainverify.Report {
	t.Helper()
	rep, err := chainverify.VerifyDB(context.Background(), d.auditor, chainverify.DBOptions{Full: true})
	require.NoError(t, err)
	return rep
}

func (d *deployment) requireClean(t *testing.T) {
	t.Helper()
	rep := d.verify(t)
	require.Empty(t, rep.Findings, "chain verify is clean")
	require.Len(t, rep.Chains, 3, "provider, alpha and beta")
	var stale int
	require.NoError(t, d.su.QueryRow(context.Background(), `
		SELECT count(*) FROM oml.chain_heads h
		 WHERE NOT EXISTS (SELECT 1 FROM oml.journal j WHERE j.tenant_id = h.tenant_id AND j.seq = h.seq AND j.hash = h.hash)
		    OR EXISTS (SELECT 1 FROM oml.journal j WHERE j.tenant_id = h.tenant_id AND j.seq > h.seq)`).Scan(&stale))
	require.Zero(t, stale, "every chain_heads row is its journal's last event")
}

// as runs sql in a transaction on pool acting for tenant (oml.tenant_id;
// uuid.Nil: the provider), rolled back afterwards, and returns its error.
func as(t *testing.T, pool *pgxpool.Pool, tn uuid.UUID, sql string, args ...any) error {
	t.Helper()
	ctx := context.Background()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SELECT set_config('oml.tenant_id', $1, true)", tn.String())
	require.NoError(t, err)
	_, err = tx.Exec(ctx, sql, args...)
	return err
}

func requireCode(t *testing.T, code string, err error, what string) {
	t.Helper()
	require.Error(t, err, what)
	var pe *pgconn.PgError
	require.True(t, errors.As(err, &pe), "%s: %v", what, err)
	require.Equal(t, code, pe.Code, "%s: %v", what, err)
}

// head reads tenant's last journal event (superuser: the test's view).
func (d *deployment) head(t *testing.T, tn uuid.UUID) (seq int64, hash []byte, at time.Time) {
	t.Helper()
	require.NoError(t, d.su.QueryRow(context.Background(),
		`SELECT seq, hash, recorded_at FROM oml.journal WHERE tenant_id = $1 ORDER BY seq DESC LIMIT 1`, tn).Scan(&seq, &hash, &at))
	return seq, hash, at
}

const appendJournal = `SELECT oml.append_journal($1, 'k', ARRAY[$2::bigint], ARRAY[$3::bytea], ARRAY[sha256(random()::text::bytea)],
	ARRAY[decode(repeat('ab', 64), 'hex')], ARRAY['claim.submitted'], ARRAY['{}'::bytea], ARRAY[$4::timestamptz])`

// The headline attack of issue 12: the application moves the head to make
// the next events land at seq 100. Refused; the workload goes on; the
// chain verifies.
func TestThreat_AppMovesTheHead_RefusedAndTheWorkloadStillAppends(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.workload(t, 1)
	requireCode(t, denied, as(t, d.app, d.a, "UPDATE oml.chain_heads SET seq = 99"), "app UPDATE chain_heads")
	requireCode(t, denied, as(t, d.app, d.a, "DELETE FROM oml.chain_heads"), "app DELETE chain_heads")
	requireCode(t, denied, as(t, d.app, d.a, "INSERT INTO oml.chain_heads (tenant_id, seq, hash, updated_at) VALUES ($1, 99, sha256('x'), now())", uuid.New()), "app INSERT chain_heads")
	d.workload(t, 2)
	d.drain(t)
	d.requireClean(t)
}

// The same move by the owner (or a superuser) is possible, but harmless and
// detected: chain verify reports the head, the append path takes its seq
// from the journal (not the head row), and the next append puts the head
// back.
func TestThreat_OwnerMovesTheHead_HarmlessAndDetected(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDeployment(t)
	d.workload(t, 1)
	seq, _, _ := d.head(t, d.a)
	_, err := d.owner.Exec(ctx, "UPDATE oml.chain_heads SET seq = 99 WHERE tenant_id = $1", d.a)
	require.NoError(t, err)
	rep := d.verify(t)
	require.Len(t, rep.Findings, 1)
	require.Equal(t, chainverify.ReasonHeadMismatch, rep.Findings[0].Reason)
	recs, err := chain.Append(ctx, d.app, d.key, d.a, journal.MustNew(journal.ClaimErased{ArtifactID: "never-submitted", By: "x"}))
	require.ErrorIs(t, err, journal.ErrRejected, "the fold still runs against the real state")
	require.Nil(t, recs)
	d.workload(t, 2)
	next, _, _ := d.head(t, d.a)
	require.Greater(t, next, seq)
	require.Less(t, next, int64(99), "the chain went on from the journal's last event, not from the moved head")
	d.drain(t)
	d.requireClean(t)
}

// The application cannot write the journal except as an extension of the
// chain through oml.append_journal.
func TestThreat_AppWritesTheJournalOffChain_Refused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDeployment(t)
	d.workload(t, 1)
	seq, hash, at := d.head(t, d.a)
	seqB, hashB, atB := d.head(t, d.b)
	var beforeHead []byte
	require.NoError(t, d.su.QueryRow(ctx, `SELECT hash FROM oml.journal WHERE tenant_id = $1 AND seq = $2`, d.a, seq-1).Scan(&beforeHead))
	zero := make([]byte, 32)
	other := make([]byte, 32)
	_, _ = rand.Read(other)
	for _, c := range []struct {
		name, code string
		tn         uuid.UUID
		sql        string
		args       []any
	}{
		{"direct INSERT", denied, d.a, `INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
			VALUES ($1, $2, $3, sha256('x'), decode(repeat('ab', 64), 'hex'), 'k', 'claim.submitted', '{}', now())`, []any{d.a, seq + 1, hash}},
		{"UPDATE", denied, d.a, "UPDATE oml.journal SET event_type = 'x'", nil},
		{"DELETE", denied, d.a, "DELETE FROM oml.journal", nil},
		{"TRUNCATE", denied, d.a, "TRUNCATE oml.journal", nil},
		{"gap: seq head+2", offChain, d.a, appendJournal, []any{d.a, seq + 2, hash, at}},
		{"wrong prev_hash", offChain, d.a, appendJournal, []any{d.a, seq + 1, other, at}},
		{"recorded_at before the head's", offChain, d.a, appendJournal, []any{d.a, seq + 1, hash, at.Add(-time.Hour)}},
		{"a second genesis", duplicated, d.a, appendJournal, []any{d.a, int64(1), zero, at}},
		{"a genesis with a non-zero prev_hash", offChain, d.a, appendJournal, []any{d.a, int64(1), other, at}},
		{"a fork: another event at the head's seq, linked like it", duplicated, d.a, appendJournal, []any{d.a, seq, beforeHead, at}},
		{"another tenant's chain", denied, d.a, appendJournal, []any{d.b, seq + 1, hash, at}},
		{"another tenant's chain, well linked to its head", denied, d.a, appendJournal, []any{d.b, seqB + 1, hashB, atB}},
		{"a batch whose second event does not link to its first", offChain, d.a, `SELECT oml.append_journal($1, 'k',
			ARRAY[$2::bigint, $2::bigint + 1], ARRAY[$3::bytea, $4::bytea], ARRAY[sha256('one'), sha256('two')],
			ARRAY[decode(repeat('ab', 64), 'hex'), decode(repeat('ab', 64), 'hex')], ARRAY['claim.submitted', 'claim.submitted'],
			ARRAY['{}'::bytea, '{}'::bytea], ARRAY[$5::timestamptz, $5::timestamptz])`, []any{d.a, seq + 1, hash, other, at}},
		{"a chain for a tenant that does not exist", offChain, uuid.Nil, "", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.sql == "" { // the ghost chain acts for the ghost tenant
				ghost := uuid.New()
				c.tn, c.sql, c.args = ghost, appendJournal, []any{ghost, int64(1), zero, at}
			}
			requireCode(t, c.code, as(t, d.app, c.tn, c.sql, c.args...), c.name)
		})
	}
	// The shape is the database's to check, the signature the verifier's:
	// a well-linked event with a forged signature is accepted, and found.
	require.NoError(t, pgx.BeginFunc(ctx, d.app, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT set_config('oml.tenant_id', $1, true)", d.a.String()); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, appendJournal, d.a, seq+1, hash, at)
		return err
	}))
	rep := d.verify(t)
	require.Len(t, rep.Findings, 1)
	require.Equal(t, d.a, rep.Findings[0].Tenant)
	require.Equal(t, seq+1, rep.Findings[0].Seq)
}

// A ghost-tenant outbox row (issue 12's second headline attack) and rows
// naming no event are refused, so they can never stop the lake writer.
func TestThreat_AppGhostOutboxRow_Refused(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.workload(t, 1)
	seq, _, _ := d.head(t, d.a)
	ghost := uuid.New()
	const row = `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, payload) VALUES ($1, $2, 'bronze.events', 'append', '{}')`
	requireCode(t, noEvent, as(t, d.app, ghost, row, ghost, int64(1)), "ghost tenant")
	requireCode(t, noEvent, as(t, d.app, d.a, row, d.a, seq+1), "an event not (yet) in the journal")
	requireCode(t, noEvent, as(t, d.owner, d.a, row, d.a, seq+1), "the owner too")
	// (gold rows: no event has one yet, so the good rows of the batch copy no
	// existing row, which outbox_implied_once would refuse first.)
	requireCode(t, noEvent, as(t, d.app, d.a, `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, payload)
		SELECT $1, s, 'gold.lineage', 'materialize', '{}' FROM generate_series($2::bigint - 1, $2::bigint + 1) s`, d.a, seq), "one bad row in a batch")
	d.workload(t, 2)
	d.drain(t)
	d.requireClean(t)
}

// append_journal writes its events' outbox rows with the outbox trigger
// skipped (append_writes_its_outbox), on the transaction-local setting
// oml.journal_checked. A job role can set that setting itself; its own
// outbox INSERT is still checked (the skip also needs table-level INSERT on
// oml.outbox, which no job role has), so the ghost-tenant row and the row
// naming no event are refused as before.
func TestThreat_JobRoleForgesTheCheckedSetting_OutboxRowStillRefused(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.workload(t, 1)
	seq, _, _ := d.head(t, d.a)
	ghost := uuid.New()
	const row = `WITH s AS (SELECT set_config('oml.journal_checked', 'on', true))
	             INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, payload)
	             SELECT $1, $2, 'bronze.events', 'append', '{}' FROM s`
	requireCode(t, noEvent, as(t, d.app, ghost, row, ghost, int64(1)), "app, ghost tenant")
	requireCode(t, noEvent, as(t, d.app, d.a, row, d.a, seq+1), "app, an event not (yet) in the journal")
	requireCode(t, noEvent, as(t, d.lakewriter, ghost, row, ghost, int64(1)), "lake writer, ghost tenant")
	// The setting in a statement of its own, before the INSERT.
	ctx := context.Background()
	tx, err := d.app.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, "SELECT set_config('oml.tenant_id', $1, true), set_config('oml.journal_checked', 'on', true)", ghost.String())
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, payload) VALUES ($1, 1, 'bronze.events', 'append', '{}')`, ghost)
	requireCode(t, noEvent, err, "app, setting set beforehand")
}

// The outbox rows append_journal writes must name events of the same
// append (its tenant, its seqs): an application calling it with a row for
// another event, an older one of its chain included, is refused, so the
// function is no way around outbox_names_journal_event either.
func TestThreat_AppAppendJournalOutboxRowNamingAnotherEvent_Refused(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.workload(t, 1)
	seq, hash, at := d.head(t, d.a)
	const withOutbox = `SELECT oml.append_journal($1, 'k', ARRAY[$2::bigint], ARRAY[$3::bytea], ARRAY[sha256(random()::text::bytea)],
		ARRAY[decode(repeat('ab', 64), 'hex')], ARRAY['claim.submitted'], ARRAY['{}'::bytea], ARRAY[$4::timestamptz],
		ARRAY[$5::bigint], ARRAY['bronze.events'], ARRAY['append'], ARRAY[NULL::text], ARRAY[NULL::int], ARRAY['{}'])`
	requireCode(t, noEvent, as(t, d.app, d.a, withOutbox, d.a, seq+1, hash, at, seq+2), "a later event")
	requireCode(t, noEvent, as(t, d.app, d.a, withOutbox, d.a, seq+1, hash, at, seq), "an earlier event of the chain")
	requireCode(t, noEvent, as(t, d.app, d.a, withOutbox, d.a, seq+1, hash, at, nil), "no event")
	// Its own event: accepted, the row written by the function.
	require.NoError(t, pgx.BeginFunc(context.Background(), d.app, func(tx pgx.Tx) error {
		if _, err := tx.Exec(context.Background(), "SELECT set_config('oml.tenant_id', $1, true)", d.a.String()); err != nil {
			return err
		}
		if _, err := tx.Exec(context.Background(), withOutbox, d.a, seq+1, hash, at, seq+1); err != nil {
			return err
		}
		// The setting that skips the triggers is on only while
		// append_journal inserts: a direct INSERT after it, in the same
		// transaction, is checked again (whoever makes it).
		var checked string
		if err := tx.QueryRow(context.Background(), "SELECT coalesce(current_setting('oml.journal_checked', true), '')").Scan(&checked); err != nil {
			return err
		}
		require.NotEqual(t, "on", checked, "oml.journal_checked after append_journal")
		return nil
	}))
	var rows int
	require.NoError(t, d.su.QueryRow(context.Background(),
		`SELECT count(*) FROM oml.outbox WHERE tenant_id = $1 AND journal_seq = $2`, d.a, seq+1).Scan(&rows))
	require.Equal(t, 1, rows)
}

// A phantom tenant (or signing key) needs its provider-chain event: the
// application may not insert one at all, and nobody may insert one without
// the event.
func TestThreat_PhantomTenantAndKey_Refused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDeployment(t)
	var pseq int64
	var phash []byte
	require.NoError(t, d.su.QueryRow(ctx, `SELECT provider_seq, provider_hash FROM oml.tenants WHERE id = $1`, d.a).Scan(&pseq, &phash))
	const tenantRow = `INSERT INTO oml.tenants (id, name, created_at, provider_seq, provider_hash) VALUES ($1, $2, now(), $3, $4)`
	requireCode(t, denied, as(t, d.app, uuid.Nil, tenantRow, uuid.New(), "phantom", pseq, phash), "app, provider context")
	requireCode(t, denied, as(t, d.app, d.a, "UPDATE oml.tenants SET name = 'renamed'"), "app renames its tenant")
	requireCode(t, offChain, as(t, d.owner, uuid.Nil, tenantRow, uuid.New(), "phantom", pseq, phash), "owner, citing alpha's tenant.created")
	requireCode(t, offChain, as(t, d.owner, uuid.Nil, tenantRow, uuid.New(), "phantom", int64(999), phash), "owner, citing no event")
	requireCode(t, offChain, as(t, d.owner, d.a, "UPDATE oml.tenants SET name = 'renamed' WHERE id = $1", d.a), "owner renames a tenant")
	requireCode(t, offChain, as(t, d.owner, d.a, "UPDATE oml.tenants SET provider_hash = sha256(provider_hash) WHERE id = $1", d.a), "owner rewrites a tenant's provider_hash")

	pub := make([]byte, 32)
	_, _ = rand.Read(pub)
	const keyRow = `INSERT INTO oml.signing_keys (key_id, public_key, issued_seq, issued_hash, issued_at) VALUES ($1, $2, 1, $3, now())`
	var rootHash []byte
	require.NoError(t, d.su.QueryRow(ctx, `SELECT hash FROM oml.journal WHERE tenant_id = $1 AND seq = 1`, uuid.Nil).Scan(&rootHash))
	requireCode(t, denied, as(t, d.app, uuid.Nil, keyRow, "0123456789abcdef0123456789abcdef", pub, rootHash), "app issues a key")
	requireCode(t, offChain, as(t, d.owner, uuid.Nil, keyRow, "0123456789abcdef0123456789abcdef", pub, rootHash), "owner, citing the root key's event")
	requireCode(t, offChain, as(t, d.owner, uuid.Nil, "UPDATE oml.signing_keys SET public_key = $1", pub), "owner swaps the root public key")

	var n int
	require.NoError(t, d.su.QueryRow(ctx, `SELECT count(*) FROM oml.tenants`).Scan(&n))
	require.Equal(t, 3, n, "provider, alpha, beta")
	d.workload(t, 1)
	d.requireClean(t)
}

// The lake writer dead-letters a poison row (its own job, under its own
// login); the application then cannot hide, forge or remove a dead letter.
func TestThreat_AppHidesADeadLetter_Refused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDeployment(t)
	d.workload(t, 1)
	dl := d.poisoned(t)
	id, tn := dl.id, dl.tenant

	requireCode(t, denied, as(t, d.app, tn, "UPDATE oml.dead_letter SET reenqueued_at = now() WHERE id = $1", id), "app hides it")
	requireCode(t, denied, as(t, d.app, tn, "DELETE FROM oml.dead_letter WHERE id = $1", id), "app deletes it")
	requireCode(t, denied, as(t, d.app, tn, `INSERT INTO oml.dead_letter (outbox_seq, tenant_id, journal_seq, target, op, payload,
		attempts, first_failed_at, last_failed_at, error, skipped_seq) VALUES (-1, $1, 1, 'bronze.events', 'append', '{}', 1, now(), now(), 'x', 1)`, tn), "app forges one")
	requireCode(t, denied, as(t, d.lakewriter, tn, "UPDATE oml.dead_letter SET reenqueued_at = now() WHERE id = $1", id), "the lake writer hides it")
	var open int
	require.NoError(t, d.su.QueryRow(ctx, `SELECT count(*) FROM oml.dead_letter WHERE reenqueued_at IS NULL`).Scan(&open))
	require.Equal(t, 1, open)
	d.requireClean(t)
}

// Row-level security: the application sees its own tenant only, nothing
// without a tenant, and none of the other jobs' tables.
func TestThreat_AppReadsOnlyItsTenant(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDeployment(t)
	d.workload(t, 1)
	// count counts the rows of table the app sees whose tenant is not tn,
	// acting for tn (nil: no tenant set).
	count := func(tn *uuid.UUID, table string) (n int) {
		tx, err := d.app.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		other := uuid.Nil
		if tn != nil {
			other = *tn
			_, err = tx.Exec(ctx, "SELECT set_config('oml.tenant_id', $1, true)", tn.String())
			require.NoError(t, err)
		}
		require.NoError(t, tx.QueryRow(ctx, "SELECT count(*) FROM oml."+table+" WHERE tenant_id <> $1", other).Scan(&n))
		return n
	}
	for _, table := range []string{"journal", "chain_heads", "claims", "claim_bodies", "claim_keys", "outbox", "dead_letter"} {
		require.Zero(t, count(&d.a, table), "%s: alpha sees no other tenant's rows", table)
		require.Zero(t, count(nil, table), "%s: no tenant set sees nothing", table)
	}
	for _, table := range []string{"lake_frontier", "lake_lease", "outbox_attempts", "chain_checkpoints"} {
		requireCode(t, denied, as(t, d.app, d.a, "SELECT 1 FROM oml."+table), "app reads "+table)
	}
	requireCode(t, denied, as(t, d.app, d.a, "UPDATE oml.lake_frontier SET frontier = 0"), "app moves the frontier")
}

// The lake writer does its whole job under its own login (lease, frontier,
// attempts, dead letters, materialize.skipped; the other tests drain as it
// too) and can change nothing else.
func TestThreat_LakeWriterCannotRewriteTheChainOrTheFold(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.workload(t, 1)
	d.drain(t)
	seq, hash, at := d.head(t, d.a)
	for _, c := range []struct{ name, code, sql string }{
		{"UPDATE chain_heads", denied, "UPDATE oml.chain_heads SET seq = 99"},
		{"INSERT journal", denied, `INSERT INTO oml.journal SELECT * FROM oml.journal LIMIT 1`},
		{"UPDATE journal", denied, "UPDATE oml.journal SET event_type = 'x'"},
		{"UPDATE claims", denied, "UPDATE oml.claims SET state = 'promoted'"},
		{"INSERT claim_bodies", denied, "INSERT INTO oml.claim_bodies SELECT * FROM oml.claim_bodies LIMIT 1"},
		{"DELETE claim_keys", denied, "DELETE FROM oml.claim_keys"},
		{"INSERT tenants", denied, "INSERT INTO oml.tenants SELECT * FROM oml.tenants LIMIT 1"},
		{"DELETE outbox", denied, "DELETE FROM oml.outbox"},
		{"UPDATE outbox", denied, "UPDATE oml.outbox SET payload = '{}'"},
		{"DELETE dead_letter", denied, "DELETE FROM oml.dead_letter"},
	} {
		requireCode(t, c.code, as(t, d.lakewriter, d.a, c.sql), c.name)
	}
	// (materialize.skipped: the one type the lake writer journals; any other
	// is refused before the chain check, TestThreat_AppendJournalEventTypesByRole.)
	requireCode(t, offChain, as(t, d.lakewriter, d.a, strings.Replace(appendJournal, "claim.submitted", "materialize.skipped", 1),
		d.a, seq+2, hash, at), "a gap through append_journal")
	d.requireClean(t)
}

// The auditor verifies and reconciles under its own login, storing only its
// checkpoints, and can write nothing else.
func TestThreat_AuditorIsReadOnly(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDeployment(t)
	d.workload(t, 1)
	d.drain(t)
	rep := d.verify(t)
	require.Empty(t, rep.Findings)
	require.Positive(t, rep.Checkpoints, "the auditor stores its checkpoints")
	rec := d.reconcile(t)
	require.True(t, rec.OK, "reconcile as the auditor: %+v", rec.Findings)
	doc := doctor.Run(ctx, doctor.Options{
		DB:   func(context.Context) (*pgxpool.Pool, error) { return d.auditor, nil },
		Lake: func(context.Context) (store.Store, error) { return d.lake, nil },
	})
	for _, c := range doc.Checks {
		require.NotContains(t, strings.Join(append([]string{c.Summary}, c.Details...), " "), "permission denied",
			"doctor as the auditor: check %s", c.ID)
	}
	seq, hash, at := d.head(t, d.a)
	for _, c := range []struct{ name, sql string }{
		{"INSERT journal", `INSERT INTO oml.journal SELECT * FROM oml.journal LIMIT 1`},
		{"UPDATE chain_heads", "UPDATE oml.chain_heads SET seq = 99"},
		{"INSERT outbox", "INSERT INTO oml.outbox (tenant_id, journal_seq, target, op) SELECT tenant_id, seq, 'bronze.events', 'append' FROM oml.journal LIMIT 1"},
		{"UPDATE lake_frontier", "UPDATE oml.lake_frontier SET frontier = 0"},
		{"UPDATE dead_letter", "UPDATE oml.dead_letter SET reenqueued_at = now()"},
		{"UPDATE claims", "UPDATE oml.claims SET state = 'promoted'"},
		{"DELETE claim_keys", "DELETE FROM oml.claim_keys"},
	} {
		requireCode(t, denied, as(t, d.auditor, d.a, c.sql), c.name)
	}
	requireCode(t, denied, as(t, d.auditor, d.a, appendJournal, d.a, seq+1, hash, at), "append_journal")
}

// The owner (and a superuser) is bound by the chain's shape too: an
// off-chain journal row is refused whoever inserts it.
func TestThreat_OwnerInsertsOffChain_Refused(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.workload(t, 1)
	seq, hash, at := d.head(t, d.a)
	const row = `INSERT INTO oml.journal (tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at)
		VALUES ($1, $2, $3, sha256('x'), decode(repeat('ab', 64), 'hex'), 'k', 'claim.submitted', '{}', $4)`
	for _, pool := range []*pgxpool.Pool{d.owner, d.su} {
		requireCode(t, offChain, as(t, pool, d.a, row, d.a, seq+2, hash, at), "gap")
		requireCode(t, offChain, as(t, pool, d.a, row, d.a, seq+1, make([]byte, 32), at), "wrong prev_hash")
		requireCode(t, offChain, as(t, pool, d.a, row, uuid.New(), int64(1), make([]byte, 32), at), "ghost genesis")
	}
	d.requireClean(t)
}

// Recovery (oml chain restore-tail) re-inserts a lost tail: in seq order it
// is a correct extension and is accepted, head included; out of order it is
// not.
func TestJournalTrigger_RestoredTailInSeqOrderIsAccepted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDeployment(t)
	d.workload(t, 1)
	seq, _, _ := d.head(t, d.a)
	const cols = `tenant_id, seq, prev_hash, hash, signature, key_id, event_type, payload, recorded_at`
	// Lose the last three events (the superuser, behind everyone's back; as a
	// failover to a standby without them would), keeping a copy.
	_, err := d.su.Exec(ctx, `CREATE TABLE lost AS SELECT `+cols+` FROM oml.journal WHERE tenant_id = $1 AND seq > $2`, d.a, seq-3)
	require.NoError(t, err)
	_, err = d.su.Exec(ctx, `ALTER TABLE oml.journal DISABLE TRIGGER journal_append_only_row;
		DELETE FROM oml.journal WHERE (tenant_id, seq) IN (SELECT tenant_id, seq FROM lost);
		ALTER TABLE oml.journal ENABLE TRIGGER journal_append_only_row`)
	require.NoError(t, err)
	// The head as the standby had it: at the last event it still holds.
	_, err = d.su.Exec(ctx, `UPDATE oml.chain_heads h SET seq = j.seq, hash = j.hash, updated_at = j.recorded_at
		  FROM oml.journal j WHERE j.tenant_id = h.tenant_id AND h.tenant_id = $1 AND j.seq = $2`, d.a, seq-3)
	require.NoError(t, err)
	_, err = d.su.Exec(ctx, `GRANT SELECT ON lost TO PUBLIC`)
	require.NoError(t, err)
	requireCode(t, offChain, as(t, d.owner, d.a, `INSERT INTO oml.journal SELECT * FROM lost WHERE seq = $1`, seq), "the last event first")
	// One statement is checked once its rows are all in: the whole tail in
	// one statement is the same extension whatever its row order.
	require.NoError(t, as(t, d.owner, d.a, `INSERT INTO oml.journal SELECT * FROM lost ORDER BY seq DESC`), "the tail in one statement")
	for s := seq - 2; s <= seq; s++ {
		_, err = d.owner.Exec(ctx, `INSERT INTO oml.journal SELECT * FROM lost WHERE seq = $1`, s)
		require.NoError(t, err, "seq %d", s)
	}
	d.requireClean(t)
}
