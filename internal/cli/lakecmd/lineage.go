package lakecmd

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lineage"
	"github.com/omlhq/oml/internal/tenant"
)

// LineageOptions are the inputs of `oml lake lineage`: its argument and
// flags, and what its run function needs, as functions (NewCmdLineage
// fills them from the Factory; a test replaces them).
type LineageOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Lake opens the lake root.
	Lake func(ctx context.Context) (store.Store, error)
	// Tenants are the tenants whose tables are read (--tenant, else every
	// tenant) and their names (lineageTenants).
	Tenants func(ctx context.Context, tenant string) ([]uuid.UUID, map[uuid.UUID]string, error)
	// Read is lineage.Read: one tenant's gold.lineage changes.
	Read func(ctx context.Context, lake store.Store, q lineage.Query) (lineage.Result, error)

	ArtifactID string
	Version    int
	Tenant     string
	AsOf       string
}

// NewCmdLineage builds `oml lake lineage ARTIFACT`; runF replaces the run
// function in tests.
func NewCmdLineage(f *cliutil.Factory, runF func(context.Context, *LineageOptions) error) *cobra.Command {
	opts := &LineageOptions{IO: f.IO, Format: f.Format, Read: lineage.Read,
		Lake: func(ctx context.Context) (store.Store, error) { return f.Lake(ctx, "") },
		Tenants: func(ctx context.Context, tenant string) ([]uuid.UUID, map[uuid.UUID]string, error) {
			return lineageTenants(ctx, f, tenant)
		}}
	cmd := &cobra.Command{
		Use:   "lineage ARTIFACT",
		Short: "Print an artifact's history from the lake's gold.lineage",
		Long: `Print every change to the promoted versions of ARTIFACT as the lake's
gold.lineage tables hold them: the promotion (writer, promoter, workarea,
provenance), then each demotion, reassignment (workarea from -> to),
simulation end and erasure, in journal order, with the journal seq and
event hash that made it, who, when, the state before and after, and the
outbox seq. Digests and attribution only: lineage never holds a body.

It reads the lake only. Every tenant's table is read unless --tenant is
given (a tenant id needs no database; a name, or no --tenant, needs one).
--as-of reads the tables as they were: a number is a Delta table version
(needs --tenant), anything else an RFC 3339 time (the latest version
committed at or before it). Exit code 1 when the artifact has no lineage.
See docs/gold.md.`,
		Example: `  oml lake lineage art-42 --tenant acme
  oml lake lineage art-42 --version 2 --tenant acme -o json
  oml lake lineage art-42 --tenant acme --as-of 7
  oml lake lineage art-42 --as-of 2026-03-01T12:00:00Z`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ArtifactID = args[0]
			if opts.Version < 0 {
				return cliutil.FlagErrorf("--version must be a claim version (1 or more), or 0 for every version")
			}
			if _, _, err := parseLineageAsOf(opts.AsOf); err != nil {
				return err
			}
			if v, _, _ := parseLineageAsOf(opts.AsOf); v != nil && opts.Tenant == "" {
				return cliutil.FlagErrorf("--as-of %s is a table version, and versions are per table: give --tenant too (or an RFC 3339 time)", opts.AsOf)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return lineageRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&opts.Version, "version", 0, "only this version of the artifact (0: every version)")
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "only this tenant (name or id; an id needs no database)")
	cmd.Flags().StringVar(&opts.AsOf, "as-of", "", "read the tables as of a Delta version (a number; needs --tenant) or an RFC 3339 time")
	return cmd
}

// parseLineageAsOf reads --as-of: a table version or a time (both nil:
// unset).
func parseLineageAsOf(s string) (*int64, *time.Time, error) {
	if s == "" {
		return nil, nil, nil
	}
	if v, err := strconv.ParseInt(s, 10, 64); err == nil {
		if v < 0 {
			return nil, nil, cliutil.FlagErrorf("--as-of %s: a table version is 0 or more", s)
		}
		return &v, nil, nil
	}
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, nil, cliutil.FlagErrorf("--as-of %q is neither a table version (a number) nor an RFC 3339 time (e.g. 2026-03-01T12:00:00Z)", s)
	}
	return nil, &ts, nil
}

