package delta

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
)

func testSchema() *StructType {
	return &StructType{Fields: []StructField{
		Field("id", Prim(TypeLong), false),
		Field("name", Prim(TypeString), true),
		Field("day", Prim(TypeDate), true),
	}}
}

func newTestTable(t *testing.T, st store.Store, partitionBy ...string) *Writer {
	t.Helper()
	w, err := CreateTable(context.Background(), st, TableSpec{Schema: testSchema(), PartitionColumns: partitionBy}, Options{})
	require.NoError(t, err)
	return w
}

// fakeAdd is an add action for a file that is not read (log-level tests).
func fakeAdd(day string) *Add {
	name := "part-" + uuid.NewString() + ".parquet"
	pv := map[string]*string{}
	if day != "" {
		d := day
		pv["day"] = &d
		name = "day=" + day + "/" + name
	}
	return &Add{Path: EncodePath(name), PartitionValues: pv, Size: 100, ModificationTime: time.Now().UnixMilli(), DataChange: true,
		Stats: `{"numRecords":1}`}
}

// snapState is the comparable content of a snapshot.
type snapState struct {
	Version    int64
	Files      []string
	Tombstones []string
	Txns       map[string]int64
	Protocol   Protocol
	MetadataID string
	Schema     string
	Partitions []string
}

func stateOf(s *Snapshot) snapState {
	st := snapState{Version: s.Version(), Txns: map[string]int64{}, Protocol: s.Protocol(), MetadataID: s.Metadata().ID,
		Schema: s.Metadata().SchemaString, Partitions: s.PartitionColumns()}
	for _, a := range s.Files() {
		pv := ""
		for _, k := range sortedKeys(a.PartitionValues) {
			if v := a.PartitionValues[k]; v != nil {
				pv += k + "=" + *v + ";"
			} else {
				pv += k + "=<null>;"
			}
		}
		st.Files = append(st.Files, a.Path+fmt.Sprintf("|%d|%d|%t|%s|%s", a.Size, a.ModificationTime, a.DataChange, a.Stats, pv))
	}
	for _, r := range s.Tombstones() {
		ts := int64(-1)
		if r.DeletionTimestamp != nil {
			ts = *r.DeletionTimestamp
		}
		st.Tombstones = append(st.Tombstones, fmt.Sprintf("%s|%d|%t", r.Path, ts, r.DataChange))
	}
	for k, v := range s.Txns() {
		st.Txns[k] = v.Version
	}
	sort.Strings(st.Files)
	return st
}

func TestWriterRoundTripEveryVersion(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	w := newTestTable(t, st, "day")
	states := []snapState{stateOf(w.Snapshot())}
	for i := 1; i <= 12; i++ {
		c := Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("2026-01-0" + fmt.Sprint(1+i%3)), fakeAdd("2026-01-01")},
			Txn: &Txn{AppID: "oml-lakewriter", Version: int64(i * 10)}, Extra: map[string]any{"omlBatch": map[string]any{"from": i, "to": i + 1}}}
		if i%4 == 0 { // copy-on-write rewrite of the oldest live file
			files := w.Snapshot().Files()
			key, err := DecodePath(files[0].Path)
			require.NoError(t, err)
			rm, err := w.Remove(key)
			require.NoError(t, err)
			c.Operation, c.Removes = "MERGE", []*Remove{rm}
		}
		v, err := w.Commit(ctx, c)
		require.NoError(t, err)
		require.Equal(t, int64(i), v)
		states = append(states, stateOf(w.Snapshot()))
	}
	for v, want := range states {
		snap, err := Load(ctx, st, AtVersion(int64(v)))
		require.NoError(t, err)
		require.Equal(t, want, stateOf(snap), "version %d", v)
	}
	latest, err := Load(ctx, st)
	require.NoError(t, err)
	require.Equal(t, states[len(states)-1], stateOf(latest))
	tv, ok := latest.TxnVersion("oml-lakewriter")
	require.True(t, ok)
	require.Equal(t, int64(120), tv)

	_, err = Load(ctx, st, AtVersion(13))
	require.ErrorIs(t, err, ErrVersionNotFound)
}

