package delta

import (
	"encoding/json"
	"sort"
)

// txnEntry is what a snapshot knows of one appId's latest txn.
type txnEntry struct {
	txn Txn
	// at is the version that set it; info the commitInfo of that commit,
	// when the snapshot replayed or made it (Snapshot.txnInfo's contract).
	at   int64
	info json.RawMessage
}

// txnState holds the latest txn per appId. Nearly every table has one
// appId (the lake writer's), and the lake writer keeps thousands of
// snapshots open: three maps by appId (txn, version, commitInfo) cost a
// map header and a group of eight slots each, about 1 KB per table,
// where one entry in a slice costs 80 bytes. Past txnIndexAt appIds (a
// table many streaming queries write) a map indexes the slice, so a
// replay stays linear in the log.
type txnState struct {
	list  []txnEntry
	index map[string]int // by appId, once list is longer than txnIndexAt
}

const txnIndexAt = 8

// find returns appID's entry (nil: none). The pointer is valid until the
// next put.
func (t *txnState) find(appID string) *txnEntry {
	if t.index != nil {
		if i, ok := t.index[appID]; ok {
			return &t.list[i]
		}
		return nil
	}
	for i := range t.list {
		if t.list[i].txn.AppID == appID {
			return &t.list[i]
		}
	}
	return nil
}

// put returns appID's entry, adding an empty one when there is none. The
// pointer is valid until the next put.
func (t *txnState) put(appID string) *txnEntry {
	if e := t.find(appID); e != nil {
		return e
	}
	t.list = append(t.list, txnEntry{txn: Txn{AppID: appID}})
	n := len(t.list)
	switch {
	case t.index != nil:
		t.index[appID] = n - 1
	case n > txnIndexAt:
		t.index = make(map[string]int, n)
		for i := range t.list {
			t.index[t.list[i].txn.AppID] = i
		}
	}
	return &t.list[n-1]
}

// len is the number of appIds.
func (t *txnState) len() int { return len(t.list) }

// sorted returns the txns ordered by appId (a checkpoint's order).
func (t *txnState) sorted() []Txn {
	out := make([]Txn, len(t.list))
	for i := range t.list {
		out[i] = t.list[i].txn
	}
	sort.Slice(out, func(i, j int) bool { return out[i].AppID < out[j].AppID })
	return out
}
