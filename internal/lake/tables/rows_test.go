package tables_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/pq"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
)

// The column names of each table, in order: part of the lake format
// (existing tables have them; lakewriter's checkSchema refuses others).
var wantColumns = map[tables.Kind][]string{
	tables.Bronze: {"tenant_id", "seq", "event_type", "recorded_at", "prev_hash", "hash", "signature", "key_id", "payload", "outbox_seq"},
	tables.Silver: {"artifact_id", "version", "tenant_id", "workarea_id", "writer", "principal", "provenance", "plaintext_digest",
		"ciphertext_digest", "body", "state", "promoted_by", "submitted_seq", "promoted_seq", "journal_seq", "outbox_seq", "updated_at"},
	tables.Gold: {"tenant_id", "artifact_id", "version", "journal_seq", "event_type", "event_hash", "recorded_at", "actor", "reason",
		"state_before", "state_after", "workarea_id", "to_workarea_id", "writer", "principal", "provenance", "plaintext_digest",
		"ciphertext_digest", "submitted_seq", "prev_journal_seq", "outbox_seq"},
	tables.Workareas: {"tenant_id", "workarea_id", "claims", "promoted", "demoted", "reassigned", "simulation_ended", "erased",
		"writers", "changes", "first_journal_seq", "first_changed_at", "last_journal_seq", "last_changed_at", "last_outbox_seq"},
}

func allColumns(k tables.Kind) []string {
	switch k {
	case tables.Bronze:
		return tables.BronzeColumns().Columns()
	case tables.Silver:
		return tables.SilverColumns().Columns()
	case tables.Workareas:
		return tables.WorkareaColumns().Columns()
	}
	return tables.LineageColumns().Columns()
}

func schemaNames(k tables.Kind) []string {
	var out []string
	for _, f := range k.Schema().Fields {
		out = append(out, f.Name)
	}
	return out
}

// TestColumns_EqualTheSchemaFieldsInOrder: the column constants (a full
// projection lists them in order), the schema's fields and the lake
// format's column list are one list.
func TestColumns_EqualTheSchemaFieldsInOrder(t *testing.T) {
	t.Parallel()
	for _, k := range tables.Kinds {
		require.Equal(t, wantColumns[k], schemaNames(k), "%s schema", k)
		require.Equal(t, schemaNames(k), allColumns(k), "%s column constants", k)
	}
	require.Equal(t, "outbox_seq", tables.BronzeOutboxSeq.Name())
	require.Equal(t, "body", tables.SilverBody.Name())
	require.Equal(t, "prev_journal_seq", tables.LineagePrevJournalSeq.Name())
}

// One row of each table with a distinct value in every column, so a
// mapping that swaps two columns of the same type cannot round-trip.
func sampleRows() (tables.BronzeRow, tables.SilverRow, tables.GoldLineageRow) {
	at := time.Date(2026, 12, 1, 12, 34, 56, 789000000, time.UTC) // µs precision: Parquet timestamps
	b := tables.BronzeRow{TenantID: uuid.NewString(), Seq: 11, EventType: "claim.submitted", RecordedAt: at,
		PrevHash: []byte{1, 2}, Hash: []byte{3, 4}, Signature: []byte{5, 6}, KeyID: "key-1", Payload: `{"a":1}`, OutboxSeq: 12}
	s := tables.SilverRow{ArtifactID: "art-1", Version: 3, TenantID: uuid.NewString(), WorkareaID: "wa", Writer: "wr",
		Principal: "pr", Provenance: "pv", PlaintextDigest: "pd", CiphertextDigest: "cd", Body: []byte("body"),
		State: "promoted", PromotedBy: "pb", SubmittedSeq: 21, PromotedSeq: 22, JournalSeq: 23, OutboxSeq: 24, UpdatedAt: at.Add(time.Second)}
	g := tables.GoldLineageRow{TenantID: uuid.NewString(), ArtifactID: "art-2", Version: 4, JournalSeq: 31, EventType: "claim.reassigned",
		EventHash: []byte{7, 8}, RecordedAt: at.Add(2 * time.Second), Actor: "ac", Reason: "re", StateBefore: "promoted",
		StateAfter: "reassigned", WorkareaID: "wa-from", ToWorkareaID: "wa-to", Writer: "wr2", Principal: "pr2", Provenance: "pv2",
		PlaintextDigest: "pd2", CiphertextDigest: "cd2", SubmittedSeq: 29, PrevJournalSeq: 30, OutboxSeq: 32}
	return b, s, g
}

