package lakecmd

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakerepair"
	"github.com/omlhq/oml/internal/lineage"
	"github.com/omlhq/oml/internal/maintain"
	"github.com/omlhq/oml/internal/outbox"
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

// `oml lake erasure-status`: each erased claim's stage and when its bytes
// can be gone (due now past it), --pending leaving out the finished ones.
func TestErasureStatusRun_StagesAndJSON(t *testing.T) {
	at := runtest.At
	claims := []maintain.ErasedClaim{
		{Tenant: runtest.Acme, ArtifactID: "a-1", Versions: []int32{1, 2}, ErasedSeq: 30, ErasedAt: at, KeyDestroyed: true, Merged: true, Stage: maintain.StageInRemovedFiles,
			Files: []maintain.FileRef{{Path: "part-1.parquet", Kind: "tombstoned", RemovedAt: at}}, GoneBy: at.Add(-time.Hour)},
		{Tenant: runtest.Acme, ArtifactID: "a-2", Versions: []int32{1}, ErasedSeq: 31, ErasedAt: at, KeyDestroyed: true, Merged: true, Stage: maintain.StageInLiveFiles,
			Files: []maintain.FileRef{{Path: "part-2.parquet", Kind: "live"}}, GoneBy: at.Add(7 * 24 * time.Hour)},
		{Tenant: runtest.Acme, ArtifactID: "a-3", ErasedSeq: 32, ErasedAt: at, KeyDestroyed: true, Stage: maintain.StageNeverInLake, Files: []maintain.FileRef{}},
		{Tenant: runtest.Acme, ArtifactID: "a-4", Versions: []int32{1}, ErasedSeq: 33, ErasedAt: at, KeyDestroyed: true, Merged: true, Stage: maintain.StageGone, Files: []maintain.FileRef{}},
	}
	for _, tc := range []struct {
		name      string
		tty, json bool
		pending   bool
	}{{name: "tty", tty: true}, {name: "no-tty"}, {name: "pending"}, {name: "json", json: true}, {name: "pending-json", json: true, pending: true}} {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			opts := &ErasureStatusOptions{IO: s.IO, Format: runtest.Format(tc.json), Tenant: "acme", Pending: tc.pending || tc.name == "pending",
				Now: func() time.Time { return at },
				Erased: func(_ context.Context, tenant string, now time.Time) ([]maintain.ErasedClaim, error) {
					require.Equal(t, "acme", tenant)
					require.Equal(t, at, now)
					return claims, nil
				}}
			runtest.RequireOutput(t, s, erasureStatusRun(context.Background(), opts), cliutil.ExitOK, "")
		})
	}
}

// `oml lake lineage`: every tenant's changes merged in one table (names
// beside the ids) or one JSON document; no lineage anywhere is exit 1.
func TestLineageRun_ChangesAndExits(t *testing.T) {
	acmeTable := runtest.Acme.String() + "/gold/lineage"
	changes := []tables.GoldLineageRow{
		{TenantID: runtest.Acme.String(), ArtifactID: "art-42", Version: 1, JournalSeq: 7, EventType: "claim.promoted", EventHash: []byte{0xab, 0x12},
			RecordedAt: runtest.At, Actor: "ops", StateAfter: "promoted", WorkareaID: "w-1", Writer: "agent-1", Principal: "ops", Provenance: "human",
			PlaintextDigest: "pd", CiphertextDigest: "cd", OutboxSeq: 40},
		{TenantID: runtest.Acme.String(), ArtifactID: "art-42", Version: 1, JournalSeq: 9, EventType: "claim.demoted", EventHash: []byte{0xcd, 0x34},
			RecordedAt: runtest.At.Add(time.Hour), Actor: "ops", Reason: "wrong", StateBefore: "promoted", StateAfter: "demoted", WorkareaID: "w-1", OutboxSeq: 44},
	}
	for _, tc := range []struct {
		name      string
		tty, json bool
		none      bool
		wantCode  cliutil.ExitCode
	}{{name: "tty", tty: true}, {name: "no-tty"}, {name: "json", json: true}, {name: "none", none: true, wantCode: cliutil.ExitFindings}} {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			opts := &LineageOptions{IO: s.IO, Format: runtest.Format(tc.json), ArtifactID: "art-42",
				Lake: func(context.Context) (store.Store, error) { return nil, nil },
				Tenants: func(_ context.Context, tenant string) ([]uuid.UUID, map[uuid.UUID]string, error) {
					require.Empty(t, tenant)
					return []uuid.UUID{runtest.Acme, runtest.Initech}, map[uuid.UUID]string{runtest.Acme: "acme", runtest.Initech: "initech"}, nil
				},
				Read: func(_ context.Context, _ store.Store, q lineage.Query) (lineage.Result, error) {
					require.Equal(t, "art-42", q.ArtifactID)
					if q.Tenant != runtest.Acme || tc.none {
						return lineage.Result{Tenant: q.Tenant, Table: q.Tenant.String() + "/gold/lineage"}, nil
					}
					return lineage.Result{Tenant: q.Tenant, Table: acmeTable, Exists: true, DeltaVersion: 5, TxnVersion: 44, Changes: changes}, nil
				}}
			runtest.RequireOutput(t, s, lineageRun(context.Background(), opts), tc.wantCode, "")
		})
	}
}

