package lakecmd

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/maintain"
)

// ErasureStatusOptions are the inputs of `oml lake erasure-status`: its
// flags and what its run function needs, as functions
// (NewCmdErasureStatus fills them from the Factory; a test replaces them).
type ErasureStatusOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Now is the time the stages are judged at.
	Now func() time.Time
	// Erased opens the lake and the database, resolves --tenant ("" for
	// every tenant) and reads every erased claim's stage at now
	// (maintain.ErasureStatus); its errors are the command's.
	Erased func(ctx context.Context, tenant string, now time.Time) ([]maintain.ErasedClaim, error)

	Tenant  string
	Pending bool
}

// NewCmdErasureStatus builds `oml lake erasure-status`.
func NewCmdErasureStatus(f *cliutil.Factory, runF func(context.Context, *ErasureStatusOptions) error) *cobra.Command {
	opts := &ErasureStatusOptions{IO: f.IO, Format: f.Format, Now: time.Now,
		Erased: func(ctx context.Context, tenant string, now time.Time) ([]maintain.ErasedClaim, error) {
			return erasedClaims(ctx, f, tenant, now)
		}}
	cmd := &cobra.Command{
		Use:   "erasure-status",
		Short: "Show, per erased claim, how far its ciphertext has got out of the lake",
		Long: `For every erased claim (claim.erased in the journal), show the stage it has
reached and when its bytes can be gone:

  journalled        claim.erased is journalled but the data key is still present
                    (never expected: oml reconcile reports erased-key-present)
  key-destroyed     the data key is gone; the lake writer has not merged
                    state=erased into silver yet (lag: see oml lake status)
  in-live-files     silver says erased, but a live file still holds the body:
                    oml lake optimize (or maintain) rewrites it without
  in-removed-files  only removed (tombstoned) or orphaned files hold it:
                    oml lake vacuum deletes them once the retention has passed
  gone              no file under the silver table's directory holds it
  never-in-lake     no version was ever promoted: its body never reached the lake

GONE BY is the earliest time every byte can be gone: the latest
removed-at + retention of the files that hold it, or now + retention while a
live file still does. Vacuum must run after it (oml lake maintain does once
the tombstone has expired). It reads every data file whose stats may hold an
erased claim, removed ones included. Needs the database and the lake.
See docs/erasure.md.`,
		Example: `  oml lake erasure-status --tenant acme
  oml lake erasure-status --pending -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return erasureStatusRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "only this tenant (name or id)")
	cmd.Flags().BoolVar(&opts.Pending, "pending", false, "only claims whose bytes are not gone yet")
	return cmd
}

// erasedClaims is ErasureStatusOptions.Erased over the Factory.
func erasedClaims(ctx context.Context, f *cliutil.Factory, tenant string, now time.Time) ([]maintain.ErasedClaim, error) {
	lake, err := f.Lake(ctx, "")
	if err != nil {
		return nil, err
	}
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return nil, err
	}
	var tid *uuid.UUID
	if tenant != "" {
		tn, err := f.Tenant(ctx, tenant)
		if err != nil {
			return nil, err
		}
		tid = &tn.ID
	}
	return maintain.ErasureStatus(ctx, pool, lake, tid, now)
}

func erasureStatusRun(ctx context.Context, opts *ErasureStatusOptions) error {
	format, _ := opts.Format()
	now := opts.Now()
	all, err := opts.Erased(ctx, opts.Tenant, now)
	if err != nil {
		return err
	}
	claims := []maintain.ErasedClaim{}
	for _, c := range all {
		if opts.Pending && (c.Stage == maintain.StageGone || c.Stage == maintain.StageNeverInLake) {
			continue
		}
		claims = append(claims, c)
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, struct {
			Now    time.Time              `json:"now"`
			Claims []maintain.ErasedClaim `json:"claims"`
		}{now.UTC(), claims})
	}
	var rows [][]string
	for _, c := range claims {
		gone := "-"
		if !c.GoneBy.IsZero() {
			gone = cliutil.Time(c.GoneBy)
			if c.GoneBy.Before(now) {
				gone += " (vacuum due now)"
			}
		}
		rows = append(rows, []string{c.Tenant.String(), c.ArtifactID, fmt.Sprint(c.ErasedSeq), cliutil.Time(c.ErasedAt), c.Stage, fmt.Sprint(len(c.Files)), gone})
	}
	return cliutil.Table(opts.IO, []string{"TENANT", "ARTIFACT", "ERASED SEQ", "ERASED AT", "STAGE", "FILES", "GONE BY"}, rows)
}
