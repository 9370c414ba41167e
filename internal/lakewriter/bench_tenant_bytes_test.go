package lakewriter

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

var benchTenantBytesN = flag.Int("bench.tenantbytes", 500, "tenants in BenchmarkTenantBytes")

// BenchmarkTenantBytes measures what the lake writer keeps in memory per
// tenant (docs/lake-writer.md, memory): each of a tenant's four tables
// created and committed once through the registry as a drain does (one
// file, its txn and batch bounds), with the records the drainer keeps
// for the whole run (the complete slots, the witness stamps). It reports
// the live heap after a GC, per tenant:
//
//   - open-B/tenant: the tenant's four writers kept open, plus its records;
//   - reopened-B/table: one writer reopened from its log (the path a table
//     evicted by --max-open-tables takes when a batch next touches it);
//   - records-B/tenant: the records alone, every writer closed.
//
// Run it on main's tree and on a change's in the same session to compare
// (docs/lake-writer.md has the commands).
func BenchmarkTenantBytes(b *testing.B) {
	ctx := context.Background()
	n := *benchTenantBytesN
	for i := 0; i < b.N; i++ {
		lake, err := store.NewFile(b.TempDir(), store.WithSync(store.SyncGroup))
		require.NoError(b, err)
		keys := make([]tables.TableKey, 0, n*tables.NumKinds)
		for range n {
			t := uuid.New()
			for _, k := range tables.Kinds {
				keys = append(keys, tables.TableKey{Tenant: t, Kind: k})
			}
		}
		base := liveHeap()
		d := &Drainer{opts: Options{WitnessInterval: time.Second}}
		d.tables = newRegistry(lake, registryOptions{Lean: true})
		d.witnessPending = map[uuid.UUID]struct{}{}
		sem := make(chan struct{}, 32)
		errs := make(chan error, len(keys))
		for j, key := range keys {
			d.tables.markAbsent(key) // as the start-up scan of an empty lake leaves it
			d.witnessPending[key.Tenant] = struct{}{}
			sem <- struct{}{}
			go func() {
				defer func() { <-sem }()
				errs <- commitLikeTheDrain(ctx, d, key, int64(j+1))
			}()
		}
		for range keys {
			require.NoError(b, <-errs)
		}
		d.takeDue(time.Now())
		open := liveHeap()

		again := newRegistry(lake, registryOptions{Lean: true})
		for _, key := range keys {
			_, err := again.writer(ctx, key, leaveMissing)
			require.NoError(b, err)
		}
		reopened := liveHeap()
		runtime.KeepAlive(again)

		d.tables = nil
		again = nil
		records := liveHeap()
		runtime.KeepAlive(d)

		b.ReportMetric(float64(open-base)/float64(n), "open-B/tenant")
		b.ReportMetric(float64(reopened-open)/float64(len(keys)), "reopened-B/table")
		b.ReportMetric(float64(records-base)/float64(n), "records-B/tenant")
	}
}

// liveHeap is the heap in use after a full collection.
func liveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// commitLikeTheDrain creates key's table through the registry with one
// row of its kind, committed with the txn and batch bounds a drain's
// batch commit carries, and records it complete.
func commitLikeTheDrain(ctx context.Context, d *Drainer, key tables.TableKey, seq int64) error {
	w, err := d.tables.writer(ctx, key, createMissing)
	if err != nil {
		return err
	}
	add, err := w.WriteFile(ctx, map[string]*string{}, []pq.Row{benchRowOf(key, seq)})
	if err != nil {
		return err
	}
	rows := int64(10000)
	bounds := tables.BatchBounds{Start: seq - 1, End: seq + 9999, SystemIdentifier: "7715006151879041038", Timeline: 1, Rows: &rows,
		Anchor: &tables.Anchor{Seq: seq + 9999, Tenant: key.Tenant, JournalSeq: 3,
			EventHash: fmt.Sprintf("%064x", seq), Digest: fmt.Sprintf("%064x", seq+1)}}
	if _, err := w.Commit(ctx, delta.Commit{
		Operation:           "STREAMING UPDATE",
		OperationParameters: map[string]any{"outputMode": "Append", "queryId": tables.AppID},
		OperationMetrics:    map[string]any{"numAddedFiles": "1", "numOutputRows": "1", "numOutputBytes": fmt.Sprint(add.Size)},
		Adds:                []*delta.Add{add},
		Txn:                 &delta.Txn{AppID: tables.AppID, Version: bounds.End},
		Extra:               bounds.CommitInfo(),
	}); err != nil {
		return err
	}
	d.tables.resized(key, w)
	d.markComplete(key, bounds.End)
	return nil
}

// benchRowOf is a row of key's kind with the sizes a claim's rows have.
func benchRowOf(key tables.TableKey, seq int64) pq.Row {
	now := time.Now().UTC()
	tenant := key.Tenant.String()
	digest := fmt.Sprintf("%064x", seq)
	switch key.Kind {
	case tables.Bronze:
		return tables.BronzeRow{TenantID: tenant, Seq: seq, EventType: "claim.submitted", RecordedAt: now,
			PrevHash: make([]byte, 32), Hash: make([]byte, 32), Signature: make([]byte, 64), KeyID: "ed4efbc9a6830c70cadbabd8b98b2d97",
			Payload: `{"artifact_id":"art-1-2-0-0","version":1,"ciphertext_digest":"` + digest + `"}`, OutboxSeq: seq}.Row()
	case tables.Silver:
		return tables.SilverRow{ArtifactID: "art-1-2-0-0", Version: 1, TenantID: tenant, WorkareaID: "wa-1",
			Writer: "writer-1", Principal: "principal-1", Provenance: "observed", PlaintextDigest: digest, CiphertextDigest: digest,
			Body: make([]byte, 200), State: "promoted", PromotedBy: "principal-1", SubmittedSeq: seq, PromotedSeq: seq, JournalSeq: seq,
			OutboxSeq: seq, UpdatedAt: now}.Row()
	case tables.Gold:
		return tables.GoldLineageRow{TenantID: tenant, ArtifactID: "art-1-2-0-0", Version: 1, JournalSeq: seq, EventType: "claim.promoted",
			EventHash: make([]byte, 32), RecordedAt: now, Actor: "principal-1", StateBefore: "submitted", StateAfter: "promoted",
			WorkareaID: "wa-1", Writer: "writer-1", Principal: "principal-1", Provenance: "observed",
			PlaintextDigest: digest, CiphertextDigest: digest, SubmittedSeq: seq, PrevJournalSeq: seq, OutboxSeq: seq}.Row()
	default:
		return tables.GoldWorkareaRow{TenantID: tenant, WorkareaID: "wa-1", Claims: 1, Promoted: 1, Writers: []string{"writer-1"},
			Changes: 1, FirstJournalSeq: seq, FirstChangedAt: now, LastJournalSeq: seq, LastChangedAt: now, LastOutboxSeq: seq}.Row()
	}
}