func TestWriterCommitInfoFirstWithOperationAndExtras(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	w := newTestTable(t, st)
	_, err := w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")},
		OperationParameters: map[string]any{"mode": "Append", "partitionBy": []string{"day"}, "auto": false}, OperationMetrics: map[string]any{"numFiles": "1", "numOutputRows": 3},
		Extra: map[string]any{"omlBatch": map[string]any{"fromSeq": 1, "toSeq": 9}}, Txn: &Txn{AppID: "a", Version: 9}})
	require.NoError(t, err)
	for v := int64(0); v <= 1; v++ {
		b, err := st.Get(ctx, CommitKey(v))
		require.NoError(t, err)
		acts, err := DecodeCommitBytes(b)
		require.NoError(t, err)
		require.Equal(t, "commitInfo", acts[0].Kind())
		ci := ParseCommitInfo(acts[0].CommitInfo)
		require.NotEmpty(t, ci.CommitID)
		require.Contains(t, ci.EngineInfo, "oml/")
		if v == 0 {
			require.Equal(t, "CREATE TABLE", ci.Operation)
			require.Equal(t, "protocol", acts[1].Kind())
			require.Equal(t, Protocol{MinReaderVersion: 1, MinWriterVersion: 2}, *acts[1].Protocol)
			require.Equal(t, "metaData", acts[2].Kind())
			require.NotNil(t, acts[2].MetaData.CreatedTime)
		} else {
			require.Equal(t, "WRITE", ci.Operation)
			require.Contains(t, string(acts[0].CommitInfo), `"omlBatch":{"fromSeq":1,"toSeq":9}`)
			// Spark reads parameters and metrics as maps of strings.
			require.Equal(t, map[string]any{"mode": "Append", "partitionBy": `["day"]`, "auto": "false"}, ci.OperationParameters)
			require.Equal(t, map[string]any{"numFiles": "1", "numOutputRows": "3"}, ci.OperationMetrics)
			require.Equal(t, "txn", acts[len(acts)-1].Kind())
			require.NotNil(t, acts[len(acts)-1].Txn.LastUpdated)
		}
	}
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Extra: map[string]any{"txnId": "x"}})
	require.Error(t, err)
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Txn: &Txn{AppID: "a", Version: 9}})
	require.ErrorIs(t, err, ErrTxnNotNewer)
}

func TestWriterConflictCarriesWinnerTxn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.NewMem()
	newTestTable(t, st)
	w1, err := OpenWriter(ctx, st, Options{})
	require.NoError(t, err)
	w2, err := OpenWriter(ctx, st, Options{})
	require.NoError(t, err)

	_, err = w1.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "oml-lakewriter", Version: 50}})
	require.NoError(t, err)

	// w2 tries the same batch: it loses and learns its txn is applied.
	_, err = w2.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "oml-lakewriter", Version: 50}})
	var ce *ConflictError
	require.ErrorAs(t, err, &ce)
	require.ErrorIs(t, err, ErrConflict)
	require.Equal(t, int64(1), ce.Version)
	require.Len(t, ce.Winners, 1)
	require.True(t, ce.TxnApplied("oml-lakewriter", 50))
	require.False(t, ce.TxnApplied("oml-lakewriter", 51))
	require.True(t, ce.ChangedFiles())
	require.Equal(t, "WRITE", ce.Winners[0].Operation)
	// w2 caught up: its snapshot has w1's commit, and its next batch lands at 2.
	require.Equal(t, int64(1), w2.Version())
	v, err := w2.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "oml-lakewriter", Version: 60}})
	require.NoError(t, err)
	require.Equal(t, int64(2), v)
	snap, err := Load(ctx, st)
	require.NoError(t, err)
	require.Equal(t, 2, snap.NumFiles())
}

