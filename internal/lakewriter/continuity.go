package lakewriter

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/tenant"
)

// Continuity: the lake knows which database history it was drained from,
// and the writer checks that the database still holds it before writing.
// See doc.go, invariant 7.

// anchorDigest is part of the lake format: changing it makes every recorded
// anchor unrecognisable. v1 covers every column of the outbox row that
// says what the row is, and the journal event hash.
func anchorDigest(seq int64, tenant uuid.UUID, journalSeq int64, target, op, artifact string, version int32, eventHash []byte) string {
	h := sha256.New()
	fmt.Fprintf(h, "oml-anchor-v1\x00%d\x00%s\x00%d\x00%s\x00%s\x00%s\x00%d\x00", seq, tenant, journalSeq, target, op, artifact, version)
	h.Write(eventHash)
	return hex.EncodeToString(h.Sum(nil))
}

// Identity is where a database's history stands (outbox.Identity: its
// system identifier, timeline and outbox sequence's last value).
type Identity = outbox.Identity

type rowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// anchorOf is the anchor a batch records for outbox row r (nil for none).
func anchorOf(r *outbox.AnchorRow) *tables.Anchor {
	if r == nil {
		return nil
	}
	return &tables.Anchor{
		Seq: r.Seq, Tenant: r.Tenant, JournalSeq: r.JournalSeq, EventHash: hex.EncodeToString(r.EventHash),
		Digest: anchorDigest(r.Seq, r.Tenant, r.JournalSeq, r.Target, r.Op, r.ArtifactID, r.Version, r.EventHash),
	}
}

// readBatchRecord computes what a commit of batch (start, end] records,
// the database's identity, and the row now at prev's seq (nil when prev is
// nil or the row is gone).
func readBatchRecord(ctx context.Context, db rowQuerier, start, end int64, prev *tables.Anchor) (tables.BatchBounds, Identity, *tables.Anchor, error) {
	b := tables.BatchBounds{Start: start, End: end}
	prevSeq := int64(-1)
	if prev != nil {
		prevSeq = prev.Seq
	}
	id, cur, old, err := outbox.ReadBatchRecord(ctx, db, start, end, prevSeq)
	if err != nil {
		return b, id, nil, err
	}
	b.SystemIdentifier, b.Timeline = id.SystemIdentifier, id.Timeline
	b.Anchor = anchorOf(cur)
	return b, id, anchorOf(old), nil
}

// anchorVerdict is what the database says about a recorded anchor.
type anchorVerdict int

const (
	anchorAgrees  anchorVerdict = iota
	anchorMissing               // no such outbox row and no such journal event
	anchorDiffers               // a row at that seq, with other content
)

// checkAnchor compares a recorded anchor with the database. An outbox row
// that is gone (pruned) is recognised by its journal event instead: the
// event and the row were committed in one transaction, so the event being
// there with the same hash means the history is the same.
func checkAnchor(ctx context.Context, db rowQuerier, a *tables.Anchor) (anchorVerdict, error) {
	row, err := outbox.ReadAnchorRow(ctx, db, a.Seq)
	if err != nil {
		return 0, fmt.Errorf("check the lake's record of outbox row %d: %w", a.Seq, err)
	}
	if row != nil {
		if anchorOf(row).Digest == a.Digest {
			return anchorAgrees, nil
		}
		if row.EventHash == nil {
			// The outbox row is the one the lake drained but its journal
			// event is gone (deleted behind the database's back: a failover
			// loses the row with it). The outbox's history agrees; the
			// chain is chain verify's and the fork check's business (which
			// hold that tenant), not a reason to stop every table.
			if h, herr := hex.DecodeString(a.EventHash); herr == nil {
				row.EventHash = h
				if anchorOf(row).Digest == a.Digest {
					return anchorAgrees, nil
				}
			}
		}
		return anchorDiffers, nil
	}
	h, err := journal.EventHash(ctx, db, a.Tenant, a.JournalSeq)
	if errors.Is(err, pgx.ErrNoRows) {
		return anchorMissing, nil
	}
	if err != nil {
		return 0, fmt.Errorf("check the journal event of outbox row %d: %w", a.Seq, err)
	}
	if hex.EncodeToString(h) == a.EventHash {
		return anchorAgrees, nil
	}
	return anchorDiffers, nil
}