// LineageChangeJSON is one change in `oml lake lineage -o json`: one
// gold.lineage row.
type LineageChangeJSON struct {
	TenantID         string    `json:"tenant_id"`
	ArtifactID       string    `json:"artifact_id"`
	Version          int32     `json:"version"`
	JournalSeq       int64     `json:"journal_seq"`
	EventType        string    `json:"event_type"`
	EventHash        string    `json:"event_hash"`
	RecordedAt       time.Time `json:"recorded_at"`
	Actor            string    `json:"actor"`
	Reason           string    `json:"reason"`
	StateBefore      string    `json:"state_before"`
	StateAfter       string    `json:"state_after"`
	WorkareaID       string    `json:"workarea_id"`
	ToWorkareaID     *string   `json:"to_workarea_id"`
	Writer           string    `json:"writer"`
	Principal        string    `json:"principal"`
	Provenance       string    `json:"provenance"`
	PlaintextDigest  string    `json:"plaintext_digest"`
	CiphertextDigest string    `json:"ciphertext_digest"`
	SubmittedSeq     int64     `json:"submitted_seq"`
	PrevJournalSeq   int64     `json:"prev_journal_seq"`
	OutboxSeq        *int64    `json:"outbox_seq"`
}

// LineageTableJSON is one tenant's table as read.
type LineageTableJSON struct {
	TenantID     string `json:"tenant_id"`
	Tenant       string `json:"tenant"`
	Table        string `json:"table"`
	DeltaVersion int64  `json:"delta_version"`
	TxnVersion   *int64 `json:"txn_version"`
	Changes      int    `json:"changes"`
}

// LineageResult is the -o json document of `oml lake lineage`.
type LineageResult struct {
	ArtifactID string              `json:"artifact_id"`
	Version    *int32              `json:"version"`
	AsOf       *string             `json:"as_of"`
	Tables     []LineageTableJSON  `json:"tables"`
	Changes    []LineageChangeJSON `json:"changes"`
}

// lineageTenants resolves --tenant to tenant ids (a bare id needs no
// database), or every tenant of the deployment.
func lineageTenants(ctx context.Context, f *cliutil.Factory, name string) ([]uuid.UUID, map[uuid.UUID]string, error) {
	if id, err := uuid.Parse(name); err == nil && f.DatabaseURL() == "" {
		return []uuid.UUID{id}, nil, nil
	}
	if f.DatabaseURL() == "" {
		return nil, nil, cliutil.ConfigErrorf("oml lake lineage needs the database to find the tenants (or a tenant name): pass --database-url or set OML_DATABASE_URL, or give --tenant as a tenant id")
	}
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return nil, nil, err
	}
	names, err := tenantNames(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	if name != "" {
		tn, err := tenant.Resolve(ctx, pool, name)
		if err != nil {
			return nil, nil, cliutil.FlagErrorf("--tenant: %v", err)
		}
		return []uuid.UUID{tn.ID}, names, nil
	}
	ids, err := tenant.IDs(ctx, pool)
	if err != nil {
		return nil, nil, cliutil.AsConfigError(err)
	}
	return ids, names, nil
}

