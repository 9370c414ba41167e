package maintain

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// Erasure stages, in the order a claim passes through them.
const (
	// StageJournalled: claim.erased is in the journal but the data key is
	// still in oml.claim_keys (never expected: both happen in one
	// transaction; reconcile reports it as erased-key-present).
	StageJournalled = "journalled"
	// StageKeyDestroyed: the key is gone; the lake writer has not merged
	// state=erased into silver yet (lag).
	StageKeyDestroyed = "key-destroyed"
	// StageInLiveFiles: silver says erased, but a live file still holds the
	// ciphertext: the next erase-bodies rewrite (oml lake optimize or
	// maintain) removes it from the live table.
	StageInLiveFiles = "in-live-files"
	// StageInRemovedFiles: only files no live version references (tombstoned
	// or orphaned) still hold it; vacuum deletes them after the retention.
	StageInRemovedFiles = "in-removed-files"
	// StageGone: no file under the table's directory holds it.
	StageGone = "gone"
	// StageNeverInLake: no version was ever promoted, so its ciphertext
	// never reached the lake.
	StageNeverInLake = "never-in-lake"
)

// FileRef is a file that still holds an erased claim's ciphertext.
type FileRef struct {
	Path string `json:"path"`
	// Kind is live, tombstoned or orphan (written, never committed).
	Kind string `json:"kind"`
	// RemovedAt is the tombstone's deletion time (orphans: the file's
	// modification time).
	RemovedAt time.Time `json:"removed_at,omitzero"`
	// DeletableAt is when vacuum at the table's retention may delete it.
	DeletableAt time.Time `json:"deletable_at,omitzero"`
}

// ErasedClaim is one erased artifact's progress out of the lake.
type ErasedClaim struct {
	Tenant       uuid.UUID `json:"tenant_id"`
	ArtifactID   string    `json:"artifact_id"`
	Versions     []int32   `json:"promoted_versions"` // the versions silver holds rows for
	ErasedSeq    int64     `json:"erased_seq"`        // journal seq of claim.erased
	ErasedAt     time.Time `json:"erased_at"`
	KeyDestroyed bool      `json:"key_destroyed"`
	// Merged: the lake writer has applied the erasure's silver outbox row.
	Merged bool      `json:"merged_into_silver"`
	Stage  string    `json:"stage"`
	Files  []FileRef `json:"files"`
	// GoneBy is the earliest time every byte can be gone if maintenance
	// runs as scheduled: the last DeletableAt of its files, or for a claim
	// still in live files now + retention (the rewrite has yet to happen).
	// Zero for gone or never-in-lake. Vacuum must still run after it.
	GoneBy           time.Time     `json:"gone_by,omitzero"`
	Retention        time.Duration `json:"-"`
	RetentionSeconds float64       `json:"retention_seconds"` // JSON durations are float seconds (docs/cli.md)

	outboxSeq int64 // the erasure's silver outbox row (0: none)
}

// ErasureStatus reports every erased claim (of one tenant, or all) and how
// far its ciphertext has got out of the tenant's silver table. It reads
// the fold state and outbox in PostgreSQL, the silver log, and every data
// file under the table's directory whose stats may hold an erased artifact
// (tombstoned and orphaned files included), so its cost grows with the
// table; it is an operator's question, not a hot path.
func ErasureStatus(ctx context.Context, db *pgxpool.Pool, lake store.Store, tenant *uuid.UUID, now time.Time) ([]ErasedClaim, error) {
	if now.IsZero() {
		now = time.Now()
	}
	claims, err := erasedClaims(ctx, db, tenant)
	if err != nil {
		return nil, err
	}
	byTenant := map[uuid.UUID][]*ErasedClaim{}
	var order []uuid.UUID
	for i := range claims {
		c := &claims[i]
		if _, ok := byTenant[c.Tenant]; !ok {
			order = append(order, c.Tenant)
		}
		byTenant[c.Tenant] = append(byTenant[c.Tenant], c)
	}
	for _, tn := range order {
		if err := locateCiphertext(ctx, lake, tn, byTenant[tn], now); err != nil {
			return nil, err
		}
	}
	return claims, nil
}

