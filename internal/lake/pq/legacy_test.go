package pq

import (
	"bytes"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	pqschema "github.com/apache/arrow-go/v18/parquet/schema"
	"github.com/stretchr/testify/require"
)

// TestReadsLegacyLayouts writes, with arrow-go's low-level writer, the shapes
// older writers (parquet-avro, parquet-thrift, Spark's legacy format, Hive)
// use and pq never writes: 2-level lists ("array", "<name>_tuple", repeated
// primitive), a bare repeated field, MAP_KEY_VALUE, TIMESTAMP_MILLIS,
// nanosecond timestamps, UINT_8 and a BYTE_ARRAY decimal. pq must read them.
func TestReadsLegacyLayouts(t *testing.T) {
	t.Parallel()
	must := func(n pqschema.Node, err error) pqschema.Node {
		require.NoError(t, err)
		return n
	}
	opt, req, rep := parquet.Repetitions.Optional, parquet.Repetitions.Required, parquet.Repetitions.Repeated
	conv := pqschema.ConvertedTypes
	fields := pqschema.FieldList{
		must(pqschema.NewGroupNodeConverted("a", opt, pqschema.FieldList{
			pqschema.NewInt32Node("array", rep, -1),
		}, conv.List, -1)),
		must(pqschema.NewGroupNodeConverted("b", opt, pqschema.FieldList{
			must(pqschema.NewGroupNode("array", rep, pqschema.FieldList{
				must(pqschema.NewPrimitiveNodeConverted("str", req, parquet.Types.ByteArray, conv.UTF8, -1, 0, 0, -1)),
			}, -1)),
		}, conv.List, -1)),
		must(pqschema.NewGroupNodeConverted("c", opt, pqschema.FieldList{
			must(pqschema.NewGroupNode("c_tuple", rep, pqschema.FieldList{pqschema.NewInt64Node("x", req, -1)}, -1)),
		}, conv.List, -1)),
		pqschema.NewInt32Node("d", rep, -1),
		must(pqschema.NewGroupNodeConverted("e", opt, pqschema.FieldList{
			must(pqschema.NewGroupNode("map", rep, pqschema.FieldList{
				must(pqschema.NewPrimitiveNodeConverted("key", req, parquet.Types.ByteArray, conv.UTF8, -1, 0, 0, -1)),
				pqschema.NewInt32Node("value", opt, -1),
			}, -1)),
		}, conv.MapKeyValue, -1)),
		must(pqschema.NewPrimitiveNodeConverted("tsm", opt, parquet.Types.Int64, conv.TimestampMillis, -1, 0, 0, -1)),
		must(pqschema.NewPrimitiveNodeLogical("tsn", opt, pqschema.NewTimestampLogicalType(true, pqschema.TimeUnitNanos), parquet.Types.Int64, -1, -1)),
		must(pqschema.NewPrimitiveNodeConverted("u8", opt, parquet.Types.Int32, conv.Uint8, -1, 0, 0, -1)),
		must(pqschema.NewPrimitiveNodeConverted("decb", opt, parquet.Types.ByteArray, conv.Decimal, -1, 5, 2, -1)),
	}
	root, err := pqschema.NewGroupNode("spark_schema", req, fields, -1)
	require.NoError(t, err)

	var buf bytes.Buffer
	fw := file.NewParquetWriter(&buf, root)
	rg := fw.AppendRowGroup()
	next := func() file.ColumnChunkWriter {
		cw, err := rg.NextColumn()
		require.NoError(t, err)
		return cw
	}
	i32 := func(v []int32, d, r []int16) {
		_, err := next().(*file.Int32ColumnChunkWriter).WriteBatch(v, d, r)
		require.NoError(t, err)
	}
	i64 := func(v []int64, d, r []int16) {
		_, err := next().(*file.Int64ColumnChunkWriter).WriteBatch(v, d, r)
		require.NoError(t, err)
	}
	ba := func(v []parquet.ByteArray, d, r []int16) {
		_, err := next().(*file.ByteArrayColumnChunkWriter).WriteBatch(v, d, r)
		require.NoError(t, err)
	}
	// Two rows; row 1 holds nulls and empty lists.
	i32([]int32{1, 2}, []int16{2, 2, 0}, []int16{0, 1, 0})             // a.array
	ba([]parquet.ByteArray{[]byte("x")}, []int16{2, 1}, []int16{0, 0}) // b.array.str
	i64([]int64{7}, []int16{2, 0}, []int16{0, 0})                      // c.c_tuple.x
	i32([]int32{5, 6}, []int16{1, 1, 0}, []int16{0, 1, 0})             // d
	ba([]parquet.ByteArray{[]byte("k")}, []int16{2, 0}, []int16{0, 0}) // e.map.key
	i32([]int32{1}, []int16{3, 0}, []int16{0, 0})                      // e.map.value
	i64([]int64{1000}, []int16{1, 0}, nil)                             // tsm
	i64([]int64{1_500_000_999}, []int16{1, 0}, nil)                    // tsn
	i32([]int32{200}, []int16{1, 0}, nil)                              // u8
	ba([]parquet.ByteArray{{0xff, 0x83}}, []int16{1, 0}, nil)          // decb = -1.25
	require.NoError(t, rg.Close())
	require.NoError(t, fw.Close())

	f, got := readBytes(t, buf.Bytes())
	require.Equal(t, "struct<a:array<integer>,b:array<struct<str:string not null>>,c:array<struct<x:long not null>>,"+
		"d:array<integer> not null,e:map<string,integer>,tsm:timestamp,tsn:timestamp,u8:short,decb:decimal(5,2)>", f.Schema().String())
	require.Equal(t, []Row{
		{
			[]any{int32(1), int32(2)}, []any{[]any{"x"}}, []any{[]any{int64(7)}}, []any{int32(5), int32(6)},
			[]MapEntry{{Key: "k", Value: int32(1)}}, time.UnixMilli(1000).UTC(), time.UnixMicro(1_500_000).UTC(),
			int16(200), "dec:-1.25",
		},
		{nil, []any{}, nil, []any{}, nil, nil, nil, nil, nil},
	}, []Row{normalize(got[0]).([]any), normalize(got[1]).([]any)})
}
