package schema_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/testdb"
)

// grantsMatrix is every object of schema oml and what each job role (and
// PUBLIC) may do with it, after every migration: the one place the grants
// are listed (docs/security.md, "Grants of new objects"). An object
// missing here, or granted other than listed, fails
// TestGrants_EveryObjectMatchesTheMatrix with its name: a migration that
// adds a table, sequence or function must decide, role by role, what it
// grants, and say it here. Column grants (INSERT on some columns only) are
// listed as "column oml.table.column"; a role absent from an entry has
// nothing. The owner, which owns everything, is not listed.
var grantsMatrix = map[string]map[string]string{
	"schema oml": {app: "USAGE", lw: "USAGE", aud: "USAGE"},

	// The chain: read by every job; written only through append_journal
	// (and its trigger-maintained head).
	"table oml.journal":     {app: "SELECT", lw: "SELECT", aud: "SELECT"},
	"table oml.chain_heads": {app: "SELECT", lw: "SELECT", aud: "SELECT"},
	"function oml.append_journal(p_tenant uuid, p_key_id text, p_seq bigint[], p_prev_hash bytea[], p_hash bytea[], p_signature bytea[], p_event_type text[], p_payload bytea[], p_recorded_at timestamp with time zone[])": {
		app: "EXECUTE", lw: "EXECUTE"},
	// The same with the append's own outbox rows (append_writes_its_outbox).
	"function oml.append_journal(p_tenant uuid, p_key_id text, p_seq bigint[], p_prev_hash bytea[], p_hash bytea[], p_signature bytea[], p_event_type text[], p_payload bytea[], p_recorded_at timestamp with time zone[], p_outbox_journal_seq bigint[], p_outbox_target text[], p_outbox_op text[], p_outbox_artifact_id text[], p_outbox_version integer[], p_outbox_payload text[])": {
		app: "EXECUTE", lw: "EXECUTE"},
	// The full checks behind append_journal's fast path (append_fast_path):
	// called by append_journal, which runs as the owner; no job role calls
	// it directly.
	"function oml.append_journal_full(p_tenant uuid, p_key_id text, p_seq bigint[], p_prev_hash bytea[], p_hash bytea[], p_signature bytea[], p_event_type text[], p_payload bytea[], p_recorded_at timestamp with time zone[], p_outbox_journal_seq bigint[], p_outbox_target text[], p_outbox_op text[], p_outbox_artifact_id text[], p_outbox_version integer[], p_outbox_payload text[])": {},
	"table oml.tenants":           {app: "SELECT", lw: "SELECT", aud: "SELECT"},
	"table oml.signing_keys":      {app: "SELECT", lw: "SELECT", aud: "SELECT"},
	"table oml.schema_migrations": {app: "SELECT", lw: "SELECT", aud: "SELECT"},
	"table oml.chain_checkpoints": {lw: "SELECT", aud: "SELECT,INSERT,UPDATE,DELETE"},

	// The fold state the application writes with its events.
	"table oml.claims":       {app: "SELECT,INSERT,UPDATE", lw: "SELECT", aud: "SELECT"},
	"table oml.claim_bodies": {app: "SELECT,INSERT", lw: "SELECT", aud: "SELECT"},
	"table oml.claim_keys":   {app: "SELECT,INSERT,DELETE", lw: "SELECT", aud: "SELECT"},

	// The outbox: inserted column by column (never copy_of, which marks a
	// re-enqueue's copy), never updated or deleted by a job role.
	"table oml.outbox":                {app: "SELECT", lw: "SELECT", aud: "SELECT"},
	"column oml.outbox.tenant_id":     {app: "INSERT", lw: "INSERT"},
	"column oml.outbox.journal_seq":   {app: "INSERT", lw: "INSERT"},
	"column oml.outbox.target":        {app: "INSERT", lw: "INSERT"},
	"column oml.outbox.op":            {app: "INSERT", lw: "INSERT"},
	"column oml.outbox.artifact_id":   {app: "INSERT", lw: "INSERT"},
	"column oml.outbox.version":       {app: "INSERT", lw: "INSERT"},
	"column oml.outbox.payload":       {app: "INSERT", lw: "INSERT"},
	"sequence oml.outbox_seq_seq":     {lw: "SELECT", aud: "SELECT"},
	"table oml.dead_letter":           {app: "SELECT", lw: "SELECT,INSERT", aud: "SELECT"},
	"sequence oml.dead_letter_id_seq": {},

	// The lake writer's own bookkeeping.
	"table oml.lake_frontier":   {lw: "SELECT,INSERT,UPDATE,DELETE", aud: "SELECT"},
	"table oml.lake_lease":      {lw: "SELECT,INSERT,UPDATE,DELETE", aud: "SELECT"},
	"table oml.outbox_attempts": {lw: "SELECT,INSERT,UPDATE,DELETE", aud: "SELECT"},
	"table oml.outbox_pruned":   {lw: "SELECT", aud: "SELECT"}, // oml outbox prune (the owner) writes it; the writer and the auditor read it

	// Row-level security reads the tenant setting through it; harmless to
	// anyone (it returns a setting the caller chose).
	"function oml.current_tenant()": {"PUBLIC": "EXECUTE", app: "EXECUTE", lw: "EXECUTE", aud: "EXECUTE"},
	// Trigger functions: nobody calls them.
	"function oml.journal_refuse_change()":         {},
	"function oml.journal_extend_chain()":          {},
	"function oml.outbox_take_xid()":               {},
	"function oml.outbox_stamp_xid()":              {},
	"function oml.outbox_require_event()":          {},
	"function oml.outbox_copy_names_dead_letter()": {},
	"function oml.tenants_require_event()":         {},
	"function oml.signing_keys_require_event()":    {},
}

