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
	"github.com/omlhq/oml/internal/lakewriter"
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
func archiveDir(key lakewriter.TableKey, readVersion int64) string {
	return fmt.Sprintf("%s/%s/%s/v%020d", ArchiveRoot, key.Tenant, key.Kind.Dir(), readVersion)
}

type archived struct {
	Rows     int64
	Manifest string // key under the lake root
}

// writeArchive writes every row tp removes for good (rows of removed
// files above the target txn version: the rows at or below it come back
// with the re-added files, or from the database for a rebuild) as
// Parquet, streaming file by file, then the manifest.
func writeArchive(ctx context.Context, lake, table store.Store, snap *delta.Snapshot, planDigest string, tp *TablePlan) (archived, error) {
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
	cols, err := snap.ScanColumns(nil)
	if err != nil {
		return archived{}, err
	}
	seqCol := -1
	for i, c := range cols {
		if c.Name == "outbox_seq" {
			seqCol = i
		}
	}
	if seqCol < 0 {
		return archived{}, fmt.Errorf("%s has no outbox_seq column: not a lake-writer table", tp.Path)
	}
	err = delta.PutStream(ctx, lake, m.RowsFile, func(out io.Writer) error {
		pw, err := pq.NewWriter(out, schema, pq.Options{})
		if err != nil {
			return err
		}
		for _, f := range tp.removes {
			m.RemovedFiles = append(m.RemovedFiles, f.Path)
			err := snap.Scan(ctx, table, delta.ScanOptions{Files: []*delta.Add{f}}, func(_ *delta.Add, rows []pq.Row) error {
				keep := rows[:0]
				for _, r := range rows {
					if s, ok := r[seqCol].(int64); !ok || s > tp.TargetTxnVersion {
						keep = append(keep, r)
					}
				}
				m.Rows += int64(len(keep))
				if len(keep) == 0 {
					return nil
				}
				return pw.Write(keep)
			})
			if errors.Is(err, store.ErrNotFound) {
				m.MissingFiles = append(m.MissingFiles, f.Path)
				continue
			}
			if err != nil {
				return fmt.Errorf("read %s of %s for the archive: %w", f.Path, tp.Path, err)
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