func erasedClaims(ctx context.Context, db *pgxpool.Pool, tenant *uuid.UUID) ([]ErasedClaim, error) {
	rows, err := db.Query(ctx, `
SELECT c.tenant_id, c.artifact_id,
       coalesce(array_agg(c.version ORDER BY c.version) FILTER (WHERE c.promoted_seq IS NOT NULL), '{}'),
       max(c.last_seq), max(c.updated_at),
       NOT EXISTS (SELECT 1 FROM oml.claim_keys k WHERE k.tenant_id = c.tenant_id AND k.artifact_id = c.artifact_id),
       (SELECT max(o.seq) FROM oml.outbox o WHERE o.tenant_id = c.tenant_id AND o.artifact_id = c.artifact_id
                AND o.target = 'silver.claims' AND o.op = 'retract')
FROM oml.claims c
WHERE c.state = 'erased' AND ($1::uuid IS NULL OR c.tenant_id = $1)
GROUP BY c.tenant_id, c.artifact_id
ORDER BY c.tenant_id, max(c.last_seq), c.artifact_id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("list erased claims: %w", err)
	}
	defer rows.Close()
	var out []ErasedClaim
	for rows.Next() {
		var c ErasedClaim
		var seq *int64
		if err := rows.Scan(&c.Tenant, &c.ArtifactID, &c.Versions, &c.ErasedSeq, &c.ErasedAt, &c.KeyDestroyed, &seq); err != nil {
			return nil, fmt.Errorf("list erased claims: %w", err)
		}
		c.Files = []FileRef{}
		if seq != nil {
			c.outboxSeq = *seq
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list erased claims: %w", err)
	}
	return out, nil
}

// locateCiphertext finds, for one tenant's erased claims, every file under
// its silver table's directory that still holds one of their bodies, and
// sets Merged, Files, Stage and GoneBy.
func locateCiphertext(ctx context.Context, lake store.Store, tenant uuid.UUID, claims []*ErasedClaim, now time.Time) error {
	key := tables.TableKey{Tenant: tenant, Kind: tables.Silver}
	st, err := key.Store(lake)
	if err != nil {
		return err
	}
	snap, err := delta.Load(ctx, st)
	if notFound(err) {
		snap, err = nil, nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", key, err)
	}
	retention := delta.DefaultDeletedFileRetention
	txn := int64(-1)
	want := map[string]*ErasedClaim{}
	var ids []string
	for _, c := range claims {
		if len(c.Versions) > 0 {
			want[c.ArtifactID] = c
			ids = append(ids, c.ArtifactID)
		}
	}
	sort.Strings(ids)
	if snap != nil {
		if retention, err = snap.DeletedFileRetention(); err != nil {
			return err
		}
		if v, ok := snap.TxnVersion(tables.AppID); ok {
			txn = v
		}
		if err := scanForBodies(ctx, st, snap, ids, want, retention); err != nil {
			return fmt.Errorf("look for erased ciphertext in %s: %w", key, err)
		}
	}
	for _, c := range claims {
		c.Retention, c.RetentionSeconds = retention, retention.Seconds()
		c.Merged = c.outboxSeq > 0 && txn >= c.outboxSeq
		sort.Slice(c.Files, func(i, j int) bool { return c.Files[i].Path < c.Files[j].Path })
		live := false
		for _, f := range c.Files {
			if f.Kind == "live" {
				live = true
			}
			if f.DeletableAt.After(c.GoneBy) {
				c.GoneBy = f.DeletableAt
			}
		}
		switch {
		case !c.KeyDestroyed:
			c.Stage = StageJournalled
		case len(c.Versions) == 0:
			c.Stage = StageNeverInLake
		case !c.Merged:
			// Not merged yet (lag): the promoted row, in the lake or on its
			// way, still carries the body.
			c.Stage = StageKeyDestroyed
		case live:
			c.Stage = StageInLiveFiles
		case len(c.Files) > 0:
			c.Stage = StageInRemovedFiles
		default:
			c.Stage = StageGone
		}
		if c.Stage == StageInLiveFiles || c.Stage == StageKeyDestroyed {
			// The rewrite that tombstones the live copy has not happened:
			// the earliest the bytes can go is a retention after it.
			if gb := now.Add(retention); gb.After(c.GoneBy) {
				c.GoneBy = gb
			}
		}
	}
	return nil
}

// scanForBodies reads every existing data file under the table (live,
// tombstoned, orphaned) whose stats may hold one of ids and records, per
// erased claim, the files holding a non-null body of one of its rows.
func scanForBodies(ctx context.Context, st store.Store, snap *delta.Snapshot, ids []string, want map[string]*ErasedClaim, retention time.Duration) error {
	if len(ids) == 0 {
		return nil
	}
	objs, err := st.List(ctx, "", "")
	if err != nil {
		return err
	}
	tomb := map[string]*delta.Remove{}
	for _, r := range snap.Tombstones() {
		k, err := delta.DecodePath(r.Path)
		if err != nil {
			return err
		}
		tomb[k] = r
	}
	for _, o := range objs {
		if hiddenPath(o.Key) || !strings.HasSuffix(o.Key, ".parquet") {
			continue
		}
		ref := FileRef{Path: o.Key}
		add, live := snap.File(o.Key)
		stats := ""
		switch {
		case live:
			ref.Kind = "live"
			stats = add.Stats
		case tomb[o.Key] != nil:
			r := tomb[o.Key]
			ref.Kind = "tombstoned"
			stats = r.Stats
			if r.DeletionTimestamp != nil {
				ref.RemovedAt = time.UnixMilli(*r.DeletionTimestamp).UTC()
			} else {
				ref.RemovedAt = o.ModTime.UTC()
			}
		default:
			// An orphan (a rewrite that lost its race, a crashed writer's
			// file) or a tombstone that already expired from the log: vacuum
			// goes by the file's age.
			ref.Kind = "orphan"
			ref.RemovedAt = o.ModTime.UTC()
		}
		if !live {
			ref.DeletableAt = ref.RemovedAt.Add(retention)
		}
		candidate := false
		for _, id := range ids {
			if mayHoldArtifact(stats, id) {
				candidate = true
				break
			}
		}
		if !candidate {
			continue
		}
		hit := map[*ErasedClaim]bool{}
		err := readBodies(ctx, st, o.Key, func(id string, body []byte) {
			if c := want[id]; c != nil && body != nil {
				hit[c] = true
			}
		})
		if err != nil {
			return fmt.Errorf("reading %s: %w", o.Key, err)
		}
		for c := range hit {
			c.Files = append(c.Files, ref)
		}
	}
	return nil
}

// hiddenPath is vacuum's rule: a segment starting with '_' or '.' that is
// not a partition directory ("_2=x") hides the path (the log, temp files).
func hiddenPath(key string) bool {
	for _, seg := range strings.Split(key, "/") {
		if (strings.HasPrefix(seg, "_") || strings.HasPrefix(seg, ".")) && !strings.Contains(seg, "=") {
			return true
		}
	}
	return false
}

// readBodies reads the artifact_id and body columns of any silver data
// file, live or not (delta's Scan reads only live files; a tombstoned or
// orphaned file is read here straight from Parquet).
func readBodies(ctx context.Context, st store.Store, key string, fn func(id string, body []byte)) error {
	obj, err := st.Open(ctx, key)
	if err != nil {
		return err
	}
	defer obj.Close()
	f, err := pq.Open(obj, obj.Size())
	if err != nil {
		return err
	}
	str, err := delta.PQType(delta.Prim(delta.TypeString))
	if err != nil {
		return err
	}
	bin, err := delta.PQType(delta.Prim(delta.TypeBinary))
	if err != nil {
		return err
	}
	rows, err := f.RowsFor(pq.NewSchema(pq.Field{Name: "artifact_id", Type: str, Nullable: true}, pq.Field{Name: "body", Type: bin, Nullable: true}))
	if err != nil {
		return err
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		batch, err := rows.Next(4096)
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		for _, r := range batch {
			id, _ := r[0].(string)
			body, _ := r[1].([]byte)
			fn(id, body)
		}
	}
}
