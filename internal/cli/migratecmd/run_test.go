package migratecmd

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testkit/runtest"
)

var twoMigrations = []schema.Migration{{Version: 1, Name: "init", Checksum: "0123456789abcdef"}, {Version: 2, Name: "outbox", Checksum: "fedcba9876543210"}}

// `oml migrate`'s run function without a database: what was applied (or
// that nothing was), --status's table on and off a terminal, golden -o
// json, and a database that holds a migration this binary does not embed
// (the list is printed, then exit 2).
func TestRun_AppliesAndLists(t *testing.T) {
	status := []schema.StatusEntry{{Migration: twoMigrations[0], Applied: true, AppliedAt: runtest.At}, {Migration: twoMigrations[1]}}
	unknown := errors.New("the database holds migration 099, which this oml does not embed: upgrade oml")
	cases := []struct {
		name      string
		tty, json bool
		status    bool
		applied   []schema.Migration
		statusErr error
		wantCode  cliutil.ExitCode
	}{
		{name: "applied", applied: twoMigrations},
		{name: "applied-json", json: true, applied: twoMigrations},
		{name: "current"},
		{name: "current-json", json: true},
		{name: "status-tty", tty: true, status: true},
		{name: "status-no-tty", status: true},
		{name: "status-json", json: true, status: true},
		{name: "status-newer", status: true, statusErr: unknown, wantCode: cliutil.ExitUsage},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := runtest.IO(tc.tty)
			opts := &Options{IO: s.IO, Format: runtest.Format(tc.json), Status: tc.status, Latest: func() int { return 2 },
				Apply: func(context.Context) ([]schema.Migration, error) {
					require.False(t, tc.status, "--status changes nothing")
					return tc.applied, nil
				},
				ReadStatus: func(context.Context) ([]schema.StatusEntry, error) { return status, tc.statusErr }}
			runtest.RequireOutput(t, s, run(context.Background(), opts), tc.wantCode, "")
		})
	}
}
