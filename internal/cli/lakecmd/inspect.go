package lakecmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/lake/delta"
)

// InspectOptions are the inputs of `oml lake inspect`: its argument and
// flags, and what its run function needs, as functions (NewCmdInspect
// fills them from the Factory; a test replaces them).
type InspectOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Read opens TABLE and reads the version the flags pick
	// (readInspect); its errors are the command's.
	Read func(ctx context.Context, opts *InspectOptions) (InspectResult, error)

	Table   string
	Version int64  // -1: latest
	AsOf    string // RFC 3339 timestamp (time travel by timestamp); "": unset
	Files   bool   // also list every live file
}

// NewCmdInspect builds `oml lake inspect TABLE`; runF replaces the run
// function in tests.
func NewCmdInspect(f *cliutil.Factory, runF func(context.Context, *InspectOptions) error) *cobra.Command {
	opts := &InspectOptions{IO: f.IO, Format: f.Format, Read: func(ctx context.Context, o *InspectOptions) (InspectResult, error) {
		return readInspect(ctx, f, o)
	}}
	cmd := &cobra.Command{
		Use:   "inspect TABLE",
		Short: "Show a Delta table's version, protocol, schema, files and txn versions",
		Long: `Show one Delta table: its version, protocol, schema and partitioning, the live
files and their bytes, the remembered tombstones, the checkpoint it was read
from and the commits since, and every application transaction (txn appId,
version, last update). The lake writer's appId is oml-lakewriter.

TABLE is a URL (file:///..., s3://...) or TENANT/LAYER/NAME under --lake,
TENANT being a tenant's name (acme/silver/claims) or id.`,
		Example: `  oml lake inspect 3f9c2d.../bronze/events
  oml lake inspect file:///var/lib/oml/lake/3f9c2d.../silver/claims -o json
  oml lake inspect s3://lake/prod/3f9c2d.../gold/lineage --version 12
  oml lake inspect acme/silver/claims --as-of 2026-03-01T12:00:00Z`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Table = args[0]
			if opts.Version < -1 {
				return cliutil.FlagErrorf("--version must be a table version (0 or more)")
			}
			if opts.AsOf != "" {
				if opts.Version >= 0 {
					return cliutil.FlagErrorf("give --version or --as-of, not both")
				}
				if _, err := parseAsOf(opts.AsOf); err != nil {
					return err
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return inspectRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().Int64Var(&opts.Version, "version", -1, "show this version instead of the latest (time travel)")
	cmd.Flags().StringVar(&opts.AsOf, "as-of", "", "show the latest version committed at or before this RFC 3339 time (time travel by timestamp)")
	cmd.Flags().BoolVar(&opts.Files, "files", false, "also list every live file (path, partition, size, records)")
	return cmd
}

// InspectResult is the -o json document of `oml lake inspect`.
type InspectResult struct {
	Table                  string            `json:"table"`
	Version                int64             `json:"version"`
	AsOf                   *time.Time        `json:"as_of,omitempty"`
	Protocol               ProtocolJSON      `json:"protocol"`
	TableID                string            `json:"table_id"`
	Name                   *string           `json:"name"`
	CreatedTime            *time.Time        `json:"created_time"`
	Schema                 []ColumnJSON      `json:"schema"`
	PartitionColumns       []string          `json:"partition_columns"`
	Configuration          map[string]string `json:"configuration"`
	LiveFiles              int               `json:"live_files"`
	LiveBytes              int64             `json:"live_bytes"`
	Tombstones             int               `json:"tombstones"`
	CheckpointVersion      *int64            `json:"checkpoint_version"`
	CommitsSinceCheckpoint int64             `json:"commits_since_checkpoint"`
	Txns                   []TxnJSON         `json:"txns"`
	Files                  []FileJSON        `json:"files,omitempty"`
}

// FileJSON is one live file (with --files).
type FileJSON struct {
	Path             string             `json:"path"`
	PartitionValues  map[string]*string `json:"partition_values"`
	Size             int64              `json:"size"`
	Records          *int64             `json:"records"`
	ModificationTime time.Time          `json:"modification_time"`
}

// ProtocolJSON is a protocol action in snake_case.
type ProtocolJSON struct {
	MinReaderVersion int      `json:"min_reader_version"`
	MinWriterVersion int      `json:"min_writer_version"`
	ReaderFeatures   []string `json:"reader_features"`
	WriterFeatures   []string `json:"writer_features"`
}

// ColumnJSON is one top-level column.
type ColumnJSON struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	Nullable  bool   `json:"nullable"`
	Partition bool   `json:"partition"`
}

// TxnJSON is one application transaction.
type TxnJSON struct {
	AppID       string     `json:"app_id"`
	Version     int64      `json:"version"`
	LastUpdated *time.Time `json:"last_updated"`
}

func msTime(ms *int64) *time.Time {
	if ms == nil {
		return nil
	}
	t := time.UnixMilli(*ms).UTC()
	return &t
}

// typeString renders a type compactly (struct<a:long>, array<string>, ...).
func typeString(t delta.DataType) string {
	switch t := t.(type) {
	case *delta.StructType:
		parts := make([]string, len(t.Fields))
		for i, f := range t.Fields {
			parts[i] = f.Name + ":" + typeString(f.Type)
		}
		return "struct<" + strings.Join(parts, ",") + ">"
	case *delta.ArrayType:
		return "array<" + typeString(t.ElementType) + ">"
	case *delta.MapType:
		return "map<" + typeString(t.KeyType) + "," + typeString(t.ValueType) + ">"
	}
	return t.TypeString()
}

// Inspect builds the inspect result of a snapshot.
func Inspect(snap *delta.Snapshot) InspectResult {
	p := snap.Protocol()
	md := snap.Metadata()
	part := map[string]bool{}
	for _, c := range md.PartitionColumns {
		part[c] = true
	}
	res := InspectResult{
		Table: snap.Table(), Version: snap.Version(),
		Protocol: ProtocolJSON{MinReaderVersion: p.MinReaderVersion, MinWriterVersion: p.MinWriterVersion,
			ReaderFeatures: nonNil(p.ReaderFeatures), WriterFeatures: nonNil(p.WriterFeatures)},
		TableID: md.ID, Name: md.Name, CreatedTime: msTime(md.CreatedTime),
		PartitionColumns: nonNil(md.PartitionColumns), Configuration: md.Configuration,
		LiveFiles: snap.NumFiles(), LiveBytes: snap.TotalBytes(), Tombstones: snap.NumTombstones(),
		CommitsSinceCheckpoint: snap.Version() - snap.CheckpointVersion(),
		Schema:                 []ColumnJSON{}, Txns: []TxnJSON{},
	}
	if cv := snap.CheckpointVersion(); cv >= 0 {
		res.CheckpointVersion = &cv
		res.CommitsSinceCheckpoint = snap.Version() - cv
	} else {
		res.CommitsSinceCheckpoint = snap.Version() + 1
	}
	for _, f := range snap.Schema().Fields {
		res.Schema = append(res.Schema, ColumnJSON{Name: f.Name, Type: typeString(f.Type), Nullable: f.Nullable, Partition: part[f.Name]})
	}
	txns := snap.Txns()
	ids := make([]string, 0, len(txns))
	for id := range txns {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		t := txns[id]
		res.Txns = append(res.Txns, TxnJSON{AppID: t.AppID, Version: t.Version, LastUpdated: msTime(t.LastUpdated)})
	}
	return res
}

// versionLine is the version, with the --as-of time it was chosen for.
func versionLine(res InspectResult) string {
	if res.AsOf == nil {
		return fmt.Sprint(res.Version)
	}
	return fmt.Sprintf("%d (as of %s)", res.Version, res.AsOf.Format(time.RFC3339Nano))
}

// parseAsOf reads an --as-of timestamp (RFC 3339, fractional seconds
// allowed).
func parseAsOf(s string) (time.Time, error) {
	ts, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, cliutil.FlagErrorf("--as-of %q is not an RFC 3339 timestamp (e.g. 2026-03-01T12:00:00Z or 2026-03-01T13:00:00+01:00)", s)
	}
	return ts, nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// readInspect is InspectOptions.Read over the Factory's lake.
func readInspect(ctx context.Context, f *cliutil.Factory, opts *InspectOptions) (InspectResult, error) {
	st, err := OpenTable(ctx, f, opts.Table)
	if err != nil {
		return InspectResult{}, err
	}
	var lo []delta.LoadOptions
	if opts.Version >= 0 {
		lo = append(lo, delta.AtVersion(opts.Version))
	}
	var asOf *time.Time
	if opts.AsOf != "" {
		ts, err := parseAsOf(opts.AsOf)
		if err != nil {
			return InspectResult{}, err
		}
		v, err := delta.VersionAsOf(ctx, st, ts)
		if errors.Is(err, delta.ErrBeforeFirstCommit) {
			return InspectResult{}, cliutil.ConfigErrorf("--as-of %s: %v; give a later time, or see oml lake history for the oldest commit", opts.AsOf, err)
		}
		if err != nil {
			return InspectResult{}, tableError(st.String(), err)
		}
		lo = append(lo, delta.AtVersion(v))
		u := ts.UTC()
		asOf = &u
	}
	snap, err := delta.Load(ctx, st, lo...)
	if err != nil {
		return InspectResult{}, tableError(st.String(), err)
	}
	res := Inspect(snap)
	res.AsOf = asOf
	if opts.Files {
		res.Files = files(snap)
	}
	return res, nil
}

func inspectRun(ctx context.Context, opts *InspectOptions) error {
	format, err := opts.Format()
	if err != nil {
		return err
	}
	res, err := opts.Read(ctx, opts)
	if err != nil {
		return err
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, res)
	}
	out := opts.IO.Out
	cp := "none (replayed from version 0)"
	if res.CheckpointVersion != nil {
		cp = fmt.Sprint(*res.CheckpointVersion)
	}
	proto := fmt.Sprintf("reader %d, writer %d", res.Protocol.MinReaderVersion, res.Protocol.MinWriterVersion)
	if len(res.Protocol.ReaderFeatures)+len(res.Protocol.WriterFeatures) > 0 {
		proto += fmt.Sprintf(" (features: %s)", strings.Join(append(append([]string{}, res.Protocol.ReaderFeatures...), res.Protocol.WriterFeatures...), ", "))
	}
	part := "none"
	if len(res.PartitionColumns) > 0 {
		part = strings.Join(res.PartitionColumns, ", ")
	}
	created := "-"
	if res.CreatedTime != nil {
		created = cliutil.Time(*res.CreatedTime)
	}
	if err := cliutil.KeyValues(out, [][2]string{
		{"table", res.Table},
		{"version", versionLine(res)},
		{"protocol", proto},
		{"table id", res.TableID},
		{"created", created},
		{"partitioned by", part},
		{"live files", fmt.Sprint(res.LiveFiles)},
		{"live bytes", fmt.Sprint(res.LiveBytes)},
		{"tombstones", fmt.Sprint(res.Tombstones)},
		{"checkpoint", cp},
		{"commits since checkpoint", fmt.Sprint(res.CommitsSinceCheckpoint)},
	}); err != nil {
		return err
	}
	if len(res.Configuration) > 0 {
		keys := make([]string, 0, len(res.Configuration))
		for k := range res.Configuration {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintln(out, "\nconfiguration:")
		for _, k := range keys {
			fmt.Fprintf(out, "  %s=%s\n", k, res.Configuration[k])
		}
	}
	fmt.Fprintln(out)
	rows := make([][]string, 0, len(res.Schema))
	for _, c := range res.Schema {
		rows = append(rows, []string{c.Name, c.Type, fmt.Sprint(c.Nullable), fmt.Sprint(c.Partition)})
	}
	if err := cliutil.Table(opts.IO, []string{"COLUMN", "TYPE", "NULLABLE", "PARTITION"}, rows); err != nil {
		return err
	}
	fmt.Fprintln(out)
	if len(res.Txns) == 0 {
		fmt.Fprintln(out, "txns: none")
	} else {
		rows = rows[:0]
		for _, t := range res.Txns {
			lu := "-"
			if t.LastUpdated != nil {
				lu = cliutil.Time(*t.LastUpdated)
			}
			rows = append(rows, []string{t.AppID, fmt.Sprint(t.Version), lu})
		}
		if err := cliutil.Table(opts.IO, []string{"TXN APP ID", "VERSION", "LAST UPDATED"}, rows); err != nil {
			return err
		}
	}
	if !opts.Files {
		return nil
	}
	fmt.Fprintln(out)
	rows = rows[:0]
	for _, fl := range res.Files {
		parts := make([]string, 0, len(fl.PartitionValues))
		for _, c := range res.PartitionColumns {
			v := "null"
			if p := fl.PartitionValues[c]; p != nil {
				v = fmt.Sprintf("%q", *p)
			}
			parts = append(parts, c+"="+v)
		}
		rec := "-"
		if fl.Records != nil {
			rec = fmt.Sprint(*fl.Records)
		}
		rows = append(rows, []string{fl.Path, orDash(strings.Join(parts, " ")), fmt.Sprint(fl.Size), rec, cliutil.Time(fl.ModificationTime)})
	}
	return cliutil.Table(opts.IO, []string{"FILE", "PARTITION", "BYTES", "RECORDS", "MODIFIED"}, rows)
}

// files lists the live files with their record counts from the stats.
func files(snap *delta.Snapshot) []FileJSON {
	out := []FileJSON{}
	for _, a := range snap.Files() {
		path, err := delta.DecodePath(a.Path)
		if err != nil {
			path = a.Path
		}
		fj := FileJSON{Path: path, PartitionValues: a.PartitionValues, Size: a.Size, ModificationTime: time.UnixMilli(a.ModificationTime).UTC()}
		if fj.PartitionValues == nil {
			fj.PartitionValues = map[string]*string{}
		}
		var st struct {
			NumRecords *int64 `json:"numRecords"`
		}
		if a.Stats != "" && json.Unmarshal([]byte(a.Stats), &st) == nil {
			fj.Records = st.NumRecords
		}
		out = append(out, fj)
	}
	return out
}
