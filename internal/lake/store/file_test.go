package store_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/omlhq/oml/internal/lake/store"
	"github.com/stretchr/testify/require"
)

func TestFileStoreIgnoresLeftoverTempFilesAndKeepsNoneAfterWrites(t *testing.T) {
	t.Parallel()
	for _, link := range []bool{false, true} {
		name := "renameat2"
		if link {
			name = "link"
		}
		t.Run(name, func(t *testing.T) { testLeftoverTempFiles(t, link) })
	}
}

func testLeftoverTempFiles(t *testing.T, link bool) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := store.NewFile(dir)
	require.NoError(t, err)
	if link {
		store.PublishByLink(s)
	}
	require.NoError(t, s.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte("v0")))
	require.ErrorIs(t, s.PutIfAbsent(ctx, "_delta_log/00000000000000000000.json", []byte("v0'")), store.ErrExists)
	require.NoError(t, s.Put(ctx, "_delta_log/_last_checkpoint", nil, 0))

	entries, err := os.ReadDir(filepath.Join(dir, "_delta_log"))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	require.Equal(t, []string{"00000000000000000000.json", "_last_checkpoint"}, names, "temporary files left behind")

	// A crash between writing the temporary file and publishing it leaves
	// one behind; List must not show it.
	leftover := filepath.Join(dir, "_delta_log", ".00000000000000000001.json.0123456789abcdef.oml-tmp")
	require.NoError(t, os.WriteFile(leftover, []byte("partial"), 0o644))
	infos, err := s.List(ctx, "", "")
	require.NoError(t, err)
	require.Len(t, infos, 2)
	_, err = s.Get(ctx, "_delta_log/00000000000000000001.json")
	require.ErrorIs(t, err, store.ErrNotFound)
	require.NoError(t, s.PutIfAbsent(ctx, "_delta_log/00000000000000000001.json", []byte("v1")))
}

func TestFileStoreKeyBelowAFileIsAnError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := store.NewFile(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, s.PutIfAbsent(ctx, "x", []byte("1")))
	err = s.PutIfAbsent(ctx, "x/y", []byte("2"))
	require.ErrorContains(t, err, "is a file")
	require.NotErrorIs(t, err, store.ErrExists)
	_, err = s.Get(ctx, "x/y")
	require.ErrorIs(t, err, store.ErrNotFound)
}

func TestFileStoreRefusesRelativeRoot(t *testing.T) {
	t.Parallel()
	_, err := store.NewFile("relative/lake")
	require.ErrorContains(t, err, "not an absolute path")
}

func TestFileStoreKeyThatIsADirectoryIsNotReportedAsExisting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := store.NewFile(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, s.PutIfAbsent(ctx, "x/y", []byte("1")))
	err = s.PutIfAbsent(ctx, "x", []byte("2"))
	require.ErrorContains(t, err, "a directory of that name holds other objects")
	require.NotErrorIs(t, err, store.ErrExists)
}

func TestFileStoreRemoveStaleTempSweepsOnlyOldTempFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	s, err := store.NewFile(dir)
	require.NoError(t, err)
	require.NoError(t, s.PutIfAbsent(ctx, "t/_delta_log/00000000000000000000.json", []byte("v0")))
	old := filepath.Join(dir, "t", "_delta_log", ".00000000000000000001.json.00000000deadbeef.oml-tmp")
	fresh := filepath.Join(dir, "t", ".part-1.parquet.00000000cafef00d.oml-tmp")
	require.NoError(t, os.WriteFile(old, []byte("x"), 0o644))
	require.NoError(t, os.WriteFile(fresh, []byte("x"), 0o644))
	past := time.Now().Add(-2 * time.Hour)
	require.NoError(t, os.Chtimes(old, past, past))

	n, err := s.RemoveStaleTemp(ctx, time.Hour)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.NoFileExists(t, old)
	require.FileExists(t, fresh)
	_, err = s.Get(ctx, "t/_delta_log/00000000000000000000.json")
	require.NoError(t, err)
}

func TestFileStorePutOntoADirectoryKey_ReportsTheDirectoryAndKeepsItsObjects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := store.NewFile(t.TempDir())
	require.NoError(t, err)
	require.NoError(t, s.Put(ctx, "x/y", bytes.NewReader([]byte("1")), 1))
	err = s.Put(ctx, "x", bytes.NewReader([]byte("2")), 1)
	require.ErrorContains(t, err, "a directory of that name holds other objects")
	got, err := s.Get(ctx, "x/y")
	require.NoError(t, err)
	require.Equal(t, []byte("1"), got)
}
