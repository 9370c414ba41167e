package schema_test

// Threat-model rows 21-24 of docs/security.md: a forged second copy of a
// legitimate outbox row, and event types by role through append_journal.

import (
	"context"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/reconcile"
)

// The insert of a copy of outbox row $1, as the application would forge it.
const copyRow = `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload)
	SELECT tenant_id, journal_seq, target, op, artifact_id, version, payload FROM oml.outbox WHERE seq = $1`

// outboxRow returns the seq of tenant's last outbox row of target/op (the
// superuser's view).
func (d *deployment) outboxRow(t *testing.T, tn uuid.UUID, target, op string) int64 {
	t.Helper()
	var seq int64
	require.NoError(t, d.su.QueryRow(context.Background(), `SELECT max(seq) FROM oml.outbox
		WHERE tenant_id = $1 AND target = $2 AND op = $3 AND copy_of IS NULL`, tn, target, op).Scan(&seq))
	require.Positive(t, seq, "tenant %s has a %s %s row", tn, target, op)
	return seq
}

// The application copies legitimate outbox rows (each passes the lake
// writer's row check, since the journal implies it): the database refuses
// every copy, whether the original is drained yet or not, and the
// application cannot mark a copy as a re-enqueue either.
func TestThreat_AppForgesASecondCopyOfAnOutboxRow_Refused(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.workload(t, 1)
	drained := d.outboxRow(t, d.a, journal.TargetBronzeEvents, journal.OpAppend)
	d.drain(t)
	d.workload(t, 2)
	pendingBronze := d.outboxRow(t, d.a, journal.TargetBronzeEvents, journal.OpAppend)
	pendingMat := d.outboxRow(t, d.a, journal.TargetSilverClaims, journal.OpMaterialize)
	for name, seq := range map[string]int64{"a drained bronze row": drained, "a pending bronze row": pendingBronze,
		"a pending materialization": pendingMat} {
		requireCode(t, duplicated, as(t, d.app, d.a, copyRow, seq), name)
	}
	requireCode(t, denied, as(t, d.app, d.a, `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload, copy_of)
		SELECT tenant_id, journal_seq, target, op, artifact_id, version, payload, seq FROM oml.outbox WHERE seq = $1`, pendingMat),
		"a copy marked as a re-enqueue")
	requireCode(t, duplicated, as(t, d.lakewriter, d.a, copyRow, pendingBronze), "the lake writer's copy")
	d.drain(t)
	rec := d.reconcile(t)
	require.True(t, rec.OK, "every legitimate row is in the lake once: %+v", rec.Findings)
	d.requireClean(t)
}

// The owner can get past the database's rule (it owns the index and drops
// it). The lake writer still applies each implied row once: a copy of a
// row already in the lake, and a copy of a row in the same batch, are
// poison and dead-lettered, never a second lake row.
func TestThreat_OwnerPlantsACopyPastTheIndex_DeadLetteredNeverAppliedTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDeployment(t)
	d.workload(t, 1)
	drained := d.outboxRow(t, d.a, journal.TargetBronzeEvents, journal.OpAppend)
	d.drain(t)
	d.workload(t, 2)
	pendingMat := d.outboxRow(t, d.a, journal.TargetSilverClaims, journal.OpMaterialize)
	_, err := d.owner.Exec(ctx, `DROP INDEX oml.outbox_implied_once`)
	require.NoError(t, err)
	var copies []int64
	for _, seq := range []int64{drained, pendingMat} {
		var c int64
		require.NoError(t, d.owner.QueryRow(ctx, copyRow+` RETURNING seq`, seq).Scan(&c))
		copies = append(copies, c)
	}
	sum := d.drain(t)
	require.ElementsMatch(t, copies, sum.DeadLettered, "both copies dead-lettered, nothing else")
	rec := d.reconcile(t)
	require.Zero(t, rec.Counts[reconcile.DuplicateInLake], "no row is in the lake twice: %+v", rec.Findings)
	var classes []reconcile.Class
	for _, f := range rec.Findings {
		classes = append(classes, f.Class)
	}
	require.Equal(t, []reconcile.Class{reconcile.DeadLettered, reconcile.DeadLettered}, classes, "%+v", rec.Findings)
	d.requireClean(t)
}

