package pq

import (
	"fmt"
	"io"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
)

// Both codecs below replace arrow-go's for the whole process, because
// arrow-go's codec registry is global; pq is the only user of arrow-go in oml.
// The bytes they produce are standard Snappy blocks and zstd frames that every
// Parquet reader decodes; only the encoder settings differ (measured in
// docs/parquet.md).
func init() {
	compress.RegisterCodec(compress.Codecs.Snappy, fastSnappy{})
	compress.RegisterCodec(compress.Codecs.Zstd, &zstdCodec{})
}

// fastSnappy: arrow-go encodes through klauspost's snappy package, which uses
// s2's "better" (slower, ~3% smaller) encoder; on the bronze benchmark that
// encoder was 45% of the write CPU. s2.EncodeSnappy emits the same standard
// Snappy block format at the default speed.
type fastSnappy struct{}

func (fastSnappy) Encode(dst, src []byte) []byte { return s2.EncodeSnappy(dst, src) }

func (fastSnappy) EncodeLevel(dst, src []byte, _ int) []byte { return s2.EncodeSnappy(dst, src) }

func (fastSnappy) Decode(dst, src []byte) []byte {
	out, err := snappy.Decode(dst, src)
	if err != nil {
		panic(err) // arrow-go's contract for Decode; its readers call DecodeWithError
	}
	return out
}

// DecodeWithError refuses a block whose header announces more bytes than dst
// holds: arrow-go sizes dst from the page header (itself capped at 256 MiB),
// and a corrupt length would otherwise make the decoder allocate up to 4 GiB
// and kill the process (found by FuzzCorruptPages).
func (fastSnappy) DecodeWithError(dst, src []byte) ([]byte, error) {
	n, err := snappy.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if n > len(dst) {
		return nil, fmt.Errorf("snappy block decodes to %d bytes but the page holds %d; the file is corrupt", n, len(dst))
	}
	return snappy.Decode(dst, src)
}

func (fastSnappy) NewReader(r io.Reader) io.ReadCloser { return io.NopCloser(snappy.NewReader(r)) }

func (fastSnappy) CompressBound(n int64) int64 { return int64(s2.MaxEncodedLen(int(n))) }

func (fastSnappy) NewWriter(w io.Writer) io.WriteCloser { return snappy.NewBufferedWriter(w) }

func (f fastSnappy) NewWriterLevel(w io.Writer, _ int) (io.WriteCloser, error) {
	return f.NewWriter(w), nil
}

// zstdCodec: arrow-go's encoder turns on entropy coding of all literals and
// resets pooled encoders after every page; on incompressible ciphertext
// (silver bodies) that made zstd writes ~2x slower than necessary. This one
// keeps one pooled single-threaded encoder per level with klauspost's
// defaults, and one shared decoder (DecodeAll is safe for concurrent use).
type zstdCodec struct {
	pools   sync.Map // zstd.EncoderLevel -> *sync.Pool
	decOnce sync.Once
	dec     *zstd.Decoder
}

func (z *zstdCodec) encoder(level int) (*zstd.Encoder, *sync.Pool) {
	l := zstd.SpeedDefault
	if level != compress.DefaultCompressionLevel && level > 0 {
		l = zstd.EncoderLevelFromZstd(level)
	}
	p, ok := z.pools.Load(l)
	if !ok {
		p, _ = z.pools.LoadOrStore(l, &sync.Pool{New: func() any {
			e, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(l), zstd.WithEncoderConcurrency(1), zstd.WithZeroFrames(true))
			if err != nil {
				panic(err) // only invalid options fail, and these are constant
			}
			return e
		}})
	}
	pool := p.(*sync.Pool)
	return pool.Get().(*zstd.Encoder), pool
}

func (z *zstdCodec) Encode(dst, src []byte) []byte {
	return z.EncodeLevel(dst, src, compress.DefaultCompressionLevel)
}

func (z *zstdCodec) EncodeLevel(dst, src []byte, level int) []byte {
	e, pool := z.encoder(level)
	out := e.EncodeAll(src, dst[:0])
	pool.Put(e)
	return out
}

func (z *zstdCodec) decoder() *zstd.Decoder {
	z.decOnce.Do(func() {
		d, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(0), zstd.WithDecoderMaxMemory(maxDecodedPage))
		if err != nil {
			panic(err)
		}
		z.dec = d
	})
	return z.dec
}

func (z *zstdCodec) Decode(dst, src []byte) []byte {
	out, err := z.DecodeWithError(dst, src)
	if err != nil {
		panic(err)
	}
	return out
}

// DecodeWithError bounds the output like the snappy decoder does: by the
// frame's declared content size against dst, and by the decoder's memory cap.
func (z *zstdCodec) DecodeWithError(dst, src []byte) ([]byte, error) {
	var h zstd.Header
	if err := h.Decode(src); err == nil && h.HasFCS && h.FrameContentSize > uint64(len(dst)) {
		return nil, fmt.Errorf("zstd frame decodes to %d bytes but the page holds %d; the file is corrupt", h.FrameContentSize, len(dst))
	}
	return z.decoder().DecodeAll(src, dst[:0])
}

// maxDecodedPage matches arrow-go's default cap on a page's uncompressed size.
const maxDecodedPage = 256 << 20

func (z *zstdCodec) CompressBound(n int64) int64 {
	// ZSTD_COMPRESSBOUND from zstd.h
	extra := int64(0)
	if n < 128<<10 {
		extra = ((128 << 10) - n) >> 11
	}
	return n + (n >> 8) + extra
}

func (z *zstdCodec) NewReader(r io.Reader) io.ReadCloser {
	d, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return io.NopCloser(errReader{err})
	}
	return d.IOReadCloser()
}

func (z *zstdCodec) NewWriter(w io.Writer) io.WriteCloser {
	e, err := zstd.NewWriter(w)
	if err != nil {
		panic(err)
	}
	return e
}

func (z *zstdCodec) NewWriterLevel(w io.Writer, level int) (io.WriteCloser, error) {
	l := zstd.SpeedDefault
	if level != compress.DefaultCompressionLevel && level > 0 {
		l = zstd.EncoderLevelFromZstd(level)
	}
	return zstd.NewWriter(w, zstd.WithEncoderLevel(l))
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }
