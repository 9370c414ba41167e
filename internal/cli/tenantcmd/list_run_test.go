package tenantcmd

import (
	"context"
	"testing"
	"time"

	"github.com/charmbracelet/x/exp/golden"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/tenant"
)

// `oml tenant list`'s run function without a database: the tenants come
// from a function, so the output is pinned byte for byte — aligned on a
// terminal, tab-separated off one, one JSON document with -o json, and
// `"tenants": []` (not null) when there are none.
func TestListRun_TableOnAndOffATerminalAndJSON(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	two := []tenant.Tenant{
		{ID: uuid.MustParse("0b5c9a52-4f5e-4c0e-8a55-1b2f3c4d5e6f"), Name: "acme", CreatedAt: at, ProviderSeq: 2, ProviderHash: "ab12", HeadSeq: 17},
		{ID: uuid.MustParse("f1e2d3c4-b5a6-4978-8a9b-0c1d2e3f4a5b"), Name: "globex", CreatedAt: at.Add(time.Hour), ProviderSeq: 3, ProviderHash: "cd34", HeadSeq: 1},
	}
	cases := []struct {
		name    string
		tty     bool
		json    bool
		tenants []tenant.Tenant
	}{
		{name: "tty", tty: true, tenants: two},
		{name: "no-tty", tenants: two},
		{name: "json", json: true, tenants: two},
		{name: "json-none", json: true},
		{name: "no-tty-none"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			io, _, out, errOut := iostreams.Test()
			io.SetStdoutTTY(tc.tty)
			opts := &ListOptions{
				IO: io,
				Format: func() (cliutil.Format, error) {
					if tc.json {
						return cliutil.FormatJSON, nil
					}
					return cliutil.FormatTable, nil
				},
				Tenants: func(context.Context) ([]tenant.Tenant, error) { return tc.tenants, nil },
			}
			require.NoError(t, listRun(context.Background(), opts))
			require.Empty(t, errOut.String())
			golden.RequireEqual(t, out.Bytes())
		})
	}
}

// A failed listing is the command's error, unchanged (its exit was set
// where it was classified), and nothing is printed.
func TestListRun_ErrorIsReturnedAsItIs(t *testing.T) {
	io, _, out, _ := iostreams.Test()
	want := cliutil.ConfigErrorf("cannot connect")
	err := listRun(context.Background(), &ListOptions{IO: io, Format: func() (cliutil.Format, error) { return cliutil.FormatJSON, nil },
		Tenants: func(context.Context) ([]tenant.Tenant, error) { return nil, want }})
	require.Same(t, want, err)
	require.Empty(t, out.String())
}
