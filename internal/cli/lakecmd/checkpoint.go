package lakecmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/maintain"
)

// CheckpointOptions are the inputs of `oml lake checkpoint`: its flags and
// what its run function needs, as functions (NewCmdCheckpoint fills them;
// a test replaces them).
type CheckpointOptions struct {
	maintainDeps
	// Measure is maintain.Measure; Checkpoint is maintain.CheckpointTable.
	Measure    func(ctx context.Context, t maintain.Table, o maintain.MeasureOptions) (maintain.Measurements, error)
	Checkpoint func(ctx context.Context, t maintain.Table) (maintain.CheckpointResult, error)

	tableSelection
	Force bool
}

// checkpointRow is one table in the output.
type checkpointRow struct {
	Table                  string `json:"table"`
	Exists                 bool   `json:"exists"`
	Version                int64  `json:"version"`
	CheckpointVersion      int64  `json:"checkpoint_version"` // before this run, -1: none
	CommitsSinceCheckpoint int64  `json:"commits_since_checkpoint"`
	Interval               int64  `json:"checkpoint_interval"`
	Checkpointed           bool   `json:"checkpointed"`
	NewCheckpoint          *int64 `json:"new_checkpoint_version,omitempty"` // set when checkpointed (v0 is a version)
	Error                  string `json:"error,omitempty"`
}

// NewCmdCheckpoint builds `oml lake checkpoint`.
func NewCmdCheckpoint(f *cliutil.Factory, runF func(context.Context, *CheckpointOptions) error) *cobra.Command {
	opts := &CheckpointOptions{maintainDeps: newMaintainDeps(f), Measure: maintain.Measure, Checkpoint: maintain.CheckpointTable}
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Write a Delta checkpoint for every table past its checkpoint interval",
		Long: `Write a classic Delta checkpoint of the latest version of every selected
table that has made its checkpoint interval's worth of commits
(delta.checkpointInterval, else 100) since its last checkpoint, so a reader
starting cold reads one Parquet file instead of replaying every JSON commit.
--force checkpoints every table with at least one commit since its last
checkpoint. The lake writer checkpoints as it drains; this catches tables
it left behind (a crash, a stopped writer). Safe beside oml lake drain.`,
		Example: `  oml lake checkpoint
  oml lake checkpoint --tenant acme --table silver --force`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return checkpointRun(cmd.Context(), opts)
		},
	}
	opts.addFlags(cmd)
	cmd.Flags().BoolVar(&opts.Force, "force", false, "checkpoint every table with a commit since its last checkpoint, due or not")
	return cmd
}

func checkpointRun(ctx context.Context, opts *CheckpointOptions) error {
	format, _ := opts.Format()
	tables, err := opts.Tables(ctx, opts.tableSelection)
	if err != nil {
		return err
	}
	out := []checkpointRow{}
	failed := 0
	for _, t := range tables {
		m, err := opts.Measure(ctx, t, maintain.MeasureOptions{})
		row := checkpointRow{Table: t.Key.Path(), Exists: m.Exists, Version: m.Version, CheckpointVersion: m.CheckpointVersion,
			CommitsSinceCheckpoint: m.CommitsSinceCheckpoint, Interval: m.CheckpointInterval}
		if err == nil && m.Exists && m.CommitsSinceCheckpoint > 0 && (opts.Force || m.CommitsSinceCheckpoint >= m.CheckpointInterval) {
			var r maintain.CheckpointResult
			if r, err = opts.Checkpoint(ctx, t); err == nil {
				row.Checkpointed, row.NewCheckpoint = true, &r.Version
			}
		}
		if err != nil {
			row.Error = err.Error()
			failed++
		}
		out = append(out, row)
	}
	if err := writeTables(opts.IO, format, out, []string{"TABLE", "VERSION", "LAST CHECKPOINT", "COMMITS SINCE/INTERVAL", "ACTION"}, checkpointCells); err != nil {
		return err
	}
	if failed > 0 {
		return cliutil.Findingsf("checkpoint failed on %d table(s); see the table above", failed)
	}
	return nil
}

// checkpointCells is a checkpoint row's line in the table.
func checkpointCells(r checkpointRow) []string {
	if !r.Exists && r.Error == "" {
		return nil
	}
	action := "not due"
	switch {
	case r.Error != "":
		action = "error: " + r.Error
	case r.Checkpointed:
		action = fmt.Sprintf("checkpointed at v%d", *r.NewCheckpoint)
	case r.CommitsSinceCheckpoint == 0:
		action = "up to date"
	}
	cp := "-"
	if r.CheckpointVersion >= 0 {
		cp = fmt.Sprint(r.CheckpointVersion)
	}
	return []string{r.Table, fmt.Sprint(r.Version), cp, fmt.Sprintf("%d/%d", r.CommitsSinceCheckpoint, r.Interval), action}
}
