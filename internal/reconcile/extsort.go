package reconcile

import (
	"bufio"
	"bytes"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
)

// extSort sorts records by key in bounded memory: records accumulate in a
// buffer of at most runBytes; a full buffer is sorted and spilled to a
// temporary file (a run); the sorted stream is a k-way merge of the runs
// (or the buffer itself, sorted in place, when nothing was spilled).
//
// Why not rely on the lake writer's files being sorted: they are (each data
// file is written in (artifact_id, version) or seq order), but the auditor
// must not trust the thing it audits — a duplicate file, a foreign writer or
// a hand-made repair may not be, and a k-way merge over thousands of small
// files would hold a page of every file at once. Spilling costs one
// sequential write and read of the compact records (keys, digests and
// attribution only, never bodies).
//
// A record is [uvarint keyLen][key][value]; records compare by key bytes,
// then by the whole record (a deterministic order for duplicates). Records
// live back to back in one reused arena (no per-record allocation, so the
// buffer's size is the memory bound, not a guess at allocator overhead).
type extSort struct {
	dir      string
	runBytes int

	// The run buffer: records back to back in arena, spans[i] = [start,
	// end) of record i. One arena reused for every run, so a run makes no
	// garbage and the buffer never holds more than about runBytes.
	arena []byte
	spans [][2]uint32
	runs  []string
	total int64
	peak  int // largest in-memory buffer seen, bytes (arena + spans)
}

func newExtSort(dir string, runBytes int) *extSort {
	if runBytes <= 0 {
		runBytes = 32 << 20
	}
	return &extSort{dir: dir, runBytes: runBytes}
}

func splitRecord(rec []byte) (key, value []byte) {
	n, w := binary.Uvarint(rec)
	return rec[w : w+int(n)], rec[w+int(n):]
}

func cmpRecords(a, b []byte) int {
	ka, _ := splitRecord(a)
	kb, _ := splitRecord(b)
	if c := bytes.Compare(ka, kb); c != 0 {
		return c
	}
	return bytes.Compare(a, b)
}

func (s *extSort) bufBytes() int { return len(s.arena) + 8*len(s.spans) }

// add appends the record [uvarint len(key)][key][value].
func (s *extSort) add(key, value []byte) error {
	size := binary.MaxVarintLen32 + len(key) + len(value)
	if len(s.spans) > 0 && s.bufBytes()+size+8 > s.runBytes {
		if err := s.spill(); err != nil {
			return err
		}
	}
	if need := len(s.arena) + size; need > cap(s.arena) {
		// Grow by doubling but never past runBytes (append's own growth
		// would overshoot the bound by up to 25%).
		grown := make([]byte, len(s.arena), max(need, min(max(2*cap(s.arena), 64<<10), s.runBytes)))
		copy(grown, s.arena)
		s.arena = grown
	}
	start := len(s.arena)
	s.arena = binary.AppendUvarint(s.arena, uint64(len(key)))
	s.arena = append(s.arena, key...)
	s.arena = append(s.arena, value...)
	s.spans = append(s.spans, [2]uint32{uint32(start), uint32(len(s.arena))})
	s.total++
	return nil
}

func (s *extSort) rec(i int) []byte { return s.arena[s.spans[i][0]:s.spans[i][1]] }

func (s *extSort) sortBuf() {
	s.peak = max(s.peak, cap(s.arena)+8*cap(s.spans))
	slices.SortFunc(s.spans, func(a, b [2]uint32) int {
		return cmpRecords(s.arena[a[0]:a[1]], s.arena[b[0]:b[1]])
	})
}

