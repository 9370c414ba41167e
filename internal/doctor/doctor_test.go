package doctor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/witness"
)

// witnessAll publishes every tenant's current head to the lake, as
// `oml chain witness` does.
func (b *bundle) witnessAll(t testing.TB) {
	t.Helper()
	ctx := context.Background()
	heads, err := witness.Capture(ctx, b.pool, nil, time.Now())
	require.NoError(t, err)
	for _, h := range heads {
		require.NoError(t, h.Sign(b.key))
		_, err := witness.Publish(ctx, b.lake, h)
		require.NoError(t, err)
	}
}

// tamper edits the journal behind the application's back (as the owner,
// with the append-only triggers off), as an attacker or a bad restore would.
func (b *bundle) tamper(t testing.TB, sql ...string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `ALTER TABLE oml.journal DISABLE TRIGGER USER`); err != nil {
			return err
		}
		for _, s := range sql {
			if _, err := tx.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
		}
		_, err := tx.Exec(ctx, `ALTER TABLE oml.journal ENABLE TRIGGER USER`)
		return err
	}))
}

func TestDoctor_HealthySystem_EveryCheckOK(t *testing.T) {
	t.Parallel()
	b := setup(t, 3)
	b.load(t, 20, 0, 7)
	b.drain(t, nil)
	b.witnessAll(t)

	rep := b.doctor(t, nil)
	require.Equal(t, doctor.Checks(), ids(rep))
	for _, c := range rep.Checks {
		want := doctor.StatusOK
		switch c.ID {
		case doctor.IDReconcile:
			want = doctor.StatusSkipped
			require.Contains(t, c.Summary, "--deep")
		case doctor.IDReplication:
			// The test cluster is a single node: below the production
			// profile, which is a warning (and only that).
			want = doctor.StatusWarn
			require.Contains(t, c.Summary, "single node")
		}
		require.Equalf(t, want, c.Status, "%s: %s %v", c.ID, c.Summary, c.Details)
		require.Equal(t, "docs/runbooks/"+c.ID+".md", c.Runbook)
		require.NotEmpty(t, c.Summary)
	}
	require.Equal(t, doctor.StatusWarn, rep.Status)
	require.False(t, rep.Failed(false))

	require.Contains(t, check(t, rep, doctor.IDDatabase).Summary, "(current)")
	require.Equal(t, true, check(t, rep, doctor.IDLake).Data["put_if_absent"])
	require.EqualValues(t, 0, check(t, rep, doctor.IDLag).Data["backlog_rows"])
	require.Equal(t, 4, check(t, rep, doctor.IDFork).Data["tenants_witnessed"]) // 3 tenants + the provider
	delta := check(t, rep, doctor.IDDelta)
	require.Positive(t, delta.Data["tables"])

	// Chain verification is incremental: the first run stored the verified
	// heads, so a second run with nothing appended resumes every tenant
	// chain and reads only the provider chain (always verified in full: it
	// issues the keys), one key.issued and one tenant.created per tenant.
	first := check(t, rep, doctor.IDChain)
	require.Greater(t, first.Data["events_verified"], int64(4))
	rep2 := b.doctor(t, nil)
	second := requireStatus(t, rep2, doctor.IDChain, doctor.StatusOK)
	require.EqualValues(t, 1+3, second.Data["events_verified"])
	require.Equal(t, 3, second.Data["resumed"])

	// The JSON document has every check under stable field names.
	raw, err := json.Marshal(rep)
	require.NoError(t, err)
	var doc struct {
		Status string         `json:"status"`
		Counts map[string]int `json:"counts"`
		Checks []struct {
			ID, Title, Status, Summary, Runbook string
			Details                             []string
			Data                                map[string]any
			CheckedAt                           time.Time `json:"checked_at"`
			DurationSeconds                     *float64  `json:"duration_seconds"`
		} `json:"checks"`
	}
	require.NoError(t, json.Unmarshal(raw, &doc))
	require.Equal(t, "warn", doc.Status) // replication: a single node
	require.Len(t, doc.Checks, len(doctor.Checks()))
	for _, c := range doc.Checks {
		require.NotEmpty(t, c.ID)
		require.NotNil(t, c.Details)
		require.NotNil(t, c.Data)
		require.NotNil(t, c.DurationSeconds)
	}
}

func ids(rep doctor.Report) []string {
	var out []string
	for _, c := range rep.Checks {
		out = append(out, c.ID)
	}
	return out
}

