package lakecmd

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/maintain"
)

// OptimizeOptions are the inputs of `oml lake optimize`: its flags and what
// its run function needs, as functions (NewCmdOptimize fills them; a test
// replaces them).
type OptimizeOptions struct {
	maintainDeps
	// Measure, EraseBodies and Compact are the maintain functions.
	Measure     func(ctx context.Context, t maintain.Table, o maintain.MeasureOptions) (maintain.Measurements, error)
	EraseBodies func(ctx context.Context, t maintain.Table, o maintain.EraseOptions) (maintain.EraseResult, error)
	Compact     func(ctx context.Context, t maintain.Table, o maintain.CompactOptions) (maintain.CompactResult, error)

	tableSelection
	MinFiles   int
	TargetSize string
	targetSize int64
}

type optimizeRow struct {
	Table       string                  `json:"table"`
	Exists      bool                    `json:"exists"`
	EraseBodies *maintain.EraseResult   `json:"erase_bodies,omitempty"`
	Optimize    *maintain.CompactResult `json:"optimize,omitempty"`
	Error       string                  `json:"error,omitempty"`
}

// NewCmdOptimize builds `oml lake optimize`.
func NewCmdOptimize(f *cliutil.Factory, runF func(context.Context, *OptimizeOptions) error) *cobra.Command {
	opts := &OptimizeOptions{maintainDeps: newMaintainDeps(f), Measure: maintain.Measure, EraseBodies: maintain.EraseBodies, Compact: maintain.Compact}
	cmd := &cobra.Command{
		Use:   "optimize",
		Short: "Compact small files (and erase erased claims' bodies from silver)",
		Long: `Compact each selected table's files below --target-size into files of about
that size, in one OPTIMIZE commit per table (remove + add, dataChange false),
sorted by a useful key: silver by (artifact_id, version), so the lake
writer's MERGE prunes by artifact_id; bronze by seq; gold by journal_seq.
A table needs at least --min-files small files to be compacted.

On silver it first rewrites every live file holding an erased claim's body,
with that body set to null (one UPDATE commit, dataChange true: it changes a
value), whatever the file's size: see docs/erasure.md.

Safe beside oml lake drain: if a commit lands between the read and the
commit, a winner that only appended is rebased over; a winner that removed a
file being replaced (a MERGE) makes the rewrite start again from the new
version, at most 3 times, then give up for this run (exit 1). Nothing is ever
published over a removed file. The replaced files stay until oml lake vacuum.`,
		Example: `  oml lake optimize
  oml lake optimize --tenant acme --table silver --target-size 64MiB -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.validate(); err != nil {
				return err
			}
			var err error
			if opts.targetSize, err = parseTargetSize(opts.TargetSize); err != nil {
				return err
			}
			if opts.MinFiles < 2 {
				return cliutil.FlagErrorf("--min-files must be at least 2 (compacting one file into one file gains nothing)")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return optimizeRun(cmd.Context(), opts)
		},
	}
	opts.addFlags(cmd)
	cmd.Flags().IntVar(&opts.MinFiles, "min-files", 2, "small files a table (partition) needs before it is compacted")
	cmd.Flags().StringVar(&opts.TargetSize, "target-size", "128MiB", "size compacted files aim for; files at or above it are left alone")
	return cmd
}

func optimizeRun(ctx context.Context, opts *OptimizeOptions) error {
	format, _ := opts.Format()
	tables, err := opts.Tables(ctx, opts.tableSelection)
	if err != nil {
		return err
	}
	out := []optimizeRow{}
	failed := 0
	for _, t := range tables {
		m, err := opts.Measure(ctx, t, maintain.MeasureOptions{TargetSize: opts.targetSize})
		row := optimizeRow{Table: t.Key.Path(), Exists: m.Exists}
		if err == nil && m.Exists {
			err = func() error {
				er, err := opts.EraseBodies(ctx, t, maintain.EraseOptions{})
				if er.Version >= 0 || er.FilesScanned > 0 {
					row.EraseBodies = &er
				}
				if err != nil {
					return err
				}
				cr, err := opts.Compact(ctx, t, maintain.CompactOptions{TargetSize: opts.targetSize, MinFiles: opts.MinFiles})
				row.Optimize = &cr
				return err
			}()
		}
		if err != nil {
			row.Error = err.Error()
			failed++
		}
		out = append(out, row)
		if errors.Is(err, context.Canceled) {
			break
		}
	}
	if err := writeTables(opts.IO, format, out, []string{"TABLE", "ERASED BODIES", "COMPACTED"}, optimizeCells); err != nil {
		return err
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if failed > 0 {
		return cliutil.Findingsf("optimize failed on %d table(s); see above, and rerun (a rewrite that kept losing races to the lake writer is redone on the next run)", failed)
	}
	return nil
}

// optimizeCells is an optimize row's line in the table.
func optimizeCells(r optimizeRow) []string {
	if !r.Exists && r.Error == "" {
		return nil
	}
	erased, compacted := "-", "-"
	if e := r.EraseBodies; e != nil && e.Version >= 0 {
		erased = fmt.Sprintf("%d bodies in %d files (v%d)", e.BodiesNulled, e.FilesRewritten, e.Version)
	}
	if c := r.Optimize; c != nil && c.Version >= 0 {
		compacted = fmt.Sprintf("%d files -> %d, %s -> %s (v%d)", c.FilesRemoved, c.FilesAdded,
			maintain.HumanBytes(c.BytesRemoved), maintain.HumanBytes(c.BytesAdded), c.Version)
	} else if c != nil {
		compacted = "nothing to compact"
	}
	if r.Error != "" {
		compacted = "error: " + r.Error
	}
	return []string{r.Table, erased, compacted}
}