// TestRows_RoundTripEveryColumnInMemory: Row then Decode gives the row
// back, every column; and Row has one value per schema field.
func TestRows_RoundTripEveryColumnInMemory(t *testing.T) {
	t.Parallel()
	b, s, g := sampleRows()
	require.Len(t, b.Row(), len(tables.Bronze.Schema().Fields))
	require.Len(t, s.Row(), len(tables.Silver.Schema().Fields))
	require.Len(t, g.Row(), len(tables.Gold.Schema().Fields))
	require.Equal(t, b, tables.DecodeBronze(b.Row()))
	require.Equal(t, s, tables.DecodeSilver(s.Row()))
	require.Equal(t, g, tables.DecodeLineage(g.Row()))
	a, v := tables.SilverClaim(s.Row())
	require.Equal(t, s.ArtifactID, a)
	require.Equal(t, s.Version, v)

	// The nulls: an erased body; a lineage row of no reassignment, and
	// one re-derived after prune (no outbox seq).
	s.Body = nil
	require.Nil(t, s.Row()[tables.SilverBody])
	require.Equal(t, s, tables.DecodeSilver(s.Row()))
	g.ToWorkareaID, g.OutboxSeq = "", 0
	require.Nil(t, g.Row()[tables.LineageToWorkareaID])
	require.Nil(t, g.Row()[tables.LineageOutboxSeq])
	require.Equal(t, g, tables.DecodeLineage(g.Row()))
}

// writeAndScan writes rows to a new table of key's kind through Delta and
// Parquet and scans them back with the given columns (nil: all).
func writeAndScan(t *testing.T, key tables.TableKey, rows []pq.Row, cols []string) []pq.Row {
	t.Helper()
	ctx := context.Background()
	st, err := key.Store(store.NewMem())
	require.NoError(t, err)
	w, err := delta.CreateTable(ctx, st, key.Spec(), delta.Options{})
	require.NoError(t, err)
	add, err := w.WriteFile(ctx, map[string]*string{}, rows)
	require.NoError(t, err)
	_, err = w.Commit(ctx, delta.Commit{Operation: "WRITE", Adds: []*delta.Add{add}})
	require.NoError(t, err)
	snap, err := delta.Load(ctx, st)
	require.NoError(t, err)
	var out []pq.Row
	require.NoError(t, snap.Scan(ctx, st, delta.ScanOptions{Columns: cols}, func(_ *delta.Add, rs []pq.Row) error {
		out = append(out, rs...)
		return nil
	}))
	return out
}

