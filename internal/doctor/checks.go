package doctor

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakesummary"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/outboxprune"
	"github.com/omlhq/oml/internal/reconcile"
	"github.com/omlhq/oml/internal/replication"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/witness"
)

// checkDefs is every check in report order. The database check must stay
// first: Run runs it before the others and skips them when it fails.
var checkDefs = []checkDef{
	{id: IDDatabase, title: "database reachable, schema current", run: checkDatabase},
	{id: IDLake, title: "lake reachable, put-if-absent honored", needsLake: true, run: checkLake},
	{id: IDLease, title: "lake writer alive", needsDB: true, run: checkLease},
	{id: IDLag, title: "frontier lag", needsDB: true, run: checkLag},
	{id: IDHorizon, title: "snapshot horizon", needsDB: true, run: checkHorizon},
	{id: IDDeadLetters, title: "dead letters", needsDB: true, run: checkDeadLetters},
	{id: IDOutbox, title: "outbox size and rows waiting to be pruned", needsDB: true, needsLake: true, run: checkOutbox},
	{id: IDContinuity, title: "lake and database share their history", needsDB: true, needsLake: true, run: checkContinuity},
	{id: IDReplication, title: "replication and durability profile", needsDB: true, run: checkReplication},
	{id: IDFork, title: "fork check against witnessed heads", needsDB: true, needsLake: true, run: checkFork},
	{id: IDChain, title: "chain verification (incremental)", needsDB: true, run: checkChain},
	{id: IDDelta, title: "Delta table health", needsLake: true, run: checkDelta}, // degrades without the database
	{id: IDReconcile, title: "reconcile lake against journal", needsDB: true, needsLake: true, deep: true, run: checkReconcile},
}

// ---- database ----

func checkDatabase(ctx context.Context, r *run, res *Result) {
	start := time.Now()
	pool, err := r.opts.DB(ctx)
	if err != nil {
		if strings.HasPrefix(err.Error(), "cannot reach the database") {
			res.fail("%v", err) // pgconn's sentence already says so
		} else {
			res.fail("cannot reach the database: %v", err)
		}
		return
	}
	r.pool = pool
	var version string
	if err := pool.QueryRow(ctx, `SHOW server_version`).Scan(&version); err != nil {
		res.fail("the database does not answer queries: %v", err)
		return
	}
	res.Data["latency_seconds"] = time.Since(start).Seconds()
	res.Data["server_version"] = version
	pending, err := schema.Pending(ctx, pool)
	if err != nil {
		res.fail("the schema cannot be used: %v", err)
		return
	}
	names := make([]string, 0, len(pending))
	for _, m := range pending {
		names = append(names, fmt.Sprintf("%03d_%s", m.Version, m.Name))
	}
	res.Data["schema_latest"] = schema.Latest()
	res.Data["schema_version"] = schema.Latest() - len(pending)
	res.Data["pending_migrations"] = names
	if len(pending) > 0 {
		next := "oml migrate"
		if len(pending) == schema.Latest() {
			next = "oml init (schema and deployment genesis)" // a fresh database
		}
		res.fail("%d migration(s) pending: %s; run %s", len(pending), strings.Join(names, ", "), next)
		for _, n := range names {
			res.detail("pending migration %s", n)
		}
		return
	}
	res.Summary = fmt.Sprintf("PostgreSQL %s reachable, schema at version %d (current)", version, schema.Latest())
}

// ---- lake ----

func checkLake(ctx context.Context, r *run, res *Result) {
	res.Data["lake"] = r.lake.String()
	// The probe writes, and a write creates a missing file lake's tree:
	// doctor must never bring a mistyped --lake into existence. Whether a
	// missing lake is a problem depends on the frontier (the delta check).
	if missing, err := store.RootMissing(r.lake); err != nil || missing {
		res.Data["put_if_absent"] = nil
		if err != nil {
			res.fail("cannot look at the lake root of %s: %v", r.lake, err)
			return
		}
		res.Status = StatusWarn
		res.Summary = fmt.Sprintf("%s does not exist: not probed (doctor only reads); the first oml lake drain creates it — if rows were drained already, --lake names the wrong lake", r.lake)
		return
	}
	start := time.Now()
	err := store.Probe(ctx, r.lake)
	res.Data["probe_seconds"] = time.Since(start).Seconds()
	res.Data["put_if_absent"] = err == nil
	switch {
	case errors.Is(err, store.ErrUnsupported):
		res.fail("%s does not honor put-if-absent: two lake writers could overwrite each other's commits", r.lake)
		res.detail("%v", err)
	case err != nil:
		res.fail("cannot write a scratch object to %s: %v", r.lake, err)
	default:
		res.Summary = fmt.Sprintf("%s reachable; put-if-absent honored (probe under %s)", r.lake, store.ProbePrefix)
	}
}

// ---- lake writer status (shared by lease, lag, horizon, dead letters) ----

type lakeStatus struct {
	lakewriter.Status
	readAt time.Time
}

// lakeWriterStatus reads lakewriter.ReadStatus once per run: the four checks
// built on it must see one consistent reading, and the fence it takes
// costs a transaction id.
func (r *run) lakeWriterStatus(ctx context.Context) (*lakeStatus, error) {
	r.statusOnce.Do(func() {
		// Not the first caller's context: its timeout would fail the others.
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.opts.Timeout)
		defer cancel()
		st, err := lakewriter.ReadStatus(sctx, r.pool, lakewriter.StatusOptions{})
		if err != nil {
			r.statusErr = err
			return
		}
		r.status = &lakeStatus{Status: st, readAt: r.now()}
	})
	return r.status, r.statusErr
}

