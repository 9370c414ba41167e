package chaincmd

import (
	"context"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/witness"
)

// HeadOptions are `oml chain head`'s flags and what its run function
// needs, as functions (NewCmdHead fills them from the Factory; a test
// replaces them).
type HeadOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Heads opens the database (and the lake, when one is configured) and
	// reads what the view shows (readHeadsView); its errors are the
	// command's.
	Heads func(ctx context.Context, tenant string) (*headsView, error)

	Tenant string
}

// headsView is what `oml chain head` reads before it decides: the stored
// heads (with names and checkpoints), the fork check against the lake's
// witnesses and bronze (empty without a lake), and the database's identity
// (idErr set when it could not be read: no failover line then).
type headsView struct {
	rows            []*headRow
	fork            *chainverify.ForkCheckResult
	lake            bool
	sysID, timeline string
	idErr           error
}

// NewCmdHead builds `oml chain head`.
func NewCmdHead(f *cliutil.Factory, runF func(context.Context, *HeadOptions) error) *cobra.Command {
	opts := &HeadOptions{IO: f.IO, Format: f.Format, Heads: func(ctx context.Context, tenant string) (*headsView, error) {
		return readHeadsView(ctx, f, tenant)
	}}
	cmd := &cobra.Command{
		Use:   "head",
		Short: "Show each chain's stored head, last verified checkpoint and newest witnessed head",
		Long: `Show, per tenant, the head stored in oml.chain_heads, the last head oml chain
verify fully verified (its checkpoint), and the newest head witnessed outside
PostgreSQL in the lake (when --lake is set), with the fork check's verdict:

  ok         the stored chain contains the witnessed head
  no-witness nothing witnessed yet for this tenant (or no lake configured)
  tail-lost  PostgreSQL is behind the witness or the lake's bronze.events:
             committed events were lost
  fork       PostgreSQL holds a different hash at the witnessed seq (or at
             bronze's newest seq)
  accepted   a fork or lost tail that oml chain accept-fork accepted (listed
             for ever, not a failure)

This is a quick look, not a verification: run oml chain verify for that.
Exit status: 0 no tail-lost or fork; 1 otherwise; 2 usage or connection error.`,
		Example: `  oml chain head
  oml chain head --tenant acme -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return headRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "show only this tenant (name or id)")
	return cmd
}

type headRow struct {
	Tenant          uuid.UUID  `json:"tenant"`
	Name            string     `json:"name"`
	Seq             int64      `json:"seq"`
	Hash            string     `json:"hash"`
	UpdatedAt       time.Time  `json:"updated_at"`
	CheckpointSeq   *int64     `json:"checkpoint_seq"`
	CheckpointAt    *time.Time `json:"checkpoint_verified_at"`
	WitnessSeq      *int64     `json:"witness_seq"`
	WitnessHash     string     `json:"witness_hash,omitempty"`
	WitnessTime     *time.Time `json:"witness_time"`
	WitnessSystemID string     `json:"witness_system_identifier,omitempty"`
	WitnessTimeline string     `json:"witness_timeline,omitempty"`
	Status          string     `json:"status"`
	StatusDetail    string     `json:"status_detail,omitempty"`
	Failover        string     `json:"failover,omitempty"`
}

// readHeadsView is HeadOptions.Heads over the Factory's database and lake.
func readHeadsView(ctx context.Context, f *cliutil.Factory, tenant string) (*headsView, error) {
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return nil, err
	}
	only, err := onlyTenant(ctx, pool, tenant)
	if err != nil {
		return nil, err
	}
	names, err := tenantNames(ctx, pool)
	if err != nil {
		return nil, cliutil.AsConfigError(err)
	}
	rows, err := readHeads(ctx, pool, only)
	if err != nil {
		return nil, cliutil.AsConfigError(err)
	}
	for _, r := range rows {
		r.Name = names[r.Tenant]
	}
	st, err := f.OptionalLake(ctx)
	if err != nil {
		return nil, err
	}
	v := &headsView{rows: rows, fork: &chainverify.ForkCheckResult{}, lake: st != nil}
	if st != nil {
		if v.fork, err = chainverify.ForkCheck(ctx, pool, st, only); err != nil {
			return nil, cliutil.AsConfigError(err)
		}
	}
	v.sysID, v.timeline, v.idErr = witness.Identity(ctx, pool)
	return v, nil
}

func headRun(ctx context.Context, opts *HeadOptions) error {
	format, _ := opts.Format()
	v, err := opts.Heads(ctx, opts.Tenant)
	if err != nil {
		return err
	}
	rows, fc, sysID, timeline, idErr := v.rows, v.fork, v.sysID, v.timeline, v.idErr
	problems := fc.Untrusted
	broken := 0
	for _, r := range rows {
		w := fc.Witnessed[r.Tenant]
		if w == nil {
			r.Status = "no-witness"
			continue
		}
		seq, t := w.Seq, w.Time
		r.WitnessSeq, r.WitnessHash, r.WitnessTime = &seq, w.Hash, &t
		r.WitnessSystemID, r.WitnessTimeline = w.SystemIdentifier, w.Timeline
		r.Status = "ok"
		if idErr == nil && (w.SystemIdentifier != sysID || w.Timeline != timeline) {
			r.Failover = fmt.Sprintf("the database changed since this head was witnessed (system %s timeline %s, now system %s timeline %s): a failover or restore happened",
				w.SystemIdentifier, w.Timeline, sysID, timeline)
		}
		for _, a := range fc.Accepted {
			if a.Finding.Tenant == r.Tenant {
				r.Status = "accepted"
				r.StatusDetail = fmt.Sprintf("%s at seq %d (%s), accepted by provider seq %d: %s", a.Finding.Reason, a.Finding.Seq, a.Finding.Evidence["anchor"], a.AcceptedAt, a.Reason)
			}
		}
		if fd, bad := fc.Forked(r.Tenant); bad {
			r.Status = string(fd.Reason)
			r.StatusDetail = fmt.Sprintf("%s (PostgreSQL head: seq %d hash %s; witnessed %s, system %s, timeline %s)",
				fd.Detail, r.Seq, r.Hash, cliutil.Time(w.Time), w.SystemIdentifier, w.Timeline)
			broken++
		}
	}
	if format == cliutil.FormatJSON {
		rows = cliutil.NonNil(rows)
		if err := cliutil.WriteJSON(opts.IO.Out, rows); err != nil {
			return err
		}
	} else {
		table := make([][]string, 0, len(rows))
		opt := func(p *int64) string {
			if p == nil {
				return "-"
			}
			return fmt.Sprint(*p)
		}
		for _, r := range rows {
			wt := "-"
			if r.WitnessTime != nil {
				wt = cliutil.Time(*r.WitnessTime)
			}
			table = append(table, []string{r.Tenant.String(), r.Name, fmt.Sprint(r.Seq), short(r.Hash),
				opt(r.CheckpointSeq), opt(r.WitnessSeq), wt, r.Status})
		}
		if err := cliutil.Table(opts.IO, []string{"TENANT", "NAME", "SEQ", "HASH", "VERIFIED", "WITNESSED", "WITNESS TIME", "STATUS"}, table); err != nil {
			return err
		}
		for _, r := range rows {
			if r.Failover != "" {
				fmt.Fprintf(opts.IO.ErrOut, "oml: tenant %s (%s): %s\n", r.Tenant, r.Name, r.Failover)
			}
			if r.StatusDetail != "" {
				fmt.Fprintf(opts.IO.ErrOut, "oml: tenant %s (%s): %s: %s\n", r.Tenant, r.Name, r.Status, r.StatusDetail)
			}
		}
		if !v.lake {
			fmt.Fprintln(opts.IO.ErrOut, "oml: note: no lake configured (--lake or OML_LAKE_URL): witnessed heads not shown")
		}
	}
	for _, p := range problems {
		fmt.Fprintf(opts.IO.ErrOut, "oml: warning: %s\n", p)
	}
	if broken > 0 {
		return cliutil.Findingsf("%d chain(s) disagree with their witnessed head: run oml chain verify for the full report", broken)
	}
	return nil
}

func readHeads(ctx context.Context, pool *pgxpool.Pool, only *uuid.UUID) ([]*headRow, error) {
	hs, err := chainverify.StoredHeads(ctx, pool, only)
	if err != nil {
		return nil, err
	}
	out := make([]*headRow, 0, len(hs))
	for _, h := range hs {
		out = append(out, &headRow{Tenant: h.Tenant, Seq: h.Seq, Hash: hex.EncodeToString(h.Hash), UpdatedAt: h.UpdatedAt,
			CheckpointSeq: h.CheckpointSeq, CheckpointAt: h.CheckpointAt})
	}
	return out, nil
}
