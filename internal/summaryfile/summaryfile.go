package summaryfile

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Writer builds one summary object: write the lines into Body, then Seal.
type Writer struct {
	Body   bytes.Buffer
	header string
}

// NewWriter starts a summary with header (the format's name, ending in a
// space). size is the expected object size: the buffer is allocated once
// (a summary of many entries is megabytes, and growing it by doubling
// copied it several times over).
func NewWriter(header string, size int) *Writer {
	w := &Writer{header: header}
	w.Body.Grow(len(header) + 2*sha256.Size + 1 + size)
	w.Body.WriteString(header + strings.Repeat("0", 2*sha256.Size) + "\n")
	return w
}

// Seal fills in the body's hash and returns the object.
func (w *Writer) Seal() []byte {
	hdr := len(w.header) + 2*sha256.Size + 1
	b := w.Body.Bytes()
	sum := sha256.Sum256(b[hdr:])
	hex.Encode(b[len(w.header):hdr-1], sum[:])
	return b
}

// Open checks data against header and max and calls line for each body
// line in order (n is its line number in the object, from 2); the first
// error stops it, named with key and the line.
func Open(data []byte, header, key string, max int, line func(n int, s string) error) error {
	if len(data) > max {
		return fmt.Errorf("%s is larger than %d bytes", key, max)
	}
	first, body, ok := bytes.Cut(data, []byte("\n"))
	want, okh := strings.CutPrefix(string(first), header)
	sum := sha256.Sum256(body)
	if !ok || !okh || want != hex.EncodeToString(sum[:]) {
		return fmt.Errorf("%s does not hash to its header", key)
	}
	for n := 2; len(body) > 0; n++ {
		var l []byte
		l, body, _ = bytes.Cut(body, []byte("\n"))
		if err := line(n, string(l)); err != nil {
			return fmt.Errorf("%s line %d: %w", key, n, err)
		}
	}
	return nil
}