func checkLease(ctx context.Context, r *run, res *Result) {
	st, err := r.lakeWriterStatus(ctx)
	if err != nil {
		res.fail("cannot read the lake writer's state: %v", err)
		return
	}
	now := st.readAt
	res.Data["backlog_rows"] = st.BacklogRows
	res.Data["lease_live"] = st.LeaseLive
	if st.Lease != nil {
		l := st.Lease
		res.Data["holder"] = l.Holder
		res.Data["host"] = l.Host
		res.Data["pid"] = l.PID
		res.Data["heartbeat_at"] = l.HeartbeatAt
		res.Data["expires_at"] = l.ExpiresAt
		res.detail("lease holder %s on %s, pid %d, since %s", l.Holder, l.Host, l.PID, l.AcquiredAt.UTC().Format(time.RFC3339))
		res.detail("last heartbeat %s (%s ago), expires %s", l.HeartbeatAt.UTC().Format(time.RFC3339), ago(now, l.HeartbeatAt), l.ExpiresAt.UTC().Format(time.RFC3339))
	}
	if st.LeaseLive {
		res.Summary = fmt.Sprintf("lake writer %s on %s (pid %d) alive, heartbeat %s ago", st.Lease.Holder, st.Lease.Host, st.Lease.PID, ago(now, st.Lease.HeartbeatAt))
		res.Data["writer_down_seconds"] = 0.0
		return
	}
	// An expired lease means the writer died without letting go (a clean
	// stop deletes it): graded by how long ago, whatever is waiting, since
	// nothing new will reach the lake until a writer runs again.
	if st.Lease != nil {
		downFor := now.Sub(st.Lease.ExpiresAt)
		res.Data["writer_down_seconds"] = downFor.Seconds()
		res.Status = grade(downFor, r.th.WriterDownWarn, r.th.WriterDownFail)
		res.Summary = fmt.Sprintf("the lease of %s on %s (pid %d) expired %s ago: the writer stopped without releasing it (warn %s, fail %s); %d row(s) waiting",
			st.Lease.Holder, st.Lease.Host, st.Lease.PID, ago(now, st.Lease.ExpiresAt), r.th.WriterDownWarn, r.th.WriterDownFail, st.BacklogRows)
		if res.Status != StatusOK {
			res.detail("start the lake writer again (systemd unit, or oml lake drain); look at its logs for why it stopped")
		}
		return
	}
	// No lease at all: normal between cron runs of `oml lake drain --once`
	// and harmless while nothing waits. It matters while rows wait, for as
	// long as they have waited with nobody draining them.
	what := "no lake writer has ever advanced the frontier"
	down := st.LagSeconds
	if !st.FrontierAt.IsZero() {
		what = fmt.Sprintf("no lake writer holds the lease; the frontier last moved %s ago", ago(now, st.FrontierAt))
		down = min(down, now.Sub(st.FrontierAt).Seconds())
	}
	if st.BacklogRows == 0 {
		res.Summary = what + "; nothing is waiting to be drained"
		res.Data["writer_down_seconds"] = 0.0
		return
	}
	downFor := time.Duration(down * float64(time.Second))
	res.Data["writer_down_seconds"] = down
	res.Status = grade(downFor, r.th.WriterDownWarn, r.th.WriterDownFail)
	res.Summary = fmt.Sprintf("%s; %d row(s) have waited %s with no writer (warn %s, fail %s)",
		what, st.BacklogRows, ago(now, now.Add(-downFor)), r.th.WriterDownWarn, r.th.WriterDownFail)
	if res.Status != StatusOK {
		res.detail("start the lake writer (systemd unit, or oml lake drain --once from cron) and watch the lag check fall")
	}
}

func checkLag(ctx context.Context, r *run, res *Result) {
	st, err := r.lakeWriterStatus(ctx)
	if err != nil {
		res.fail("cannot read the frontier and backlog: %v", err)
		return
	}
	lag := time.Duration(st.LagSeconds * float64(time.Second))
	res.Data["frontier"] = st.Frontier
	res.Data["last_seq"] = st.LastSeq
	res.Data["stable_seq"] = st.StableSeq
	res.Data["backlog_rows"] = st.BacklogRows
	res.Data["backlog_seq_gap"] = st.BacklogSeqGap
	res.Data["lag_seconds"] = st.LagSeconds
	// The outbox's size on disk (table, indexes, TOAST) and the planner's
	// row estimate: cheap at any size, for the outbox-growth alert.
	var outboxBytes int64
	var outboxRows float64
	if err := r.pool.QueryRow(ctx, `SELECT pg_total_relation_size('oml.outbox'), greatest(reltuples, 0)::float8
  FROM pg_class WHERE oid = 'oml.outbox'::regclass`).Scan(&outboxBytes, &outboxRows); err == nil {
		res.Data["outbox_bytes"] = outboxBytes
		res.Data["outbox_rows_estimate"] = int64(outboxRows)
	}
	res.Status = grade(lag, r.th.LagWarn, r.th.LagFail)
	res.raise(grade(st.BacklogRows, r.th.BacklogWarn, r.th.BacklogFail))
	if st.BacklogRows > 0 { // a gap of rolled-back seqs alone is not lag
		res.raise(grade(st.BacklogSeqGap, r.th.SeqGapWarn, r.th.SeqGapFail))
	}
	if st.BacklogRows == 0 {
		res.Summary = fmt.Sprintf("caught up: frontier %d, nothing waiting", st.Frontier)
	} else {
		res.Summary = fmt.Sprintf("%d row(s) behind (seq gap %d), oldest waiting %s", st.BacklogRows, st.BacklogSeqGap, lag.Round(time.Millisecond))
	}
	res.detail("frontier %d (updated %s), outbox last seq %d, stable seq %d", st.Frontier, stamp(st.FrontierAt), st.LastSeq, st.StableSeq)
	res.detail("thresholds: lag warn %s / fail %s; backlog warn %d / fail %d rows; seq gap warn %d / fail %d",
		r.th.LagWarn, r.th.LagFail, r.th.BacklogWarn, r.th.BacklogFail, r.th.SeqGapWarn, r.th.SeqGapFail)
	if st.HorizonHeld {
		res.detail("an open transaction holds the snapshot horizon: see the horizon check")
	}
	// Rows waiting and a standby behind: that is what a lake writer with
	// the default --durable-on waits for (see the replication check).
	if st.BacklogRows > 0 {
		s := st.Status // a copy: the reading is shared with the other checks
		if err := s.ReadDurability(ctx, r.pool, replication.DefaultPolicy); err == nil && s.Durability != nil && !s.Durability.Durable {
			res.detail("a lake writer with --durable-on %s is %s", s.Durability.Policy, s.Durability.Reason)
		}
	}
}