func (s *extSort) spill() error {
	if len(s.spans) == 0 {
		return nil
	}
	s.sortBuf()
	f, err := os.CreateTemp(s.dir, "oml-reconcile-run-*")
	if err != nil {
		return fmt.Errorf("reconcile: create a sort run (set TMPDIR to a directory with room): %w", err)
	}
	s.runs = append(s.runs, f.Name())
	w := bufio.NewWriterSize(f, 256<<10)
	var hdr [binary.MaxVarintLen64]byte
	for i := range s.spans {
		r := s.rec(i)
		n := binary.PutUvarint(hdr[:], uint64(len(r)))
		if _, err := w.Write(hdr[:n]); err != nil {
			_ = f.Close()
			return fmt.Errorf("reconcile: write a sort run: %w", err)
		}
		if _, err := w.Write(r); err != nil {
			_ = f.Close()
			return fmt.Errorf("reconcile: write a sort run: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		_ = f.Close()
		return fmt.Errorf("reconcile: write a sort run: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("reconcile: write a sort run: %w", err)
	}
	s.arena, s.spans = s.arena[:0], s.spans[:0]
	return nil
}

// release spills the buffer and frees it when the sort already spilled
// (the merge reads the buffer from a run either way), so a caller can fill
// a second sorter while this one waits without holding two buffers.
func (s *extSort) release() error {
	if len(s.runs) == 0 {
		return nil
	}
	if err := s.spill(); err != nil {
		return err
	}
	s.arena, s.spans = nil, nil
	return nil
}

// close removes the run files and drops the buffer.
func (s *extSort) close() {
	for _, r := range s.runs {
		_ = os.Remove(r)
	}
	s.runs = nil
	s.arena, s.spans = nil, nil
}

// iterator yields the records in order.
type iterator interface {
	// next returns the next record, or nil at the end. The slice is valid
	// until the following call.
	next() ([]byte, error)
	close()
}

// sorted returns the merged stream. Call close on the sorter afterwards.
func (s *extSort) sorted() (iterator, error) {
	if len(s.runs) == 0 {
		s.sortBuf()
		return &memIter{s: s}, nil
	}
	if err := s.spill(); err != nil {
		return nil, err
	}
	s.arena, s.spans = nil, nil
	m := &mergeIter{}
	for _, name := range s.runs {
		f, err := os.Open(name)
		if err != nil {
			m.close()
			return nil, fmt.Errorf("reconcile: reopen a sort run: %w", err)
		}
		r := &runReader{f: f, r: bufio.NewReaderSize(f, 64<<10)}
		s.peak += 64 << 10
		if err := r.advance(); err != nil {
			_ = f.Close()
			m.close()
			return nil, err
		}
		if r.cur == nil {
			_ = f.Close()
			continue
		}
		m.h = append(m.h, r)
	}
	heap.Init(&m.h)
	return m, nil
}

type memIter struct {
	s *extSort
	i int
}

func (m *memIter) next() ([]byte, error) {
	if m.i >= len(m.s.spans) {
		return nil, nil
	}
	m.i++
	return m.s.rec(m.i - 1), nil
}

func (m *memIter) close() {}

// runReader reads one run. Two buffers alternate, so the record handed
// out by the merge stays valid while the reader moves to the next one.
type runReader struct {
	f    *os.File
	r    *bufio.Reader
	cur  []byte
	bufs [2][]byte
	flip int
}

func (r *runReader) advance() error {
	n, err := binary.ReadUvarint(r.r)
	if errors.Is(err, io.EOF) {
		r.cur = nil
		return nil
	}
	if err != nil {
		return fmt.Errorf("reconcile: read a sort run: %w", err)
	}
	r.flip ^= 1
	if cap(r.bufs[r.flip]) < int(n) {
		r.bufs[r.flip] = make([]byte, n, max(int(n), 512))
	}
	rec := r.bufs[r.flip][:n]
	if _, err := io.ReadFull(r.r, rec); err != nil {
		return fmt.Errorf("reconcile: read a sort run: %w", err)
	}
	r.cur = rec
	return nil
}

type runHeap []*runReader

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return cmpRecords(h[i].cur, h[j].cur) < 0 }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*runReader)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

type mergeIter struct {
	h runHeap
}

func (m *mergeIter) next() ([]byte, error) {
	if len(m.h) == 0 {
		return nil, nil
	}
	top := m.h[0]
	rec := top.cur
	if err := top.advance(); err != nil {
		return nil, err
	}
	if top.cur == nil {
		_ = top.f.Close()
		heap.Pop(&m.h)
	} else {
		heap.Fix(&m.h, 0)
	}
	return rec, nil
}

func (m *mergeIter) close() {
	for _, r := range m.h {
		_ = r.f.Close()
	}
	m.h = nil
}

// enc and dec are the value encoding of records: strings and byte slices
// length-prefixed, integers as varints.
type enc []byte

func (e enc) str(s string) enc {
	e = binary.AppendUvarint(e, uint64(len(s)))
	return append(e, s...)
}

func (e enc) bytes(b []byte) enc {
	e = binary.AppendUvarint(e, uint64(len(b)))
	return append(e, b...)
}

func (e enc) int(v int64) enc { return binary.AppendVarint(e, v) }

func (e enc) bool(v bool) enc {
	if v {
		return append(e, 1)
	}
	return append(e, 0)
}

type dec struct {
	b   []byte
	err error
}

func (d *dec) bytes() []byte {
	if d.err != nil {
		return nil
	}
	n, w := binary.Uvarint(d.b)
	if w <= 0 || int(n) > len(d.b)-w {
		d.err = errors.New("reconcile: corrupt sort record")
		return nil
	}
	v := d.b[w : w+int(n)]
	d.b = d.b[w+int(n):]
	return v
}

func (d *dec) str() string { return string(d.bytes()) }

func (d *dec) int() int64 {
	if d.err != nil {
		return 0
	}
	v, w := binary.Varint(d.b)
	if w <= 0 {
		d.err = errors.New("reconcile: corrupt sort record")
		return 0
	}
	d.b = d.b[w:]
	return v
}

func (d *dec) bool() bool {
	if d.err != nil || len(d.b) == 0 {
		d.err = errors.New("reconcile: corrupt sort record")
		return false
	}
	v := d.b[0] == 1
	d.b = d.b[1:]
	return v
}
