package lakewriter

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/replication"
	"github.com/omlhq/oml/internal/tenant"
)

// Status is what `oml lake status` shows: where the lake writer is and what
// holds it back.
type Status struct {
	Frontier        int64            `json:"frontier"` // frontier cache: last outbox seq in the lake
	FrontierAt      time.Time        `json:"frontier_updated_at"`
	LastBatchStart  int64            `json:"last_batch_start"`
	LastBatchEnd    int64            `json:"last_batch_end"`
	LastSeq         int64            `json:"last_seq"`        // the outbox sequence's last value
	StableSeq       int64            `json:"stable_seq"`      // the stable prefix right now (a fence taken and checked)
	HorizonHeld     bool             `json:"horizon_held"`    // a transaction keeps the fence from being final
	BacklogRows     int64            `json:"backlog_rows"`    // outbox rows above the frontier
	BacklogSeqGap   int64            `json:"backlog_seq_gap"` // last_seq - frontier
	OldestUnapplied *time.Time       `json:"oldest_unapplied_at,omitempty"`
	LagSeconds      float64          `json:"lag_seconds"` // age of the oldest unapplied row
	Lease           *Lease           `json:"lease"`
	LeaseLive       bool             `json:"lease_live"`
	Blockers        []outbox.Blocker `json:"blockers"`
	DeadLetters     int64            `json:"dead_letters"` // not yet re-enqueued
	OldestDeadAt    *time.Time       `json:"oldest_dead_letter_at,omitempty"`
	Tables          []TableStatus    `json:"tables,omitempty"`
	// Continuity is the continuity check (continuity.go), when a lake was
	// given: does the database still hold what the lake says it drained?
	Continuity *Continuity `json:"continuity,omitempty"`
	// ContinuityError says why the check could not run (the lake is
	// unreachable, say); the rest of the status is still there.
	ContinuityError string `json:"continuity_error,omitempty"`
	// StableLSN is the WAL position covering the stable prefix (read after
	// the fence was seen final; 0 when the horizon is held).
	StableLSN replication.LSN `json:"stable_lsn"`
	// DurabilityAtCurrentWAL: the horizon was held, so Durability judges
	// the WAL position covering every commit so far, not a stable prefix.
	DurabilityAtCurrentWAL bool `json:"durability_at_current_wal,omitempty"`
	// Durability is the stable prefix against the streaming standbys under
	// a --durable-on policy (filled by ReadDurability; nil otherwise).
	Durability *replication.Verdict `json:"durability,omitempty"`
	// DurabilityError says why Durability could not be judged (the role
	// cannot see the standbys' positions).
	DurabilityError string `json:"durability_error,omitempty"`
	// HeldTables are the tables the lake writer holds for a fault of their
	// own (read from the lake, so only when it is given).
	HeldTables []TableHold `json:"held_tables,omitempty"`
}

// TableStatus is one Delta table's position.
type TableStatus struct {
	Table           string `json:"table"`
	Tenant          string `json:"tenant_id"`
	TenantName      string `json:"tenant,omitempty"` // filled by callers that know the names
	Kind            string `json:"kind"`
	Exists          bool   `json:"exists"`
	Version         int64  `json:"version"`
	TxnVersion      int64  `json:"txn_version"` // last batch end applied (-1: none)
	Files           int    `json:"files"`
	SinceCheckpoint int64  `json:"commits_since_checkpoint"`
	Error           string `json:"error,omitempty"`
}

// StatusOptions say how much ReadStatus reads beyond the database.
type StatusOptions struct {
	// Lake, when set, runs the continuity check (it reads every tenant
	// table's log) and reads the held tables; nil leaves Continuity nil.
	Lake store.Store
	// Tables also lists every table (needs Lake).
	Tables bool
	// ReadTables, when set, reads the tables for the list and the
	// continuity check instead of opening each (lake status passes the lake
	// summary's reader, internal/lakesummary).
	ReadTables TablesReader
}

