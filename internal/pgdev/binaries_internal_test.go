package pgdev

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// fakeInstall makes root/<major>/bin with stub initdb, pg_ctl and a postgres
// that reports version major.3.
func fakeInstall(t *testing.T, root, major string) string {
	t.Helper()
	bin := filepath.Join(root, major, "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	for _, name := range []string{"initdb", "pg_ctl"} {
		require.NoError(t, os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\nexit 0\n"), 0o755))
	}
	script := "#!/bin/sh\necho 'postgres (PostgreSQL) " + major + ".3 (Test)'\n"
	require.NoError(t, os.WriteFile(filepath.Join(bin, "postgres"), []byte(script), 0o755))
	return bin
}

// Not parallel: it swaps PATH and the Debian glob.
func TestFindBinaries_SearchOrder(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	bin9 := fakeInstall(t, root, "9")
	bin12 := fakeInstall(t, root, "12")
	bin16 := fakeInstall(t, root, "16")
	// A directory with pg_ctl but no postgres is not an installation.
	broken := filepath.Join(root, "99", "bin")
	require.NoError(t, os.MkdirAll(broken, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(broken, "pg_ctl"), []byte("#!/bin/sh\n"), 0o755))

	old := debianGlob
	debianGlob = filepath.Join(root, "*", "bin")
	t.Cleanup(func() { debianGlob = old })
	t.Setenv(EnvBinDir, "")
	t.Setenv("PATH", t.TempDir())

	b, err := FindBinaries(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, bin16, b.Dir, "newest major first (numeric, not lexical: 16 > 12 > 9)")
	require.Equal(t, 16, b.Major)
	require.Equal(t, "16.3 (Test)", b.Version)

	b, err = FindBinaries(ctx, 12)
	require.NoError(t, err)
	require.Equal(t, bin12, b.Dir, "an existing data directory's major wins")

	b, err = FindBinaries(ctx, 11)
	require.NoError(t, err)
	require.Equal(t, bin16, b.Dir, "no install of the wanted major: the newest (Init then names the mismatch)")

	// pg_ctl on PATH (through a symlink) comes before the Debian layout.
	link := t.TempDir()
	require.NoError(t, os.Symlink(filepath.Join(bin9, "pg_ctl"), filepath.Join(link, "pg_ctl")))
	t.Setenv("PATH", link)
	b, err = FindBinaries(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, bin9, b.Dir)

	t.Setenv(EnvBinDir, bin12)
	b, err = FindBinaries(ctx, 0)
	require.NoError(t, err)
	require.Equal(t, bin12, b.Dir, "OML_PG_BINDIR wins over everything")

	t.Setenv(EnvBinDir, broken)
	_, err = FindBinaries(ctx, 0)
	require.ErrorContains(t, err, "OML_PG_BINDIR="+broken+" is not a usable PostgreSQL bin directory")

	t.Setenv(EnvBinDir, "")
	t.Setenv("PATH", t.TempDir())
	debianGlob = filepath.Join(t.TempDir(), "*", "bin")
	_, err = FindBinaries(ctx, 0)
	require.ErrorIs(t, err, ErrNoBinaries)
	_, err = Ensure(ctx, EnsureOptions{})
	require.ErrorIs(t, err, ErrNoBinaries)
	require.ErrorContains(t, err, "apt-get install -y postgresql", "the error says what to run")
}

func TestErrorLines_KeepsTheErrorNotTheChatter(t *testing.T) {
	t.Parallel()
	out := "The files belonging to this database system will be owned by user \"postgres\".\n\nData page checksums are disabled.\n\ninitdb: error: directory \"/x\" exists but is not empty\ninitdb: hint: If you want to create a new database system, remove it.\n"
	require.Equal(t, `initdb: error: directory "/x" exists but is not empty | initdb: hint: If you want to create a new database system, remove it.`, errorLines(out, 3))
	require.Equal(t, "b | c", errorLines("a\n\nb\n\nc\n", 2))
}