// checkRows compares the number of outbox rows in a recorded batch with
// the database's: the anchor alone would miss a lost row below it whose
// transaction committed after the anchor's (seq order is not commit
// order). Fewer rows are fine only when the outbox was pruned into the
// batch (its oldest row is above the batch start).
func checkRows(ctx context.Context, db rowQuerier, b tables.BatchBounds) (anchorVerdict, error) {
	if b.Rows == nil {
		return anchorAgrees, nil
	}
	c, err := outbox.CountRange(ctx, db, b.Start, b.End)
	if err != nil {
		return 0, err
	}
	n, oldest, pruned := c.Rows, c.Oldest, c.Pruned
	switch {
	case n == *b.Rows:
		return anchorAgrees, nil
	case n < *b.Rows && (oldest == nil || *oldest > b.Start+1 || pruned):
		// Pruned into (or past) the batch: `oml outbox prune` deleted
		// rows of some table at or above the batch start (its mark in
		// oml.outbox_pruned; it keeps dead-lettered rows, so the oldest
		// row can be older than the batch). A database that lost the
		// batch instead is caught by the anchor's journal event, checked
		// first.
		return anchorAgrees, nil
	case n < *b.Rows:
		return anchorMissing, nil
	}
	return anchorDiffers, nil
}

// Continuity states.
const (
	ContinuityOK         = "ok"
	ContinuityAhead      = "lake-ahead"       // the lake holds seqs the database never drew
	ContinuityDiverged   = "diverged"         // the lake holds rows the database does not hold (or holds otherwise)
	ContinuityDeployment = "other-deployment" // the lake belongs to another deployment (a wrong --lake)
)

// Continuity is the result of the continuity check.
type Continuity struct {
	State  string `json:"state"`
	Detail string `json:"detail,omitempty"`
	// DB is where the database stands now.
	DB Identity `json:"database"`
	// LakePosition is the greatest txn version of any table; LakeSystemIdentifier
	// and LakeTimeline are recorded with the newest commit that has them.
	LakePosition         int64  `json:"lake_position"`
	LakeSystemIdentifier string `json:"lake_system_identifier,omitempty"`
	LakeTimeline         int64  `json:"lake_timeline,omitempty"`
	// LastAgreedSeq is the newest batch end whose recorded rows the database
	// holds with the same content, below every disagreement (-1: none found;
	// then nothing recorded in the lake is known to be in the database).
	// Only batch ends are recorded (one anchor per commit), so the histories
	// part somewhere in (LastAgreedSeq, next recorded end]; the exact last
	// shared journal seq per tenant is recovery's sharedSeq (accept-fork's
	// shared_seq), which compares every bronze event.
	LastAgreedSeq int64 `json:"last_agreed_seq"`
	// Tables are the tables holding rows past LastAgreedSeq.
	Tables []string `json:"tables,omitempty"`
	// Unrecorded counts tables whose newest commit predates continuity
	// records (only the numbers are checked for them).
	Unrecorded int `json:"unrecorded_tables"`
	// Anchors is how many distinct recorded rows were compared.
	Anchors    int         `json:"anchors_checked"`
	Deployment *Deployment `json:"lake_deployment,omitempty"`
}

// OK reports whether the lake and the database share their history.
func (c Continuity) OK() bool { return c.State == ContinuityOK }

// ContinuityError is the writer's refusal: the lake is ahead of, or
// diverged from, the database (or belongs to another deployment).
type ContinuityError struct{ C Continuity }

func (e *ContinuityError) Error() string {
	c := e.C
	switch c.State {
	case ContinuityDeployment:
		return "the lake belongs to another deployment: " + c.Detail + "; check --lake (nothing was written)"
	}
	agreed := "no recorded seq"
	if c.LastAgreedSeq >= 0 {
		agreed = "seq " + strconv.FormatInt(c.LastAgreedSeq, 10)
	}
	return fmt.Sprintf("the lake is %s the database (%s): lake at seq %d (timeline %d), database outbox at seq %d (timeline %d); both agree up to %s; refusing to write to %d table(s) — see docs/runbooks/continuity.md",
		map[string]string{ContinuityAhead: "ahead of", ContinuityDiverged: "diverged from"}[c.State], c.Detail,
		c.LakePosition, c.LakeTimeline, c.DB.LastSeq, c.DB.Timeline, agreed, len(c.Tables))
}