// ReadStatus gathers the status: the frontier, the backlog and the lease
// from the database, and what opts asks of the lake.
func ReadStatus(ctx context.Context, db *pgxpool.Pool, opts StatusOptions) (Status, error) {
	lake, withTables := opts.Lake, opts.Tables
	var s Status
	fr, err := outbox.ReadFrontier(ctx, db)
	if err != nil {
		return s, err
	}
	s.Frontier, s.LastBatchStart, s.LastBatchEnd = fr.Seq, fr.BatchStart, fr.BatchEnd
	if fr.UpdatedAt != nil {
		s.FrontierAt = *fr.UpdatedAt
	}
	bl, err := outbox.ReadBacklog(ctx, db, s.Frontier)
	if err != nil {
		return s, err
	}
	s.LastSeq, s.BacklogRows, s.OldestUnapplied, s.DeadLetters, s.OldestDeadAt = bl.LastSeq, bl.Rows, bl.OldestUnapplied, bl.DeadLetters, bl.OldestDeadAt
	s.BacklogSeqGap = max(0, s.LastSeq-s.Frontier)
	if s.OldestUnapplied != nil {
		s.LagSeconds = time.Since(*s.OldestUnapplied).Seconds()
	}

	// Is the horizon past a fresh fence? If not, name what holds it.
	f, err := outbox.TakeFence(ctx, db)
	if err != nil {
		return s, err
	}
	h, err := outbox.Horizon(ctx, db)
	if err != nil {
		return s, err
	}
	if f.Final(h) {
		s.StableSeq = f.LastSeq
		if s.StableLSN, err = outbox.CoverLSN(ctx, db); err != nil {
			return s, err
		}
	} else {
		s.HorizonHeld = true
		s.StableSeq = s.Frontier
		if s.Blockers, err = outbox.Blockers(ctx, db, f.Xid, 5); err != nil {
			return s, err
		}
	}
	if s.Lease, err = ReadLease(ctx, db); err != nil {
		return s, err
	}
	s.LeaseLive = s.Lease != nil && s.Lease.ExpiresAt.After(time.Now())

	var positions []TablePosition // from the tables pass, for the continuity check
	if withTables && lake != nil {
		read := readTables
		if opts.ReadTables != nil {
			read = func(ctx context.Context, db *pgxpool.Pool, _ store.Store) ([]TableStatus, []TablePosition, error) {
				return readTablesVia(ctx, db, opts.ReadTables)
			}
		}
		if s.Tables, positions, err = read(ctx, db, lake); err != nil {
			return s, err
		}
	}
	if lake != nil {
		var c Continuity
		if withTables {
			// A table that cannot be read fails the check, as CheckLake's
			// LakePositions would.
			err = tablesError(s.Tables)
			if err == nil {
				c, err = CheckContinuity(ctx, db, lake, positions)
			}
		} else if opts.ReadTables != nil {
			c, err = checkLakeVia(ctx, db, lake, opts.ReadTables)
		} else {
			c, err = CheckLake(ctx, db, lake)
		}
		if err != nil {
			s.ContinuityError = err.Error()
		} else {
			s.Continuity = &c
		}
		// Best effort like the continuity check: an unreachable lake is
		// already reported there.
		if h, err := ReadHolds(ctx, lake); err == nil {
			s.HeldTables = h
		}
	}
	return s, nil
}

func tablesError(ts []TableStatus) error {
	for _, t := range ts {
		if t.Error != "" {
			return errors.New(t.Error)
		}
	}
	return nil
}

