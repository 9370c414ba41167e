// Package pq reads and writes Parquet files for oml's lake. It knows nothing
// about Delta: the Delta layer (internal/lake/delta) uses it for data files and
// checkpoints, and does Delta things (stats JSON, string truncation, partition
// values) itself.
//
// # API summary
//
//	s := pq.NewSchema(
//	    pq.Required("tenant_id", pq.String),
//	    pq.Required("seq", pq.Int64),
//	    pq.Nullable("recorded_at", pq.Timestamp),
//	    pq.Nullable("hash", pq.Binary),
//	    pq.Nullable("tags", pq.MapOf(pq.String, pq.String, true)),
//	    pq.Nullable("parts", pq.ListOf(pq.String, true)),
//	    pq.Nullable("add", pq.StructOf(pq.Nullable("path", pq.String), pq.Nullable("size", pq.Int64))),
//	)
//	w, err := pq.NewWriter(out, s, pq.Options{Compression: pq.Zstd}) // Snappy by default; zstd level 1 unless ZstdLevel
//	err = w.Write([]pq.Row{{"t1", int64(1), time.Now(), []byte{1}, nil, []any{"a"}, []any{"p", int64(3)}}})
//	// a row not fitting the schema: *pq.RowError{Index}, that row dropped, writer still usable
//	w.WrittenBytes(); w.BufferedBytes() // roll files by size
//	meta, err := w.Close() // meta.NumRows, meta.Size (bytes), meta.Columns[i] {Path, NullCount, Min, Max}; meta.Column("a", "b")
//
//	f, err := pq.Open(readerAt, size) // footer only
//	f.Schema(); f.NumRows()
//	rows, err := f.Rows("seq", "hash", "not_in_file") // projection by top-level name; absent => null
//	rows, err := f.RowsFor(wantSchema)                  // nested projection (checkpoint add/remove/...)
//	for { batch, err := rows.Next(1024); if err == io.EOF { break } ... }
//	all, err := rows.ReadAll()
//
// # Go values of a row (writer input and reader output)
//
//	kind            Go value                         notes
//	null            nil                              any nullable field
//	boolean         bool
//	byte/short      int8 / int16                     the writer also accepts any Go integer that fits
//	integer/long    int32 / int64                    (reader returns exactly these types)
//	float/double    float32 / float64
//	string          string                           UTF-8, BYTE_ARRAY (STRING)
//	binary          []byte                           writer copies it (nil []byte is an empty value, not null); reader returns a fresh copy
//	date            pq.Date (days since 1970-01-01)  writer also accepts time.Time (its UTC date)
//	timestamp       time.Time in UTC, µs precision   written INT64 TIMESTAMP(MICROS, isAdjustedToUTC=true), sub-µs truncated
//	timestamp_ntz   time.Time (wall clock, loc UTC)  written INT64 TIMESTAMP(MICROS, isAdjustedToUTC=false)
//	decimal(p,s)    pq.Decimal{Unscaled *big.Int, Scale}  writer also accepts "12.30"; p<=9 INT32, <=18 INT64, else FIXED_LEN_BYTE_ARRAY
//	array           []any                            writer also accepts []string; empty list is []any{} (not nil)
//	map             []pq.MapEntry{Key, Value}        ordered pairs, as stored; writer also accepts map[string]string (keys sorted); pq.ToStringMap converts back
//	struct          []any in field order             same as a Row
//
// Struct values are positional ([]any) rather than map[string]any: no hashing
// and no allocation of field names per value, and a missing field is an error
// rather than a silent null. Maps are entry slices because Parquet maps are
// lists of pairs (foreign files may hold duplicate keys) and keys need not be
// strings.
//
// # Reading foreign files
//
// The reader decodes what Spark, delta-rs and DuckDB write: INT96 timestamps
// (decoded here to microseconds, so year 9999 works; arrow's pqarrow refuses
// those), INT64 timestamps in millis/micros/nanos (nanos truncated to µs; the
// model has µs only), TIMESTAMP_MILLIS/MICROS converted types, INT32 DATE,
// decimals in INT32, INT64, BINARY and FIXED_LEN_BYTE_ARRAY, dictionary pages,
// zero-row files and row groups, 3-level and legacy 2-level lists, MAP and
// MAP_KEY_VALUE groups, and bare repeated fields (read as lists). Unsigned
// integers widen (uint8→short, uint16→integer, uint32→long; uint64 reads as
// long, wrapping above MaxInt64). Leaf values come back as the file stores
// them: RowsFor does not convert to a requested leaf type.
//
// # Invariants
//
//   - The writer emits only INT64 TIMESTAMP(MICROS) timestamps, never NANOS or
//     INT96, so Spark and every Delta reader accept the files.
//   - A row is written whole or not at all: a value that does not fit fails the
//     Write with *RowError, the row's already-shredded columns are rolled back,
//     and statistics are folded in per row group from what was kept.
//   - FileMeta statistics are exact over every value written: true string and
//     binary extremes (the Delta layer truncates), NaN excluded, nulls counted
//     per leaf entry. For leaves below a list or map (ColumnStats.Repeated)
//     they are over elements, which Delta does not use.
//   - Memory while writing is bounded by one row group of raw values
//     (Options.RowGroupBytes, default 64 MiB; strings are referenced, []byte
//     copied) plus arrow-go's page buffers. While reading: the compressed
//     column chunks of the projected columns of the current row group (each
//     fetched with one ReadAt, which suits an object-store-backed ReaderAt),
//     one decompressed page per projected column, and the rows of one Next
//     call.
//   - Empty strings and binaries reach arrow-go as non-nil empty slices: its
//     footer statistics treat nil as "no value", which would leave "" out of
//     the footer minimum other engines prune row groups with.
//   - Importing pq replaces arrow-go's process-wide snappy and zstd encoders
//     with faster settings producing the same standard formats (codecs.go).
//   - Malformed input makes Open or Rows.Next return an error, never panic.
//
// A file of one row group of at most 64 rows is written by pq itself
// (small.go: page v1, PLAIN values, RLE levels, its own Thrift compact
// encoder in thrift.go), byte-for-byte the file arrow-go's writer makes for
// the same rows; larger files go through arrow-go's column writers.
//
// The implementation sits on arrow-go's low-level parquet/file column readers
// and writers (not pqarrow); shredding rows into definition/repetition levels
// and assembling them back is done here (tree.go, writer.go, reader.go). See
// docs/parquet.md for why and for measurements.
package pq
