package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/cliutil"
)

// Lake commands take a tenant's name wherever a tenant is named, as
// --tenant does elsewhere, and list tables with the tenant's name beside
// the id path.
func TestBinary_LakeCommands_AcceptTenantNames_ShowNamesBesideIDs(t *testing.T) {
	t.Parallel()
	e := deployment(t)
	e.ok(t, "tenant", "create", "acme")
	e.ok(t, "dev", "load", "--tenants", "1", "--claims", "6", "--seed", "4")
	e.ok(t, "lake", "drain", "--once")

	for _, args := range [][]string{
		{"lake", "inspect", "load-001/silver/claims"},
		{"lake", "inspect", "load-001/bronze/events"},
		{"lake", "history", "load-001/bronze/events"},
		{"lake", "inspect", "_provider/bronze/events"},
	} {
		r := e.bin(t, args...)
		require.Equal(t, cliutil.ExitOK, r.code, "oml %s: %s", strings.Join(args, " "), r.stderr)
	}
	r := e.bin(t, "lake", "inspect", "nosuch/silver/claims")
	require.Equal(t, cliutil.ExitUsage, r.code, r.stderr)
	require.Contains(t, r.stderr, `"nosuch"`)
	require.Contains(t, r.stderr, "oml tenant list")

	for _, args := range [][]string{{"lake", "status", "--tables"}, {"lake", "maintain", "--dry-run"}} {
		out := e.ok(t, args...)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		var header string
		for _, l := range lines {
			if strings.HasPrefix(l, "TABLE\t") {
				header = l
			}
		}
		require.Contains(t, header, "\tTENANT\t", out)
		require.Regexp(t, `(?m)^[0-9a-f-]{36}/bronze/events\tload-001\t`, out)
		require.Regexp(t, `(?m)^0{8}-0{4}-0{4}-0{4}-0{12}/bronze/events\t_provider\t`, out)
	}

	// JSON carries the name beside the id too, in "tenant", as other
	// commands name it.
	for _, args := range [][]string{{"lake", "status", "--tables", "-o", "json"}, {"lake", "maintain", "--dry-run", "-o", "json"}} {
		var doc struct {
			Tables []struct {
				Table    string `json:"table"`
				TenantID string `json:"tenant_id"`
				Tenant   string `json:"tenant"`
			} `json:"tables"`
		}
		out := e.ok(t, args...)
		require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
		byName := map[string]string{}
		for _, tb := range doc.Tables {
			require.NotEmpty(t, tb.TenantID, "oml %s: %s has no tenant_id", strings.Join(args, " "), tb.Table)
			require.True(t, strings.HasPrefix(tb.Table, tb.TenantID+"/"), tb.Table)
			require.NotEmpty(t, tb.Tenant, "oml %s: %s has no tenant name", strings.Join(args, " "), tb.Table)
			byName[tb.Tenant] = tb.TenantID
		}
		require.Contains(t, byName, "load-001", out)
		require.Equal(t, "00000000-0000-0000-0000-000000000000", byName["_provider"], out)
	}
}

// The provider tenant has one name, _provider, shown by every command;
// "provider" is reserved as its alias, so no customer tenant can take it
// and two chains are never both called provider.
func TestBinary_TenantCreateProvider_RefusedReservedName_OneSpelling(t *testing.T) {
	t.Parallel()
	e := deployment(t)
	for _, name := range []string{"provider", "_provider"} {
		r := e.bin(t, "tenant", "create", name)
		require.Equal(t, cliutil.ExitUsage, r.code, r.stdout+r.stderr)
		require.Empty(t, r.stdout)
		require.Contains(t, r.stderr, `"`+name+`"`)
		if name == "provider" {
			require.Contains(t, r.stderr, "reserved for the provider tenant (shown as _provider)")
		}
	}
	require.NotContains(t, e.ok(t, "tenant", "list"), "provider")

	for _, args := range [][]string{{"chain", "head"}, {"status"}, {"chain", "verify"}} {
		out := e.ok(t, args...)
		require.Regexp(t, `(?m)\t_provider\t|^_provider\t`, out, "oml %s", strings.Join(args, " "))
		require.NotRegexp(t, `(?m)(^|\t)provider\t`, out, "oml %s", strings.Join(args, " "))
	}
	for _, name := range []string{"provider", "_provider"} {
		e.ok(t, "chain", "verify", "--tenant", name)
		e.ok(t, "chain", "head", "--tenant", name)
	}
}

// Shell completion completes what the arguments name, from the database:
// tenants for --tenant, TENANT/LAYER/NAME for lake inspect, open
// dead-letter ids for deadletter show.
func TestBinary_Completion_TenantsTablesDeadLetterIDs(t *testing.T) {
	t.Parallel()
	e := deployment(t)
	e.ok(t, "dev", "load", "--tenants", "1", "--claims", "10", "--poison", "1", "--seed", "6")
	e.ok(t, "lake", "drain", "--once", "--poison-budget", "1", "--log-level", "error")

	complete := func(args ...string) []string {
		r := e.bin(t, append([]string{"__complete"}, args...)...)
		require.Equal(t, cliutil.ExitOK, r.code, r.stderr)
		lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
		require.Equal(t, ":4", lines[len(lines)-1], "no file completion: %s", r.stdout)
		return lines[:len(lines)-1]
	}
	require.ElementsMatch(t, []string{"load-001", "_provider"}, complete("chain", "verify", "--tenant", ""))
	require.Equal(t, []string{"load-001"}, complete("reconcile", "--tenant", "lo"))
	require.Contains(t, complete("lake", "inspect", "load-001/"), "load-001/silver/claims")
	ids := complete("deadletter", "show", "")
	require.Len(t, ids, 1)
	require.Regexp(t, `^1\tload-001 art-`, ids[0])
	require.Empty(t, complete("deadletter", "reenqueue", "1", ""), "an id already given is not offered again")
}
