package lakecmd

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/maintain"
	"github.com/omlhq/oml/internal/testkit/runtest"
)

// `oml lake history`'s run function without a lake: the commits as a
// table (tty on and off) or one JSON document, an empty log as [].
func TestHistoryRun_TablesAndJSON(t *testing.T) {
	ms := runtest.At.UnixMilli()
	entries := []delta.HistoryEntry{
		{Version: 1, Timestamp: ms, Operation: "WRITE", OperationMetrics: map[string]any{"numFiles": 2, "numOutputRows": 40},
			OperationParameters: map[string]any{"mode": "Append"}, Txns: []delta.Txn{{AppID: tables.AppID, Version: 120, LastUpdated: &ms}}, AddedFiles: 2,
			CommitInfo: json.RawMessage(`{"operation":"WRITE"}`)},
		{Version: 0, Timestamp: ms - 1000, Operation: "CREATE TABLE", EngineInfo: "oml"},
	}
	for _, tc := range []struct {
		name      string
		tty, json bool
		entries   []delta.HistoryEntry
	}{
		{name: "tty", tty: true, entries: entries}, {name: "no-tty", entries: entries}, {name: "json", json: true, entries: entries}, {name: "json-empty", json: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			opts := &HistoryOptions{IO: s.IO, Format: runtest.Format(tc.json), Table: "acme/bronze/events", Limit: 5,
				Read: func(_ context.Context, table string, o delta.HistoryOptions) (string, []delta.HistoryEntry, error) {
					require.Equal(t, "acme/bronze/events", table)
					require.Equal(t, 5, o.Limit)
					return "file:///lake/t/bronze/events", tc.entries, nil
				}}
			runtest.RequireOutput(t, s, historyRun(context.Background(), opts), cliutil.ExitOK, "")
		})
	}
}

// `oml lake inspect`: key/value lines, the schema and txn tables, the
// files with --files, or one JSON document.
func TestInspectRun_TablesAndJSON(t *testing.T) {
	cv, rec, day := int64(10), int64(40), "2026-01-02"
	res := InspectResult{Table: "file:///lake/t/silver/claims", Version: 12, Protocol: ProtocolJSON{MinReaderVersion: 1, MinWriterVersion: 2, ReaderFeatures: []string{}, WriterFeatures: []string{}},
		TableID: "5d2f", CreatedTime: &runtest.At, Schema: []ColumnJSON{{Name: "artifact_id", Type: "string"}, {Name: "day", Type: "date", Nullable: true, Partition: true}},
		PartitionColumns: []string{"day"}, Configuration: map[string]string{"delta.checkpointInterval": "10"}, LiveFiles: 1, LiveBytes: 2048, Tombstones: 3,
		CheckpointVersion: &cv, CommitsSinceCheckpoint: 2, Txns: []TxnJSON{{AppID: tables.AppID, Version: 120, LastUpdated: &runtest.At}},
		Files: []FileJSON{{Path: "day=2026-01-02/part-0.parquet", PartitionValues: map[string]*string{"day": &day}, Size: 2048, Records: &rec, ModificationTime: runtest.At}}}
	asOf := res
	asOf.AsOf, asOf.Files, asOf.Txns, asOf.CheckpointVersion = &runtest.At, nil, []TxnJSON{}, nil
	for _, tc := range []struct {
		name      string
		tty, json bool
		files     bool
		res       InspectResult
	}{
		{name: "tty-files", tty: true, files: true, res: res}, {name: "no-tty", res: res}, {name: "json", json: true, files: true, res: res}, {name: "as-of", res: asOf},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			opts := &InspectOptions{IO: s.IO, Format: runtest.Format(tc.json), Table: "acme/silver/claims", Version: -1, Files: tc.files,
				Read: func(_ context.Context, o *InspectOptions) (InspectResult, error) {
					require.Equal(t, "acme/silver/claims", o.Table)
					return tc.res, nil
				}}
			runtest.RequireOutput(t, s, inspectRun(context.Background(), opts), cliutil.ExitOK, "")
		})
	}
}

// fakeTables are the maintenance verbs' selection: acme's silver and gold
// tables, and a bronze table that does not exist yet.
func fakeTables(t *testing.T, want tableSelection) maintainDeps {
	return maintainDeps{Tables: func(_ context.Context, s tableSelection) ([]maintain.Table, error) {
		require.Equal(t, want, s)
		return []maintain.Table{{Key: tables.TableKey{Tenant: runtest.Acme, Kind: tables.Bronze}}, {Key: tables.TableKey{Tenant: runtest.Acme, Kind: tables.Silver}},
			{Key: tables.TableKey{Tenant: runtest.Acme, Kind: tables.Gold}}}, nil
	}}
}

// measured: bronze missing, silver due, gold up to date (fail: gold's log
// unreadable).
func measured(fail bool) func(context.Context, maintain.Table, maintain.MeasureOptions) (maintain.Measurements, error) {
	return func(_ context.Context, t maintain.Table, _ maintain.MeasureOptions) (maintain.Measurements, error) {
		switch t.Key.Kind {
		case tables.Silver:
			return maintain.Measurements{Exists: true, Version: 120, CheckpointVersion: 100, CommitsSinceCheckpoint: 20, CheckpointInterval: 10}, nil
		case tables.Gold:
			if fail {
				return maintain.Measurements{Exists: true}, fmt.Errorf("read the log: 00000000000000000007.json: unexpected EOF")
			}
			return maintain.Measurements{Exists: true, Version: 7, CheckpointVersion: 7, CheckpointInterval: 10}, nil
		}
		return maintain.Measurements{CheckpointVersion: -1}, nil
	}
}