// readTables reads every tenant table once, store.Concurrency tables at a
// time (one after another took minutes at 20,000 tables on S3), for the
// table list and the continuity check's positions (a table that cannot be
// read is listed with its error and left out of the check, as the check
// itself would refuse it).
func readTables(ctx context.Context, db *pgxpool.Pool, lake store.Store) ([]TableStatus, []TablePosition, error) {
	ids, err := tenant.IDs(ctx, db)
	if err != nil {
		return nil, nil, err
	}
	reg := newRegistry(lake, registryOptions{Delta: deltaOptions(), MaxOpen: oneShotOpenTables})
	out := make([]TableStatus, 0, len(ids)*len(tables.Kinds))
	for _, id := range ids {
		for _, k := range tables.Kinds {
			key := tables.TableKey{Tenant: id, Kind: k}
			out = append(out, TableStatus{Table: key.Path(), Tenant: id.String(), Kind: string(k), TxnVersion: -1, Version: -1})
		}
	}
	pos := make([]TablePosition, len(out))
	var g errgroup.Group
	g.SetLimit(store.Concurrency(lake))
	for i := range out {
		g.Go(func() error {
			ts := &out[i]
			key := tables.TableKey{Tenant: ids[i/len(tables.Kinds)], Kind: tables.Kinds[i%len(tables.Kinds)]}
			w, err := reg.writer(ctx, key, leaveMissing)
			switch {
			case err != nil:
				ts.Error = err.Error()
			case w != nil:
				snap := w.Snapshot()
				ts.Exists, ts.Version, ts.Files = true, snap.Version(), snap.NumFiles()
				ts.SinceCheckpoint = w.CommitsSinceCheckpoint()
				if v, ok := snap.TxnVersion(tables.AppID); ok {
					ts.TxnVersion = v
					pos[i] = TablePosition{Key: key, TxnVersion: v}
					if ci, ok := snap.TxnCommitInfo(tables.AppID); ok {
						rec, found := tables.ParseBatchBounds(ci)
						pos[i].rec = &foundRecord{rec: rec, ok: found}
					}
				}
				reg.forget(key) // read once: keep no snapshot
			}
			return nil
		})
	}
	_ = g.Wait() // errors are per table, in out
	positions := pos[:0]
	for _, p := range pos {
		if p.TxnVersion > 0 {
			positions = append(positions, p)
		}
	}
	return out, positions, nil
}

// ReadDurability fills s.Durability: whether the standbys p requires have
// flushed the stable prefix s read (what a lake writer running with p would
// be waiting for). With the horizon held there is no new stable prefix, but
// the standbys' positions are still a fact the operator needs (a writer
// waits for them next): they are judged at the WAL position covering every
// commit so far, which covers the frontier and whatever becomes final next,
// and DurabilityAtCurrentWAL says so. When the role cannot see the
// standbys' positions (*replication.HiddenError) it says so in
// DurabilityError instead.
func (s *Status) ReadDurability(ctx context.Context, db *pgxpool.Pool, p replication.Policy) error {
	if !p.Waits() {
		return nil
	}
	lsn := s.StableLSN
	if s.HorizonHeld {
		var err error
		if lsn, err = outbox.CoverLSN(ctx, db); err != nil {
			return err
		}
		s.DurabilityAtCurrentWAL = true
	}
	r, err := replication.Read(ctx, db)
	if err != nil {
		return err
	}
	v, err := replication.Evaluate(p, lsn, r)
	var hidden *replication.HiddenError
	if errors.As(err, &hidden) {
		s.DurabilityError = err.Error()
		return nil
	}
	if err != nil {
		return err
	}
	s.Durability = &v
	return nil
}

// DurabilityLines is the one wording of the durability verdict on a status
// screen (`oml lake status`, `oml status`): one "durability" line, then one
// line per standby. Empty when nothing was judged (--durable-on none).
func (s *Status) DurabilityLines() [][2]string {
	if s.DurabilityError != "" {
		return [][2]string{{"durability", "cannot tell: " + s.DurabilityError}}
	}
	v := s.Durability
	if v == nil {
		return nil
	}
	what := "stable prefix"
	if s.DurabilityAtCurrentWAL {
		what = "WAL so far (the horizon is held, so judged at the current WAL position)"
	}
	var out [][2]string
	switch {
	case !v.Durable:
		out = append(out, [2]string{"durability", fmt.Sprintf("--durable-on %s: %s (a writer waits: lag, not loss)", v.Policy, v.Reason)})
	case len(v.Flushed) == 0:
		out = append(out, [2]string{"durability", fmt.Sprintf("--durable-on %s: no standby is streaming; the %s is on this node only (see oml doctor, replication)", v.Policy, what)})
	default:
		out = append(out, [2]string{"durability", fmt.Sprintf("--durable-on %s: %s (WAL %s) flushed by %d streaming standby(s)", v.Policy, what, v.LSN, len(v.Flushed))})
	}
	for _, p := range v.Flushed {
		out = append(out, [2]string{"  standby", fmt.Sprintf("%s flushed %s", p.Name, p.Flush)})
	}
	for _, p := range v.Waiting {
		out = append(out, [2]string{"  standby", fmt.Sprintf("%s flushed %s, %d bytes BEHIND", p.Name, p.Flush, p.BehindBytes)})
	}
	return out
}