const (
	app = "oml_app"
	lw  = "oml_lakewriter"
	aud = "oml_auditor"
)

// jobRoles are the roles the matrix covers (PUBLIC is every role).
var jobRoles = []string{"PUBLIC", "oml_app", "oml_lakewriter", "oml_auditor"}

// grantsQuery lists, per object of schema oml, each job role's privileges
// (a NULL ACL is the object type's default, e.g. EXECUTE to PUBLIC on a
// function). Objects with no grant to a job role are listed with role ”.
const grantsQuery = `
WITH objs AS (
    SELECT (CASE c.relkind WHEN 'S' THEN 'sequence' WHEN 'v' THEN 'view' WHEN 'm' THEN 'view' ELSE 'table' END)
           || ' oml.' || c.relname AS obj,
           coalesce(c.relacl, acldefault(CASE WHEN c.relkind = 'S' THEN 's'::"char" ELSE 'r'::"char" END, c.relowner)) AS acl
      FROM pg_class c
     WHERE c.relnamespace = 'oml'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
    UNION ALL
    SELECT 'column oml.' || c.relname || '.' || a.attname, a.attacl
      FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
     WHERE c.relnamespace = 'oml'::regnamespace AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
       AND a.attnum > 0 AND NOT a.attisdropped AND a.attacl IS NOT NULL
    UNION ALL
    SELECT 'function oml.' || p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')',
           coalesce(p.proacl, acldefault('f', p.proowner))
      FROM pg_proc p
     WHERE p.pronamespace = 'oml'::regnamespace
    UNION ALL
    SELECT 'schema oml', coalesce(n.nspacl, acldefault('n', n.nspowner))
      FROM pg_namespace n WHERE n.nspname = 'oml'
), grants AS (
    SELECT o.obj, CASE WHEN x.grantee = 0 THEN 'PUBLIC' ELSE x.grantee::regrole::text END AS role, x.privilege_type AS priv
      FROM objs o, aclexplode(o.acl) x
)
SELECT o.obj, coalesce(g.role, ''), coalesce(string_agg(DISTINCT g.priv, ',' ORDER BY g.priv), '')
  FROM (SELECT DISTINCT obj FROM objs) o
  LEFT JOIN grants g ON g.obj = o.obj AND g.role = ANY ($1)
 GROUP BY 1, 2
 ORDER BY 1, 2`

// Every object in schema oml is granted to the job roles exactly as the
// matrix says: a new table, sequence or function that forgets its grants
// (or grants too much, or is granted by a default privilege nobody
// listed) fails here, named.
func TestGrants_EveryObjectMatchesTheMatrix(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := testdb.New(t)
	rows, err := db.Pool(t).Query(ctx, grantsQuery, jobRoles)
	require.NoError(t, err)
	got := map[string]map[string]string{}
	for rows.Next() {
		var obj, role, privs string
		require.NoError(t, rows.Scan(&obj, &role, &privs))
		if got[obj] == nil {
			got[obj] = map[string]string{}
		}
		if role != "" {
			got[obj][role] = privs
		}
	}
	require.NoError(t, rows.Err())
	require.Contains(t, got, "table oml.journal", "the query sees the schema")

	var problems []string
	for obj, roles := range got {
		want, listed := grantsMatrix[obj]
		if !listed {
			problems = append(problems, fmt.Sprintf("%s is not in grantsMatrix (internal/schema/grants_test.go): decide what each job role may do with it, grant that in its migration, and list it (it grants %s)", obj, render(roles)))
			continue
		}
		for _, r := range jobRoles {
			if norm(want[r]) != roles[r] {
				problems = append(problems, fmt.Sprintf("%s: %s has %q, the matrix says %q", obj, r, roles[r], norm(want[r])))
			}
		}
	}
	for obj := range grantsMatrix {
		if _, ok := got[obj]; !ok {
			problems = append(problems, fmt.Sprintf("%s is in grantsMatrix but not in the database", obj))
		}
	}
	sort.Strings(problems)
	require.Empty(t, problems, "grants differ from the matrix:\n%s", strings.Join(problems, "\n"))
}

// norm sorts a comma-separated privilege list as the query renders it.
func norm(s string) string {
	if s == "" {
		return ""
	}
	ps := strings.Split(s, ",")
	for i := range ps {
		ps[i] = strings.TrimSpace(ps[i])
	}
	sort.Strings(ps)
	return strings.Join(ps, ",")
}

func render(roles map[string]string) string {
	if len(roles) == 0 {
		return "nothing to a job role"
	}
	var parts []string
	for _, r := range jobRoles {
		if p, ok := roles[r]; ok {
			parts = append(parts, fmt.Sprintf("%q: %q", r, p))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}