func lineageRun(ctx context.Context, opts *LineageOptions) error {
	format, err := opts.Format()
	if err != nil {
		return err
	}
	version, at, err := parseLineageAsOf(opts.AsOf)
	if err != nil {
		return err
	}
	lake, err := opts.Lake(ctx)
	if err != nil {
		return err
	}
	ids, names, err := opts.Tenants(ctx, opts.Tenant)
	if err != nil {
		return err
	}
	res := LineageResult{ArtifactID: opts.ArtifactID, Tables: []LineageTableJSON{}, Changes: []LineageChangeJSON{}}
	if opts.Version > 0 {
		v := int32(opts.Version)
		res.Version = &v
	}
	if opts.AsOf != "" {
		res.AsOf = &opts.AsOf
	}
	for _, id := range ids {
		r, err := opts.Read(ctx, lake, lineage.Query{Tenant: id, ArtifactID: opts.ArtifactID, Version: int32(opts.Version),
			AsOf: lineage.AsOf{Version: version, Time: at}})
		if errors.Is(err, lineage.ErrBeforeHistory) {
			return cliutil.ConfigErrorf("--as-of %s: %v; give a later point, or see oml lake history %s for the versions the log holds", opts.AsOf, err, r.Table)
		}
		if err != nil {
			return tableError(r.Table, err)
		}
		if !r.Exists {
			continue
		}
		tj := LineageTableJSON{TenantID: id.String(), Tenant: tenantOfPath(names, r.Table), Table: r.Table,
			DeltaVersion: r.DeltaVersion, Changes: len(r.Changes)}
		if r.TxnVersion >= 0 {
			v := r.TxnVersion
			tj.TxnVersion = &v
		}
		res.Tables = append(res.Tables, tj)
		for _, c := range r.Changes {
			res.Changes = append(res.Changes, changeJSON(c))
		}
	}
	if format == cliutil.FormatJSON {
		if err := cliutil.WriteJSON(opts.IO.Out, res); err != nil {
			return err
		}
	} else if len(res.Changes) > 0 {
		if err := lineageTable(opts.IO, res, names); err != nil {
			return err
		}
	}
	if len(res.Changes) == 0 {
		what := "artifact " + opts.ArtifactID
		if opts.Version > 0 {
			what += fmt.Sprintf(" v%d", opts.Version)
		}
		return cliutil.Findingsf("no lineage for %s in %d gold.lineage table(s) read: it was never promoted, or the lake writer has not drained its promotion yet (see oml lake status)", what, len(res.Tables))
	}
	return nil
}

func changeJSON(c tables.GoldLineageRow) LineageChangeJSON {
	j := LineageChangeJSON{TenantID: c.TenantID, ArtifactID: c.ArtifactID, Version: c.Version, JournalSeq: c.JournalSeq,
		EventType: c.EventType, EventHash: hex.EncodeToString(c.EventHash), RecordedAt: c.RecordedAt, Actor: c.Actor,
		Reason: c.Reason, StateBefore: c.StateBefore, StateAfter: c.StateAfter, WorkareaID: c.WorkareaID,
		Writer: c.Writer, Principal: c.Principal, Provenance: c.Provenance, PlaintextDigest: c.PlaintextDigest,
		CiphertextDigest: c.CiphertextDigest, SubmittedSeq: c.SubmittedSeq, PrevJournalSeq: c.PrevJournalSeq}
	if c.ToWorkareaID != "" {
		to := c.ToWorkareaID
		j.ToWorkareaID = &to
	}
	if c.OutboxSeq != 0 {
		s := c.OutboxSeq
		j.OutboxSeq = &s
	}
	return j
}

func lineageTable(ios *iostreams.IOStreams, res LineageResult, names map[uuid.UUID]string) error {
	tenants := map[string]bool{}
	for _, c := range res.Changes {
		tenants[c.TenantID] = true
	}
	header := []string{"SEQ", "TIME", "EVENT", "V", "CHANGE", "ACTOR", "WORKAREA", "REASON"}
	if len(tenants) > 1 {
		header = append([]string{"TENANT"}, header...)
	}
	rows := make([][]string, 0, len(res.Changes))
	for _, c := range res.Changes {
		wa := c.WorkareaID
		if c.ToWorkareaID != nil {
			wa += " -> " + *c.ToWorkareaID
		}
		who := c.Actor
		if c.StateAfter == "promoted" {
			who = c.Writer + " -> " + c.Actor // writer, then promoter
		}
		row := []string{fmt.Sprint(c.JournalSeq), cliutil.Time(c.RecordedAt), c.EventType, fmt.Sprint(c.Version),
			c.StateBefore + " -> " + c.StateAfter, who, wa, orDash(c.Reason)}
		if len(tenants) > 1 {
			row = append([]string{tenantOfPath(names, c.TenantID)}, row...)
		}
		rows = append(rows, row)
	}
	return cliutil.Table(ios, header, rows)
}
