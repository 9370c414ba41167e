package store_test

import (
	"testing"

	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lake/store/storetest"
	"github.com/stretchr/testify/require"
)

func TestConformanceFile(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := store.NewFile(t.TempDir() + "/lake")
		require.NoError(t, err)
		return s
	})
}

func TestConformanceFileGroupSync(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := store.NewFile(t.TempDir()+"/lake", store.WithSync(store.SyncGroup))
		require.NoError(t, err)
		return s
	})
}

// TestConformanceFileLinkPublish runs the suite on a file store whose
// put-if-absent links, as on a filesystem without renameat2's
// RENAME_NOREPLACE (the fallback must keep the same guarantees).
func TestConformanceFileLinkPublish(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := store.NewFile(t.TempDir() + "/lake")
		require.NoError(t, err)
		store.PublishByLink(s)
		return s
	})
}

func TestConformanceMem(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store { return store.NewMem() })
}

func TestConformanceFaultyWithoutRules(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		s, err := store.NewFile(t.TempDir())
		require.NoError(t, err)
		return store.NewFaulty(s)
	})
}

func TestConformanceS3(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		return s3test.NewBucket(t, storetest.MultipartConfig).Store
	})
}

func TestConformanceS3UnderPrefix(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T) store.Store {
		b := s3test.NewBucket(t, func(c *store.S3Config) {
			storetest.MultipartConfig(c)
			c.Prefix = "lake/root"
		})
		return b.Store
	})
}