// TestRows_RoundTripEveryColumnThroughParquet: a typed row written as the
// lake writer writes it (its Delta schema, its Parquet row) and read back
// decodes to itself, every column. A Go type that does not match the
// schema's, or a value in the wrong position, fails here.
func TestRows_RoundTripEveryColumnThroughParquet(t *testing.T) {
	t.Parallel()
	b, s, g := sampleRows()
	tn := uuid.New()
	erased := s
	erased.ArtifactID, erased.Body = "art-0", nil
	noClaim := g
	noClaim.ToWorkareaID, noClaim.StateAfter, noClaim.OutboxSeq = "", "demoted", 0

	got := writeAndScan(t, tables.TableKey{Tenant: tn, Kind: tables.Bronze}, []pq.Row{b.Row()}, nil)
	require.Len(t, got, 1)
	require.Equal(t, b, tables.DecodeBronze(got[0]))

	got = writeAndScan(t, tables.TableKey{Tenant: tn, Kind: tables.Silver}, []pq.Row{erased.Row(), s.Row()}, nil)
	require.Len(t, got, 2)
	require.Nil(t, got[0][tables.SilverBody], "an erased body is null in Parquet")
	require.Equal(t, erased, tables.DecodeSilver(got[0]))
	require.Equal(t, s, tables.DecodeSilver(got[1]))

	got = writeAndScan(t, tables.TableKey{Tenant: tn, Kind: tables.Gold}, []pq.Row{noClaim.Row(), g.Row()}, nil)
	require.Len(t, got, 2)
	require.Nil(t, got[0][tables.LineageToWorkareaID])
	require.Nil(t, got[0][tables.LineageOutboxSeq])
	require.Equal(t, noClaim, tables.DecodeLineage(got[0]))
	require.Equal(t, g, tables.DecodeLineage(got[1]))
}

// TestProjection_DecodesOnlyTheScannedColumns: a scan of some columns,
// in another order than the schema's, fills exactly those fields.
func TestProjection_DecodesOnlyTheScannedColumns(t *testing.T) {
	t.Parallel()
	_, s, _ := sampleRows()
	p := tables.SilverColumns(tables.SilverOutboxSeq, tables.SilverArtifactID, tables.SilverBody, tables.SilverVersion)
	require.Equal(t, []string{"outbox_seq", "artifact_id", "body", "version"}, p.Columns())
	got := writeAndScan(t, tables.TableKey{Tenant: uuid.New(), Kind: tables.Silver}, []pq.Row{s.Row()}, p.Columns())
	require.Len(t, got, 1)
	require.Equal(t, tables.SilverRow{OutboxSeq: s.OutboxSeq, ArtifactID: s.ArtifactID, Body: s.Body, Version: s.Version}, p.Decode(got[0]))

	bp := tables.BronzeColumns(tables.BronzeSeq, tables.BronzeHash)
	b, _, _ := sampleRows()
	got = writeAndScan(t, tables.TableKey{Tenant: uuid.New(), Kind: tables.Bronze}, []pq.Row{b.Row()}, bp.Columns())
	require.Equal(t, tables.BronzeRow{Seq: b.Seq, Hash: b.Hash}, bp.Decode(got[0]))
}

// TestLineageSchema_NoBodyColumn: gold.lineage carries digests and
// attribution only. Its one binary column is the event hash; no column
// can hold a body or plaintext (erasure relies on it: there is nothing in
// gold to erase).
func TestLineageSchema_NoBodyColumn(t *testing.T) {
	t.Parallel()
	for _, f := range tables.Gold.Schema().Fields {
		require.NotContains(t, []string{"body", "ciphertext", "plaintext", "payload"}, f.Name)
		if p, ok := f.Type.(*delta.PrimitiveType); ok && p.Name == delta.TypeBinary {
			require.Equal(t, tables.LineageEventHash.Name(), f.Name, "the only binary column of gold.lineage is the event hash")
		}
	}
}

func sampleWorkarea() tables.GoldWorkareaRow {
	at := time.Date(2026, 12, 1, 12, 34, 56, 789000000, time.UTC)
	return tables.GoldWorkareaRow{TenantID: uuid.NewString(), WorkareaID: "wa-1", Claims: 15, Promoted: 1, Demoted: 2,
		Reassigned: 3, SimulationEnded: 4, Erased: 5, Writers: []string{"w-a", "w-b"}, Changes: 40,
		FirstJournalSeq: 41, FirstChangedAt: at, LastJournalSeq: 42, LastChangedAt: at.Add(time.Hour), LastOutboxSeq: 43}
}

