package pq

import (
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/require"
)

// TestCodecsRefuseBlocksLargerThanThePage: a corrupt length in a compressed
// block must be an error, not a multi-GiB allocation.
func TestCodecsRefuseBlocksLargerThanThePage(t *testing.T) {
	t.Parallel()
	page := make([]byte, 1000)
	for i := range page {
		page[i] = byte(i % 7)
	}

	sn := s2.EncodeSnappy(nil, page)
	out, err := fastSnappy{}.DecodeWithError(make([]byte, len(page)), sn)
	require.NoError(t, err)
	require.Equal(t, page, out)
	// 0xff 0xff 0xff 0xff 0x0f: a varint header claiming 4 GiB.
	_, err = fastSnappy{}.DecodeWithError(make([]byte, len(page)), append([]byte{0xff, 0xff, 0xff, 0xff, 0x0f}, sn[2:]...))
	require.ErrorContains(t, err, "the file is corrupt")

	z := &zstdCodec{}
	enc := z.EncodeLevel(nil, page, 1)
	out, err = z.DecodeWithError(make([]byte, len(page)), enc)
	require.NoError(t, err)
	require.Equal(t, page, out)
	_, err = z.DecodeWithError(make([]byte, 10), enc)
	require.ErrorContains(t, err, "the file is corrupt")

	big, err := zstd.NewWriter(nil)
	require.NoError(t, err)
	frame := big.EncodeAll(make([]byte, 10<<20), nil) // compresses to a few hundred bytes
	_, err = z.DecodeWithError(make([]byte, 1000), frame)
	require.Error(t, err)
}
