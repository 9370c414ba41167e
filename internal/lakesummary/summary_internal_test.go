package lakesummary

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/bronze"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/tables"
	"github.com/omlhq/oml/internal/lakewriter"
)

func sampleEntries() []*entry {
	id := uuid.MustParse("0b7c6c53-6b57-4d3c-9d1e-2f0e3c1a9b11")
	rows := int64(7)
	rec := tables.BatchBounds{Start: 10, End: 20, SystemIdentifier: "7312", Timeline: 1, Rows: &rows,
		Anchor: &tables.Anchor{Seq: 20, Tenant: id, JournalSeq: 4, EventHash: "ab", Digest: "cd"}}
	at := time.UnixMilli(1_780_000_000_123)
	fp := fingerprint([]store.ObjectInfo{{Key: "_delta_log/00000000000000000000.json", Size: 12, ModTime: at}}, nil)
	bk := tables.TableKey{Tenant: id, Kind: tables.Bronze}
	sk := tables.TableKey{Tenant: id, Kind: tables.Silver}
	wk := tables.TableKey{Tenant: id, Kind: tables.Workareas}
	return []*entry{
		{key: bk, fullReadAt: at, start: 0, fp: fp, files: []string{"part-0.parquet", "a=b/part,1.parquet"}, t: Table{
			Key: bk, Exists: true, Version: 3, CheckpointVersion: -1, Files: 2, SmallFiles: 2, smallSize: 8 << 20,
			Retention: 7 * 24 * time.Hour, Position: lakewriter.KnownPosition(bk, 20, rec, true, true),
			Bronze: &Head{OK: true, Head: bronze.Head{Seq: 5, Hash: bytes.Repeat([]byte{0xab}, 32), Others: [][]byte{{1, 2}}, Version: 3}, files: []string{"part-0.parquet", "a=b/part,1.parquet"}},
		}},
		{key: sk, fullReadAt: at, start: 4, fp: fp, t: Table{
			Key: sk, Exists: true, Version: 9, CheckpointVersion: 4, Files: 1, TombstonedBytes: 100,
			datedBytes: 90, datedMin: 5, datedMax: 6, smallSize: 8 << 20, Retention: time.Hour,
			Position: lakewriter.KnownPosition(sk, 20, tables.BatchBounds{}, false, false),
		}},
		{key: wk, fullReadAt: at, start: 0, fp: fp, t: Table{Key: wk, Version: -1, CheckpointVersion: -1, smallSize: 8 << 20,
			Position: lakewriter.TablePosition{Key: wk}}},
	}
}

// What is stored is what is read back.
func TestEntry_EncodeDecode_RoundTrip(t *testing.T) {
	for _, e := range sampleEntries() {
		var b bytes.Buffer
		e.encode(&b)
		line := strings.TrimSuffix(b.String(), "\n")
		require.NotContains(t, line, "\n")
		got, err := decode(line, map[string]tables.BatchBounds{})
		require.NoError(t, err, line)
		require.Equal(t, e.key, got.key)
		require.Equal(t, e.fp, got.fp)
		require.Equal(t, e.start, got.start)
		require.True(t, e.fullReadAt.Equal(got.fullReadAt))
		if e.t.Bronze != nil {
			require.Equal(t, e.files, got.files)
		}
		require.Equal(t, e.t, got.t)
	}
}

// Tables whose batch records have the same text share one decoding, not
// the record: each decodes to its own copy, and a different text to its
// own record.
func TestDecode_SameBatchRecordDecodedOnceEachTableItsOwnCopy(t *testing.T) {
	recs := map[string]tables.BatchBounds{}
	var got []*entry
	for _, e := range sampleEntries()[:1] {
		for _, tenant := range []uuid.UUID{uuid.New(), uuid.New()} {
			e := *e
			e.key.Tenant, e.t.Key.Tenant = tenant, tenant
			var b bytes.Buffer
			e.encode(&b)
			d, err := decode(strings.TrimSuffix(b.String(), "\n"), recs)
			require.NoError(t, err)
			got = append(got, d)
		}
	}
	require.Len(t, recs, 1)
	a, _, _ := got[0].t.Position.Record()
	b, _, _ := got[1].t.Position.Record()
	require.Equal(t, a, b)
	require.NotNil(t, a.Anchor)
	require.NotSame(t, a.Anchor, b.Anchor)
	require.NotSame(t, a.Rows, b.Rows)

	other, err := batchRecord(`{"start":1,"end":2,"rows":1,"anchor":{"seq":2,"journalSeq":1,"eventHash":"ab","digest":"cd"}}`, recs)
	require.NoError(t, err)
	require.Len(t, recs, 2)
	require.Equal(t, int64(2), other.End)
	require.NotEqual(t, a, other)
}

// A summary that was cut short, edited or is not one is refused whole.
func TestLoad_RefusesAnyObjectThatIsNotWhatWasStored(t *testing.T) {
	ctx := t.Context()
	lake := store.NewMem()
	require.NoError(t, save(ctx, lake, sampleEntries(), 0))
	got, _, err := load(ctx, lake)
	require.NoError(t, err)
	require.Len(t, got, 3)

	good, err := lake.Get(ctx, Key)
	require.NoError(t, err)
	for name, bad := range map[string][]byte{
		"cut short": good[:len(good)-10],
		"edited":    bytes.Replace(good, []byte("\t9\t"), []byte("\t8\t"), 1),
		"empty":     {},
		"garbage":   []byte("oml lake summary v1 zz\nx"),
	} {
		require.NoError(t, lake.Put(ctx, Key, bytes.NewReader(bad), int64(len(bad))))
		_, _, err := load(ctx, lake)
		require.Error(t, err, name)
	}
}

func FuzzDecode(f *testing.F) {
	for _, e := range sampleEntries() {
		var b bytes.Buffer
		e.encode(&b)
		f.Add(strings.TrimSuffix(b.String(), "\n"))
	}
	f.Fuzz(func(t *testing.T, line string) {
		_, _ = decode(line, map[string]tables.BatchBounds{}) // never panics
	})
}
