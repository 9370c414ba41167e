package lakecmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/maintain"
)

// ackFlag is the explicit acknowledgement a retention below the table's
// needs besides --force: it deletes files that readers pinned to recent
// versions (and time travel) still need.
const ackFlag = "i-understand-this-breaks-time-travel"

// VacuumOptions are the inputs of `oml lake vacuum`: its flags and what its
// run function needs, as functions (NewCmdVacuum fills them; a test
// replaces them).
type VacuumOptions struct {
	maintainDeps
	// Vacuum is maintain.VacuumTable.
	Vacuum func(ctx context.Context, t maintain.Table, o delta.VacuumOptions) (delta.VacuumResult, delta.CleanupResult, error)

	tableSelection
	Retain    string
	DryRun    bool
	Force     bool
	Ack       bool
	retention time.Duration
}

type vacuumRow struct {
	Table          string        `json:"table"`
	Exists         bool          `json:"exists"`
	Retention      time.Duration `json:"-"`
	RetentionSecs  float64       `json:"retention_seconds"` // JSON durations are float seconds (docs/cli.md)
	Cutoff         time.Time     `json:"cutoff,omitzero"`
	DryRun         bool          `json:"dry_run"`
	Files          []string      `json:"files"`
	Bytes          int64         `json:"bytes"`
	LogDeleted     int           `json:"log_files_deleted"`
	KeptCheckpoint int64         `json:"log_kept_checkpoint"`
	Error          string        `json:"error,omitempty"`
}

// NewCmdVacuum builds `oml lake vacuum`.
func NewCmdVacuum(f *cliutil.Factory, runF func(context.Context, *VacuumOptions) error) *cobra.Command {
	opts := &VacuumOptions{maintainDeps: newMaintainDeps(f), Vacuum: maintain.VacuumTable}
	cmd := &cobra.Command{
		Use:   "vacuum",
		Short: "Delete data files no retained version references, then old log entries",
		Long: `Delete the data files of each selected table that no version inside the
retention window references (neither live nor removed less than --retain
ago) and that are older than it (so files of a commit still being written
are safe), then delete log entries older than delta.logRetentionDuration
(default 30 days) behind a retained checkpoint. When it deletes files it
records that in the table's log as Spark does: a VACUUM START commit before
the deletions and a VACUUM END commit after them (commitInfo only: no file,
no txn; see oml lake history). --dry-run lists the files, deletes nothing,
commits nothing (and skips the log cleanup).

--retain defaults to the table's delta.deletedFileRetentionDuration (7 days
unless set). A shorter retention is refused unless you pass both --force and
--` + ackFlag + `: it deletes files that a query pinned to a
recent version is still reading, and shortens time travel to --retain. Never
do it during an incident; see docs/maintenance.md and docs/erasure.md.`,
		Example: `  oml lake vacuum --dry-run
  oml lake vacuum --tenant acme --retain 14d
  oml lake vacuum --tenant acme --table silver --retain 0s --force --` + ackFlag,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.validate(); err != nil {
				return err
			}
			if opts.Retain != "" {
				d, err := parseRetention(opts.Retain)
				if err != nil {
					return cliutil.FlagErrorf("--retain: %v", err)
				}
				opts.retention = d
				if d == 0 {
					opts.retention = time.Nanosecond // 0 means "the table's" to delta.Vacuum
				}
			}
			if opts.Force != opts.Ack {
				return cliutil.FlagErrorf("--force and --%s go together: a retention below the table's deletes files readers of recent versions still need", ackFlag)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return vacuumRun(cmd.Context(), opts)
		},
	}
	opts.addFlags(cmd)
	fl := cmd.Flags()
	fl.StringVar(&opts.Retain, "retain", "", "keep files removed less than this long ago (7d, 168h; default: the table's delta.deletedFileRetentionDuration)")
	fl.BoolVar(&opts.DryRun, "dry-run", false, "list the files vacuum would delete; delete nothing")
	fl.BoolVar(&opts.Force, "force", false, "allow --retain below the table's retention (needs --"+ackFlag+")")
	fl.BoolVar(&opts.Ack, ackFlag, false, "acknowledge that a short retention breaks readers pinned to recent versions and time travel")
	return cmd
}

func vacuumRun(ctx context.Context, opts *VacuumOptions) error {
	format, _ := opts.Format()
	tables, err := opts.Tables(ctx, opts.tableSelection)
	if err != nil {
		return err
	}
	out := []vacuumRow{}
	failed := 0
	var guard error
	for _, t := range tables {
		row := vacuumRow{Table: t.Key.Path(), DryRun: opts.DryRun, Files: []string{}, KeptCheckpoint: -1}
		vr, cl, err := opts.Vacuum(ctx, t, delta.VacuumOptions{Retention: opts.retention, Force: opts.Force && opts.Ack, DryRun: opts.DryRun})
		switch {
		case errors.Is(err, delta.ErrTableNotFound):
			err = nil
		case errors.Is(err, delta.ErrRetentionTooShort):
			if guard == nil {
				guard = err
			}
			row.Exists = true
		default:
			row.Exists = true
			row.Retention, row.Cutoff, row.Bytes = vr.Retention, vr.Cutoff, vr.Bytes
			row.RetentionSecs = vr.Retention.Seconds()
			row.Files = append(row.Files, vr.Deleted...)
			row.LogDeleted, row.KeptCheckpoint = len(cl.Deleted), cl.KeptCheckpoint
		}
		if err != nil {
			row.Error = err.Error()
			failed++
		}
		out = append(out, row)
	}
	if guard != nil && failed == len(out) {
		// Every table refused the retention: a usage error, said once.
		return cliutil.FlagErrorf("%v (--force --%s)", guard, ackFlag)
	}
	if format != cliutil.FormatJSON && opts.DryRun {
		var rows [][]string
		for _, r := range out {
			for _, p := range r.Files {
				rows = append(rows, []string{r.Table, p})
			}
			if r.Error != "" {
				rows = append(rows, []string{r.Table, "error: " + r.Error})
			}
		}
		if err := cliutil.Table(opts.IO, []string{"TABLE", "WOULD DELETE"}, rows); err != nil {
			return err
		}
	} else if err := writeTables(opts.IO, format, out, []string{"TABLE", "RETENTION", "DELETED", "LOG FILES DELETED"}, func(r vacuumRow) []string {
		if !r.Exists {
			return nil
		}
		res := fmt.Sprintf("%d files, %s", len(r.Files), maintain.HumanBytes(r.Bytes))
		if r.Error != "" {
			res = "error: " + r.Error
		}
		return []string{r.Table, maintain.HumanDuration(r.Retention), res, fmt.Sprint(r.LogDeleted)}
	}); err != nil {
		return err
	}
	if failed > 0 {
		return cliutil.Findingsf("vacuum failed on %d table(s); see above", failed)
	}
	return nil
}
