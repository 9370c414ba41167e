package lakewriter

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/maintain"
)

func cachingDrainer(budget int64) *Drainer { return &Drainer{mergeRows: newMergeRows(budget)} }

// commitRetrying is mergeTable.commit the way applyTable retries a lost
// commit race: the writer catches up and the commit is built again.
func (m *mergeTable) commitRetrying(todo ...*item) {
	for attempt := 0; ; attempt++ {
		c, stats := m.build(todo)
		_, err := m.w.Commit(context.Background(), c)
		var conflict *delta.ConflictError
		if errors.As(err, &conflict) && attempt < 3 {
			continue
		}
		require.NoError(m.tb, err)
		m.d.mergeRows.committed(m.key, &c, stats.written)
		return
	}
}

// withoutTenant blanks the tenant column (two tables of the test are of
// two tenants).
func withoutTenant(kind tables.Kind, rows []pq.Row) []pq.Row {
	col := int(tables.WorkareaTenantID)
	if kind == tables.Silver {
		col = int(tables.SilverTenantID)
	}
	for _, r := range rows {
		r[col] = nil
	}
	return rows
}

// TestMergeRows_TableSameAsWithoutTheCache: the same random inserts and
// changes MERGEd with the rows cache (a roomy one, and one so small it
// evicts all the time) and without leave the same rows, and the roomy one
// served its reads from memory.
func TestMergeRows_TableSameAsWithoutTheCache(t *testing.T) {
	t.Parallel()
	for _, kind := range []tables.Kind{tables.Workareas, tables.Silver} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			plain := newMergeTable(t, kind, &Drainer{}, store.NewMem())
			roomy := newMergeTable(t, kind, cachingDrainer(16<<20), store.NewMem())
			tight := newMergeTable(t, kind, cachingDrainer(8<<10), store.NewMem())
			// gold.workareas merged file by file, as before small tables
			// were rewritten whole (mergesWhole).
			byFile := cachingDrainer(16 << 20)
			byFile.workareasByFile = true
			all := []*mergeTable{plain, roomy, tight, newMergeTable(t, kind, byFile, store.NewMem())}
			rnd := rand.New(rand.NewPCG(1, 2))
			var names []string
			states := []string{journal.StateDemoted, journal.StateReassigned, journal.StateErased, journal.StatePromoted}
			for batch := 0; batch < 40; batch++ {
				todo := make([][]*item, len(all))
				seen := map[string]bool{}
				for n := 1 + rnd.IntN(5); n > 0; n-- {
					name, insert := fmt.Sprintf("k-%03d", rnd.IntN(1000)), true
					if len(names) > 0 && rnd.IntN(3) > 0 {
						name, insert = names[rnd.IntN(len(names))], false
					}
					if seen[name] || (insert && contains(names, name)) {
						continue // silver: one claim once per batch, and promoted once
					}
					seen[name] = true
					state := states[rnd.IntN(len(states))]
					for i, m := range all {
						if insert {
							todo[i] = append(todo[i], m.insert(name))
						} else {
							todo[i] = append(todo[i], m.change(name, state))
						}
					}
					if insert {
						names = append(names, name)
					}
				}
				for i, m := range all {
					if len(todo[i]) > 0 {
						m.commit(todo[i]...)
					}
				}
			}
			want := withoutTenant(kind, plain.rows())
			require.Len(t, want, len(names))
			require.Equal(t, want, withoutTenant(kind, roomy.rows()))
			require.Equal(t, want, withoutTenant(kind, tight.rows()))
			require.Equal(t, want, withoutTenant(kind, all[3].rows()))
			c := roomy.d.mergeRows.counts()
			require.Positive(t, c.Hits)
			require.Zero(t, c.Evictions)
			require.Equal(t, len(roomy.w.Snapshot().Files()), c.Files, "every live file of a table only MERGEs wrote is cached")
			// The tight cache evicts (silver's files), or keeps nothing
			// (gold.workareas' one file of the whole table is too big for
			// it), and its MERGEs read the store.
			tc := tight.d.mergeRows.counts()
			require.Positive(t, tc.Misses)
			if kind == tables.Workareas {
				require.Zero(t, tc.Files)
				require.Len(t, roomy.w.Snapshot().Files(), 1, "the small table is rewritten whole")
				require.Greater(t, len(all[3].w.Snapshot().Files()), 1)
			} else {
				require.Positive(t, tc.Evictions)
			}
			require.LessOrEqual(t, tc.Bytes, int64(8<<10))
		})
	}
}

func contains(s []string, v string) bool {
	for _, e := range s {
		if e == v {
			return true
		}
	}
	return false
}

