package chaincmd

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/witness"
)

// HeadOptions are `oml chain head`'s flags and dependencies.
type HeadOptions struct {
	F      *cliutil.Factory
	Tenant string
}

// NewCmdHead builds `oml chain head`.
func NewCmdHead(f *cliutil.Factory, runF func(context.Context, *HeadOptions) error) *cobra.Command {
	opts := &HeadOptions{F: f}
	cmd := &cobra.Command{
		Use:   "head",
		Short: "Show each chain's stored head, last verified checkpoint and newest witnessed head",
		Long: `Show, per tenant, the head stored in oml.chain_heads, the last head oml chain
verify fully verified (its checkpoint), and the newest head witnessed outside
PostgreSQL in the lake (when --lake is set), with the fork check's verdict:

  ok         the stored chain contains the witnessed head
  no-witness nothing witnessed yet for this tenant (or no lake configured)
  tail-lost  PostgreSQL is behind the witness: committed events were lost
  fork       PostgreSQL holds a different hash at the witnessed seq

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
}

func headRun(ctx context.Context, opts *HeadOptions) error {
	f := opts.F
	format, _ := f.Format()
	pool, err := f.DB(ctx)
	if err != nil {
		return err
	}
	var only *uuid.UUID
	if opts.Tenant != "" {
		id, err := resolveTenant(ctx, pool, opts.Tenant)
		if err != nil {
			return err
		}
		only = &id
	}
	names, err := tenantNames(ctx, pool)
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	rows, err := readHeads(ctx, pool, only)
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	st, err := openLake(ctx, f)
	if err != nil {
		return err
	}
	var newest map[uuid.UUID]*witness.Head
	var problems []error
	if st != nil {
		trusted, err := issuedKeys(ctx, pool)
		if err != nil {
			return cliutil.AsConfigError(err)
		}
		if newest, problems, err = witness.Newest(ctx, st, only, trusted); err != nil {
			return cliutil.AsConfigError(err)
		}
	}
	broken := 0
	for _, r := range rows {
		r.Name = names[r.Tenant]
		w := newest[r.Tenant]
		if w == nil {
			r.Status = "no-witness"
			continue
		}
		seq, t := w.Seq, w.Time
		r.WitnessSeq, r.WitnessHash, r.WitnessTime = &seq, w.Hash, &t
		r.WitnessSystemID, r.WitnessTimeline = w.SystemIdentifier, w.Timeline
		r.Status, r.StatusDetail, err = forkCheck(ctx, pool, r, w)
		if err != nil {
			return cliutil.AsConfigError(err)
		}
		if r.Status != "ok" {
			broken++
		}
	}
	if format == cliutil.FormatJSON {
		if rows == nil {
			rows = []*headRow{}
		}
		if err := cliutil.WriteJSON(f.IO.Out, rows); err != nil {
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
		if err := cliutil.Table(f.IO, []string{"TENANT", "NAME", "SEQ", "HASH", "VERIFIED", "WITNESSED", "WITNESS TIME", "STATUS"}, table); err != nil {
			return err
		}
		for _, r := range rows {
			if r.StatusDetail != "" {
				fmt.Fprintf(f.IO.ErrOut, "oml: tenant %s (%s): %s: %s\n", r.Tenant, r.Name, r.Status, r.StatusDetail)
			}
		}
		if st == nil {
			fmt.Fprintln(f.IO.ErrOut, "oml: note: no lake configured (--lake or OML_LAKE_URL): witnessed heads not shown")
		}
	}
	for _, p := range problems {
		fmt.Fprintf(f.IO.ErrOut, "oml: warning: %s\n", p)
	}
	if broken > 0 {
		return cliutil.Findingsf("%d chain(s) disagree with their witnessed head: run oml chain verify for the full report", broken)
	}
	return nil
}

func readHeads(ctx context.Context, pool *pgxpool.Pool, only *uuid.UUID) ([]*headRow, error) {
	rs, err := pool.Query(ctx, `
SELECT h.tenant_id, h.seq, h.hash, h.updated_at, c.seq, c.verified_at
FROM oml.chain_heads h LEFT JOIN oml.chain_checkpoints c USING (tenant_id)
WHERE $1::uuid IS NULL OR h.tenant_id = $1
ORDER BY h.tenant_id`, only)
	if err != nil {
		return nil, fmt.Errorf("read oml.chain_heads: %w", err)
	}
	defer rs.Close()
	var out []*headRow
	for rs.Next() {
		r := &headRow{}
		var hash []byte
		if err := rs.Scan(&r.Tenant, &r.Seq, &hash, &r.UpdatedAt, &r.CheckpointSeq, &r.CheckpointAt); err != nil {
			return nil, fmt.Errorf("read oml.chain_heads: %w", err)
		}
		r.Hash = hex.EncodeToString(hash)
		out = append(out, r)
	}
	return out, rs.Err()
}

// forkCheck is the witness comparison, in the order of the design notes:
// behind the witness → tail-lost; another hash at the witnessed seq → fork.
func forkCheck(ctx context.Context, pool *pgxpool.Pool, r *headRow, w *witness.Head) (status, detail string, err error) {
	if r.Seq < w.Seq {
		return "tail-lost", fmt.Sprintf("PostgreSQL's head is seq %d hash %s but seq %d hash %s was witnessed at %s (system %s, timeline %s)",
			r.Seq, r.Hash, w.Seq, w.Hash, cliutil.Time(w.Time), w.SystemIdentifier, w.Timeline), nil
	}
	var stored []byte
	err = pool.QueryRow(ctx, `SELECT hash FROM oml.journal WHERE tenant_id = $1 AND seq = $2`, r.Tenant, w.Seq).Scan(&stored)
	if errors.Is(err, pgx.ErrNoRows) {
		return "tail-lost", fmt.Sprintf("seq %d, witnessed with hash %s, is missing from the journal", w.Seq, w.Hash), nil
	}
	if err != nil {
		return "", "", fmt.Errorf("read tenant %s seq %d: %w", r.Tenant, w.Seq, err)
	}
	if !bytes.Equal(stored, w.HashBytes()) {
		return "fork", fmt.Sprintf("PostgreSQL holds hash %x at seq %d but hash %s was witnessed there at %s (PostgreSQL head: seq %d hash %s)",
			stored, w.Seq, w.Hash, cliutil.Time(w.Time), r.Seq, r.Hash), nil
	}
	return "ok", "", nil
}