// TestPutIfAbsentRace: many writers commit the same version at once;
// exactly one wins, the others get the typed conflict, and the commit file
// is the winner's.
func TestPutIfAbsentRace(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"mem", "file", "s3"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var st store.Store = store.NewMem()
			switch backend {
			case "file":
				fs, err := store.NewFile(t.TempDir())
				require.NoError(t, err)
				st = fs
			case "s3":
				st = store.MustSub(s3test.NewBucket(t, nil).Store, "tenant/bronze/events")
			}
			newTestTable(t, st)
			const n = 16
			writers := make([]*Writer, n)
			for i := range writers {
				w, err := OpenWriter(ctx, st, Options{})
				require.NoError(t, err)
				writers[i] = w
			}
			start := make(chan struct{})
			errs := make([]error, n)
			var wg sync.WaitGroup
			for i := range writers {
				wg.Add(1)
				go func(i int) {
					defer wg.Done()
					<-start
					_, errs[i] = writers[i].Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")},
						Txn: &Txn{AppID: fmt.Sprintf("w%d", i), Version: 1}})
				}(i)
			}
			close(start)
			wg.Wait()
			winner := -1
			for i, err := range errs {
				if err == nil {
					require.Equal(t, -1, winner, "two winners")
					winner = i
					continue
				}
				var ce *ConflictError
				require.ErrorAs(t, err, &ce, "writer %d", i)
				require.Equal(t, int64(1), ce.Version)
				require.True(t, ce.TxnApplied(fmt.Sprintf("w%d", winner), 1) || winner == -1)
			}
			require.NotEqual(t, -1, winner)
			snap, err := Load(ctx, st)
			require.NoError(t, err)
			require.Equal(t, int64(1), snap.Version())
			require.Equal(t, map[string]Txn{fmt.Sprintf("w%d", winner): snap.Txns()[fmt.Sprintf("w%d", winner)]}, snap.Txns())
			for i, err := range errs {
				if err != nil {
					var ce *ConflictError
					require.ErrorAs(t, err, &ce)
					require.True(t, ce.TxnApplied(fmt.Sprintf("w%d", winner), 1), "writer %d", i)
				}
			}
		})
	}
}

func TestAmbiguousCommitResolvedByReadBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		rule store.Rule
	}{
		// The PUT lands but the caller is told the outcome is unknown.
		{"landed-but-reported-ambiguous", store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent}, Key: "_delta_log/00000000000000000001.json", Kind: store.FaultAmbiguous, Times: 1}},
		// The PUT times out without landing: the writer re-puts the same bytes.
		{"timed-out-not-landed", store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent}, Key: "_delta_log/00000000000000000001.json", Kind: store.FaultTimeout, Delay: time.Millisecond, Times: 1}},
		// The PUT lands, is reported ambiguous, and the read-back fails once.
		{"landed-readback-fails-once", store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent}, Key: "_delta_log/00000000000000000001.json", Kind: store.FaultAmbiguous, Times: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mem := store.NewMem()
			newTestTable(t, mem)
			rules := []store.Rule{tc.rule}
			if tc.name == "landed-readback-fails-once" {
				rules = append(rules, store.Rule{Ops: []store.OpKind{store.OpGet}, Key: "_delta_log/00000000000000000001.json", Kind: store.FaultError, Times: 1})
			}
			fs := store.NewFaulty(mem, rules...)
			w, err := OpenWriter(ctx, fs, Options{})
			require.NoError(t, err)
			v, err := w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "a", Version: 7}})
			require.NoError(t, err)
			require.Equal(t, int64(1), v)
			// Exactly one commit 1, and no commit 2.
			snap, err := Load(ctx, mem)
			require.NoError(t, err)
			require.Equal(t, int64(1), snap.Version())
			require.Equal(t, 1, snap.NumFiles())
			// The writer continues at version 2.
			v, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "a", Version: 8}})
			require.NoError(t, err)
			require.Equal(t, int64(2), v)
		})
	}
}

func TestAmbiguousCommitThatLostIsAConflict(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := store.NewMem()
	newTestTable(t, mem)
	other, err := OpenWriter(ctx, mem, Options{})
	require.NoError(t, err)
	// Every put of version 1 by w is reported ambiguous; in between,
	// another writer wins version 1.
	fs := store.NewFaulty(mem, store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent}, Key: "_delta_log/00000000000000000001.json", Kind: store.FaultTimeout, Delay: time.Millisecond, Times: 1,
		Match: func(store.OpKind, string) bool {
			_, err := other.Commit(ctx, Commit{Operation: "WRITE", Txn: &Txn{AppID: "b", Version: 1}})
			return err == nil
		}})
	w, err := OpenWriter(ctx, fs, Options{})
	require.NoError(t, err)
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "a", Version: 7}})
	var ce *ConflictError
	require.ErrorAs(t, err, &ce)
	require.True(t, ce.TxnApplied("b", 1))
	snap, err := Load(ctx, mem)
	require.NoError(t, err)
	require.Equal(t, int64(1), snap.Version())
	require.Equal(t, 0, snap.NumFiles())
}