// TestMergeRows_CommitThatNeverLandsLeavesTheCachedRows: a MERGE edits
// the rows mergeRows hands it (silver's retract sets columns in place), so
// a commit built but never landed (a lost race, a crash) must leave the
// cache's rows as they were: the next MERGE of the file starts from them.
func TestMergeRows_CommitThatNeverLandsLeavesTheCachedRows(t *testing.T) {
	t.Parallel()
	for _, kind := range []tables.Kind{tables.Workareas, tables.Silver} {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			m := newMergeTable(t, kind, cachingDrainer(16<<20), store.NewMem())
			m.commit(m.insert("a"), m.insert("b"))
			before := m.rows()
			_, stats := m.build([]*item{m.change("a", journal.StateDemoted)}) // never committed
			require.Len(t, stats.written, 1)
			require.Equal(t, before, m.rows(), "nothing landed")
			m.commit(m.change("b", journal.StateDemoted))
			after := m.rows()
			require.Equal(t, before[0], after[0], "the row of the commit that never landed is as it was")
			require.NotEqual(t, before[1], after[1])
			require.EqualValues(t, 2, m.d.mergeRows.counts().Hits)
		})
	}
}

// TestMergeRows_FileRewrittenByOthersIsReadFromTheStore: a cached file
// that another writer replaced — erasure nulling an erased claim's body
// (maintain.EraseBodies), a compaction (maintain.Compact), a second lake
// writer's MERGE — is not live any more, so the next MERGE reads the
// file that replaced it, even when it first builds on its stale snapshot
// (the cached rows of the old file) and loses the commit race. An erased
// body must never come back from memory.
func TestMergeRows_FileRewrittenByOthersIsReadFromTheStore(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, other := range []string{"erase", "compact", "writer"} {
		t.Run(other, func(t *testing.T) {
			t.Parallel()
			lake := store.NewMem()
			m := newMergeTable(t, tables.Silver, cachingDrainer(16<<20), lake)
			m.commit(m.insert("a"), m.insert("b"))
			m.commit(m.insert("c"))
			m.commit(m.change("a", journal.StateErased))
			root, err := m.key.Store(lake)
			require.NoError(t, err)
			tbl := maintain.Table{Key: m.key, Store: root}
			switch other {
			case "erase":
				res, err := maintain.EraseBodies(ctx, tbl, maintain.EraseOptions{})
				require.NoError(t, err)
				require.Equal(t, 1, res.BodiesNulled)
			case "compact":
				res, err := maintain.Compact(ctx, tbl, maintain.CompactOptions{})
				require.NoError(t, err)
				require.Equal(t, 2, res.FilesRemoved)
			case "writer":
				second := *m
				second.d = &Drainer{}
				second.w, err = delta.OpenWriter(ctx, root, delta.Options{})
				require.NoError(t, err)
				second.commit(second.change("a", journal.StateDemoted))
				m.seq = second.seq
			}
			misses := m.d.mergeRows.counts().Misses
			m.commitRetrying(m.change("b", journal.StateDemoted)) // on the stale snapshot first
			require.Greater(t, m.d.mergeRows.counts().Misses, misses, "the file that replaced b's was read from the store")
			m.commitRetrying(m.change("c", journal.StateDemoted))
			rows := m.rows()
			require.Len(t, rows, 3)
			a := tables.DecodeSilver(rows[0])
			switch other {
			case "erase":
				require.Equal(t, journal.StateErased, a.State)
				require.Nil(t, a.Body, "the erased body stays erased")
			case "compact":
				require.Equal(t, journal.StateErased, a.State)
			case "writer":
				require.Equal(t, journal.StateDemoted, a.State, "the second writer's change stays")
			}
			for _, r := range rows[1:] {
				require.Equal(t, journal.StateDemoted, tables.DecodeSilver(r).State)
			}
		})
	}
}