func checkHorizon(ctx context.Context, r *run, res *Result) {
	st, err := r.lakeWriterStatus(ctx)
	if err != nil {
		res.fail("cannot read the snapshot horizon: %v", err)
		return
	}
	res.Data["horizon_held"] = st.HorizonHeld
	type blk struct {
		PID         int32     `json:"pid"`
		Kind        string    `json:"kind"`
		Database    string    `json:"database"`
		User        string    `json:"user"`
		Application string    `json:"application"`
		State       string    `json:"state"`
		XactStart   time.Time `json:"xact_start"`
		QueryStart  time.Time `json:"query_start"`
		AgeSeconds  float64   `json:"age_seconds"`
		Query       string    `json:"query"`
		GID         string    `json:"gid,omitempty"`
	}
	blockers := make([]blk, 0, len(st.Blockers))
	var oldest time.Duration
	for _, b := range st.Blockers {
		age := b.Age(st.readAt)
		oldest = max(oldest, age)
		blockers = append(blockers, blk{PID: b.PID, Kind: b.Kind, Database: b.Database, User: b.User, Application: b.Application,
			State: b.State, XactStart: b.XactStart, QueryStart: b.QueryStart, AgeSeconds: age.Seconds(), Query: b.Query, GID: b.GID})
		who := fmt.Sprintf("pid %d", b.PID)
		if b.Kind == "prepared" {
			who = fmt.Sprintf("prepared transaction %q", b.GID)
		}
		res.detail("%s, open %s (since %s), last query started %s, application %q, database %q, user %q, state %q: %s",
			who, age.Round(time.Millisecond), stamp(b.XactStart), stamp(b.QueryStart), b.Application, b.Database, b.User, b.State, oneLine(b.Query))
	}
	res.Data["blockers"] = blockers
	res.Data["oldest_seconds"] = oldest.Seconds()
	if !st.HorizonHeld || len(blockers) == 0 {
		res.Summary = "no open transaction holds the snapshot horizon"
		return
	}
	res.Status = grade(oldest, r.th.HorizonWarn, r.th.HorizonFail)
	b := blockers[0]
	for _, c := range blockers {
		if c.AgeSeconds > b.AgeSeconds {
			b = c
		}
	}
	res.Summary = fmt.Sprintf("%d open transaction(s) hold the horizon; oldest pid %d (%q) open %s (warn %s, fail %s)",
		len(blockers), b.PID, b.Application, oldest.Round(time.Millisecond), r.th.HorizonWarn, r.th.HorizonFail)
}

func checkDeadLetters(ctx context.Context, r *run, res *Result) {
	st, err := r.lakeWriterStatus(ctx)
	if err != nil {
		res.fail("cannot count dead letters: %v", err)
		return
	}
	res.Data["count"] = st.DeadLetters
	res.Data["oldest_at"] = st.OldestDeadAt
	if st.DeadLetters == 0 {
		res.Summary = "no dead letters"
		return
	}
	res.Status = StatusWarn
	if st.DeadLetters >= r.th.DeadLettersFail {
		res.Status = StatusFail
	}
	oldest := "-"
	if st.OldestDeadAt != nil {
		oldest = fmt.Sprintf("%s (%s ago)", stamp(*st.OldestDeadAt), ago(st.readAt, *st.OldestDeadAt))
	}
	res.Summary = fmt.Sprintf("%d dead letter(s), oldest %s: the lake is missing these rows until re-enqueued", st.DeadLetters, oldest)
	res.detail("list them: oml deadletter list; repair the cause, then oml deadletter reenqueue ID...")
	res.detail("fails at %d dead letters (--dead-letters-fail)", r.th.DeadLettersFail)
}

// ---- outbox ----