func TestDoctor_OnARealS3Server_HealthyThenWithoutPutIfAbsent(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.lake = s3test.NewBucket(t, nil).Store
	b.load(t, 10, 0, 9)
	b.drain(t, nil)
	b.witnessAll(t)
	rep := b.doctor(t, nil)
	for _, c := range rep.Checks {
		if c.ID != doctor.IDReconcile && c.ID != doctor.IDReplication { // replication: a single node warns
			require.Equalf(t, doctor.StatusOK, c.Status, "%s: %s %v", c.ID, c.Summary, c.Details)
		}
	}
	require.Contains(t, check(t, rep, doctor.IDLake).Summary, "s3://")
	require.Positive(t, check(t, rep, doctor.IDDelta).Data["tables"])

	// The same bucket behind a gateway that ignores If-None-Match.
	b.lake = notConditional{b.lake}
	c := requireStatus(t, b.doctor(t, nil), doctor.IDLake, doctor.StatusFail)
	require.Contains(t, c.Summary, "does not honor put-if-absent")
}

func TestDoctor_DatabaseUnreachable_FailsItAndSkipsItsDependents(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.load(t, 10, 0, 3)
	b.drain(t, nil)
	healthy := requireStatus(t, b.doctor(t, nil), doctor.IDDelta, doctor.StatusOK)
	opts := b.options(nil)
	opts.DB = func(context.Context) (*pgxpool.Pool, error) {
		return nil, errors.New("cannot reach the database at postgres://oml@db:5432/oml: connection refused")
	}
	rep := doctor.Run(context.Background(), opts)
	db := requireStatus(t, rep, doctor.IDDatabase, doctor.StatusFail)
	require.Contains(t, db.Summary, "connection refused")
	requireStatus(t, rep, doctor.IDLake, doctor.StatusOK) // the lake does not need the database
	for _, id := range []string{doctor.IDLease, doctor.IDLag, doctor.IDHorizon, doctor.IDDeadLetters, doctor.IDFork, doctor.IDChain} {
		c := requireStatus(t, rep, id, doctor.StatusSkipped)
		require.Contains(t, c.Summary, "the database check failed (see its row)")
		require.NotContains(t, c.Summary, "connection refused", "the connection error is said once, in the database row")
	}
	// The Delta check reads table logs: it runs on the reachable lake,
	// finding the tables by listing it, and says it degraded.
	delta := requireStatus(t, rep, doctor.IDDelta, doctor.StatusOK)
	require.Equal(t, true, delta.Data["degraded"])
	require.Positive(t, healthy.Data["tables"])
	require.Equal(t, healthy.Data["tables"], delta.Data["tables"], "the lake listing finds every table the database names")
	require.Contains(t, strings.Join(delta.Details, "\n"), "the database is unreachable")
	require.Equal(t, doctor.StatusFail, rep.Status)
	require.True(t, rep.Failed(false))
}

func TestDoctor_SchemaNotMigrated_NamesThePendingMigrations(t *testing.T) {
	t.Parallel()
	pool := testdb.New(t, testdb.Empty()).Pool(t)
	rep := doctor.Run(context.Background(), doctor.Options{
		DB: func(context.Context) (*pgxpool.Pool, error) { return pool, nil }, Timeout: time.Minute,
	})
	db := requireStatus(t, rep, doctor.IDDatabase, doctor.StatusFail)
	require.Contains(t, db.Summary, "pending")
	require.Contains(t, db.Summary, "001_")
	require.Contains(t, db.Summary, "run oml init", "a fresh database wants init, not migrate alone")
	require.NotEmpty(t, db.Data["pending_migrations"])
	c := requireStatus(t, rep, doctor.IDLag, doctor.StatusSkipped)
	require.Contains(t, c.Summary, "pending")
	// No lake configured: the lake checks say so instead of failing.
	for _, id := range []string{doctor.IDLake} {
		c := requireStatus(t, rep, id, doctor.StatusSkipped)
		require.Contains(t, c.Summary, "no lake configured")
	}
}

func TestDoctor_NoLakeConfigured_SkipsTheLakeChecksWithTheReason(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	opts := b.options(nil)
	opts.Lake = nil
	rep := doctor.Run(context.Background(), opts)
	for _, id := range []string{doctor.IDLake, doctor.IDFork, doctor.IDDelta} {
		c := requireStatus(t, rep, id, doctor.StatusSkipped)
		require.Contains(t, c.Summary, "OML_LAKE_URL")
	}
	requireStatus(t, rep, doctor.IDChain, doctor.StatusOK)
	requireStatus(t, rep, doctor.IDReplication, doctor.StatusWarn) // a single node
	require.Equal(t, doctor.StatusWarn, rep.Status)
}

