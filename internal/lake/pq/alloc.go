package pq

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// pageBuffers is the allocator the readers give Arrow's page readers: it
// keeps the buffers a closed column reader frees, by power-of-two size,
// for the next file's readers. Arrow's default allocator makes a new
// buffer for each and never frees one, and every column chunk's page
// reader starts with a 16 KiB decompression buffer however small the
// chunk: reading a small data file of gold.workareas (a few rows, 15
// columns) allocated about 250 KB, 57% of what a MERGE that missed its
// kept rows allocated (BenchmarkMergeSteadyState, path=cache-off), and the
// lake writer's steady state reads such files all the time.
//
// A buffer is reused only after Arrow released it (a column reader is
// closed when its row group is read, Rows.closeColumns), and the values
// handed out never alias one: the cursors copy every byte array they
// convert (bytesConv). A buffer whose reader is never closed (a Rows left
// before its end) is collected as any other.
var pageBuffers memory.Allocator = &pooledAllocator{}

// Size classes kept: from minPooled to maxPooled bytes, powers of two.
// Smaller buffers are cheap to make; larger ones are rare (big pages) and
// would pin memory in the pool.
const (
	minPooledShift = 10 // 1 KiB
	maxPooledShift = 20 // 1 MiB
)

type pooledAllocator struct {
	pools [maxPooledShift - minPooledShift + 1]sync.Pool // of *[]byte, full class length
}

// class is the index of the smallest class holding size, or -1 when size
// is not pooled.
func class(size int) int {
	if size <= 0 || size > 1<<maxPooledShift {
		return -1
	}
	shift := max(bits.Len(uint(size-1)), minPooledShift)
	return shift - minPooledShift
}

func (a *pooledAllocator) Allocate(size int) []byte {
	c := class(size)
	if c < 0 {
		return make([]byte, size)
	}
	if p, ok := a.pools[c].Get().(*[]byte); ok {
		b := (*p)[:size]
		clear(b) // Arrow's own allocator hands out zeroed memory
		return b
	}
	return make([]byte, size, 1<<(c+minPooledShift))
}

func (a *pooledAllocator) Reallocate(size int, b []byte) []byte {
	if cap(b) >= size {
		return b[:size]
	}
	nb := a.Allocate(size)
	copy(nb, b)
	a.Free(b)
	return nb
}

// Free keeps b for reuse when it is a whole buffer of a class (Allocate's
// own: a slice of another length or offset is left to the collector).
func (a *pooledAllocator) Free(b []byte) {
	n := cap(b)
	c := class(n)
	if c < 0 || n != 1<<(c+minPooledShift) {
		return
	}
	b = b[:n]
	a.pools[c].Put(&b)
}