func TestAmbiguousCommitUnresolvedBreaksWriter(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := store.NewMem()
	newTestTable(t, mem)
	fs := store.NewFaulty(mem,
		store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent}, Key: "_delta_log/*.json", Kind: store.FaultTimeout, Delay: time.Millisecond},
	)
	w, err := OpenWriter(ctx, fs, Options{ReadBackAttempts: 2})
	require.NoError(t, err)
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}})
	var ae *AmbiguousCommitError
	require.ErrorAs(t, err, &ae)
	require.ErrorIs(t, err, store.ErrAmbiguous)
	_, err = w.Commit(ctx, Commit{Operation: "WRITE"})
	require.ErrorIs(t, err, store.ErrAmbiguous, "the writer stays broken until reopened")
	snap, err := Load(ctx, mem)
	require.NoError(t, err)
	require.Equal(t, int64(0), snap.Version(), "no partial commit is visible")
}

func TestStoreErrorLeavesNoCommit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := store.NewMem()
	newTestTable(t, mem)
	fs := store.NewFaulty(mem, store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent}, Kind: store.FaultError, Times: 1})
	w, err := OpenWriter(ctx, fs, Options{})
	require.NoError(t, err)
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}})
	require.ErrorIs(t, err, store.ErrInjected)
	snap, err := Load(ctx, mem)
	require.NoError(t, err)
	require.Equal(t, int64(0), snap.Version())
	v, err := w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}})
	require.NoError(t, err)
	require.Equal(t, int64(1), v)
}

func TestWriterFailsClosedWhenTableUpgraded(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := store.NewMem()
	w := newTestTable(t, mem)
	// Another engine enables deletion vectors behind our back.
	body, err := EncodeCommit([]Action{
		{CommitInfo: []byte(`{"operation":"UPGRADE PROTOCOL"}`)},
		{Protocol: &Protocol{MinReaderVersion: 3, MinWriterVersion: 7, ReaderFeatures: []string{"deletionVectors"}, WriterFeatures: []string{"deletionVectors"}}},
	})
	require.NoError(t, err)
	require.NoError(t, mem.PutIfAbsent(ctx, CommitKey(1), body))
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}})
	require.ErrorIs(t, err, ErrUnsupported)
	require.Contains(t, err.Error(), "deletionVectors")
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}})
	require.ErrorIs(t, err, ErrUnsupported)
	snap, err := Load(ctx, mem, AtVersion(1))
	require.Nil(t, snap)
	require.ErrorIs(t, err, ErrUnsupported)
}

func TestWriterGateAppendOnlyAndInvariants(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := store.NewMem()
	w, err := CreateTable(ctx, mem, TableSpec{Schema: testSchema(), Configuration: map[string]string{"delta.appendOnly": "true"}}, Options{})
	require.NoError(t, err)
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}})
	require.NoError(t, err)
	key, _ := DecodePath(w.Snapshot().Files()[0].Path)
	rm, err := w.Remove(key)
	require.NoError(t, err)
	_, err = w.Commit(ctx, Commit{Operation: "DELETE", Removes: []*Remove{rm}})
	require.ErrorIs(t, err, ErrUnsupported)
	require.Contains(t, err.Error(), "appendOnly")
	// Compaction (dataChange=false) is allowed on an append-only table.
	rm, err = w.RemoveCompacted(key)
	require.NoError(t, err)
	add := fakeAdd("")
	add.DataChange = false
	_, err = w.Commit(ctx, Commit{Operation: "OPTIMIZE", Removes: []*Remove{rm}, Adds: []*Add{add}})
	require.NoError(t, err)

	schema := testSchema()
	schema.Fields[0].Metadata["delta.invariants"] = []byte(`"{\"expression\":{\"expression\":\"id > 0\"}}"`)
	_, err = CreateTable(ctx, store.NewMem(), TableSpec{Schema: schema}, Options{})
	require.ErrorIs(t, err, ErrUnsupported)
	require.Contains(t, err.Error(), "invariants")

	_, err = CreateTable(ctx, store.NewMem(), TableSpec{Schema: testSchema(), Configuration: map[string]string{"delta.setTransactionRetentionDuration": "interval 1 days"}}, Options{})
	require.ErrorIs(t, err, ErrUnsupported)
	require.Contains(t, err.Error(), "delta.setTransactionRetentionDuration")
}

