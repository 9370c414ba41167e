package lakerepair

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// Manifest describes one table repair's archive (manifest.json beside
// rows.parquet). It is part of the lake format: operators and auditors
// read it.
type Manifest struct {
	Format         string           `json:"format"` // oml-repair-archive-v1
	TenantID       string           `json:"tenant_id"`
	Table          string           `json:"table"`
	Path           string           `json:"path"`
	Action         string           `json:"action"`
	Classes        map[string]int64 `json:"classes"`
	PlanDigest     string           `json:"plan_digest"`
	ReadVersion    int64            `json:"read_version"`
	CommitVersion  int64            `json:"commit_version"` // the repair commit (read_version + 1)
	RestoreVersion int64            `json:"restore_version"`
	TxnBefore      int64            `json:"txn_version_before"`
	TxnAfter       int64            `json:"txn_version_after"`
	Rows           int64            `json:"rows"`
	RowsFile       string           `json:"rows_file"`
	RemovedFiles   []string         `json:"removed_files"`
	MissingFiles   []string         `json:"missing_files"` // removed files the store had lost already
	Journal        ManifestJournal  `json:"journal"`
}

// ManifestJournal names the journal event that records the repair: the
// lake.repaired on the tenant's chain listing this table's commit.
type ManifestJournal struct {
	EventType    string `json:"event_type"`
	TenantID     string `json:"tenant_id"`
	Table        string `json:"table"`
	DeltaVersion int64  `json:"delta_version"`
	PlanDigest   string `json:"plan_digest"`
}

// archiveDir is where one table repair's archive goes: named by the table
// and the Delta version the repair read, so a re-run of the same repair
// writes the same objects.
func archiveDir(key tables.TableKey, readVersion int64) string {
	return fmt.Sprintf("%s/%s/%s/v%020d", ArchiveRoot, key.Tenant, key.Kind.Dir(), readVersion)
}

type archived struct {
	Rows     int64
	Manifest string // key under the lake root
}

// writeArchive writes, streaming file by file, every row of tp's removed
// files that archive selects as Parquet, then the manifest. kept (when
// set) receives, per removed file, the rows archive did not select: the
// rest of a file a row-level repair rewrites. A removed file the store has
// lost, or that is not readable Parquet, is listed in the manifest.
func writeArchive(ctx context.Context, lake, table store.Store, snap *delta.Snapshot, planDigest string, tp *TablePlan,
	archive func(pq.Row) bool, kept func([]pq.Row) error) (archived, error) {
	dir := archiveDir(tp.key, tp.ReadVersion)
	m := Manifest{Format: "oml-repair-archive-v1", TenantID: tp.Tenant.String(), Table: tp.Table, Path: tp.Path, Action: tp.Action,
		Classes: tp.Classes, PlanDigest: planDigest, ReadVersion: tp.ReadVersion, CommitVersion: tp.ReadVersion + 1,
		RestoreVersion: tp.RestoreVersion, TxnBefore: tp.TxnVersion, TxnAfter: tp.TargetTxnVersion, RowsFile: dir + "/rows.parquet",
		RemovedFiles: []string{}, MissingFiles: []string{},
		Journal: ManifestJournal{EventType: "lake.repaired", TenantID: tp.Tenant.String(), Table: tp.Table,
			DeltaVersion: tp.ReadVersion + 1, PlanDigest: planDigest}}
	schema, err := snap.DataSchema()
	if err != nil {
		return archived{}, err
	}
	err = delta.PutStream(ctx, lake, m.RowsFile, func(out io.Writer) error {
		pw, err := pq.NewWriter(out, schema, pq.Options{})
		if err != nil {
			return err
		}
		for _, f := range tp.removes {
			m.RemovedFiles = append(m.RemovedFiles, f.Path)
			var rest []pq.Row
			err := snap.Scan(ctx, table, delta.ScanOptions{Files: []*delta.Add{f}}, func(_ *delta.Add, rows []pq.Row) error {
				var take []pq.Row
				for _, r := range rows {
					if archive(r) {
						take = append(take, r)
					} else if kept != nil {
						rest = append(rest, append(pq.Row(nil), r...))
					}
				}
				m.Rows += int64(len(take))
				if len(take) == 0 {
					return nil
				}
				tp.erase.scrub(take) // never an erased body in the archive (erasure.go)
				return pw.Write(take)
			})
			if errors.Is(err, store.ErrNotFound) || errors.Is(err, delta.ErrCorruptData) {
				m.MissingFiles = append(m.MissingFiles, f.Path)
				continue
			}
			if err != nil {
				return fmt.Errorf("read %s of %s for the archive: %w", f.Path, tp.Path, err)
			}
			if kept != nil {
				if err := kept(rest); err != nil {
					return err
				}
			}
		}
		_, err = pw.Close()
		return err
	})
	if err != nil {
		return archived{}, fmt.Errorf("write the repair archive of %s: %w", tp.Path, err)
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return archived{}, err
	}
	key := dir + "/manifest.json"
	if err := lake.Put(ctx, key, bytes.NewReader(b), int64(len(b))); err != nil {
		return archived{}, fmt.Errorf("write the repair archive manifest of %s: %w", tp.Path, err)
	}
	return archived{Rows: m.Rows, Manifest: key}, nil
}

// columnIndexes finds named columns in the snapshot's scan order.
func columnIndexes(snap *delta.Snapshot, names []string) ([]int, error) {
	cols, err := snap.ScanColumns(nil)
	if err != nil {
		return nil, err
	}
	out := make([]int, 0, len(names))
	for _, n := range names {
		i := -1
		for j, c := range cols {
			if c.Name == n {
				i = j
			}
		}
		if i < 0 {
			return nil, fmt.Errorf("%s has no column %s: not a lake-writer table", snap.Table(), n)
		}
		out = append(out, i)
	}
	return out, nil
}
