package pq

import (
	"bytes"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// randValue returns a random value of typ, null with probability 1/5 when nullable.
func randValue(r *rand.Rand, typ *Type, nullable bool) any {
	if nullable && r.IntN(5) == 0 {
		return nil
	}
	switch typ.Kind {
	case KindBoolean:
		return r.IntN(2) == 0
	case KindInt8:
		return int8(r.Int32())
	case KindInt16:
		return int16(r.Int32())
	case KindInt32:
		return r.Int32() - math.MaxInt32/2
	case KindInt64:
		return int64(r.Uint64())
	case KindFloat:
		return float32(r.NormFloat64())
	case KindDouble:
		return r.NormFloat64() * 1e6
	case KindString:
		n := r.IntN(12)
		b := make([]byte, n)
		for i := range b {
			b[i] = byte('a' + r.IntN(26))
		}
		return string(b)
	case KindBinary:
		b := make([]byte, r.IntN(40))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	case KindDate:
		return Date(r.Int32N(2_000_000) - 700_000)
	case KindTimestamp, KindTimestampNTZ:
		// years 0001..9999
		return time.UnixMicro(r.Int64N(315_537_897_600_000_000) - 62_135_596_800_000_000).UTC()
	case KindDecimal:
		limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(typ.Precision)), nil)
		u := new(big.Int).SetUint64(r.Uint64())
		u.Mul(u, new(big.Int).SetUint64(r.Uint64()))
		u.Mul(u, new(big.Int).SetUint64(r.Uint64()))
		u.Mod(u, limit)
		if r.IntN(2) == 0 {
			u.Neg(u)
		}
		return Decimal{Unscaled: u, Scale: typ.Scale}
	case KindStruct:
		out := make([]any, len(typ.Fields))
		for i, f := range typ.Fields {
			out[i] = randValue(r, f.Type, f.Nullable)
		}
		return out
	case KindList:
		out := make([]any, r.IntN(5))
		for i := range out {
			out[i] = randValue(r, typ.Elem, typ.ElemNullable)
		}
		return out
	case KindMap:
		out := make([]MapEntry, r.IntN(4))
		for i := range out {
			out[i] = MapEntry{Key: randValue(r, typ.Key, false), Value: randValue(r, typ.Value, typ.ValueNullable)}
		}
		return out
	}
	panic(fmt.Sprintf("kind %v", typ.Kind))
}

// TestRoundTripRandomAcrossPagesAndRowGroups writes random rows of every type
// with tiny pages and row groups, so lists and maps straddle page boundaries,
// and requires the reader to return exactly what was written, whole and
// projected, under every codec.
func TestRoundTripRandomAcrossPagesAndRowGroups(t *testing.T) {
	t.Parallel()
	s := allTypesSchema()
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			r := rand.New(rand.NewPCG(seed, 99))
			rows := make([]Row, 3000)
			for i := range rows {
				row := make(Row, len(s.Fields))
				for j, f := range s.Fields {
					row[j] = randValue(r, f.Type, f.Nullable)
				}
				rows[i] = row
			}
			opts := Options{Compression: Compression(seed % 3), PageBytes: 512, RowGroupRows: int64(700 + seed*100)}
			var buf bytes.Buffer
			w, err := NewWriter(&buf, s, opts)
			require.NoError(t, err)
			for i := 0; i < len(rows); i += 333 {
				require.NoError(t, w.Write(rows[i:min(i+333, len(rows))]))
			}
			meta, err := w.Close()
			require.NoError(t, err)
			require.Equal(t, int64(len(rows)), meta.NumRows)

			f, got := readBytes(t, buf.Bytes())
			require.Greater(t, f.NumRowGroups(), 2)
			require.Len(t, got, len(rows))
			for i := range rows {
				require.Equal(t, normalize(Row(rows[i])), normalize(Row(got[i])), "row %d", i)
			}

			// Projection in a different order, with a missing column.
			_, proj := readBytes(t, buf.Bytes(), "ms", "nope", "ls", "i64")
			for i := range rows {
				require.Equal(t, normalize([]any{rows[i][20], nil, rows[i][18], rows[i][4]}), normalize([]any(proj[i])), "row %d", i)
			}

			// Stats agree with a direct computation.
			var lo, hi int64 = math.MaxInt64, math.MinInt64
			nulls := int64(0)
			for _, row := range rows {
				if row[3] == nil {
					nulls++
					continue
				}
				lo, hi = min(lo, int64(row[3].(int32))), max(hi, int64(row[3].(int32)))
			}
			c := meta.Column("i32")
			require.Equal(t, int32(lo), c.Min)
			require.Equal(t, int32(hi), c.Max)
			require.Equal(t, nulls, c.NullCount)
		})
	}
}