func TestCreateTableTwiceConflicts(t *testing.T) {
	t.Parallel()
	mem := store.NewMem()
	newTestTable(t, mem)
	_, err := CreateTable(context.Background(), mem, TableSpec{Schema: testSchema()}, Options{})
	require.ErrorIs(t, err, ErrConflict)
}

// copyTable copies a corpus table into a temporary directory (the corpus
// itself is never written).
func copyTable(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	require.NoError(t, filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	}))
	return dst
}

func listAll(t *testing.T, dir string) []string {
	var out []string
	require.NoError(t, filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			out = append(out, p)
		}
		return err
	}))
	return out
}

// TestGoldenWriterGate: a minimal writer refuses every corpus table it may
// not commit to, before writing anything, and can commit to the others.
func TestGoldenWriterGate(t *testing.T) {
	t.Parallel()
	dir, entries := loadManifest(t)
	for _, e := range entries {
		t.Run(e.Dir, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			cp := copyTable(t, filepath.Join(dir, e.Dir))
			before := listAll(t, cp)
			st, err := store.NewFile(cp)
			require.NoError(t, err)
			w, err := OpenWriter(ctx, st, Options{})
			if !e.MinimalWriterMayCommit {
				require.Error(t, err)
				require.Nil(t, w)
				if e.Expect == "read" {
					require.ErrorIs(t, err, ErrUnsupported)
				}
				require.Equal(t, before, listAll(t, cp), "nothing may be written")
				return
			}
			require.NoError(t, err)
			v, err := w.Commit(ctx, Commit{Operation: "WRITE", Txn: &Txn{AppID: "oml-golden", Version: 1}})
			require.NoError(t, err)
			require.Equal(t, *e.Version+1, v)
			snap, err := Load(ctx, st)
			require.NoError(t, err)
			require.Equal(t, *e.ActiveFiles, snap.NumFiles())
		})
	}
}

// TestS3RoundTripWithCheckpoint runs the writer against a real S3 server:
// commits, a checkpoint, and a reload through it.
func TestS3RoundTripWithCheckpoint(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.MustSub(s3test.NewBucket(t, nil).Store, "t1/silver/claims")
	w := newTestTable(t, st, "day")
	for i := 1; i <= 5; i++ {
		_, err := w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("2026-01-02")}, Txn: &Txn{AppID: "oml-lakewriter", Version: int64(i)}})
		require.NoError(t, err)
	}
	_, err := w.Checkpoint(ctx)
	require.NoError(t, err)
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("2026-01-03")}, Txn: &Txn{AppID: "oml-lakewriter", Version: 6}})
	require.NoError(t, err)
	snap, err := Load(ctx, st)
	require.NoError(t, err)
	require.Equal(t, int64(5), snap.CheckpointVersion())
	require.Equal(t, stateOf(w.Snapshot()), stateOf(snap))
}

// TestTwoProcessCommitRace: several processes commit version 1 of the same
// table at once, on the file store and on a real S3 server; exactly one
// wins and every other one gets the typed conflict.
func TestTwoProcessCommitRace(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{"file", "s3"} {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			var st store.Store
			var url string
			var env []string
			switch backend {
			case "file":
				dir := t.TempDir()
				fs, err := store.NewFile(dir)
				require.NoError(t, err)
				st, url = fs, "file://"+dir
			case "s3":
				b := s3test.NewBucket(t, nil)
				st, url, env = store.MustSub(b.Store, "t/bronze/events"), b.URL("t/bronze/events"), b.Env()
			}
			newTestTable(t, st)
			exe, err := os.Executable()
			require.NoError(t, err)
			const n = 4
			type child struct {
				cmd *exec.Cmd
				in  io.WriteCloser
				out *bufio.Scanner
			}
			children := make([]child, n)
			for i := range children {
				cmd := exec.Command(exe, "-test.run=^$")
				cmd.Env = append(append(os.Environ(), env...), raceChildEnv+"="+url, fmt.Sprintf("OML_DELTA_RACE_APP=p%d", i))
				in, err := cmd.StdinPipe()
				require.NoError(t, err)
				out, err := cmd.StdoutPipe()
				require.NoError(t, err)
				require.NoError(t, cmd.Start())
				sc := bufio.NewScanner(out)
				require.True(t, sc.Scan())
				require.Equal(t, "ready", sc.Text())
				children[i] = child{cmd, in, sc}
			}
			for _, c := range children {
				_, err := io.WriteString(c.in, "go\n")
				require.NoError(t, err)
			}
			won, lost := 0, 0
			for _, c := range children {
				require.True(t, c.out.Scan())
				switch c.out.Text() {
				case "won":
					won++
				case "conflict":
					lost++
				default:
					t.Fatalf("child said %q", c.out.Text())
				}
				require.NoError(t, c.cmd.Wait())
			}
			require.Equal(t, 1, won)
			require.Equal(t, n-1, lost)
			snap, err := Load(context.Background(), st)
			require.NoError(t, err)
			require.Equal(t, int64(1), snap.Version())
			require.Equal(t, 1, snap.NumFiles())
			require.Len(t, snap.Txns(), 1)
		})
	}
}