func TestDoctor_StoreWithoutPutIfAbsent_FailsTheLakeCheck(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.lake = notConditional{b.lake}
	rep := b.doctor(t, nil)
	c := requireStatus(t, rep, doctor.IDLake, doctor.StatusFail)
	require.Contains(t, c.Summary, "does not honor put-if-absent")
	require.Equal(t, false, c.Data["put_if_absent"])
	require.True(t, rep.Failed(false))
}

func TestDoctor_LakeThatHangs_FailsTheLakeCheckWithinItsTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.lake = store.NewFaulty(b.lake, store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent}, Kind: store.FaultTimeout})
	opts := b.options(nil)
	opts.Timeout = 300 * time.Millisecond
	rep := doctor.Run(context.Background(), opts)
	c := requireStatus(t, rep, doctor.IDLake, doctor.StatusFail)
	require.True(t, strings.Contains(c.Summary, "did not finish within") || strings.Contains(c.Summary, "cannot write a scratch object"), c.Summary)
}

func TestDoctor_DrainStopped_LagAndLeaseGradeAgainstThresholds(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.load(t, 15, 0, 7)
	// Nobody drains. With the default thresholds fresh rows are fine.
	rep := b.doctor(t, nil)
	lag := requireStatus(t, rep, doctor.IDLag, doctor.StatusOK)
	rows := lag.Data["backlog_rows"].(int64)
	require.Positive(t, rows)
	require.Positive(t, lag.Data["backlog_seq_gap"])
	require.Positive(t, lag.Data["lag_seconds"])
	require.Contains(t, lag.Summary, "row(s) behind")
	requireStatus(t, rep, doctor.IDLease, doctor.StatusOK)

	// Seconds: any age warns.
	rep = b.doctor(t, func(th *doctor.Thresholds) { th.LagWarn = time.Nanosecond })
	requireStatus(t, rep, doctor.IDLag, doctor.StatusWarn)
	// Rows: the backlog reaches the fail threshold.
	rep = b.doctor(t, func(th *doctor.Thresholds) { th.BacklogWarn, th.BacklogFail = 1, rows })
	requireStatus(t, rep, doctor.IDLag, doctor.StatusFail)
	// Seq: the gap reaches the warn threshold.
	gap := lag.Data["backlog_seq_gap"].(int64)
	rep = b.doctor(t, func(th *doctor.Thresholds) { th.SeqGapWarn = gap })
	requireStatus(t, rep, doctor.IDLag, doctor.StatusWarn)

	// No writer while rows wait: the lease check grades how long.
	rep = b.doctor(t, func(th *doctor.Thresholds) { th.WriterDownWarn = time.Nanosecond })
	c := requireStatus(t, rep, doctor.IDLease, doctor.StatusWarn)
	require.Contains(t, c.Summary, "with no writer")
	rep = b.doctor(t, func(th *doctor.Thresholds) { th.WriterDownWarn, th.WriterDownFail = time.Nanosecond, time.Nanosecond })
	requireStatus(t, rep, doctor.IDLease, doctor.StatusFail)

	// Drained: all quiet again, even at the strictest thresholds.
	b.drain(t, nil)
	rep = b.doctor(t, func(th *doctor.Thresholds) {
		th.LagWarn, th.BacklogWarn, th.SeqGapWarn, th.WriterDownWarn = time.Nanosecond, 1, 1, time.Nanosecond
	})
	requireStatus(t, rep, doctor.IDLag, doctor.StatusOK)
	requireStatus(t, rep, doctor.IDLease, doctor.StatusOK)
}

func TestDoctor_Lease_LiveHolderOKExpiredHolderFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 1)
	b.load(t, 5, 0, 7)
	_, err := b.pool.Exec(ctx, `INSERT INTO oml.lake_lease (name, holder, host, pid, acquired_at, heartbeat_at, expires_at)
VALUES ($1, 'drain-1', 'lake-host', 4242, now() - interval '1 hour', now(), now() + interval '30 seconds')`, lakewriter.LeaseName)
	require.NoError(t, err)
	rep := b.doctor(t, func(th *doctor.Thresholds) { th.WriterDownWarn, th.WriterDownFail = time.Nanosecond, time.Nanosecond })
	c := requireStatus(t, rep, doctor.IDLease, doctor.StatusOK)
	require.Contains(t, c.Summary, "drain-1")
	require.Contains(t, c.Summary, "alive")
	require.Equal(t, true, c.Data["lease_live"])

	_, err = b.pool.Exec(ctx, `UPDATE oml.lake_lease SET heartbeat_at = now() - interval '20 minutes', expires_at = now() - interval '19 minutes'`)
	require.NoError(t, err)
	// The holder stopped renewing 19 minutes ago (it crashed: a clean stop
	// deletes the lease): past the 15-minute default, whatever waits.
	rep = b.doctor(t, nil)
	c = requireStatus(t, rep, doctor.IDLease, doctor.StatusFail)
	require.Contains(t, c.Summary, "expired")
	require.Contains(t, c.Summary, "drain-1")
}

func TestDoctor_HorizonHeldByAnOpenTransaction_NamesTheBackend(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.load(t, 3, 0, 7)
	b.drain(t, nil)
	pid := holdHorizon(t, b)

	rep := b.doctor(t, func(th *doctor.Thresholds) { th.HorizonWarn = time.Nanosecond })
	c := requireStatus(t, rep, doctor.IDHorizon, doctor.StatusWarn)
	require.Equal(t, true, c.Data["horizon_held"])
	require.Contains(t, strings.Join(c.Details, "\n"), fmt.Sprintf("pid %d", pid))
	require.Contains(t, strings.Join(c.Details, "\n"), `"horizon-holder"`)
	require.Contains(t, c.Summary, "hold the horizon")

	rep = b.doctor(t, func(th *doctor.Thresholds) { th.HorizonWarn, th.HorizonFail = time.Nanosecond, time.Nanosecond })
	requireStatus(t, rep, doctor.IDHorizon, doctor.StatusFail)
}

func TestDoctor_DeadLetters_CountAndOldest(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	res := b.load(t, 30, 2, 7)
	require.NotEmpty(t, res.Poison)
	b.drain(t, nil)

	rep := b.doctor(t, nil)
	c := requireStatus(t, rep, doctor.IDDeadLetters, doctor.StatusWarn)
	require.EqualValues(t, len(res.Poison), c.Data["count"])
	require.NotNil(t, c.Data["oldest_at"])
	require.Contains(t, c.Summary, "oldest")
	require.Equal(t, doctor.StatusWarn, rep.Status)
	require.False(t, rep.Failed(false))
	require.True(t, rep.Failed(true))

	rep = b.doctor(t, func(th *doctor.Thresholds) { th.DeadLettersFail = 1 })
	requireStatus(t, rep, doctor.IDDeadLetters, doctor.StatusFail)
}

func TestDoctor_ForkedHead_FailsForkAndChainChecks(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.load(t, 10, 0, 7)
	b.witnessAll(t)
	requireStatus(t, b.doctor(t, nil), doctor.IDFork, doctor.StatusOK)

	// A restore from an older backup: the tenant lost its last events and
	// its head was rewound to match.
	id := b.tenants[1]
	b.tamper(t,
		fmt.Sprintf(`DELETE FROM oml.journal WHERE tenant_id = '%s' AND seq > 3`, id),
		fmt.Sprintf(`UPDATE oml.chain_heads h SET seq = j.seq, hash = j.hash FROM oml.journal j
WHERE h.tenant_id = '%[1]s' AND j.tenant_id = '%[1]s' AND j.seq = 3`, id))
	rep := b.doctor(t, nil)
	c := requireStatus(t, rep, doctor.IDFork, doctor.StatusFail)
	require.Contains(t, strings.Join(c.Details, "\n"), "tenant-01")
	require.Contains(t, strings.Join(c.Details, "\n"), "tail-lost")
	// The incremental chain check resumes from the checkpoint the first
	// run stored, which the journal no longer reaches.
	requireStatus(t, rep, doctor.IDChain, doctor.StatusFail)
}

func TestDoctor_TamperedEventAfterTheLastVerifiedHead_FailsTheChainCheck(t *testing.T) {
	t.Parallel()
	b := setup(t, 2)
	b.load(t, 5, 0, 1)
	first := requireStatus(t, b.doctor(t, nil), doctor.IDChain, doctor.StatusOK)
	before := first.Data["events_verified"].(int64)

	// New events after the verified heads, one of them edited in place.
	b.load(t, 5, 0, 2)
	var seq int64
	require.NoError(t, b.pool.QueryRow(context.Background(),
		`SELECT max(seq) FROM oml.journal WHERE tenant_id = $1`, b.tenants[0]).Scan(&seq))
	b.tamper(t, fmt.Sprintf(`UPDATE oml.journal SET payload = payload || '\x00'::bytea WHERE tenant_id = '%s' AND seq = %d`, b.tenants[0], seq-1))

	rep := b.doctor(t, nil)
	c := requireStatus(t, rep, doctor.IDChain, doctor.StatusFail)
	require.Contains(t, strings.Join(c.Details, "\n"), "tenant-00")
	require.Less(t, c.Data["events_verified"].(int64), 2*before+10, "verification was not incremental")
}

