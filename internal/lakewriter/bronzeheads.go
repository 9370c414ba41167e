package lakewriter

import (
	"bytes"
	"context"
	"maps"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// The fork check compares each tenant's journal with two anchors, its
// newest witness and the newest event its bronze.events table holds.
// Reading the bronze anchor from the lake means a table's log and the data
// file(s) holding its newest seq: at 10,000 tenants that was most of the
// periodic check's 10–28 s of CPU on the 2-core VM, once a minute, beside
// the batches. The writer holding the lease is the only one that writes
// bronze, and it knows what it wrote: bronzeHeads remembers, per tenant,
// the newest bronze event it has seen in the lake (read by a fork check)
// or committed itself, and the periodic check takes the bronze anchor from
// there. Only tenants it knows nothing of are read from the lake.
//
// What this keeps: the anchor checked is never older than the lake's.
// Bronze rows of a tenant are appended in seq order (a table at txn
// version v holds every one of its rows ≤ v, and a tenant's outbox order
// is its journal order), so after a commit the newest bronze event is the
// newest one the commit wrote, or the one known before if that is newer.
// An anchor is an event bronze held: the journal must still hold it, so
// keeping the newest seen (even past a restore of an older lake copy)
// checks no less than the lake would.
//
// What it drops: a change to the lake by someone else while this writer
// holds the lease (nothing should write bronze then). The check at each
// start of a lease reads every table (scan.go) and replaces the memory
// (reset), and a periodic check at least every forkFullPassInterval reads
// every anchor from the lake again, so such a change is still seen, later.
type bronzeHeads struct {
	mu    sync.Mutex
	heads map[uuid.UUID]bronze.Head
}

// forkFullPassInterval is how often a periodic fork check reads every
// bronze anchor from the lake (bronzeHeads), counted from the last check
// that did (the one at start does).
const forkFullPassInterval = 30 * time.Minute

// reset makes heads, read by a fork check before anything was written
// under this lease, the whole memory.
func (m *bronzeHeads) reset(heads map[uuid.UUID]bronze.Head) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.heads = maps.Clone(heads)
}

// seen merges heads read from the lake while batches committed: a head
// read before a commit the memory already has is older and is ignored.
func (m *bronzeHeads) seen(heads map[uuid.UUID]bronze.Head) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for t, h := range heads {
		m.keepLocked(t, h)
	}
}

// committed records the newest bronze row of a commit to tenant's
// bronze.events at table version v.
func (m *bronzeHeads) committed(tenant uuid.UUID, rows []*item, v int64) {
	h := bronze.Head{Seq: -1, Version: v}
	for _, it := range rows {
		r := tables.DecodeBronze(it.row)
		if r.Seq <= 0 || len(r.Hash) == 0 {
			continue // not an event row: never an anchor (journal seqs start at 1)
		}
		if r.Seq > h.Seq {
			h.Seq, h.Hash = r.Seq, r.Hash
		}
	}
	if h.Seq < 0 {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keepLocked(tenant, h)
}

// keepLocked keeps the newer of h and the head known for t; another hash
// at the known seq is kept beside it (bronze holding two events at one seq
// is fork evidence, as bronze.Head says).
func (m *bronzeHeads) keepLocked(t uuid.UUID, h bronze.Head) {
	if m.heads == nil {
		m.heads = map[uuid.UUID]bronze.Head{}
	}
	old, ok := m.heads[t]
	switch {
	case !ok || h.Seq > old.Seq:
		m.heads[t] = h
	case h.Seq == old.Seq:
		for _, x := range append([][]byte{h.Hash}, h.Others...) {
			if !bytes.Equal(x, old.Hash) && !containsHash(old.Others, x) {
				old.Others = append(old.Others, x)
			}
		}
		old.Version = max(old.Version, h.Version)
		m.heads[t] = old
	}
}

func containsHash(hs [][]byte, h []byte) bool {
	for _, x := range hs {
		if bytes.Equal(x, h) {
			return true
		}
	}
	return false
}

// reader serves the periodic fork check's bronze anchors: the head known,
// else read from lake now (bronze.ReadHead).
func (m *bronzeHeads) reader(lake store.Store) chainverify.HeadReader {
	return func(ctx context.Context, tenant uuid.UUID) (bronze.Head, bool, error) {
		m.mu.Lock()
		h, ok := m.heads[tenant]
		m.mu.Unlock()
		if ok {
			return h, true, nil
		}
		return bronze.ReadHead(ctx, lake, tenant)
	}
}
