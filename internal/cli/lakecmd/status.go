package lakecmd

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakesummary"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/replication"
)

// StatusOptions are the inputs of `oml lake status`: its flags, and what
// its run function needs, as functions (NewCmdStatus fills them from the
// Factory; a test replaces them).
type StatusOptions struct {
	IO *iostreams.IOStreams
	// Format is the -o value (an invalid one reads as table, as before).
	Format func() (cliutil.Format, error)
	// Read opens the database, and the lake when one is configured or
	// tables is set, and reads the status (lakewriter.ReadStatus, the
	// tables through the lake summary) with its durability under durable.
	// missing is a frontier past zero over an empty lake (a finding, shown
	// after the status); err ends the command before anything is shown.
	Read func(ctx context.Context, tables bool, durable replication.Policy) (st lakewriter.Status, missing error, err error)
	// TenantNames are the tenants' names by id (nil without a database
	// URL), for --tables.
	TenantNames func(ctx context.Context) (map[uuid.UUID]string, error)

	Tables    bool
	DurableOn string
	durable   replication.Policy
}

// NewCmdStatus builds `oml lake status`; runF replaces the run function in
// tests.
func NewCmdStatus(f *cliutil.Factory, runF func(context.Context, *StatusOptions) error) *cobra.Command {
	opts := &StatusOptions{IO: f.IO, Format: f.Format,
		Read: func(ctx context.Context, tables bool, durable replication.Policy) (lakewriter.Status, error, error) {
			return readStatus(ctx, f, tables, durable)
		},
		TenantNames: func(ctx context.Context) (map[uuid.UUID]string, error) { return tenantNames(ctx, f) },
	}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the lake writer's frontier, backlog, lag, lease and what holds it back",
		Long: `Show where the lake writer is: the frontier (the last outbox seq in the lake,
from the frontier cache), the stable horizon (how far rows are final right
now), the backlog (rows and seq gap above the frontier, age of the oldest),
the lease holder, dead letters, and — when an open transaction anywhere in the
cluster holds the snapshot horizon back — which backend it is.

With --tables (needs --lake), every tenant table's Delta version, lake-writer
txn version and commits since its last checkpoint.

Durability: whether the streaming standbys have flushed the stable prefix, as
a lake writer running with the same --durable-on would see it, naming every
standby that is behind (that writer waits for it: lag, not loss).`,
		Example: `  oml lake status
  oml lake status --tables -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if opts.durable, err = cliutil.DurableOn(opts.DurableOn); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return statusRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Tables, "tables", false, "also show every tenant table's Delta version and txn version")
	cmd.Flags().StringVar(&opts.DurableOn, "durable-on", replication.DefaultPolicyText, replication.StatusFlagUsage)
	return cmd
}

// readStatus is StatusOptions.Read from the Factory.
func readStatus(ctx context.Context, f *cliutil.Factory, tables bool, durable replication.Policy) (st lakewriter.Status, missing, err error) {
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return st, nil, err
	}
	// With a lake configured, the continuity check runs (read-only); --tables
	// needs one.
	var lake store.Store
	if tables || f.LakeURL() != "" {
		if lake, err = f.Lake(ctx, ""); err != nil {
			return st, nil, err
		}
	}
	sopts := lakewriter.StatusOptions{Lake: lake, Tables: tables}
	if lake != nil {
		// The tables doctor read and whose logs are unchanged are not
		// read again (internal/lakesummary).
		sopts.ReadTables = lakesummary.StatusReader(lake)
	}
	if st, err = lakewriter.ReadStatus(ctx, pool, sopts); err != nil {
		return st, nil, cliutil.AsConfigError(err)
	}
	if err := st.ReadDurability(ctx, pool, durable); err != nil {
		return st, nil, cliutil.AsConfigError(err)
	}
	// A frontier past zero over an empty lake is the wrong lake or a lost
	// one: reported after the status, exit 1.
	if lake != nil {
		missing = lakeMissing(ctx, lake, st.Frontier)
		if missing != nil && !isFindings(missing) {
			return st, nil, missing
		}
	}
	return st, missing, nil
}

func statusRun(ctx context.Context, opts *StatusOptions) (err error) {
	format, _ := opts.Format()
	st, missing, err := opts.Read(ctx, opts.Tables, opts.durable)
	if err != nil {
		return err
	}
	var names map[uuid.UUID]string
	if opts.Tables {
		if names, err = opts.TenantNames(ctx); err != nil {
			return err
		}
		for i, t := range st.Tables {
			if n := tenantOfPath(names, t.Table); n != "-" {
				st.Tables[i].TenantName = n
			}
		}
	}
	if format == cliutil.FormatJSON {
		st.Blockers = cliutil.NonNil(st.Blockers)
		if err := cliutil.WriteJSON(opts.IO.Out, st); err != nil {
			return err
		}
		if missing != nil {
			return missing
		}
		return continuityFinding(st)
	}
	lease := "none (no lake writer is running)"
	if st.Lease != nil {
		state := "live"
		if !st.LeaseLive {
			state = "EXPIRED (the writer stopped renewing it)"
		}
		lease = fmt.Sprintf("%s on %s, pid %d, since %s, heartbeat %s, %s",
			st.Lease.Holder, st.Lease.Host, st.Lease.PID, cliutil.Time(st.Lease.AcquiredAt), cliutil.Time(st.Lease.HeartbeatAt), state)
	}
	oldest := "-"
	if st.OldestUnapplied != nil {
		oldest = fmt.Sprintf("%s (%s ago)", cliutil.Time(*st.OldestUnapplied), time.Duration(st.LagSeconds*float64(time.Second)).Round(time.Second))
	}
	horizon := fmt.Sprintf("%d (final)", st.StableSeq)
	if st.HorizonHeld {
		horizon = "held back by an open transaction: nothing new is final yet (lag, not loss)"
	}
	dead := "none" // as oml status says it
	if st.DeadLetters > 0 {
		dead = fmt.Sprint(st.DeadLetters)
	}
	if st.OldestDeadAt != nil {
		dead += fmt.Sprintf(" (oldest %s): see oml deadletter list", cliutil.Time(*st.OldestDeadAt))
	}
	pairs := [][2]string{
		{"frontier", fmt.Sprintf("%d (updated %s)", st.Frontier, cliutil.Time(st.FrontierAt))},
		{"last batch", fmt.Sprintf("(%d, %d]", st.LastBatchStart, st.LastBatchEnd)},
		{"outbox last seq", fmt.Sprint(st.LastSeq)},
		{"stable horizon", horizon},
		{"backlog", fmt.Sprintf("%s, seq gap %d", cliutil.Count(st.BacklogRows, "row"), st.BacklogSeqGap)},
		{"oldest unapplied", oldest},
		{"lease", lease},
		{"dead letters", dead},
	}
	for _, b := range st.Blockers {
		pairs = append(pairs, [2]string{"blocking", describeBlocker(b)})
	}
	pairs = append(pairs, [2]string{"continuity", describeContinuity(st)})
	pairs = append(pairs, st.DurabilityLines()...)
	for _, h := range st.HeldTables {
		pairs = append(pairs, [2]string{"held table", fmt.Sprintf("%s since %s: %s (see docs/runbooks/delta.md)", h.Table, cliutil.Time(h.Since), h.Reason)})
	}
	if err := cliutil.KeyValuesTo(opts.IO, pairs); err != nil {
		return err
	}
	defer func() {
		if err == nil {
			err = continuityFinding(st)
		}
	}()
	if opts.Tables {
		fmt.Fprintln(opts.IO.Out)
		list := st.Tables
		if len(list) > tablesListed {
			var summary [][2]string
			list, summary = summarizeTables(st.Tables, st.Frontier)
			if err := cliutil.KeyValuesTo(opts.IO, summary); err != nil {
				return err
			}
			fmt.Fprintln(opts.IO.Out)
		}
		var rows [][]string
		for _, t := range list {
			v, txn, files, since := "-", "-", "-", "-"
			if t.Exists {
				v, files, since = fmt.Sprint(t.Version), fmt.Sprint(t.Files), fmt.Sprint(t.SinceCheckpoint)
				if t.TxnVersion >= 0 {
					txn = fmt.Sprint(t.TxnVersion)
				}
			}
			if t.Error != "" {
				v = "error: " + t.Error
			}
			rows = append(rows, []string{t.Table, tenantOfPath(names, t.Table), v, txn, files, since})
		}
		if err := cliutil.Table(opts.IO, []string{"TABLE", "TENANT", "VERSION", "TXN VERSION", "FILES", "SINCE CHECKPOINT"}, rows); err != nil {
			return err
		}
	}
	return missing
}

// tablesListed is how many tables `lake status --tables` lists one by
// one; beyond it (20,000 tables at 5,000 tenants) the table output is a
// summary and the tables worth a look — every one that failed to read,
// then the most commits since a checkpoint and the most files
// (tablesWorst each) — and -o json lists them all.
const (
	tablesListed = 200
	tablesWorst  = 20
)

// summarizeTables returns the tables to list and the summary lines.
func summarizeTables(all []lakewriter.TableStatus, frontier int64) ([]lakewriter.TableStatus, [][2]string) {
	var exist, errs, atFrontier, noTxn int
	var files, since int64
	var list []lakewriter.TableStatus
	var ok []lakewriter.TableStatus
	for _, t := range all {
		switch {
		case t.Error != "":
			errs++
			list = append(list, t)
		case t.Exists:
			exist++
			files += int64(t.Files)
			since = max(since, t.SinceCheckpoint)
			if t.TxnVersion >= frontier {
				atFrontier++
			}
			if t.TxnVersion < 0 {
				noTxn++
			}
			ok = append(ok, t)
		}
	}
	seen := map[string]bool{}
	for _, t := range list {
		seen[t.Table] = true
	}
	worst := func(less func(a, b lakewriter.TableStatus) bool) {
		sort.SliceStable(ok, func(i, j int) bool { return less(ok[i], ok[j]) })
		for _, t := range ok[:min(len(ok), tablesWorst)] {
			if !seen[t.Table] {
				seen[t.Table] = true
				list = append(list, t)
			}
		}
	}
	worst(func(a, b lakewriter.TableStatus) bool { return a.SinceCheckpoint > b.SinceCheckpoint })
	worst(func(a, b lakewriter.TableStatus) bool { return a.Files > b.Files })
	return list, [][2]string{
		{"tables", fmt.Sprintf("%d of %d exist (%d tenants × %d kinds); %d could not be read", exist, len(all), len(all)/len(tables.Kinds), len(tables.Kinds), errs)},
		{"at the frontier", fmt.Sprintf("%d (the others hold every row of theirs up to their txn version; a table no batch touched lately is behind it)", atFrontier)},
		{"no lake-writer commit", fmt.Sprint(noTxn)},
		{"files", fmt.Sprintf("%d in all; most commits since a checkpoint: %d", files, since)},
		{"listed below", fmt.Sprintf("%d: every unreadable table, then the %d with the most commits since a checkpoint and the %d with the most files (-o json lists all %d)", len(list), tablesWorst, tablesWorst, len(all))},
	}
}

// lakeMissing is lakewriter.CheckLakeHoldsFrontier as a command error: the
// lake holding none of the drained rows is a finding (exit 1) naming both
// the lake and the frontier; failing to look is a connection error (2).
func lakeMissing(ctx context.Context, lake store.Store, frontier int64) error {
	err := lakewriter.CheckLakeHoldsFrontier(ctx, lake, frontier)
	var lm *lakewriter.LakeMissingError
	if errors.As(err, &lm) {
		return cliutil.Findingsf("%s", lm.Error())
	}
	return cliutil.AsConfigError(err)
}

func isFindings(err error) bool {
	var fe *cliutil.FindingsError
	return errors.As(err, &fe)
}

// describeContinuity is the status line of the continuity check.
func describeContinuity(st lakewriter.Status) string {
	c := st.Continuity
	switch {
	case st.ContinuityError != "":
		return "cannot check: " + st.ContinuityError
	case c == nil:
		return "not checked (no lake configured: --lake or OML_LAKE_URL)"
	case c.OK():
		return fmt.Sprintf("ok: the database holds what the lake drained (lake at seq %d, database at seq %d, timeline %d)", c.LakePosition, c.DB.LastSeq, c.DB.Timeline)
	}
	return "FAILED: " + (&lakewriter.ContinuityError{C: *c}).Error()
}

// continuityFinding makes a failed continuity check the command's exit 1
// (and a check that could not run, exit 2, after the rest was shown).
func continuityFinding(st lakewriter.Status) error {
	if st.ContinuityError != "" {
		return cliutil.ConfigErrorf("cannot check the lake's continuity with the database: %s", st.ContinuityError)
	}
	if c := st.Continuity; c != nil && !c.OK() {
		return cliutil.Findingsf("%s", (&lakewriter.ContinuityError{C: *c}).Error())
	}
	return nil
}
