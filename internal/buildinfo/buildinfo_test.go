package buildinfo

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// Not parallel: it sets the linker variables.
func TestRead_LinkerValuesAndToolchain(t *testing.T) {
	old := [3]string{Version, Commit, BuildTime}
	t.Cleanup(func() { Version, Commit, BuildTime = old[0], old[1], old[2] })

	Version, Commit, BuildTime = "", "0123456789abcdef0123456789abcdef01234567", "2026-12-01T09:00:00Z"
	in := Read()
	require.Equal(t, runtime.Version(), in.GoVersion)
	require.Equal(t, runtime.GOOS+"/"+runtime.GOARCH, in.Platform)
	require.Equal(t, Commit, in.Commit)
	require.Equal(t, "2026-12-01T09:00:00Z", in.BuildTime)
	require.Equal(t, "dev-0123456789ab", in.Version)

	Version = "v1.2.3"
	require.Equal(t, "v1.2.3", Read().Version)
	require.Equal(t, "v1.2.3", String())
}
