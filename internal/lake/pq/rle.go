package pq

import (
	"encoding/binary"
	"math"
)

// rleEncoder is the RLE/bit-packed hybrid encoder of definition and
// repetition levels, a port of arrow-go's utils.RleEncoder and BitWriter
// (PutBatchLevels, Flush) over a reused byte slice, so that a level run is
// encoded into the same bytes arrow-go writes.
type rleEncoder struct {
	out       []byte
	width     int
	buf       [8]uint64
	nbuf      int
	cur       uint64
	rep, lit  int32
	indicator int // offset of the reserved literal indicator byte, or -1

	// bit writer
	byteoff int
	bits    uint64
	bitoff  uint
}

func (r *rleEncoder) reset(out []byte, width int) {
	*r = rleEncoder{out: out, width: width, indicator: -1, byteoff: len(out)}
}

func (r *rleEncoder) reserve(n int) {
	for len(r.out) < n {
		r.out = append(r.out, 0)
	}
}

func (r *rleEncoder) writeAt(p []byte, off int) {
	r.reserve(off + len(p))
	copy(r.out[off:], p)
}

func (r *rleEncoder) flushBits(align bool) {
	var n int
	if r.bitoff > 0 {
		n = int((r.bitoff + 7) / 8)
		var raw [8]byte
		binary.LittleEndian.PutUint64(raw[:], r.bits)
		r.writeAt(raw[:n], r.byteoff)
	}
	if align {
		r.bits = 0
		r.byteoff += n
		r.bitoff = 0
	}
}

func (r *rleEncoder) writeValue(v uint64) {
	nbits := uint(r.width)
	r.bits |= v << r.bitoff
	r.bitoff += nbits
	if r.bitoff >= 64 {
		var raw [8]byte
		binary.LittleEndian.PutUint64(raw[:], r.bits)
		r.writeAt(raw[:], r.byteoff)
		r.byteoff += 8
		r.bitoff -= 64
		r.bits = v >> (nbits - r.bitoff)
	}
}

func (r *rleEncoder) skipByte() int {
	r.flushBits(true)
	off := r.byteoff
	r.byteoff++
	r.reserve(r.byteoff)
	return off
}

func (r *rleEncoder) flushLiteral(updateIndicator bool) {
	if r.indicator == -1 {
		r.indicator = r.skipByte()
	}
	for _, v := range r.buf[:r.nbuf] {
		r.writeValue(v)
	}
	r.nbuf = 0
	if updateIndicator {
		r.writeAt([]byte{byte((r.lit/8)<<1 | 1)}, r.indicator)
		r.indicator = -1
		r.lit = 0
	}
}

func (r *rleEncoder) flushRepeated() {
	r.flushBits(true)
	var vb [binary.MaxVarintLen64]byte
	n := binary.PutUvarint(vb[:], uint64(r.rep)<<1)
	r.writeAt(vb[:n], r.byteoff)
	r.byteoff += n
	r.flushBits(true)
	var raw [8]byte
	binary.LittleEndian.PutUint64(raw[:], r.cur)
	nb := (r.width + 7) / 8
	r.writeAt(raw[:nb], r.byteoff)
	r.byteoff += nb
	r.rep = 0
	r.nbuf = 0
}

func (r *rleEncoder) flushBuffered(done bool) {
	if r.rep >= 8 {
		r.nbuf = 0
		if r.lit != 0 {
			r.flushLiteral(true)
		}
		return
	}
	r.lit += int32(r.nbuf)
	if r.lit/8+1 >= 1<<6 {
		r.flushLiteral(true)
	} else {
		r.flushLiteral(done)
	}
	r.rep = 0
}

func (r *rleEncoder) put(v uint64) {
	if r.cur == v {
		r.rep++
		if r.rep > 8 {
			return
		}
	} else {
		if r.rep >= 8 {
			r.flushRepeated()
		}
		r.rep = 1
		r.cur = v
	}
	r.buf[r.nbuf] = v
	r.nbuf++
	if r.nbuf == 8 {
		r.flushBuffered(false)
	}
}

func (r *rleEncoder) putLevels(values []int16) {
	enc := 0
	for enc < len(values) {
		v := values[enc]
		if r.rep >= 8 && r.cur == uint64(v) {
			end := enc + 1
			for end < len(values) && values[end] == v {
				end++
			}
			n := min(end-enc, int(math.MaxInt32-r.rep))
			r.rep += int32(n)
			enc += n
			if r.rep == math.MaxInt32 && enc < len(values) && values[enc] == v {
				r.flushRepeated()
			}
			continue
		}
		if r.rep == 0 && r.nbuf == 0 && len(values)-enc >= 8 && values[enc+7] == v {
			end := enc + 1
			for end < len(values) && values[end] == v {
				end++
			}
			if end-enc >= 8 {
				r.cur = uint64(v)
				if r.lit != 0 {
					r.rep = 8
					r.flushLiteral(true)
					enc += 8
				}
				n := min(end-enc, int(math.MaxInt32-r.rep))
				r.rep += int32(n)
				enc += n
				continue
			}
		}
		batchEnd := min(len(values), enc+8-r.nbuf)
		for ; enc < batchEnd; enc++ {
			r.put(uint64(values[enc]))
		}
	}
}

// finish flushes and returns the buffer with the encoded levels appended.
func (r *rleEncoder) finish() []byte {
	if r.lit > 0 || r.rep > 0 || r.nbuf > 0 {
		allRep := r.lit == 0 && (r.rep == int32(r.nbuf) || r.nbuf == 0)
		if r.rep > 0 && allRep {
			r.flushRepeated()
		} else {
			for r.nbuf != 0 && r.nbuf < 8 {
				r.buf[r.nbuf] = 0
				r.nbuf++
			}
			r.lit += int32(r.nbuf)
			r.flushLiteral(true)
			r.rep = 0
		}
	}
	r.flushBits(false)
	written := r.byteoff + int((r.bitoff+7)/8)
	return r.out[:written]
}