// TestWriterHappyPathNeverLists: the writer applies its own commits to its
// in-memory snapshot; only opening the table lists the log.
func TestWriterHappyPathNeverLists(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := store.NewMem()
	newTestTable(t, mem)
	fs := store.NewFaulty(mem)
	w, err := OpenWriter(ctx, fs, Options{})
	require.NoError(t, err)
	opened, gets := fs.Count(store.OpList), fs.Count(store.OpGet)
	for i := 1; i <= 20; i++ {
		_, err := w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "a", Version: int64(i)}})
		require.NoError(t, err)
	}
	require.Equal(t, opened, fs.Count(store.OpList))
	require.Equal(t, gets, fs.Count(store.OpGet), "no commit was read back")
}

// TestS3AmbiguousCommitResolvedByReadBack: on a real S3 server, a commit
// PUT that lands but is reported ambiguous resolves to success by reading
// the object back; one that lost resolves to a conflict.
func TestS3AmbiguousCommitResolvedByReadBack(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st := store.MustSub(s3test.NewBucket(t, nil).Store, "t/bronze/events")
	newTestTable(t, st)
	fs := store.NewFaulty(st, store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent}, Key: "_delta_log/00000000000000000001.json", Kind: store.FaultAmbiguous, Times: 1})
	w, err := OpenWriter(ctx, fs, Options{})
	require.NoError(t, err)
	v, err := w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "a", Version: 1}})
	require.NoError(t, err)
	require.Equal(t, int64(1), v)

	other, err := OpenWriter(ctx, st, Options{})
	require.NoError(t, err)
	_, err = other.Commit(ctx, Commit{Operation: "WRITE", Txn: &Txn{AppID: "b", Version: 1}})
	require.NoError(t, err)
	fs.SetRules(store.Rule{Ops: []store.OpKind{store.OpPutIfAbsent}, Key: "_delta_log/00000000000000000002.json", Kind: store.FaultAmbiguous, Times: 1})
	_, err = w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd("")}, Txn: &Txn{AppID: "a", Version: 2}})
	var ce *ConflictError
	require.ErrorAs(t, err, &ce)
	require.True(t, ce.TxnApplied("b", 1))
	snap, err := Load(ctx, st)
	require.NoError(t, err)
	require.Equal(t, int64(2), snap.Version())
	require.Equal(t, 1, snap.NumFiles())
}

// removesInLog decodes every remove action of every commit file as raw JSON
// objects, so a test sees exactly which keys were written.
func removesInLog(t *testing.T, st store.Store) []map[string]json.RawMessage {
	t.Helper()
	ctx := context.Background()
	objs, err := st.List(ctx, LogDir, "")
	require.NoError(t, err)
	var out []map[string]json.RawMessage
	for _, o := range objs {
		if !strings.HasSuffix(o.Key, ".json") {
			continue
		}
		body, err := st.Get(ctx, o.Key)
		require.NoError(t, err)
		for _, line := range strings.Split(strings.TrimSpace(string(body)), "\n") {
			var a map[string]json.RawMessage
			require.NoError(t, json.Unmarshal([]byte(line), &a))
			if raw, ok := a["remove"]; ok {
				var rm map[string]json.RawMessage
				require.NoError(t, json.Unmarshal(raw, &rm))
				out = append(out, rm)
			}
		}
	}
	return out
}

