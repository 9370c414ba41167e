package pq

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// The lake's bronze and silver data schemas (internal/lake/tables, every
// column nullable), copied: a pq test cannot import a package that imports pq.

func lakeBronzeSchema() *Schema {
	return NewSchema(
		Nullable("tenant_id", String), Nullable("seq", Int64), Nullable("event_type", String),
		Nullable("recorded_at", Timestamp), Nullable("prev_hash", Binary), Nullable("hash", Binary),
		Nullable("signature", Binary), Nullable("key_id", String), Nullable("payload", String),
		Nullable("outbox_seq", Int64),
	)
}

func lakeSilverSchema() *Schema {
	return NewSchema(
		Nullable("artifact_id", String), Nullable("version", Int32), Nullable("tenant_id", String),
		Nullable("workarea_id", String), Nullable("writer", String), Nullable("principal", String),
		Nullable("provenance", String), Nullable("plaintext_digest", String), Nullable("ciphertext_digest", String),
		Nullable("body", Binary), Nullable("state", String), Nullable("promoted_by", String),
		Nullable("submitted_seq", Int64), Nullable("promoted_seq", Int64), Nullable("journal_seq", Int64),
		Nullable("outbox_seq", Int64), Nullable("updated_at", Timestamp),
	)
}

func lakeSilverRows(n int) []Row {
	r := rand.New(rand.NewPCG(5, 6))
	tenant := uuidLike(r)
	at := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	rows := make([]Row, n)
	for i := range rows {
		rows[i] = Row{uuidLike(r), int32(i % 3), tenant, fmt.Sprintf("wa-%d", i%50), fmt.Sprintf("agent-%d", i%20),
			fmt.Sprintf("user-%d@example.com", i%100), "human", hex.EncodeToString(randBytes(r, 32)), hex.EncodeToString(randBytes(r, 32)),
			randBytes(r, 2048), "promoted", nil, int64(i + 1), nil, int64(i + 7), int64(i + 1000), at.Add(time.Duration(i) * time.Second)}
	}
	return rows
}

// BenchmarkSmallFile writes lake-shaped files of 1 to 64 rows through one
// shared Layout, through the small-file path ("small") and through arrow-go's
// column writers ("arrow"), in the same run.
func BenchmarkSmallFile(b *testing.B) {
	bronze, _ := bronzeRows(64)
	kinds := []struct {
		name   string
		schema *Schema
		rows   []Row
	}{
		{"bronze", lakeBronzeSchema(), bronze},
		{"silver", lakeSilverSchema(), lakeSilverRows(64)},
	}
	for _, k := range kinds {
		l, err := NewLayout(k.schema, Options{})
		if err != nil {
			b.Fatal(err)
		}
		arrow := *l
		arrow.fast = nil
		for _, n := range []int{1, 3, 10, 64} {
			for _, path := range []struct {
				name string
				l    *Layout
			}{{"arrow", &arrow}, {"small", l}} {
				b.Run(fmt.Sprintf("%s/rows=%d/%s", k.name, n, path.name), func(b *testing.B) {
					var buf bytes.Buffer
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						buf.Reset()
						w, err := path.l.NewWriter(&buf)
						if err != nil {
							b.Fatal(err)
						}
						if err := w.Write(k.rows[:n]); err != nil {
							b.Fatal(err)
						}
						if _, err := w.Close(); err != nil {
							b.Fatal(err)
						}
					}
					b.SetBytes(int64(buf.Len()))
				})
			}
		}
	}
}