func TestDoctor_DeltaTableFarPastItsCheckpointInterval(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.load(t, 20, 0, 7)
	// One-row batches and checkpoints switched off: every batch is a commit
	// and none is ever checkpointed (and a retract lands in a later batch
	// than its promotion, so it rewrites a silver file: a tombstone).
	b.drain(t, func(o *lakewriter.Options) {
		o.Limits.Rows = 1
		o.CheckpointInterval = 1_000_000
	})
	requireStatus(t, b.doctor(t, nil), doctor.IDDelta, doctor.StatusOK)

	rep := b.doctor(t, func(th *doctor.Thresholds) { th.CheckpointWarn, th.CheckpointFail = 2, 4 })
	c := requireStatus(t, rep, doctor.IDDelta, doctor.StatusFail)
	require.Contains(t, c.Summary, "need maintenance")
	require.Contains(t, strings.Join(c.Details, "\n"), "commits since the last checkpoint")
	require.Contains(t, strings.Join(c.Details, "\n"), b.tenants[0].String()+"/bronze/events")
	require.GreaterOrEqual(t, c.Data["max_commits_since_checkpoint"].(int64), int64(4))

	// Many small files warn (optimize is due) but never fail.
	rep = b.doctor(t, func(th *doctor.Thresholds) { th.SmallFilesWarn = 2 })
	c = requireStatus(t, rep, doctor.IDDelta, doctor.StatusWarn)
	require.Contains(t, strings.Join(c.Details, "\n"), "oml lake optimize")

	// Retracts rewrote silver files; their removes are tombstones. Eight
	// days later they are past the default 7-day retention: vacuum is due.
	now := requireStatus(t, b.doctor(t, nil), doctor.IDDelta, doctor.StatusOK)
	tomb := now.Data["tombstoned_bytes"].(int64)
	require.Positive(t, tomb, "the workload's retracts should have removed files")
	require.Zero(t, now.Data["vacuum_due_bytes"])
	opts := b.options(func(th *doctor.Thresholds) { th.VacuumWarn = 1 })
	opts.Now = func() time.Time { return time.Now().Add(8 * 24 * time.Hour) }
	c = requireStatus(t, doctor.Run(context.Background(), opts), doctor.IDDelta, doctor.StatusWarn)
	require.Equal(t, tomb, c.Data["vacuum_due_bytes"])
	require.Contains(t, strings.Join(c.Details, "\n"), "oml lake vacuum")
}

func TestThresholds_Validate(t *testing.T) {
	t.Parallel()
	th := doctor.DefaultThresholds()
	require.NoError(t, th.Validate())
	th.LagFail = th.LagWarn - 1
	require.ErrorContains(t, th.Validate(), "--lag-warn/--lag-fail")
	th = doctor.DefaultThresholds()
	th.DeadLettersFail = 0
	require.Error(t, th.Validate())
}

func TestDoctor_Deep_ReconcileHealthyDeadLetteredAndLostFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, 20, 0, 5)
	b.drain(t, nil)
	opts := b.options(nil)
	opts.Deep = true
	c := requireStatus(t, doctor.Run(ctx, opts), doctor.IDReconcile, doctor.StatusOK)
	require.Contains(t, c.Summary, "matches the journal fold")
	require.Positive(t, c.Data["events"])

	// Dead letters are a known gap (the dead-letters check grades them).
	res := b.load(t, 20, 1, 6)
	require.NotEmpty(t, res.Poison)
	b.drain(t, nil)
	c = requireStatus(t, doctor.Run(ctx, opts), doctor.IDReconcile, doctor.StatusWarn)
	require.Contains(t, c.Summary, "dead-lettered")

	// A tenant's bronze data files vanish from the store: the lake no
	// longer holds what the journal says it does.
	st, err := store.Sub(b.lake, b.tenants[1].String()+"/bronze/events")
	require.NoError(t, err)
	snap, err := delta.Load(ctx, st)
	require.NoError(t, err)
	for _, f := range snap.Files() {
		p, err := delta.DecodePath(f.Path)
		require.NoError(t, err)
		require.NoError(t, st.Delete(ctx, p))
	}
	rep := doctor.Run(ctx, opts)
	c = requireStatus(t, rep, doctor.IDReconcile, doctor.StatusFail)
	require.Contains(t, c.Summary, "missing-in-lake")
	require.NotEmpty(t, c.Details)
	require.True(t, rep.Failed(false))
}