// `oml lake repair`: a dry run prints the plan (exit 1 while it is not
// empty); on a terminal without --yes the plan is shown and a no changes
// nothing (exit 1); --yes repairs; a lake that agrees says so.
func TestRepairRun_PlansAsksAndRepairs(t *testing.T) {
	plan := func(dry bool) *lakerepair.Result {
		r := &lakerepair.Result{DryRun: dry, Plan: lakerepair.Plan{Digest: "0123456789abcdef0123", Tables: []lakerepair.TablePlan{{Tenant: runtest.Acme, TenantName: "acme",
			Table: "silver.claims", Path: runtest.Acme.String() + "/silver/claims", Action: "rewrite", Classes: map[string]int64{"duplicate-in-lake": 2},
			ReadVersion: 12, TxnVersion: 120, TargetTxnVersion: 120, RemoveFiles: 1, ReaddFiles: 1, Detail: "de-duplicate 2 rows"}},
			NotRepaired: []lakerepair.Skipped{}, Pending: []lakerepair.Skipped{}}, Repaired: []lakerepair.TableResult{}, Journal: []lakerepair.Journalled{}}
		if dry {
			r.Remaining = 1
		}
		return r
	}
	for _, tc := range []struct {
		name      string
		tty, json bool
		dryRun    bool
		yes       bool
		answer    string
		nothing   bool
		wantCalls []bool
		wantCode  cliutil.ExitCode
	}{
		{name: "dry-run", dryRun: true, wantCalls: []bool{true}, wantCode: cliutil.ExitFindings},
		{name: "dry-run-json", dryRun: true, json: true, wantCalls: []bool{true}, wantCode: cliutil.ExitFindings},
		{name: "tty-no", tty: true, answer: "n\n", wantCalls: []bool{true}, wantCode: cliutil.ExitFindings},
		{name: "tty-yes", tty: true, answer: "y\n", wantCalls: []bool{true, false}},
		{name: "yes", yes: true, wantCalls: []bool{false}},
		{name: "nothing", dryRun: true, nothing: true, wantCalls: []bool{true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			s.In.WriteString(tc.answer)
			var calls []bool
			opts := &RepairOptions{IO: s.IO, Format: runtest.Format(tc.json), DryRun: tc.dryRun, Yes: tc.yes,
				Open: func(context.Context, *RepairOptions) (lakerepair.Options, error) {
					return lakerepair.Options{DryRun: true, By: "ops"}, nil
				},
				Repair: func(_ context.Context, o lakerepair.Options) (*lakerepair.Result, error) {
					calls = append(calls, o.DryRun)
					if tc.nothing {
						return &lakerepair.Result{DryRun: true}, nil
					}
					return plan(o.DryRun), nil
				}}
			err := repairRun(context.Background(), opts)
			require.Equal(t, tc.wantCalls, calls)
			runtest.RequireStreams(t, s, err, tc.wantCode)
		})
	}
}

// `oml lake maintain`: what was due and done per table (tenant names
// beside the paths), --prune-outbox's summary after the tables, and exit 1
// when a table failed.
func TestMaintainRun_TasksPruneAndExits(t *testing.T) {
	silver := runtest.Acme.String() + "/silver/claims"
	gold := runtest.Acme.String() + "/gold/lineage"
	reports := func(fail bool) []maintain.Report {
		logs := 3
		rs := []maintain.Report{
			{Measurements: maintain.Measurements{Table: silver, Exists: true}, Plan: []maintain.Step{{Task: maintain.TaskOptimize, Reason: "12 small files"}, {Task: maintain.TaskCheckpoint, Reason: "20 commits since v100"}},
				Compacted: &maintain.CompactResult{Version: 121, FilesRemoved: 12, FilesAdded: 1}, Checkpoint: &maintain.CheckpointResult{Version: 121}, LogCleaned: &logs},
			{Measurements: maintain.Measurements{Table: gold, Exists: true}, Plan: []maintain.Step{}},
		}
		if fail {
			rs[1].Error = "read the log: unexpected EOF"
		}
		return rs
	}
	for _, tc := range []struct {
		name      string
		tty, json bool
		prune     bool
		fail      bool
		wantCode  cliutil.ExitCode
	}{{name: "tty", tty: true}, {name: "no-tty"}, {name: "json", json: true}, {name: "prune", prune: true}, {name: "prune-json", prune: true, json: true},
		{name: "failed", fail: true, wantCode: cliutil.ExitFindings}} {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			d := fakeTables(t, tableSelection{})
			d.IO, d.Format = s.IO, runtest.Format(tc.json)
			opts := &MaintainOptions{maintainDeps: d, PruneOutbox: tc.prune, MinSmallFiles: 8,
				Maintain: func(_ context.Context, ts []maintain.Table, o maintain.RunOptions) ([]maintain.Report, error) {
					require.Len(t, ts, 3)
					require.Equal(t, 8, o.Policy.MinSmallFiles)
					if tc.fail {
						return reports(true), fmt.Errorf("read the log: unexpected EOF")
					}
					return reports(false), nil
				},
				Names: func(context.Context) (map[uuid.UUID]string, error) {
					return map[uuid.UUID]string{runtest.Acme: "acme"}, nil
				},
				Prune: func(context.Context, *MaintainOptions) (*outbox.PruneResult, error) {
					require.True(t, tc.prune)
					return &outbox.PruneResult{Frontier: 120, Cutoff: runtest.At, Rows: 40, Batches: 1, Tables: []outbox.TablePrune{}}, nil
				}}
			runtest.RequireOutput(t, s, maintainRun(context.Background(), opts), tc.wantCode, "")
		})
	}
}
