package lakecmd

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/replication"
	"github.com/omlhq/oml/internal/testkit/runtest"
)

// `oml lake status`'s run function without a database or lake: the
// key/value lines (tty on and off), the --tables list with tenant names,
// one JSON document, and the exits — a lake missing what was drained or a
// failed continuity check (1, after the status), a read error (2, nothing
// shown).
func TestStatusRun_LinesTablesJSONAndExits(t *testing.T) {
	at := runtest.At
	base := lakewriter.Status{Frontier: 120, FrontierAt: at, LastBatchStart: 100, LastBatchEnd: 120, LastSeq: 130, StableSeq: 125,
		BacklogRows: 10, BacklogSeqGap: 10, OldestUnapplied: &at, LagSeconds: 42, LeaseLive: true, DeadLetters: 2, OldestDeadAt: &at,
		Lease:      &lakewriter.Lease{Holder: "writer-1", Host: "db1", PID: 4242, AcquiredAt: at, HeartbeatAt: at, ExpiresAt: at},
		Continuity: &lakewriter.Continuity{State: lakewriter.ContinuityOK, LakePosition: 120},
		Durability: &replication.Verdict{Policy: "auto", Durable: true},
		HeldTables: []lakewriter.TableHold{{Table: runtest.Acme.String() + "/silver/claims", Since: at, Reason: "corrupt commit 7"}}}
	withTables := base
	withTables.Tables = []lakewriter.TableStatus{
		{Table: runtest.Acme.String() + "/bronze/events", Tenant: runtest.Acme.String(), Kind: "bronze", Exists: true, Version: 9, TxnVersion: 120, Files: 4, SinceCheckpoint: 9},
		{Table: runtest.Initech.String() + "/silver/claims", Tenant: runtest.Initech.String(), Kind: "silver", Version: -1, TxnVersion: -1, Error: "corrupt log"},
	}
	noLake := base
	noLake.Continuity, noLake.Lease, noLake.HeldTables, noLake.DeadLetters, noLake.OldestDeadAt = nil, nil, nil, 0, nil
	broken := base
	broken.ContinuityError = "lake unreachable"
	missing := cliutil.Findingsf("the lake holds none of the 120 drained rows")
	for _, tc := range []struct {
		name      string
		tty, json bool
		tables    bool
		st        lakewriter.Status
		missing   error
		readErr   error
		wantCode  cliutil.ExitCode
	}{
		{name: "tty", tty: true, st: base},
		{name: "no-tty", st: base},
		{name: "no-lake", st: noLake},
		{name: "json", json: true, st: base},
		{name: "tables", tables: true, st: withTables},
		{name: "tables-json", tables: true, json: true, st: withTables},
		{name: "lake-missing", st: base, missing: missing, wantCode: cliutil.ExitFindings},
		{name: "lake-missing-json", json: true, st: base, missing: missing, wantCode: cliutil.ExitFindings},
		{name: "continuity-unchecked", st: broken, wantCode: cliutil.ExitUsage},
		{name: "read-error", readErr: cliutil.ConfigErrorf("cannot connect to the database"), wantCode: cliutil.ExitUsage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			opts := &StatusOptions{IO: s.IO, Format: runtest.Format(tc.json), Tables: tc.tables, durable: replication.Policy{},
				Read: func(_ context.Context, tables bool, _ replication.Policy) (lakewriter.Status, error, error) {
					require.Equal(t, tc.tables, tables)
					return tc.st, tc.missing, tc.readErr
				},
				TenantNames: func(context.Context) (map[uuid.UUID]string, error) {
					require.True(t, tc.tables, "names are read for --tables only")
					return map[uuid.UUID]string{runtest.Acme: "acme"}, nil
				}}
			runtest.RequireOutput(t, s, statusRun(context.Background(), opts), tc.wantCode, "")
		})
	}
	// The names failing ends --tables before anything is shown.
	s := runtest.IO(false)
	err := statusRun(context.Background(), &StatusOptions{IO: s.IO, Format: runtest.Format(false), Tables: true,
		Read: func(context.Context, bool, replication.Policy) (lakewriter.Status, error, error) {
			return withTables, nil, nil
		},
		TenantNames: func(context.Context) (map[uuid.UUID]string, error) {
			return nil, cliutil.AsConfigError(fmt.Errorf("list tenants: permission denied"))
		}})
	require.Equal(t, cliutil.ExitUsage, cliutil.ExitCodeFor(err))
	require.Empty(t, s.Out.String())
}