// TablePosition is one table's txn version, the input of the check.
type TablePosition struct {
	Key        tables.TableKey
	TxnVersion int64
	// rec is the record of the commit that set TxnVersion when the reader
	// of the position already had it (the writer's start-up scan); nil:
	// CheckContinuity reads the log for it.
	rec *foundRecord
}

// historyScan bounds how far back the check walks a diverged table's log
// to find the last batch both histories share.
const historyScan = 500

// CheckContinuity compares what the lake says it drained with the
// database: the outbox sequence is at or beyond every table's txn version,
// and the newest recorded batch of every table is in the database with the
// same content. When they disagree it walks the diverged tables' logs back
// to the newest batch the database still holds. Read-only.
func CheckContinuity(ctx context.Context, db rowQuerier, lake store.Store, tables []TablePosition) (Continuity, error) {
	k := &checker{ctx: ctx, db: db, lake: lake, verdicts: map[int64]anchorVerdict{}, rowVerdicts: map[[3]int64]anchorVerdict{}, reasons: map[string]bool{}, minBad: -1}
	k.c = Continuity{State: ContinuityOK, LastAgreedSeq: -1}
	id, err := outbox.ReadIdentity(ctx, db)
	if err != nil {
		return k.c, err
	}
	k.c.DB = id
	if dep, bad, err := checkDeployment(ctx, db, lake); err != nil {
		return k.c, err
	} else if bad != "" {
		k.c.State, k.c.Detail, k.c.Deployment = ContinuityDeployment, bad, dep
		return k.c, nil
	}
	if err := k.newest(tables); err != nil {
		return k.c, err
	}
	if len(k.suspects) == 0 {
		k.c.LastAgreedSeq = k.c.LakePosition
		return k.c, nil
	}
	if err := k.walkBack(); err != nil {
		return k.c, err
	}
	for _, t := range tables {
		if t.TxnVersion > k.c.LastAgreedSeq && t.TxnVersion > 0 {
			k.c.Tables = append(k.c.Tables, t.Key.String())
		}
	}
	sort.Strings(k.c.Tables)
	if err := k.classify(); err != nil {
		return k.c, err
	}
	return k.c, nil
}

// checker is one run of CheckContinuity, step by step.
type checker struct {
	ctx  context.Context
	db   rowQuerier
	lake store.Store
	c    Continuity

	verdicts    map[int64]anchorVerdict    // by anchor seq (a row-count disagreement under -end)
	rowVerdicts map[[3]int64]anchorVerdict // checkRows by (start, end, rows)
	reasons     map[string]bool
	suspects    []TablePosition
	minBad      int64   // the smallest batch end known to disagree (-1: none)
	agreedEnds  []int64 // batch ends known to agree
}

func (k *checker) verify(a *tables.Anchor) (anchorVerdict, error) {
	if v, ok := k.verdicts[a.Seq]; ok {
		return v, nil
	}
	v, err := checkAnchor(k.ctx, k.db, a)
	if err == nil {
		k.verdicts[a.Seq] = v
		k.c.Anchors++
	}
	return v, err
}

// rows is checkRows once per distinct record: every table a batch
// touched carries the same record, and counting a batch's rows costs a
// range scan (about 15 ms for 10,000 rows) where the anchor costs a probe.
func (k *checker) rows(rec tables.BatchBounds) (anchorVerdict, error) {
	if rec.Rows == nil {
		return anchorAgrees, nil
	}
	key := [3]int64{rec.Start, rec.End, *rec.Rows}
	if v, ok := k.rowVerdicts[key]; ok {
		return v, nil
	}
	v, err := checkRows(k.ctx, k.db, rec)
	if err == nil {
		k.rowVerdicts[key] = v
	}
	return v, err
}

func (k *checker) bad(end int64) {
	if k.minBad < 0 || end < k.minBad {
		k.minBad = end
	}
}

