package maintain_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/maintain"
	"github.com/omlhq/oml/internal/testkit"
)

// miniSilver is a table with silver's key, body and state columns: three
// files, each with one erased row (body set) and one promoted row.
func miniSilver(t *testing.T) (store.Store, *delta.Writer) {
	t.Helper()
	ctx := context.Background()
	st := testkit.FileLake(t)
	schema := &delta.StructType{Fields: []delta.StructField{
		delta.Field("artifact_id", delta.Prim(delta.TypeString), true),
		delta.Field("version", delta.Prim(delta.TypeInteger), true),
		delta.Field("body", delta.Prim(delta.TypeBinary), true),
		delta.Field("state", delta.Prim(delta.TypeString), true),
	}}
	w, err := delta.CreateTable(ctx, st, delta.TableSpec{Schema: schema}, delta.Options{})
	require.NoError(t, err)
	for i := 0; i < 3; i++ {
		add, err := w.WriteFile(ctx, map[string]*string{}, []pq.Row{
			{fmt.Sprintf("a%d", i), int32(1), []byte("secret-" + fmt.Sprint(i)), "erased"},
			{fmt.Sprintf("b%d", i), int32(1), []byte("kept-" + fmt.Sprint(i)), "promoted"},
		})
		require.NoError(t, err)
		_, err = w.Commit(ctx, delta.Commit{Operation: "WRITE", Adds: []*delta.Add{add}})
		require.NoError(t, err)
	}
	return st, w
}

func requireErasedBodiesNull(t *testing.T, st store.Store, wantRows int) {
	t.Helper()
	rows := readRows(t, st)
	require.Len(t, rows, wantRows)
	for _, r := range rows {
		if r[3] == "erased" {
			require.Nil(t, r[2], "erased row %v keeps its body", r[0])
		} else {
			require.NotNil(t, r[2], "row %v lost its body", r[0])
		}
	}
}

// A commit that only appends lands between the rewrite's read and its
// commit: the rewrite is re-validated (its files are all still live) and
// committed on top, without starting again.
func TestEraseBodies_AppendWinsTheRace_RebasedOver(t *testing.T) {
	// Not parallel: the hook is package-global.
	ctx := context.Background()
	st, other := miniSilver(t)
	tab := maintain.Table{Key: tables.TableKey{Tenant: uuid.New(), Kind: tables.Silver}, Store: st}
	defer maintain.SetBeforeEraseCommit(func() {
		add, err := other.WriteFile(ctx, map[string]*string{}, []pq.Row{{"c", int32(1), []byte("new"), "promoted"}})
		require.NoError(t, err)
		_, err = other.Commit(ctx, delta.Commit{Operation: "STREAMING UPDATE", Adds: []*delta.Add{add}})
		require.NoError(t, err)
	})()
	r, err := maintain.EraseBodies(ctx, tab, maintain.EraseOptions{})
	require.NoError(t, err)
	require.Zero(t, r.Restarts)
	require.Equal(t, 3, r.FilesRewritten)
	require.EqualValues(t, 5, r.Version, "committed after the winner (v4)")
	requireErasedBodiesNull(t, st, 7)
	requireLogSound(t, "mini", readLog(t, st))
}

// A commit that removes one of the files being rewritten (as the lake
// writer's MERGE does) lands in between: publishing would bring back the
// row the MERGE replaced, so the rewrite starts again from the new
// snapshot, and the MERGE's row (state changed) survives.
func TestEraseBodies_MergeWinsTheRace_RedoneFromNewSnapshot(t *testing.T) {
	ctx := context.Background()
	st, other := miniSilver(t)
	tab := maintain.Table{Key: tables.TableKey{Tenant: uuid.New(), Kind: tables.Silver}, Store: st}
	fired := false
	defer maintain.SetBeforeEraseCommit(func() {
		if fired {
			return
		}
		fired = true
		f := other.Snapshot().Files()[0]
		key, err := delta.DecodePath(f.Path)
		require.NoError(t, err)
		var rows []pq.Row
		require.NoError(t, other.Snapshot().Scan(ctx, st, delta.ScanOptions{Files: []*delta.Add{f}}, func(_ *delta.Add, b []pq.Row) error {
			rows = append(rows, b...)
			return nil
		}))
		for _, r := range rows {
			if r[3] == "promoted" {
				r[3] = "demoted" // the MERGE's change
			}
		}
		add, err := other.WriteFile(ctx, map[string]*string{}, rows)
		require.NoError(t, err)
		rm, err := other.Remove(key)
		require.NoError(t, err)
		_, err = other.Commit(ctx, delta.Commit{Operation: "MERGE", Adds: []*delta.Add{add}, Removes: []*delta.Remove{rm}})
		require.NoError(t, err)
	})()
	r, err := maintain.EraseBodies(ctx, tab, maintain.EraseOptions{})
	require.NoError(t, err)
	require.Equal(t, 1, r.Restarts)
	require.Equal(t, 3, r.FilesRewritten)
	requireErasedBodiesNull(t, st, 6)
	demoted := 0
	for _, row := range readRows(t, st) {
		if row[3] == "demoted" {
			demoted++
		}
	}
	require.Equal(t, 1, demoted, "the MERGE's change survived the rewrite")
	requireLogSound(t, "mini", readLog(t, st))
}