// TestWorkareaRow_RoundTripsEveryColumnInMemoryAndThroughParquet: the
// gold.workareas row (a list column among them) decodes to itself, and a
// row re-derived after prune has a null last_outbox_seq.
func TestWorkareaRow_RoundTripsEveryColumnInMemoryAndThroughParquet(t *testing.T) {
	t.Parallel()
	w := sampleWorkarea()
	require.Len(t, w.Row(), len(tables.Workareas.Schema().Fields))
	require.Equal(t, w, tables.DecodeWorkarea(w.Row()))
	require.Equal(t, w.WorkareaID, tables.WorkareaOf(w.Row()))
	derived := w
	derived.WorkareaID, derived.LastOutboxSeq, derived.Writers = "wa-0", 0, []string{"only"}
	require.Nil(t, derived.Row()[tables.WorkareaLastOutboxSeq])

	got := writeAndScan(t, tables.TableKey{Tenant: uuid.New(), Kind: tables.Workareas}, []pq.Row{derived.Row(), w.Row()}, nil)
	require.Len(t, got, 2)
	require.Nil(t, got[0][tables.WorkareaLastOutboxSeq])
	require.Equal(t, derived, tables.DecodeWorkarea(got[0]))
	require.Equal(t, w, tables.DecodeWorkarea(got[1]))
}

// TestWorkareaRow_ApplyCountsEachClaimInItsCurrentStateInAnyOrder: a
// promotion counts a claim, each later change moves it between state
// columns; the writers unite; first and last follow the journal seq; and
// the result does not depend on the order the changes arrive in (the
// MERGE, reconcile and repair rely on it).
func TestWorkareaRow_ApplyCountsEachClaimInItsCurrentStateInAnyOrder(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	ch := func(before, after, writer string, seq, outbox int64) tables.WorkareaChange {
		return tables.WorkareaChange{StateBefore: before, StateAfter: after, Writer: writer, JournalSeq: seq,
			RecordedAt: at.Add(time.Duration(seq) * time.Second), OutboxSeq: outbox}
	}
	changes := []tables.WorkareaChange{
		ch("held", "promoted", "w-b", 3, 10), ch("held", "promoted", "w-a", 4, 12), ch("promoted", "demoted", "w-b", 6, 15),
		ch("demoted", "erased", "w-b", 9, 20), ch("held", "promoted", "w-b", 11, 0), ch("promoted", "simulation_ended", "w-b", 12, 0),
		ch("promoted", "reassigned", "w-a", 13, 22),
	}
	want := tables.GoldWorkareaRow{Claims: 3, Promoted: 0, Demoted: 0, Reassigned: 1, SimulationEnded: 1, Erased: 1,
		Writers: []string{"w-a", "w-b"}, Changes: 7, FirstJournalSeq: 3, FirstChangedAt: at.Add(3 * time.Second),
		LastJournalSeq: 13, LastChangedAt: at.Add(13 * time.Second), LastOutboxSeq: 22}
	var fwd, rev tables.GoldWorkareaRow
	for i := range changes {
		fwd.Apply(changes[i])
		rev.Apply(changes[len(changes)-1-i])
	}
	require.Equal(t, want, fwd)
	require.Equal(t, want, rev)
	require.Equal(t, fwd.Claims, fwd.Promoted+fwd.Demoted+fwd.Reassigned+fwd.SimulationEnded+fwd.Erased)
}

// TestWorkareaSchema_NoBodyOrDigestColumn: gold.workareas holds counts
// and attribution only (erasure leaves nothing to erase in it).
func TestWorkareaSchema_NoBodyOrDigestColumn(t *testing.T) {
	t.Parallel()
	for _, f := range tables.Workareas.Schema().Fields {
		require.NotContains(t, []string{"body", "ciphertext", "plaintext", "payload", "plaintext_digest", "ciphertext_digest"}, f.Name)
		if p, ok := f.Type.(*delta.PrimitiveType); ok {
			require.NotEqual(t, delta.TypeBinary, p.Name, "gold.workareas has no binary column")
		}
	}
}
