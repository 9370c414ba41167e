package schema

import (
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestEmbeddedMigrationsAreNumberedWithoutGaps(t *testing.T) {
	t.Parallel()
	ms := All()
	require.NotEmpty(t, ms)
	for i, m := range ms {
		require.Equal(t, i+1, m.Version)
		require.Len(t, m.Checksum, 64)
		require.NotEmpty(t, m.SQL)
	}
	require.Equal(t, len(ms), Latest())
}

func TestLoadRejectsGapsAndBadNames(t *testing.T) {
	t.Parallel()
	_, err := load(fstest.MapFS{
		"migrations/001_a.sql": {Data: []byte("SELECT 1")},
		"migrations/003_c.sql": {Data: []byte("SELECT 1")},
	})
	require.ErrorContains(t, err, "without gaps")

	_, err = load(fstest.MapFS{"migrations/1_a.sql": {Data: []byte("SELECT 1")}})
	require.ErrorContains(t, err, "NNN_name.sql")
}

func TestCheckRefusesChangedChecksumAndNewerDatabase(t *testing.T) {
	t.Parallel()
	ms := []Migration{{Version: 1, Name: "a", Checksum: "aaaa"}}
	require.NoError(t, check(ms, map[int]Applied{1: {Version: 1, Checksum: "aaaa"}}))
	require.ErrorContains(t, check(ms, map[int]Applied{1: {Version: 1, Checksum: "bbbb"}}), "must never change")
	var ahead *AheadError
	require.ErrorAs(t, check(ms, map[int]Applied{1: {Version: 1, Checksum: "aaaa"}, 2: {Version: 2}}), &ahead)
	require.Equal(t, 2, ahead.DatabaseVersion)
}