// checkOutbox reports the outbox's size and the oldest row every table has
// applied (what oml outbox prune would delete); it warns when that row is
// older than OutboxPrunableWarn, i.e. nobody prunes.
func checkOutbox(ctx context.Context, r *run, res *Result) {
	var bytes int64
	var rows float64
	if err := r.pool.QueryRow(ctx, `SELECT pg_total_relation_size('oml.outbox'), greatest(reltuples, 0)::float8
  FROM pg_class WHERE oid = 'oml.outbox'::regclass`).Scan(&bytes, &rows); err != nil {
		res.fail("cannot read the outbox's size: %v", err)
		return
	}
	res.Data["outbox_bytes"] = bytes
	res.Data["outbox_rows_estimate"] = int64(rows)
	size := fmt.Sprintf("about %d rows, %s on disk", int64(rows), fmt.Sprintf("%.1f MiB", float64(bytes)/(1<<20)))
	pos, err := r.positions(ctx)
	if err != nil {
		res.fail("cannot tell which rows the lake has applied: %v", err)
		return
	}
	// What is prunable is read beside the continuity comparison (the two
	// were the last part of a run at 28,000 tables, one after the other),
	// and used only when the lake shares the database's history: prune's
	// bounds mean nothing otherwise.
	type prunable struct {
		oldest *time.Time
		tables int
		err    error
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pc := make(chan prunable, 1)
	go func() {
		var p prunable
		p.oldest, p.tables, p.err = outbox.Prunable(pctx, r.pool, outboxprune.TableBounds(pos))
		pc <- p
	}()
	// The continuity check's comparison, not a second one.
	_, c, err := r.continuity(ctx)
	if err == nil {
		_, err = outboxprune.BoundsOf(pos, c)
	}
	var refused *outboxprune.RefusedError
	switch {
	case errors.As(err, &refused):
		res.Status = StatusWarn
		res.Summary = size + "; nothing can be pruned while the lake does not share the database's history (see the continuity check)"
		return
	case err != nil:
		res.fail("cannot tell which rows the lake has applied: %v", err)
		return
	}
	p := <-pc
	oldest, tables, err := p.oldest, p.tables, p.err
	if err != nil {
		res.fail("cannot find the oldest prunable row: %v", err)
		return
	}
	res.Data["prunable_tables"] = tables
	res.Data["oldest_prunable_at"] = oldest
	if oldest == nil {
		res.Summary = size + "; no row every table has applied is left"
		return
	}
	age := time.Since(*oldest)
	res.Data["oldest_prunable_age_seconds"] = age.Seconds()
	res.Summary = fmt.Sprintf("%s; the oldest row every table has applied is %s old", size, age.Round(time.Second))
	if age > r.th.OutboxPrunableWarn {
		res.Status = StatusWarn
		res.detail("run oml outbox prune --yes (as the owner), e.g. nightly from cron; see docs/outbox.md")
	}
	res.detail("warns when the oldest prunable row is older than %s (--outbox-prunable-warn)", r.th.OutboxPrunableWarn)
}

// ---- chains ----

// tenantNames maps tenant ids to names for messages (best effort).
func (r *run) tenantNames(ctx context.Context) map[string]string {
	r.namesOnce.Do(func() {
		r.names = map[string]string{}
		names, err := tenant.Names(ctx, r.pool)
		if err != nil {
			return
		}
		for id, name := range names {
			r.names[id.String()] = name
		}
	})
	return r.names
}

func (r *run) tenantLabel(ctx context.Context, id uuid.UUID) string {
	if n := r.tenantNames(ctx)[id.String()]; n != "" {
		return fmt.Sprintf("%s (%s)", n, id)
	}
	return id.String()
}

// checkContinuity: does the database still hold what the lake says it
// drained (a failover or restore that lost a tail, a wrong --lake)? The
// same check the lake writer runs before it writes, read-only.
func checkContinuity(ctx context.Context, r *run, res *Result) {
	// lakewriter.CheckLake, on the run's read of the tables.
	_, c, err := r.continuity(ctx)
	if err != nil {
		res.fail("cannot compare the lake with the database: %v", err)
		return
	}
	res.Data["state"] = c.State
	res.Data["last_agreed_seq"] = c.LastAgreedSeq
	res.Data["lake_position"] = c.LakePosition
	res.Data["lake_timeline"] = c.LakeTimeline
	res.Data["lake_system_identifier"] = c.LakeSystemIdentifier
	res.Data["database_seq"] = c.DB.LastSeq
	res.Data["database_timeline"] = c.DB.Timeline
	res.Data["database_system_identifier"] = c.DB.SystemIdentifier
	res.Data["tables"] = append([]string{}, c.Tables...)
	res.Data["anchors_checked"] = c.Anchors
	res.Data["unrecorded_tables"] = c.Unrecorded
	if !c.OK() {
		bodyLost(ctx, r, res)
		res.fail("%s", (&lakewriter.ContinuityError{C: c}).Error())
		if c.Detail != "" {
			res.detail("%s", c.Detail)
		}
		for i, t := range c.Tables {
			if i == 10 {
				res.detail("and %d more table(s)", len(c.Tables)-10)
				break
			}
			res.detail("table %s holds rows past seq %d", t, c.LastAgreedSeq)
		}
		return
	}
	res.Summary = fmt.Sprintf("the database holds what the lake drained: lake at seq %d, database outbox at seq %d (timeline %d); %d recorded batch(es) compared",
		c.LakePosition, c.DB.LastSeq, c.DB.Timeline, c.Anchors)
	bodyLost(ctx, r, res)
	if c.Unrecorded > 0 {
		res.detail("%d table(s) were last written before oml recorded continuity in commits: only their positions were compared", c.Unrecorded)
	}
}

// bodyLost counts the claims a restore-tail brought back without their
// held body (body_lost): a permanent record after a failover, shown, not
// graded.
func bodyLost(ctx context.Context, r *run, res *Result) {
	n, err := journal.CountBodyLost(ctx, r.pool)
	if err != nil {
		res.detail("cannot count the body_lost claims: %v", err)
		return
	}
	res.Data["body_lost_claims"] = n
	if n > 0 {
		res.detail("%d claim(s) are body_lost: their held body was lost in a failover (chain.tail_restored names them); they cannot be promoted: see docs/runbooks/failover.md", n)
	}
}

func checkFork(ctx context.Context, r *run, res *Result) {
	// The witnesses are checked against the provider chain's keys as the
	// chain check verified them in this run (signatures up to its
	// checkpoint not re-verified unless its scrub is due), handed over as
	// soon as its provider chain is done; only when the chain check has
	// none to give is the provider chain read here, the same fast path.
	//
	// The keys are taken on the first witness that needs one (lazyTrust):
	// listing the witnesses and loading their summary need none, and they
	// ran after the chain check's provider chain, about 0.45 s into a run
	// at 20,000 tables, so the fork check ended after the lake read.
	trust := r.lazyTrust(ctx)
	// Only the witnesses that changed since a run verified them, and the
	// scrub's share, are read and verified again (witness.NewestCached).
	fc, ws, err := chainverify.ForkCheckCached(ctx, r.pool, r.lake, r.lazyHeadReader(), trust.lookup,
		witness.CacheOptions{Now: r.now, Write: true})
	// Keys that could not be had fail the check as before, whether or
	// not a witness asked for them (then every one read as untrusted, and
	// none kept in the witness summary: the next run verifies them again).
	if _, terr := trust.get(); terr != nil {
		err = terr
	}
	if err != nil {
		res.fail("cannot compare the journal with the witnessed heads: %v", err)
		return
	}
	res.Data["witness_summary_state"] = ws.State
	res.Data["witnesses_from_summary"] = ws.FromCache
	res.Data["witnesses_verified"] = ws.Verified
	res.Data["witnesses_scrubbed"] = ws.Scrubbed
	res.Data["oldest_witness_verified_at"] = ws.OldestVerifiedAt
	if ws.WriteError != "" {
		res.Data["witness_summary_write_error"] = ws.WriteError
	}
	forked := make([]map[string]any, 0, len(fc.Findings))
	for _, f := range fc.Findings {
		forked = append(forked, map[string]any{"tenant": f.Tenant, "seq": f.Seq, "reason": f.Reason})
		res.detail("tenant %s: %s at seq %d: %s", r.tenantLabel(ctx, f.Tenant), f.Reason, f.Seq, f.Detail)
	}
	// A witness that cannot be trusted is a finding of its own (someone
	// wrote into the witness store); the newest valid witness below it is
	// still what the journal was compared with.
	untrusted := make([]string, 0, len(fc.Untrusted))
	for _, f := range chainverify.InvalidWitnessFindings(fc.Untrusted) {
		untrusted = append(untrusted, f.Detail+" ("+f.Evidence["witness_key"]+")")
		res.detail("tenant %s: bad-witness at seq %d: %s", r.tenantLabel(ctx, f.Tenant), f.Seq, f.Detail)
	}
	accepted := make([]map[string]any, 0, len(fc.Accepted))
	for _, a := range fc.Accepted {
		accepted = append(accepted, map[string]any{"tenant": a.Finding.Tenant, "seq": a.Finding.Seq, "reason": a.Finding.Reason, "accepted_provider_seq": a.AcceptedAt})
		res.detail("tenant %s: accepted fork (%s at seq %d), provider seq %d: %s", r.tenantLabel(ctx, a.Finding.Tenant), a.Finding.Reason, a.Finding.Seq, a.AcceptedAt, a.Reason)
	}
	bronzeBad := make([]string, 0, len(fc.BronzeProblems))
	for _, e := range fc.BronzeProblems {
		bronzeBad = append(bronzeBad, e.Error())
		res.detail("bronze table not compared (unreadable): %v", e)
	}
	res.Data["tenants_witnessed"] = len(fc.Witnessed)
	var newest time.Time
	for _, w := range fc.Witnessed {
		if w.Time.After(newest) {
			newest = w.Time
		}
	}
	if !newest.IsZero() { // the witness publisher's liveness, for the witness-age alert
		res.Data["newest_witness_at"] = newest
	}
	res.Data["bronze_tables"] = len(fc.Bronze)
	res.Data["bronze_problems"] = bronzeBad
	res.Data["accepted_forks"] = accepted
	res.Data["findings"] = forked
	res.Data["untrusted_witnesses"] = untrusted
	switch {
	case len(fc.Findings) > 0:
		res.fail("%d tenant(s) disagree with their witnessed head (fork or lost tail): the lake writer will not materialize them", len(fc.Findings))
		if len(untrusted) > 0 {
			res.detail("and %d witness(es) cannot be trusted (bad-witness)", len(untrusted))
		}
	case len(untrusted) > 0:
		res.fail("%d witness(es) cannot be trusted (garbage, a bad signature, or a key the verified provider chain never issued): someone wrote into the witness store; %d tenant(s) match their newest valid witness", len(untrusted), len(fc.Witnessed))
	case len(bronzeBad) > 0:
		res.Status = StatusWarn
		res.Summary = fmt.Sprintf("%d bronze table(s) could not be read and were compared with their witness only (see the delta and reconcile checks)", len(bronzeBad))
	case len(fc.Witnessed) == 0 && len(fc.Bronze) == 0:
		res.Summary = "no heads witnessed yet, nothing to compare (oml chain witness publishes them)"
	default:
		res.Summary = fmt.Sprintf("%d tenant(s) match their newest witnessed head; %d bronze table(s) agree with the journal", len(fc.Witnessed), len(fc.Bronze))
	}
}

func checkChain(ctx context.Context, r *run, res *Result) {
	// Incremental with a scrub: VerifyDB resumes every chain after its
	// stored checkpoint (the last verified head), so each run verifies what
	// was appended since, and also re-verifies from their genesis the
	// chains least recently verified in full, up to --scrub-events events:
	// an edit below a checkpoint is found within --scrub-period. A finding
	// moves the chain's checkpoint back below it, so later runs find it
	// again until the chain is repaired. Witnesses are the fork check's
	// business; not read twice.
	// The provider chain's keys go to the fork check the moment they are
	// final; a run that ends without them says so, so it never waits.
	defer r.trust.set(nil, nil, false)
	rep, err := chainverify.VerifyDB(ctx, r.pool, chainverify.DBOptions{
		SinceCheckpoint: true, ScrubEvents: r.th.ScrubEvents, ScrubMinAge: r.th.ScrubPeriod / 2,
		OnProviderTrust: func(keys map[string]*chainverify.Key, revoked map[string]chainverify.Revocation) {
			r.trust.set(keys, revoked, true)
		},
	})
	if errors.Is(err, chainverify.ErrNoProvider) {
		res.fail("%v", err)
		return
	}
	if err != nil {
		res.fail("cannot verify the journal: %v", err)
		return
	}
	res.Data["chains"] = len(rep.Chains)
	res.Data["events_verified"] = rep.Events
	res.Data["resumed"] = rep.Resumed
	res.Data["scrubbed_chains"] = rep.Scrubbed
	res.Data["scrub_events"] = rep.ScrubEvents
	res.Data["scrub_too_large"] = rep.ScrubTooLarge
	res.Data["checkpoints_invalidated"] = rep.Invalidated
	res.Data["provider_signatures_skipped"] = rep.ProviderSignaturesSkipped
	res.Data["last_full_pass"] = nil
	if rep.LastFullPass != nil {
		res.Data["last_full_pass"] = rep.LastFullPass.UTC()
		res.Data["last_full_pass_tenant"] = rep.LastFullPassTenant.String()
	}
	findings := make([]map[string]any, 0, len(rep.Findings))
	for _, f := range rep.Findings {
		findings = append(findings, map[string]any{"tenant": f.Tenant, "seq": f.Seq, "reason": f.Reason})
		res.detail("tenant %s: first bad seq %d: %s: %s", r.tenantLabel(ctx, f.Tenant), f.Seq, f.Reason, f.Detail)
	}
	res.Data["findings"] = findings
	for _, id := range rep.ScrubTooLarge {
		res.detail("tenant %s: its chain is longer than --scrub-events (%d), so the scrub never re-verifies it: raise --scrub-events or run oml chain verify --tenant %s", r.tenantLabel(ctx, id), r.th.ScrubEvents, id)
	}
	if len(rep.Findings) > 0 {
		res.fail("%d chain(s) failed verification: run oml chain verify for the evidence", len(rep.Findings))
		return
	}
	pass := "no chain verified in full yet"
	if rep.LastFullPass != nil {
		pass = fmt.Sprintf("every event re-verified since %s (%s ago)", stamp(*rep.LastFullPass), ago(r.now(), *rep.LastFullPass).Round(time.Second))
	}
	res.Summary = fmt.Sprintf("%d chain(s) intact; %d event(s) verified this run (new events, the provider chain, and %d chain(s) scrubbed from their genesis); %s",
		len(rep.Chains), rep.Events, rep.Scrubbed, pass)
	if rep.LastFullPass != nil && ago(r.now(), *rep.LastFullPass) > r.th.ScrubPeriod {
		res.Status = StatusWarn
		res.detail("the last full pass over tenant %s is older than --scrub-period (%s): raise --scrub-events, run doctor more often, or run oml chain verify", r.tenantLabel(ctx, *rep.LastFullPassTenant), r.th.ScrubPeriod)
	}
}

// ---- Delta tables ----

type tableHealth struct {
	Table                  string `json:"table"`
	Exists                 bool   `json:"exists"`
	Version                int64  `json:"version"`
	CommitsSinceCheckpoint int64  `json:"commits_since_checkpoint"`
	Files                  int    `json:"files"`
	SmallFiles             int    `json:"small_files"`
	TombstonedBytes        int64  `json:"tombstoned_bytes"`
	VacuumDueBytes         int64  `json:"vacuum_due_bytes"`
	Error                  string `json:"error,omitempty"`
	status                 Status
	why                    string
}

// deltaParallel bounds concurrent table loads: each is a few small object
// reads, so latency, not bandwidth, is what parallelism hides.
const deltaParallel = 16

func checkDelta(ctx context.Context, r *run, res *Result) {
	// The check reads table logs; the database only names the tenants and
	// gives the frontier. Without it the tables are found by listing the
	// lake (one listing of every object: slower on a big lake, and only
	// while the database is down) and the frontier check is left out.
	var out []tableHealth
	if r.dbUsable {
		read := r.readLake(ctx)
		if read.err != nil {
			res.fail("%v", read.err)
			return
		}
		out = make([]tableHealth, len(read.tables))
		for i, t := range read.tables {
			out[i] = t.health
		}
		sum := read.summary
		res.Data["summary_state"] = sum.State
		res.Data["tables_from_summary"] = sum.FromSummary
		res.Data["tables_read"] = sum.Read
		res.Data["tables_scrubbed"] = sum.Scrubbed
		res.Data["oldest_full_read_at"] = sum.OldestFullRead
		// The summary is stored in the background, beside the other
		// checks' work on the read; this check reports how that went.
		if sum.WriteError = read.saved(); sum.WriteError != "" {
			res.Data["summary_write_error"] = sum.WriteError
			res.detail("the lake summary could not be stored (the next run reads every table again): %s", sum.WriteError)
		}
	} else {
		keys, err := lakeTableKeys(ctx, r.lake)
		res.Data["degraded"] = true
		res.detail("the database is unreachable: tables were found by listing the lake, and whether the lake holds what the frontier says was drained is not checked")
		if err != nil {
			res.fail("%v", err)
			return
		}
		out = make([]tableHealth, len(keys))
		sem := make(chan struct{}, deltaParallel)
		var wg sync.WaitGroup
		for i, k := range keys {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				out[i] = r.tableHealth(ctx, k)
			})
		}
		wg.Wait()
	}

	// An empty lake is "0 tables healthy" only if nothing was drained; with
	// a frontier past zero it is the wrong lake or a lost one.
	if r.dbUsable {
		if st, err := r.lakeWriterStatus(ctx); err == nil {
			if err := lakewriter.CheckLakeHoldsFrontier(ctx, r.lake, st.Frontier); err != nil {
				res.fail("%v", err)
				return
			}
		}
	}

	var total struct{ tables, files, small int }
	var maxSince, tomb, vac int64
	bad := []tableHealth{}
	for _, t := range out {
		if !t.Exists && t.Error == "" {
			continue
		}
		total.tables++
		total.files += t.Files
		total.small += t.SmallFiles
		maxSince = max(maxSince, t.CommitsSinceCheckpoint)
		tomb += t.TombstonedBytes
		vac += t.VacuumDueBytes
		res.raise(t.status)
		if t.status != StatusOK {
			bad = append(bad, t)
		}
	}
	// Tables the lake writer holds for a fault of their own (a data file
	// it cannot read fails no log check, so the hold itself is the finding).
	holds, err := lakewriter.ReadHolds(ctx, r.lake)
	if err != nil {
		res.fail("cannot read the lake writer's table holds: %v", err)
		return
	}
	for _, h := range holds {
		bad = append(bad, tableHealth{Table: h.Table, status: StatusFail,
			why: fmt.Sprintf("held by the lake writer since %s (not written): %s; see docs/runbooks/delta.md", h.Since.Format(time.RFC3339), h.Reason)})
		res.raise(StatusFail)
	}
	sort.SliceStable(bad, func(i, j int) bool { return bad[i].status.rank() > bad[j].status.rank() })
	for _, t := range bad {
		res.detail("%s %s: %s", t.status, t.Table, t.why)
	}
	res.Data["tables"] = total.tables
	res.Data["files"] = total.files
	res.Data["small_files"] = total.small
	res.Data["max_commits_since_checkpoint"] = maxSince
	res.Data["tombstoned_bytes"] = tomb
	res.Data["vacuum_due_bytes"] = vac
	res.Data["problems"] = bad
	if res.Status == "" {
		res.Status = StatusOK
	}
	if len(bad) == 0 {
		res.Summary = fmt.Sprintf("%d table(s) healthy: at most %d commit(s) since a checkpoint, %d small file(s), %s past retention",
			total.tables, maxSince, total.small, bytesHuman(vac))
		return
	}
	res.Summary = fmt.Sprintf("%d of %d table(s) need maintenance (worst: %s %s)", len(bad), total.tables, bad[0].Table, bad[0].why)
}

