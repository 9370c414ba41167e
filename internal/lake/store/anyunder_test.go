package store_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
)

// TestAnyUnder_TenantPrefixWithOrWithoutKeys_EmptyOnlyWhenNothingIsBelow:
// the start-up scan skips every table of a tenant AnyUnder calls empty, so
// it must say empty only when no key at all starts with the prefix — not
// for a neighbour's prefix, not through a sub-store or the fault
// injector, not for a directory marker — and a store that cannot tell in
// one request must say so.
func TestAnyUnder_TenantPrefixWithOrWithoutKeys_EmptyOnlyWhenNothingIsBelow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := s3test.NewBucket(t, func(c *store.S3Config) { c.Prefix = "lake" })
	stores := map[string]store.Store{
		"s3":        b.Store,
		"mem":       store.NewMem(),
		"faulty-s3": store.NewFaulty(b.Store),
	}
	for name, st := range stores {
		t.Run(name, func(t *testing.T) {
			root := name + "/"
			require.NoError(t, st.Put(ctx, root+"t1/bronze/events/_delta_log/00000000000000000000.json", strings.NewReader("{}"), 2))
			require.NoError(t, st.Put(ctx, root+"t10/x", strings.NewReader("x"), 1))
			for prefix, want := range map[string]bool{"t1/": true, "t10/": true, "t2/": false, "t1/bronze/": true, "t1/silver/": false} {
				found, known, err := store.AnyUnder(ctx, st, root+prefix)
				require.NoError(t, err)
				require.True(t, known, prefix)
				require.Equal(t, want, found, prefix)
			}
			sub, err := store.Sub(st, root+"t1")
			require.NoError(t, err)
			found, known, err := store.AnyUnder(ctx, sub, "bronze/")
			require.NoError(t, err)
			require.True(t, known && found, "through a sub-store")
			found, known, err = store.AnyUnder(ctx, sub, "gold/")
			require.NoError(t, err)
			require.True(t, known && !found, "through a sub-store")
		})
	}

	t.Run("s3-directory-marker", func(t *testing.T) {
		k := "lake/marked/"
		_, err := b.Store.Client().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b.Name), Key: &k, Body: strings.NewReader("")})
		require.NoError(t, err)
		found, known, err := store.AnyUnder(ctx, b.Store, "marked/")
		require.NoError(t, err)
		require.True(t, known && found, "a directory marker errs towards reading")
	})

	t.Run("file-cannot-tell", func(t *testing.T) {
		f, err := store.NewFile(t.TempDir())
		require.NoError(t, err)
		found, known, err := store.AnyUnder(ctx, f, "t1/")
		require.NoError(t, err)
		require.False(t, known)
		require.True(t, found)
	})
}
