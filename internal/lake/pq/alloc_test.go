package pq

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// The page buffers a read frees go back to pageBuffers and serve the next
// reads: the values a read returned must not share them. Each file's rows
// are read whole, then many other files of the same shape are read (in
// parallel, so the pool hands their buffers around), and the first rows
// must be as they were — in every codec, with and without dictionaries.
func TestRows_ValuesOutliveTheirPageBuffers_ManyLaterReadsChangeNothing(t *testing.T) {
	t.Parallel()
	s := NewSchema(Nullable("s", String), Nullable("bin", Binary), Nullable("l", ListOf(String, true)), Required("n", Int64))
	file := func(seed, n int, opts Options) []byte {
		rows := make([]Row, n)
		for i := range rows {
			v := fmt.Sprintf("file-%d-row-%d-%s", seed, i, bytes.Repeat([]byte{byte('a' + seed%26)}, i%40))
			rows[i] = Row{v, []byte(v), []string{v, v + "!"}, int64(seed*1000 + i)}
		}
		b, _ := writeFile(t, s, opts, rows)
		return b
	}
	for _, opts := range []Options{{Compression: Snappy}, {Compression: Zstd}, {Compression: Uncompressed}} {
		t.Run(opts.Compression.String(), func(t *testing.T) {
			first := file(0, 300, opts)
			_, kept := readBytes(t, first)
			_, want := readBytes(t, first)
			var wg sync.WaitGroup
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range 25 {
						b := file(1+g*25+i, 300, opts)
						f, err := Open(bytes.NewReader(b), int64(len(b)))
						if err != nil {
							t.Error(err)
							return
						}
						rs, err := f.Rows()
						if err != nil {
							t.Error(err)
							return
						}
						if _, err := rs.ReadAll(); err != nil {
							t.Error(err)
							return
						}
					}
				}()
			}
			wg.Wait()
			require.Equal(t, want, kept, "a value read earlier changed when its page buffers were reused")
		})
	}
}

func TestPooledAllocator_ReusesOnlyWholeBuffersOfAClass_Zeroed(t *testing.T) {
	t.Parallel()
	a := &pooledAllocator{}
	b := a.Allocate(16 << 10)
	require.Len(t, b, 16<<10)
	require.Equal(t, 16<<10, cap(b))
	for i := range b {
		b[i] = 0xff
	}
	a.Free(b)
	// sync.Pool may drop what it was given; whatever comes back is zeroed
	// and of the asked length.
	c := a.Allocate(10 << 10)
	require.Len(t, c, 10<<10)
	require.Equal(t, 16<<10, cap(c))
	require.Equal(t, make([]byte, 10<<10), c)

	// A slice that is not a whole class buffer is left to the collector.
	a.Free(make([]byte, 100, 3000))
	a.Free(b[8:])
	require.Equal(t, -1, class(0))
	require.Equal(t, -1, class(2<<20))
	require.Equal(t, 0, class(1))
	require.Equal(t, 0, class(1024))
	require.Equal(t, 1, class(1025))

	r := a.Reallocate(40<<10, a.Allocate(5<<10))
	require.Len(t, r, 40<<10)
	require.Equal(t, 64<<10, cap(r))
}