// dbTableKeys lists every table of every tenant the database knows.
func dbTableKeys(ctx context.Context, r *run) ([]tables.TableKey, error) {
	ids, err := tenant.IDs(ctx, r.pool)
	if err != nil {
		return nil, fmt.Errorf("cannot %w", err) // "cannot list tenants: …"
	}
	var keys []tables.TableKey
	for _, id := range tenant.ByID(ids) {
		for _, k := range tables.Kinds {
			keys = append(keys, tables.TableKey{Tenant: id, Kind: k})
		}
	}
	return keys, nil
}

// lakeTableKeys finds the tables the lake holds: every
// <tenant id>/<table dir>/_delta_log/ with at least one object.
func lakeTableKeys(ctx context.Context, lake store.Store) ([]tables.TableKey, error) {
	objs, err := lake.List(ctx, "", "")
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("cannot list the lake %s to find its tables: %w", lake, err)
	}
	seen := map[tables.TableKey]bool{}
	var keys []tables.TableKey
	for _, o := range objs {
		ten, rest, ok := strings.Cut(o.Key, "/")
		if !ok {
			continue
		}
		id, err := uuid.Parse(ten)
		if err != nil {
			continue
		}
		for _, k := range tables.Kinds {
			key := tables.TableKey{Tenant: id, Kind: k}
			if strings.HasPrefix(rest, k.Dir()+"/_delta_log/") && !seen[key] {
				seen[key] = true
				keys = append(keys, key)
			}
		}
	}
	return keys, nil
}