// newest checks every table's position and its newest recorded batch.
func (k *checker) newest(tables []TablePosition) error {
	recs, err := newestRecords(k.ctx, k.lake, tables)
	if err != nil {
		return err
	}
	newestRec := int64(-1)
	for i, t := range tables {
		if t.TxnVersion <= 0 {
			continue
		}
		k.c.LakePosition = max(k.c.LakePosition, t.TxnVersion)
		rec, ok := recs[i].rec, recs[i].ok
		bad := false
		if t.TxnVersion > k.c.DB.LastSeq {
			bad = true
			k.reasons[fmt.Sprintf("the outbox sequence is at %d, below the txn version %d of %s", k.c.DB.LastSeq, t.TxnVersion, t.Key)] = true
		}
		switch {
		case ok && rec.Anchor != nil:
			if rec.End > newestRec && rec.SystemIdentifier != "" {
				newestRec, k.c.LakeSystemIdentifier, k.c.LakeTimeline = rec.End, rec.SystemIdentifier, rec.Timeline
			}
			rb, err := k.checkRecord(rec)
			if err != nil {
				return err
			}
			bad = bad || rb
		default:
			k.c.Unrecorded++
		}
		if bad {
			k.suspects = append(k.suspects, t)
			k.bad(t.TxnVersion)
		} else {
			k.agreedEnds = append(k.agreedEnds, t.TxnVersion)
		}
	}
	return nil
}

// checkRecord compares one recorded batch with the database: its anchor,
// then its row count. It reports whether they disagree.
func (k *checker) checkRecord(rec tables.BatchBounds) (bool, error) {
	v, err := k.verify(rec.Anchor)
	if err != nil {
		return false, err
	}
	switch v {
	case anchorMissing:
		k.reasons[fmt.Sprintf("outbox row %d, recorded by the lake, is not in the database", rec.Anchor.Seq)] = true
		return true, nil
	case anchorDiffers:
		k.reasons[fmt.Sprintf("outbox row %d holds other content than the lake recorded", rec.Anchor.Seq)] = true
		return true, nil
	}
	rv, err := k.rows(rec)
	if err != nil || rv == anchorAgrees {
		return false, err
	}
	k.verdicts[-rec.End] = rv
	k.reasons[fmt.Sprintf("batch (%d, %d] held %d outbox rows when it was drained; the database holds another number of them", rec.Start, rec.End, *rec.Rows)] = true
	return true, nil
}

// walkBack reads each suspect table's log back to its newest batch the
// database holds, below every known disagreement, and sets LastAgreedSeq.
func (k *checker) walkBack() error {
	for _, t := range k.suspects {
		hist, err := tableHistory(k.ctx, k.lake, t.Key, historyScan)
		if err != nil {
			return err
		}
		for _, h := range hist {
			b, ok := tables.ParseBatchBounds(h.CommitInfo)
			if !ok || b.Anchor == nil || b.End >= t.TxnVersion {
				continue // the newest record was checked already
			}
			v, err := k.verify(b.Anchor)
			if err != nil {
				return err
			}
			if v == anchorAgrees && b.End <= k.c.DB.LastSeq {
				k.agreedEnds = append(k.agreedEnds, b.End)
				break
			}
			k.bad(b.End)
		}
	}
	for _, e := range k.agreedEnds {
		if e < k.minBad && e > k.c.LastAgreedSeq {
			k.c.LastAgreedSeq = e
		}
	}
	return nil
}

// classify tells a lake that is only ahead (the database lacks what the
// lake holds past LastAgreedSeq and wrote nothing new: a lost tail that
// restore-tail can bring back) from one that diverged (the database holds
// other content at a recorded seq, or rows past the lake's position: it
// wrote on top of the loss, a fork), and writes Detail.
func (k *checker) classify() error {
	k.c.State = ContinuityAhead
	for _, v := range k.verdicts {
		if v == anchorDiffers {
			k.c.State = ContinuityDiverged
		}
	}
	if k.c.State == ContinuityAhead {
		newer, err := outbox.AnyAfter(k.ctx, k.db, k.c.LakePosition)
		if err != nil {
			return fmt.Errorf("look for outbox rows past the lake: %w", err)
		}
		if newer {
			k.c.State = ContinuityDiverged
			k.reasons[fmt.Sprintf("the database wrote outbox rows past the lake's position %d on top of what it lost", k.c.LakePosition)] = true
		}
	}
	rs := make([]string, 0, len(k.reasons))
	for r := range k.reasons {
		rs = append(rs, r)
	}
	sort.Strings(rs)
	if len(rs) > 3 {
		rs = append(rs[:3], fmt.Sprintf("and %d more", len(rs)-3))
	}
	k.c.Detail = strings.Join(rs, "; ")
	return nil
}

