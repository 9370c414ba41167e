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

// FuzzCorruptPages keeps a valid footer and corrupts the page region of a
// file (page headers, levels, dictionary and data pages, compressed blocks), so
// the fuzzer reaches the decoders instead of dying in the footer parser.
func FuzzCorruptPages(f *testing.F) {
	s := NewSchema(
		Required("id", Int64), Nullable("s", String), Nullable("ts", Timestamp),
		Nullable("l", ListOf(StructOf(Nullable("a", Int32)), true)),
		Nullable("m", MapOf(String, String, true)),
	)
	var rows []Row
	for i := 0; i < 200; i++ {
		rows = append(rows, Row{int64(i), []string{"a", "bb", ""}[i%3], time.Unix(int64(i), 0),
			[]any{[]any{int32(i)}, nil}, []MapEntry{{Key: "k", Value: "v"}}})
	}
	files := map[Compression][]byte{}
	for _, c := range []Compression{Snappy, Zstd, Uncompressed} {
		var buf bytes.Buffer
		w, err := NewWriter(&buf, s, Options{Compression: c, PageBytes: 256})
		if err != nil {
			f.Fatal(err)
		}
		if err := w.Write(rows); err != nil {
			f.Fatal(err)
		}
		if _, err := w.Close(); err != nil {
			f.Fatal(err)
		}
		files[c] = buf.Bytes()
	}
	f.Add(uint8(0), uint32(10), []byte{0xff})
	f.Add(uint8(1), uint32(200), []byte{0, 0, 0, 0})
	f.Add(uint8(2), uint32(40), []byte("garbage"))
	f.Fuzz(func(t *testing.T, codec uint8, at uint32, patch []byte) {
		orig := files[Compression(codec%3)]
		footerLen := int(uint32(orig[len(orig)-8]) | uint32(orig[len(orig)-7])<<8 | uint32(orig[len(orig)-6])<<16 | uint32(orig[len(orig)-5])<<24)
		dataEnd := len(orig) - 8 - footerLen
		if dataEnd <= 4 || len(patch) == 0 {
			return
		}
		b := append([]byte(nil), orig...)
		start := 4 + int(at)%(dataEnd-4)
		for i, p := range patch {
			if start+i >= dataEnd {
				break
			}
			b[start+i] ^= p
		}
		file, err := Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return
		}
		rs, err := file.Rows()
		if err != nil {
			return
		}
		_, _ = rs.ReadAll()
	})
}