// tableHealth reads one table and grades it: the Delta check's own read,
// while the database is unreachable (else the run's lake read serves it).
func (r *run) tableHealth(ctx context.Context, k tables.TableKey) tableHealth {
	st, err := k.Store(r.lake)
	if err != nil {
		t := lakesummary.FromRead(ctx, &lakewriter.TableRead{Key: k, LoadErr: err}, r.th.SmallFileSize, r.now(), false)
		return r.healthOf(&t)
	}
	snap, err := delta.Load(ctx, st)
	if errors.Is(err, delta.ErrTableNotFound) {
		err = nil // nothing drained for this tenant and table yet
	}
	t := lakesummary.FromRead(ctx, &lakewriter.TableRead{Key: k, Store: st, Snap: snap, LoadErr: err}, r.th.SmallFileSize, r.now(), false)
	return r.healthOf(&t)
}

// healthOf grades one table from what was read of it (now, or kept in
// the lake summary: the same facts either way).
func (r *run) healthOf(tr *lakesummary.Table) tableHealth {
	t := tableHealth{Table: tr.Key.Path(), status: StatusOK, Version: -1}
	switch err := tr.LoadErr; {
	case err != nil && tr.NoStore:
		t.Error, t.status, t.why = err.Error(), StatusFail, "cannot address the table: "+err.Error()
		return t
	case err != nil:
		t.Error, t.status, t.why = err.Error(), StatusFail, "cannot be read: "+err.Error()
		return t
	case !tr.Exists:
		return t // nothing drained for this tenant and table yet
	}
	t.Exists, t.Version, t.Files = true, tr.Version, tr.Files
	t.CommitsSinceCheckpoint = tr.CommitsSinceCheckpoint()
	t.SmallFiles = tr.SmallFiles
	t.TombstonedBytes, t.VacuumDueBytes = tr.TombstonedBytes, tr.VacuumDueBytes
	retention := tr.Retention
	var whys []string
	if s := grade(t.CommitsSinceCheckpoint, r.th.CheckpointWarn, r.th.CheckpointFail); s != StatusOK {
		t.status = s
		whys = append(whys, fmt.Sprintf("%d commits since the last checkpoint (warn %d, fail %d): run oml lake checkpoint", t.CommitsSinceCheckpoint, r.th.CheckpointWarn, r.th.CheckpointFail))
	}
	if t.SmallFiles >= r.th.SmallFilesWarn {
		t.status = worst(t.status, StatusWarn)
		whys = append(whys, fmt.Sprintf("%d files under %s (warn at %d): run oml lake optimize", t.SmallFiles, bytesHuman(r.th.SmallFileSize), r.th.SmallFilesWarn))
	}
	if t.VacuumDueBytes >= r.th.VacuumWarn {
		t.status = worst(t.status, StatusWarn)
		whys = append(whys, fmt.Sprintf("%s of removed files past the %s retention (warn at %s): run oml lake vacuum", bytesHuman(t.VacuumDueBytes), retention, bytesHuman(r.th.VacuumWarn)))
	}
	t.why = strings.Join(whys, "; ")
	return t
}

