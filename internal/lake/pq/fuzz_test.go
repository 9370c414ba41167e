package pq

import (
	"bytes"
	"os"
	"testing"
	"time"
)

// FuzzOpenAndRead feeds arbitrary bytes to the reader: a malformed file must
// produce an error from Open or Next, never a panic or a hang.
func FuzzOpenAndRead(f *testing.F) {
	s := NewSchema(
		Required("id", Int64), Nullable("s", String), Nullable("ts", Timestamp),
		Nullable("l", ListOf(StructOf(Nullable("a", Int32)), true)),
		Nullable("m", MapOf(String, String, true)), Nullable("d", DecimalOf(20, 2)),
	)
	for _, c := range []Compression{Snappy, Zstd, Uncompressed} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, s, Options{Compression: c})
		if err != nil {
			f.Fatal(err)
		}
		if err := w.Write([]Row{
			{int64(1), "a", time.Unix(1, 0), []any{[]any{int32(1)}, nil}, []MapEntry{{Key: "k", Value: "v"}}, "1.25"},
			{int64(2), nil, nil, nil, nil, nil},
		}); err != nil {
			f.Fatal(err)
		}
		if _, err := w.Close(); err != nil {
			f.Fatal(err)
		}
		f.Add(buf.Bytes())
	}
	if data, cps := goldenParquetFiles(f); len(data) > 0 {
		for _, p := range []string{data[0], cps[0]} {
			b, err := os.ReadFile(p)
			if err == nil && len(b) < 64<<10 {
				f.Add(b)
			}
		}
	}
	f.Add([]byte("PAR1PAR1"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		file, err := Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		rows, err := file.Rows()
		if err != nil {
			return
		}
		_, _ = rows.ReadAll()
	})
}