func TestWriterRemoveExtendedMetadata_AlwaysCarriesPartitionValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		partBy []string
		day    string
		want   string
	}{
		{"unpartitioned", nil, "", `{}`},
		{"partitioned", []string{"day"}, "2026-01-02", `{"day":"2026-01-02"}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := store.NewMem()
			w := newTestTable(t, mem, tc.partBy...)
			for i := 0; i < 3; i++ {
				_, err := w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{fakeAdd(tc.day)}})
				require.NoError(t, err)
			}
			files := w.Snapshot().Files()
			k0, _ := DecodePath(files[0].Path)
			k1, _ := DecodePath(files[1].Path)
			rm0, err := w.Remove(k0)
			require.NoError(t, err)
			rm1, err := w.RemoveCompacted(k1)
			require.NoError(t, err)
			add := fakeAdd(tc.day)
			add.DataChange = false
			_, err = w.Commit(ctx, Commit{Operation: "OPTIMIZE", Removes: []*Remove{rm0, rm1}, Adds: []*Add{add}})
			require.NoError(t, err)

			removes := removesInLog(t, mem)
			require.Len(t, removes, 2)
			for _, rm := range removes {
				require.JSONEq(t, `true`, string(rm["extendedFileMetadata"]))
				pv, ok := rm["partitionValues"]
				require.True(t, ok, "remove %s has extendedFileMetadata but no partitionValues", rm["path"])
				require.JSONEq(t, tc.want, string(pv))
				require.Contains(t, rm, "size")
			}
			// And the log still reads back to the same state.
			snap, err := Load(ctx, mem)
			require.NoError(t, err)
			require.Equal(t, stateOf(w.Snapshot()), stateOf(snap))
			require.Len(t, snap.Files(), 2)
		})
	}
}

func TestRemoveEncoding_PartitionValuesOnlyWithExtendedMetadata(t *testing.T) {
	t.Parallel()
	ts := int64(1)
	b, err := EncodeCommit([]Action{{Remove: &Remove{Path: "a&b.parquet", DeletionTimestamp: &ts, DataChange: true}}})
	require.NoError(t, err)
	require.JSONEq(t, `{"remove":{"path":"a&b.parquet","deletionTimestamp":1,"dataChange":true}}`, string(b))
	require.Contains(t, string(b), "a&b", "paths are not HTML-escaped")
	// A remove built by hand with extendedFileMetadata but no map still gets {}.
	ext, size := true, int64(7)
	b, err = EncodeCommit([]Action{{Remove: &Remove{Path: "x.parquet", DeletionTimestamp: &ts, ExtendedFileMetadata: &ext, Size: &size}}})
	require.NoError(t, err)
	require.JSONEq(t, `{"remove":{"path":"x.parquet","deletionTimestamp":1,"dataChange":false,"extendedFileMetadata":true,"partitionValues":{},"size":7}}`, string(b))
}

// A foreign engine's remove that claims extendedFileMetadata but omits
// partitionValues is checkpointed with an empty map, not null.
func TestCheckpointRemoveExtendedMetadata_WithoutPartitionValues_WritesEmptyMap(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	mem := store.NewMem()
	w := newTestTable(t, mem)
	add := fakeAdd("")
	_, err := w.Commit(ctx, Commit{Operation: "WRITE", Adds: []*Add{add}})
	require.NoError(t, err)
	ts := time.Now().UnixMilli()
	body := fmt.Sprintf(`{"commitInfo":{"operation":"DELETE"}}`+"\n"+`{"remove":{"path":%q,"deletionTimestamp":%d,"dataChange":true,"extendedFileMetadata":true,"size":100}}`+"\n", add.Path, ts)
	require.NoError(t, mem.PutIfAbsent(ctx, CommitKey(2), []byte(body)))
	_, err = Checkpoint(ctx, mem)
	require.NoError(t, err)
	snap, err := Load(ctx, mem)
	require.NoError(t, err)
	require.Equal(t, int64(2), snap.CheckpointVersion())
	key, _ := DecodePath(add.Path)
	rm, ok := snap.tombstones[key]
	require.True(t, ok)
	require.NotNil(t, rm.PartitionValues, "the checkpoint holds partitionValues {} for an extendedFileMetadata remove")
	require.Empty(t, rm.PartitionValues)
}