type foundRecord struct {
	rec tables.BatchBounds
	ok  bool
}

// recordParallel bounds concurrent log reads: each is a listing and a
// couple of small objects, so latency, not bandwidth, is what it hides.
const recordParallel = 16

// newestRecords reads, for every table, the record of the commit that set
// its txn version: normally the newest commit (read first alone), else one
// of the last 20 (a checkpoint, optimize or vacuum commit came after).
func newestRecords(ctx context.Context, lake store.Store, tables []TablePosition) ([]foundRecord, error) {
	out := make([]foundRecord, len(tables))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(recordParallel)
	for i, t := range tables {
		if t.TxnVersion <= 0 {
			continue
		}
		if t.rec != nil {
			out[i] = *t.rec
			continue
		}
		g.Go(func() error {
			for _, limit := range []int{1, 20} {
				hist, err := tableHistory(gctx, lake, t.Key, limit)
				if err != nil {
					return err
				}
				if rec, ok := recordAt(hist, t.TxnVersion); ok || len(hist) < limit {
					out[i] = foundRecord{rec, ok}
					return nil
				}
			}
			return nil
		})
	}
	return out, g.Wait()
}

// tableHistory reads a table's newest commits (none if the table is gone).
func tableHistory(ctx context.Context, lake store.Store, key tables.TableKey, limit int) ([]delta.HistoryEntry, error) {
	st, err := key.Store(lake)
	if err != nil {
		return nil, err
	}
	hist, err := delta.History(ctx, st, delta.HistoryOptions{Limit: limit})
	if errors.Is(err, delta.ErrTableNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the history of %s: %w", key, err)
	}
	return hist, nil
}

// recordAt finds the record of the commit that set the txn version to v.
func recordAt(hist []delta.HistoryEntry, v int64) (tables.BatchBounds, bool) {
	for _, h := range hist {
		for _, t := range h.Txns {
			if t.AppID == tables.AppID && t.Version == v {
				return tables.ParseBatchBounds(h.CommitInfo)
			}
		}
	}
	return tables.BatchBounds{}, false
}

// CheckLake is the continuity check for the status surfaces (`oml lake
// status`, `oml status`, `oml doctor`): every tenant's tables are read
// (their logs only), nothing is written — not even the deployment record.
func CheckLake(ctx context.Context, db *pgxpool.Pool, lake store.Store) (Continuity, error) {
	pos, err := LakePositions(ctx, db, lake)
	if err != nil {
		return Continuity{}, err
	}
	return CheckContinuity(ctx, db, lake, pos)
}

// LakePositions reads the txn version of every table of every tenant
// (their logs only; tables that do not exist or hold no lake-writer commit
// are left out). A table whose log cannot be read is an error: callers
// that act on the positions (`oml outbox prune`) must not guess.
func LakePositions(ctx context.Context, db *pgxpool.Pool, lake store.Store) ([]TablePosition, error) {
	ids, err := tenant.IDs(ctx, db)
	if err != nil {
		return nil, err
	}
	tenant.ByID(ids)
	reg := newRegistry(lake, registryOptions{Delta: deltaOptions(), Lean: true, MaxOpen: oneShotOpenTables})
	all := make([]TablePosition, 0, len(ids)*len(tables.Kinds))
	for _, id := range ids {
		for _, k := range tables.Kinds {
			all = append(all, TablePosition{Key: tables.TableKey{Tenant: id, Kind: k}})
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(recordParallel)
	for i := range all {
		g.Go(func() error {
			w, err := reg.writer(gctx, all[i].Key, leaveMissing)
			if err != nil || w == nil {
				return err
			}
			// The record CheckContinuity needs comes from the same read.
			all[i] = positionOf(all[i].Key, w.Snapshot())
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	pos := all[:0]
	for _, p := range all {
		if p.TxnVersion > 0 {
			pos = append(pos, p)
		}
	}
	return pos, nil
}