func worst(a, b Status) Status {
	if b.rank() > a.rank() {
		return b
	}
	return a
}

// ---- reconcile (--deep) ----

func checkReconcile(ctx context.Context, r *run, res *Result) {
	rep, err := reconcile.Run(ctx, r.pool, r.lake, reconcile.Options{StaleAfter: r.th.LagFail, MaxFindings: 3})
	if err != nil {
		res.fail("cannot reconcile the lake against the journal: %v", err)
		return
	}
	counts := map[string]int64{}
	var total int64
	var classes []string
	for _, c := range reconcile.Classes {
		n := rep.Counts[c]
		counts[string(c)] = n
		if n == 0 {
			continue
		}
		total += n
		classes = append(classes, fmt.Sprintf("%s %d", c, n))
		// dead-lettered and stale-frontier rows are known gaps that the
		// dead-letters and lag checks already grade; anything else means the
		// lake disagrees with the journal.
		if c == reconcile.DeadLettered || c == reconcile.StaleFrontier {
			res.raise(StatusWarn)
		} else {
			res.raise(StatusFail)
		}
	}
	for _, f := range rep.Findings {
		res.detail("%s: tenant %s %s: %s", f.Class, f.TenantName, f.Table, f.Detail)
	}
	res.Data["counts"] = counts
	res.Data["total"] = total
	res.Data["events"] = rep.Stats.Events
	res.Data["claims"] = rep.Stats.Claims
	res.Data["lake_rows"] = rep.Stats.LakeRows
	res.Data["accepted_gaps"] = len(rep.Accepted)
	if total == 0 {
		res.Summary = fmt.Sprintf("the lake matches the journal fold (%d events, %d claims compared)", rep.Stats.Events, rep.Stats.Claims)
		return
	}
	res.Summary = fmt.Sprintf("%d finding(s): %s; run oml reconcile for every one with its evidence", total, strings.Join(classes, ", "))
}

// ---- formatting helpers ----

func ago(now, t time.Time) time.Duration {
	d := now.Sub(t)
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(time.Second)
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return "(query not visible)"
	}
	if len(s) > 120 {
		s = s[:117] + "..."
	}
	return s
}

func bytesHuman(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