// maintainCase is a maintenance verb's run case.
type maintainCase struct {
	name      string
	tty, json bool
	fail      bool
	dryRun    bool
	wantCode  cliutil.ExitCode
}

var maintainCases = []maintainCase{
	{name: "tty", tty: true}, {name: "no-tty"}, {name: "json", json: true},
	{name: "failed", fail: true, wantCode: cliutil.ExitFindings}, {name: "failed-json", fail: true, json: true, wantCode: cliutil.ExitFindings},
}

// `oml lake checkpoint`, `optimize` and `vacuum` without a lake: each
// table's action, a failing table's error row and exit 1, tty on/off and
// golden -o json.
func TestMaintenanceRuns_ActionsAndExits(t *testing.T) {
	sel := tableSelection{Tenant: "acme"}
	runs := map[string]func(tc maintainCase, s runtest.Streams) error{
		"checkpoint": func(tc maintainCase, s runtest.Streams) error {
			d := fakeTables(t, sel)
			d.IO, d.Format = s.IO, runtest.Format(tc.json)
			return checkpointRun(context.Background(), &CheckpointOptions{maintainDeps: d, tableSelection: sel, Measure: measured(tc.fail),
				Checkpoint: func(context.Context, maintain.Table) (maintain.CheckpointResult, error) {
					return maintain.CheckpointResult{Version: 120, Actions: 9}, nil
				}})
		},
		"optimize": func(tc maintainCase, s runtest.Streams) error {
			d := fakeTables(t, sel)
			d.IO, d.Format = s.IO, runtest.Format(tc.json)
			return optimizeRun(context.Background(), &OptimizeOptions{maintainDeps: d, tableSelection: sel, Measure: measured(tc.fail), targetSize: 1 << 27, MinFiles: 2,
				EraseBodies: func(_ context.Context, t maintain.Table, _ maintain.EraseOptions) (maintain.EraseResult, error) {
					if t.Key.Kind != tables.Silver {
						return maintain.EraseResult{Version: -1}, nil
					}
					return maintain.EraseResult{Version: 121, FilesScanned: 4, FilesRewritten: 1, BodiesNulled: 2}, nil
				},
				Compact: func(_ context.Context, tb maintain.Table, o maintain.CompactOptions) (maintain.CompactResult, error) {
					require.Equal(t, maintain.CompactOptions{TargetSize: 1 << 27, MinFiles: 2}, o)
					if tb.Key.Kind != tables.Silver {
						return maintain.CompactResult{Version: -1}, nil
					}
					return maintain.CompactResult{Version: 122, FilesRemoved: 12, FilesAdded: 1, BytesRemoved: 12 << 20, BytesAdded: 11 << 20, Rows: 400}, nil
				}})
		},
		"vacuum": func(tc maintainCase, s runtest.Streams) error {
			d := fakeTables(t, sel)
			d.IO, d.Format = s.IO, runtest.Format(tc.json)
			return vacuumRun(context.Background(), &VacuumOptions{maintainDeps: d, tableSelection: sel, DryRun: tc.dryRun, retention: 7 * 24 * time.Hour,
				Vacuum: func(_ context.Context, tb maintain.Table, o delta.VacuumOptions) (delta.VacuumResult, delta.CleanupResult, error) {
					require.Equal(t, delta.VacuumOptions{Retention: 7 * 24 * time.Hour, DryRun: tc.dryRun}, o)
					switch {
					case tb.Key.Kind == tables.Bronze:
						return delta.VacuumResult{}, delta.CleanupResult{}, delta.ErrTableNotFound
					case tb.Key.Kind == tables.Gold && tc.fail:
						return delta.VacuumResult{}, delta.CleanupResult{}, fmt.Errorf("list: connection reset")
					}
					return delta.VacuumResult{Version: 9, Retention: o.Retention, Cutoff: runtest.At, Bytes: 4096, DryRun: o.DryRun,
						Deleted: []string{"part-1.parquet", "part-2.parquet"}}, delta.CleanupResult{KeptCheckpoint: 7, Deleted: []string{"_delta_log/00000000000000000001.json"}}, nil
				}})
		},
	}
	for verb, run := range runs {
		cases := maintainCases
		if verb == "vacuum" {
			cases = append(cases[:len(cases):len(cases)], maintainCase{name: "dry-run", dryRun: true}, maintainCase{name: "dry-run-json", dryRun: true, json: true})
		}
		for _, tc := range cases {
			t.Run(verb+"-"+tc.name, func(t *testing.T) {
				s := runtest.IO(tc.tty)
				runtest.RequireOutput(t, s, run(tc, s), tc.wantCode, "")
			})
		}
	}
}

// Every table refusing vacuum's retention is one usage error (exit 2).
func TestVacuumRun_RetentionRefusedEverywhereIsAUsageError(t *testing.T) {
	s := runtest.IO(false)
	d := fakeTables(t, tableSelection{})
	d.IO, d.Format = s.IO, runtest.Format(false)
	err := vacuumRun(context.Background(), &VacuumOptions{maintainDeps: d, retention: time.Hour,
		Vacuum: func(context.Context, maintain.Table, delta.VacuumOptions) (delta.VacuumResult, delta.CleanupResult, error) {
			return delta.VacuumResult{}, delta.CleanupResult{}, delta.ErrRetentionTooShort
		}})
	require.Equal(t, cliutil.ExitUsage, cliutil.ExitCodeFor(err))
	require.ErrorContains(t, err, "--force --"+ackFlag)
	require.Empty(t, s.Out.String())
}
