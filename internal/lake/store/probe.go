package store

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
)

// ProbePrefix is where Probe writes its scratch objects.
const ProbePrefix = "_oml_probe/"

// Probe checks that s really implements put-if-absent, which the lake's
// commit protocol depends on: it writes a fresh scratch key under
// _oml_probe/ with PutIfAbsent, writes it again (which must fail with
// ErrExists), reads it back (it must still hold the first body) and deletes
// it. A store that accepts the second write, e.g. an S3 gateway that ignores
// If-None-Match, fails with an error wrapping ErrUnsupported. `oml doctor`
// runs this; it needs write access to the store.
func Probe(ctx context.Context, s Store) error {
	var rnd [12]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return err
	}
	key := ProbePrefix + hex.EncodeToString(rnd[:])
	first := []byte("oml put-if-absent probe: first writer\n")
	second := []byte("oml put-if-absent probe: second writer\n")
	if err := s.PutIfAbsent(ctx, key, first); err != nil {
		return fmt.Errorf("probe of %s: writing scratch object %s failed: %w", s, key, err)
	}
	// Best effort: a leftover probe object is harmless and easy to spot.
	defer s.Delete(context.WithoutCancel(ctx), key) //nolint:errcheck

	err := s.PutIfAbsent(ctx, key, second)
	switch {
	case err == nil:
		return fmt.Errorf("probe of %s: a second put-if-absent of %s succeeded, so this store does not honor conditional writes (S3: If-None-Match: *); concurrent lake writers could overwrite each other's commits: %w", s, key, ErrUnsupported)
	case !errors.Is(err, ErrExists):
		return fmt.Errorf("probe of %s: the second put-if-absent of %s failed with an unexpected error: %w", s, key, err)
	}
	got, err := s.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("probe of %s: reading back %s failed: %w", s, key, err)
	}
	if !bytes.Equal(got, first) {
		return fmt.Errorf("probe of %s: %s was overwritten by a put-if-absent that reported failure: %w", s, key, ErrUnsupported)
	}
	return nil
}
