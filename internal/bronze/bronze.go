package bronze

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// Key is tenant's bronze table.
func Key(tenant uuid.UUID) tables.TableKey {
	return tables.TableKey{Tenant: tenant, Kind: tables.Bronze}
}

// Head is the newest event bronze holds for a tenant.
type Head struct {
	Seq  int64
	Hash []byte
	// Others holds further, different hashes found at Seq (bronze holding
	// two events at one seq is itself fork evidence).
	Others [][]byte
	// Version is the table version read.
	Version int64
}

// Event is one bronze row: a journal event as the lake holds it.
type Event struct {
	Tenant     string
	Seq        int64
	EventType  string
	RecordedAt time.Time
	PrevHash   []byte
	Hash       []byte
	Signature  []byte
	KeyID      string
	Payload    []byte
	OutboxSeq  int64
	// File is the data file the row was read from (for messages).
	File string
}

// open loads the tenant's bronze snapshot; ok=false when there is no table.
func open(ctx context.Context, lake store.Store, tenant uuid.UUID) (*delta.Snapshot, store.Store, bool, error) {
	st, err := Key(tenant).Store(lake)
	if err != nil {
		return nil, nil, false, fmt.Errorf("bronze table of tenant %s: %w", tenant, err)
	}
	snap, err := delta.Load(ctx, st)
	if errors.Is(err, delta.ErrTableNotFound) {
		return nil, nil, false, nil
	}
	if err != nil {
		return nil, nil, false, fmt.Errorf("read the Delta log of %s: %w", Key(tenant), err)
	}
	return snap, st, true, nil
}

// seqBounds are a data file's seq statistics; ok=false when the file has
// none (it must then be read).
func seqBounds(f *delta.Add) (lo, hi int64, ok bool) {
	if f.Stats == "" {
		return 0, 0, false
	}
	// Other columns' bounds are strings and timestamps: decode loosely and
	// take seq's.
	var s struct {
		MinValues map[string]any `json:"minValues"`
		MaxValues map[string]any `json:"maxValues"`
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(f.Stats)))
	dec.UseNumber()
	if dec.Decode(&s) != nil {
		return 0, 0, false
	}
	ln, lok := s.MinValues[tables.BronzeSeq.Name()].(json.Number)
	hn, hok := s.MaxValues[tables.BronzeSeq.Name()].(json.Number)
	if !lok || !hok {
		return 0, 0, false
	}
	l, lerr := ln.Int64()
	h, herr := hn.Int64()
	if lerr != nil || herr != nil {
		return 0, 0, false
	}
	return l, h, true
}

// ReadHead returns the newest event bronze holds for tenant (ok=false when
// the table does not exist or is empty). It reads the log, then only the
// data files whose seq statistics reach the newest seq (every file lacking
// statistics too).
func ReadHead(ctx context.Context, lake store.Store, tenant uuid.UUID) (Head, bool, error) {
	snap, st, ok, err := open(ctx, lake, tenant)
	if err != nil || !ok {
		return Head{}, false, err
	}
	return HeadOf(ctx, snap, st, tenant)
}

// HeadOf is ReadHead on a snapshot already loaded (full or lean: a lean
// snapshot's base files are streamed from its checkpoint), with st the
// table's store: the lake writer reads each table's log once at start
// and hands the same snapshot to the fork check.
func HeadOf(ctx context.Context, snap *delta.Snapshot, st store.Store, tenant uuid.UUID) (Head, bool, error) {
	h, ok, _, err := HeadOfFiles(ctx, snap, st, tenant)
	return h, ok, err
}

// HeadOfFiles is HeadOf that also returns the data files it read for the
// head (the lake summary fingerprints them: a head kept from an earlier
// read is only as true as those files).
func HeadOfFiles(ctx context.Context, snap *delta.Snapshot, st store.Store, tenant uuid.UUID) (Head, bool, []*delta.Add, error) {
	best := int64(-1)
	var read []*delta.Add // every file that may reach the newest seq seen so far
	err := snap.EachFile(ctx, st, func(f *delta.Add) error {
		_, hi, ok := seqBounds(f)
		if ok && hi < best {
			return nil
		}
		if ok && hi > best {
			best = hi
			kept := read[:0]
			for _, r := range read {
				if _, rhi, rok := seqBounds(r); !rok || rhi >= best {
					kept = append(kept, r)
				}
			}
			read = kept
		}
		read = append(read, f)
		return nil
	})
	if err != nil {
		return Head{}, false, nil, fmt.Errorf("read the Delta log of %s: %w", Key(tenant), err)
	}
	h := Head{Seq: -1, Version: snap.Version()}
	if len(read) == 0 {
		return Head{}, false, nil, nil
	}
	err = snap.Scan(ctx, st, delta.ScanOptions{Columns: headCols.Columns(), Files: read}, func(_ *delta.Add, rows []pq.Row) error {
		for _, r := range rows {
			e := headCols.Decode(r)
			seq, hash := e.Seq, e.Hash
			switch {
			case seq > h.Seq:
				h.Seq, h.Hash, h.Others = seq, hash, nil
			case seq == h.Seq && !bytes.Equal(hash, h.Hash):
				dup := false
				for _, o := range h.Others {
					dup = dup || bytes.Equal(o, hash)
				}
				if !dup {
					h.Others = append(h.Others, hash)
				}
			}
		}
		return nil
	})
	if err != nil {
		return Head{}, false, nil, fmt.Errorf("read the newest event of %s: %w", Key(tenant), err)
	}
	if h.Seq < 1 {
		return Head{}, false, read, nil
	}
	return h, true, read, nil
}

var (
	headCols  = tables.BronzeColumns(tables.BronzeSeq, tables.BronzeHash)
	eventCols = tables.BronzeColumns()
)

// Events returns every bronze row of tenant with seq ≥ from, ordered by
// seq (then outbox seq), reading only the files whose seq statistics reach
// from. Duplicate rows are returned as stored: the caller decides.
func Events(ctx context.Context, lake store.Store, tenant uuid.UUID, from int64) ([]Event, error) {
	snap, st, ok, err := open(ctx, lake, tenant)
	if err != nil || !ok {
		return nil, err
	}
	var read []*delta.Add
	for _, f := range snap.Files() {
		if _, hi, ok := seqBounds(f); !ok || hi >= from {
			read = append(read, f)
		}
	}
	if len(read) == 0 {
		return nil, nil
	}
	var out []Event
	err = snap.Scan(ctx, st, delta.ScanOptions{Columns: eventCols.Columns(), Files: read}, func(f *delta.Add, rows []pq.Row) error {
		for _, r := range rows {
			b := eventCols.Decode(r)
			if b.Seq < from {
				continue
			}
			e := Event{Tenant: b.TenantID, Seq: b.Seq, EventType: b.EventType, RecordedAt: b.RecordedAt, PrevHash: b.PrevHash,
				Hash: b.Hash, Signature: b.Signature, KeyID: b.KeyID, OutboxSeq: b.OutboxSeq, File: f.Path}
			if r[tables.BronzePayload] != nil { // eventCols is every column, in schema order; a null payload stays nil
				e.Payload = []byte(b.Payload)
			}
			out = append(out, e)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s from seq %d: %w", Key(tenant), from, err)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Seq != out[j].Seq {
			return out[i].Seq < out[j].Seq
		}
		return out[i].OutboxSeq < out[j].OutboxSeq
	})
	return out, nil
}