// Event types by role through oml.append_journal. Each append is one event
// at a gap (head+2): a type the role may journal gets past the rights check
// and is refused by the chain check (journal_extends_chain, 23514); a type
// it may not is refused first (permission denied, 42501). Then the same
// event well linked (head+1): accepted or refused by the rights alone.
// Nothing is kept either way (each append is rolled back). The owner's own appends of these types are exercised
// by the packages that make them (tenant, keyring, deadletter, recovery).
func TestThreat_AppendJournalEventTypesByRole(t *testing.T) {
	t.Parallel()
	d := newDeployment(t)
	d.workload(t, 1)
	const appendType = `SELECT oml.append_journal($1, 'k', ARRAY[$2::bigint], ARRAY[$3::bytea], ARRAY[sha256(random()::text::bytea)],
		ARRAY[decode(repeat('ab', 64), 'hex')], ARRAY[$5::text], ARRAY['{}'::bytea], ARRAY[$4::timestamptz])`
	appTypes := map[journal.Type]bool{journal.TypeClaimSubmitted: true, journal.TypeClaimPromoted: true,
		journal.TypeClaimDemoted: true, journal.TypeClaimErased: true, journal.TypeClaimReassigned: true,
		journal.TypeSimulationEnded: true}
	// Every catalogued type, and one the catalog does not have yet: a type
	// a later release adds is the owner's until a migration grants it.
	types := append(append([]journal.Type(nil), journal.Types...), "lake.repaired")
	for _, c := range []struct {
		role    string
		on      uuid.UUID
		allowed func(journal.Type) bool
	}{
		{"oml_app", d.a, func(t journal.Type) bool { return appTypes[t] }},
		{"oml_app", uuid.Nil, func(journal.Type) bool { return false }}, // never the provider chain
		{"oml_lakewriter", d.a, func(t journal.Type) bool { return t == journal.TypeMaterializeSkipped }},
		{"oml_lakewriter", uuid.Nil, func(t journal.Type) bool { return t == journal.TypeMaterializeSkipped }},
	} {
		pool := d.app
		if c.role == "oml_lakewriter" {
			pool = d.lakewriter
		}
		seq, hash, at := d.head(t, c.on)
		chainName := "tenant"
		if c.on == uuid.Nil {
			chainName = "provider"
		}
		for _, typ := range types {
			want, outcome := denied, "refused"
			if c.allowed(typ) {
				want, outcome = offChain, "allowed"
			}
			t.Run(c.role+"/"+chainName+"/"+string(typ)+"/"+outcome, func(t *testing.T) {
				requireCode(t, want, as(t, pool, c.on, appendType, c.on, seq+2, hash, at, string(typ)), string(typ))
				// The same event well linked (head+1, rolled back): the
				// rights alone decide, on append_journal's fast path
				// (append_fast_path) as on its full checks.
				err := as(t, pool, c.on, appendType, c.on, seq+1, hash, at, string(typ))
				if c.allowed(typ) {
					require.NoError(t, err, "%s well linked", typ)
				} else {
					requireCode(t, denied, err, string(typ)+" well linked")
				}
			})
		}
		// A batch that hides one refused event among allowed ones.
		if c.role == "oml_app" && c.on != uuid.Nil {
			t.Run(c.role+"/a_batch_with_one_provider_event/refused", func(t *testing.T) {
				requireCode(t, denied, as(t, pool, c.on, `SELECT oml.append_journal($1, 'k', ARRAY[$2::bigint, $2::bigint + 1],
					ARRAY[$3::bytea, sha256('one')], ARRAY[sha256('one'), sha256('two')],
					ARRAY[decode(repeat('ab', 64), 'hex'), decode(repeat('ab', 64), 'hex')], ARRAY['claim.submitted', 'key.issued'],
					ARRAY['{}'::bytea, '{}'::bytea], ARRAY[$4::timestamptz, $4::timestamptz])`, c.on, seq+1, hash, at), "batch")
			})
		}
	}
	// The lake writer's real use of the provider chain: a ghost tenant's row
	// (planted behind the triggers by the superuser, the test's instrument)
	// is dead-lettered with a materialize.skipped on the provider chain,
	// appended as oml_lakewriter.
	ctx := context.Background()
	provider, _, _ := d.head(t, uuid.Nil)
	var ghostRow int64
	require.NoError(t, pgx.BeginFunc(ctx, d.su, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SET LOCAL session_replication_role = replica; SELECT pg_current_xact_id()`); err != nil {
			return err
		}
		return tx.QueryRow(ctx, `INSERT INTO oml.outbox (xid, tenant_id, journal_seq, target, op, payload)
			VALUES (pg_current_xact_id(), $1, 1, 'bronze.events', 'append', '{"event_type":"tenant.genesis"}') RETURNING seq`,
			uuid.New()).Scan(&ghostRow)
	}))
	d.workload(t, 2)
	sum := d.drain(t)
	require.Equal(t, []int64{ghostRow}, sum.DeadLettered)
	var skipped string
	require.NoError(t, d.su.QueryRow(ctx, `SELECT event_type FROM oml.journal WHERE tenant_id = $1 AND seq = $2`,
		uuid.Nil, provider+1).Scan(&skipped))
	require.Equal(t, string(journal.TypeMaterializeSkipped), skipped, "the lake writer journalled the skip on the provider chain")
	d.requireClean(t)
}

// The one legitimate copy: the owner re-enqueues a dead letter (oml
// deadletter reenqueue, as the non-superuser owner login). Its copy names
// the dead-lettered row in copy_of and is accepted once; the application
// cannot copy the dead-lettered row itself, and a second copy of the same
// dead letter is refused even to the owner.
func TestThreat_ReenqueueAsOwner_TheOneCopyAllowed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := newDeployment(t)
	d.workload(t, 1)
	dl := d.poisoned(t)
	id, orig := dl.id, dl.outboxSeq

	requireCode(t, duplicated, as(t, d.app, dl.tenant, copyRow, orig), "the app copies the dead-lettered row")
	res, err := deadletter.Reenqueue(ctx, d.owner, d.key, []int64{id}, deadletter.Options{By: "operator"})
	require.NoError(t, err)
	require.Len(t, res, 1)
	require.Equal(t, deadletter.OutcomeReenqueued, res[0].Outcome, "%+v", res[0])
	var copyOf int64
	require.NoError(t, d.su.QueryRow(ctx, `SELECT copy_of FROM oml.outbox WHERE seq = $1`, res[0].NewOutboxSeq).Scan(&copyOf))
	require.Equal(t, orig, copyOf, "the copy names the dead-lettered row")
	requireCode(t, duplicated, as(t, d.owner, dl.tenant, `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload, copy_of)
		SELECT tenant_id, journal_seq, target, op, artifact_id, version, payload, copy_of FROM oml.outbox WHERE seq = $1`, res[0].NewOutboxSeq),
		"a second copy of the same dead letter")
	requireCode(t, noEvent, as(t, d.owner, dl.tenant, `INSERT INTO oml.outbox (tenant_id, journal_seq, target, op, artifact_id, version, payload, copy_of)
		SELECT tenant_id, journal_seq, target, op, artifact_id, version, payload, seq FROM oml.outbox WHERE seq = $1`, res[0].NewOutboxSeq),
		"a copy naming a row that is not dead-lettered")
	d.drain(t)
	rec := d.reconcile(t)
	require.Zero(t, rec.Counts[reconcile.DuplicateInLake], "%+v", rec.Findings)
	d.requireClean(t)
}