// TestMergeRows_BoundedAndKeyedByPathAndSize: the cache stays within its
// bytes, evicts the least recently used file first, leaves out a file
// bigger than a quarter of it, forgets the files a commit removes, and
// serves a file only under its path, table and size.
func TestMergeRows_BoundedAndKeyedByPathAndSize(t *testing.T) {
	t.Parallel()
	rows := func(n int) []pq.Row {
		out := make([]pq.Row, n)
		for i := range out {
			out[i] = pq.Row{fmt.Sprintf("row-%d", i), int64(i)}
		}
		return out
	}
	one := rowsBytes(rows(10))
	budget := 4*one + one/2 // room for four, a quarter over one
	c := newMergeRows(budget)
	key := tables.TableKey{Kind: tables.Workareas}
	other := tables.TableKey{Kind: tables.Silver}
	adds := make([]*delta.Add, 6)
	for i := range adds {
		adds[i] = &delta.Add{Path: fmt.Sprintf("part-%d.parquet", i), Size: 100}
		c.committed(key, &delta.Commit{}, []writtenFile{{add: adds[i], rows: rows(10)}})
		require.LessOrEqual(t, c.counts().Bytes, budget)
		if i == 3 {
			_, ok := c.get(key, adds[0]) // 0 is now the most recently used
			require.True(t, ok)
		}
	}
	for i, want := range []bool{true, false, false, true, true, true} {
		_, ok := c.get(key, adds[i])
		require.Equal(t, want, ok, "file %d", i)
	}
	require.EqualValues(t, 2, c.counts().Evictions)

	_, ok := c.get(other, adds[5])
	require.False(t, ok, "another table's file of the same path")
	_, ok = c.get(key, &delta.Add{Path: adds[5].Path, Size: 101})
	require.False(t, ok, "the same path with another size")
	_, ok = c.get(key, adds[5])
	require.True(t, ok)

	c.committed(key, &delta.Commit{Removes: []*delta.Remove{{Path: adds[5].Path}}}, nil)
	_, ok = c.get(key, adds[5])
	require.False(t, ok, "a removed file is dropped")
	c.committed(key, &delta.Commit{}, []writtenFile{{add: &delta.Add{Path: "big", Size: 1}, rows: rows(20)}})
	_, ok = c.get(key, &delta.Add{Path: "big", Size: 1})
	require.False(t, ok, "a file over a quarter of the budget is not kept")

	var off *mergeRows // Options.MergeRowsBytes < 0
	off.committed(key, &delta.Commit{}, []writtenFile{{add: adds[0], rows: rows(1)}})
	_, ok = off.get(key, adds[0])
	require.False(t, ok)
}

// TestMergeRows_SilverFilesKeptOnlyInRoomWorkareasDoNotNeed: a silver
// file (the claims a batch inserted, rarely read again: only a later
// retract of one of them) goes in at the least recently used end, so a
// full cache evicts it before any gold/workareas file (the whole table its
// next MERGE rewrites); one a retract found moves to the front like any.
func TestMergeRows_SilverFilesKeptOnlyInRoomWorkareasDoNotNeed(t *testing.T) {
	t.Parallel()
	rows := []pq.Row{{"row", int64(1)}}
	one := rowsBytes(rows)
	c := newMergeRows(4 * one) // room for four
	wa := tables.TableKey{Kind: tables.Workareas}
	silver := tables.TableKey{Kind: tables.Silver}
	add := func(i int) *delta.Add { return &delta.Add{Path: fmt.Sprintf("part-%d.parquet", i), Size: 100} }
	put := func(key tables.TableKey, i int) {
		c.committed(key, &delta.Commit{}, []writtenFile{{add: add(i), rows: rows}})
	}
	put(silver, 0)
	put(silver, 1)
	_, ok := c.get(silver, add(1)) // found by a retract: used like any file
	require.True(t, ok)
	put(wa, 2)
	put(wa, 3)
	put(silver, 4) // the cache is full: it is evicted at once
	_, ok = c.get(silver, add(4))
	require.False(t, ok)
	put(wa, 5) // the least recently used silver file makes room
	put(wa, 6)
	for i, want := range []bool{false, false, true, true, false, true, true} {
		key := wa
		if i < 2 || i == 4 {
			key = silver
		}
		_, ok := c.get(key, add(i)) // in this order: 2 is then the least recently used
		require.Equal(t, want, ok, "file %d", i)
	}
	put(wa, 7) // a workareas file evicts the least recently used workareas one
	_, ok = c.get(wa, add(2))
	require.False(t, ok)
}

// TestStatsMayHold: a file is pruned only by string bounds it has; a
// missing, null or non-string bound, or stats that do not decode, keep it.
func TestStatsMayHold(t *testing.T) {
	t.Parallel()
	keys := map[string]bool{"m": true}
	id := func(k string) string { return k }
	for stats, want := range map[string]bool{
		``:  true,
		`{`: true,
		`{"minValues":{"workarea_id":"a"},"maxValues":{"workarea_id":"z"}}`:  true,
		`{"minValues":{"workarea_id":"n"},"maxValues":{"workarea_id":"z"}}`:  false,
		`{"minValues":{"workarea_id":"a"},"maxValues":{"workarea_id":"l"}}`:  false,
		`{"minValues":{"workarea_id":"a"},"maxValues":{"workarea_id":null}}`: true,
		`{"minValues":{"workarea_id":"a"},"maxValues":{"workarea_id":7}}`:    true,
		`{"minValues":{"workarea_id":"n"}}`:                                  false,
		`{"maxValues":{"workarea_id":"l"}}`:                                  false,
		`{"minValues":{"other":"n"},"maxValues":{"other":"l"}}`:              true,
		`{"numRecords":3}`: true,
	} {
		require.Equal(t, want, statsMayHold(&delta.Add{Stats: stats}, "workarea_id", keys, id), stats)
	}
}
