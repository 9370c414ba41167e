package lakecmd

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/lake/delta"
)

// HistoryOptions are the inputs of `oml lake history`: its argument and
// flags, and what its run function needs, as functions (NewCmdHistory
// fills them from the Factory; a test replaces them).
type HistoryOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Read opens TABLE (OpenTable) and reads its commits (delta.History):
	// the table's URL and the commits, newest first; its errors are the
	// command's.
	Read func(ctx context.Context, table string, o delta.HistoryOptions) (string, []delta.HistoryEntry, error)

	Table string
	Limit int
}

// NewCmdHistory builds `oml lake history TABLE`; runF replaces the run
// function in tests.
func NewCmdHistory(f *cliutil.Factory, runF func(context.Context, *HistoryOptions) error) *cobra.Command {
	opts := &HistoryOptions{IO: f.IO, Format: f.Format, Read: func(ctx context.Context, table string, o delta.HistoryOptions) (string, []delta.HistoryEntry, error) {
		st, err := OpenTable(ctx, f, table)
		if err != nil {
			return "", nil, err
		}
		entries, err := delta.History(ctx, st, o)
		if err != nil {
			return "", nil, tableError(st.String(), err)
		}
		return st.String(), entries, nil
	}}
	cmd := &cobra.Command{
		Use:   "history TABLE",
		Short: "List a Delta table's commits, newest first",
		Long: `List the commits of a Delta table still in its log, newest first: one line
per commit with its version, time, operation, metrics and txn (appId=version).
Commits removed by log cleanup (behind a checkpoint) are not shown.

TABLE is a URL (file:///..., s3://...) or TENANT/LAYER/NAME under --lake,
TENANT being a tenant's name (acme/silver/claims) or id.`,
		Example: `  oml lake history 3f9c2d.../bronze/events --limit 20
  oml lake history s3://lake/prod/3f9c2d.../silver/claims -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Table = args[0]
			if opts.Limit < 0 {
				return cliutil.FlagErrorf("--limit must be 0 (all) or more")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return historyRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().IntVar(&opts.Limit, "limit", 0, "show only the newest N commits (0: all)")
	return cmd
}

// HistoryEntryJSON is one commit in `oml lake history -o json`.
type HistoryEntryJSON struct {
	Version             int64           `json:"version"`
	Time                time.Time       `json:"time"`
	Operation           string          `json:"operation"`
	OperationParameters map[string]any  `json:"operation_parameters"`
	OperationMetrics    map[string]any  `json:"operation_metrics"`
	EngineInfo          string          `json:"engine_info"`
	AddedFiles          int             `json:"added_files"`
	RemovedFiles        int             `json:"removed_files"`
	Txns                []TxnJSON       `json:"txns"`
	CommitInfo          json.RawMessage `json:"commit_info"`
}

// HistoryResult is the -o json document of `oml lake history`.
type HistoryResult struct {
	Table   string             `json:"table"`
	Commits []HistoryEntryJSON `json:"commits"`
}

func historyRun(ctx context.Context, opts *HistoryOptions) error {
	format, err := opts.Format()
	if err != nil {
		return err
	}
	table, entries, err := opts.Read(ctx, opts.Table, delta.HistoryOptions{Limit: opts.Limit})
	if err != nil {
		return err
	}
	res := HistoryResult{Table: table, Commits: make([]HistoryEntryJSON, 0, len(entries))}
	for _, e := range entries {
		j := HistoryEntryJSON{Version: e.Version, Time: time.UnixMilli(e.Timestamp).UTC(), Operation: e.Operation,
			OperationParameters: e.OperationParameters, OperationMetrics: e.OperationMetrics, EngineInfo: e.EngineInfo,
			AddedFiles: e.AddedFiles, RemovedFiles: e.RemovedFiles, Txns: []TxnJSON{}, CommitInfo: e.CommitInfo}
		if j.OperationParameters == nil {
			j.OperationParameters = map[string]any{}
		}
		if j.OperationMetrics == nil {
			j.OperationMetrics = map[string]any{}
		}
		if j.CommitInfo == nil {
			j.CommitInfo = json.RawMessage("null")
		}
		for _, t := range e.Txns {
			j.Txns = append(j.Txns, TxnJSON{AppID: t.AppID, Version: t.Version, LastUpdated: msTime(t.LastUpdated)})
		}
		res.Commits = append(res.Commits, j)
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, res)
	}
	rows := make([][]string, 0, len(res.Commits))
	for _, c := range res.Commits {
		op := c.Operation
		if op == "" {
			op = "-"
		}
		txns := make([]string, 0, len(c.Txns))
		for _, t := range c.Txns {
			txns = append(txns, fmt.Sprintf("%s=%d", t.AppID, t.Version))
		}
		rows = append(rows, []string{fmt.Sprint(c.Version), cliutil.Time(c.Time), op,
			fmt.Sprintf("+%d -%d", c.AddedFiles, c.RemovedFiles), metricsString(c.OperationMetrics), orDash(strings.Join(txns, " "))})
	}
	return cliutil.Table(opts.IO, []string{"VERSION", "TIME", "OPERATION", "FILES", "METRICS", "TXN"}, rows)
}

func metricsString(m map[string]any) string {
	if len(m) == 0 {
		return "-"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s=%v", k, m[k]))
	}
	return strings.Join(parts, " ")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
