package pgdev

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// EnvBinDir names a directory holding initdb, pg_ctl and postgres; when set it
// wins over PATH and the Debian layout.
const EnvBinDir = "OML_PG_BINDIR"

// Binaries are the server programs of one PostgreSQL installation.
type Binaries struct {
	// Dir holds initdb, pg_ctl and postgres (symlinks resolved).
	Dir string
	// Major is the major version (15 for 15.18).
	Major int
	// Version is what `postgres --version` printed, e.g. "15.18 (Debian 15.18-0+deb12u1)".
	Version string
}

// Initdb, PgCtl and Postgres are the absolute paths of the programs.
func (b Binaries) Initdb() string   { return filepath.Join(b.Dir, "initdb") }
func (b Binaries) PgCtl() string    { return filepath.Join(b.Dir, "pg_ctl") }
func (b Binaries) Postgres() string { return filepath.Join(b.Dir, "postgres") }

// ErrNoBinaries means no usable PostgreSQL server installation was found.
var ErrNoBinaries = errors.New("PostgreSQL server binaries (initdb, pg_ctl, postgres) not found")

// debianGlob is where Debian and Ubuntu put one bin directory per major version.
var debianGlob = "/usr/lib/postgresql/*/bin"

// FindBinaries locates the server programs. Search order: $OML_PG_BINDIR,
// then pg_ctl on PATH (its real directory must also hold initdb and
// postgres), then /usr/lib/postgresql/*/bin newest major first. When
// wantMajor > 0 (an existing data directory's PG_VERSION), an installation of
// that major is preferred wherever it is, because a data directory can only be
// run by the major that created it.
func FindBinaries(ctx context.Context, wantMajor int) (Binaries, error) {
	var candidates []string
	if d := os.Getenv(EnvBinDir); d != "" {
		b, err := probe(ctx, d)
		if err != nil {
			return Binaries{}, fmt.Errorf("%s=%s is not a usable PostgreSQL bin directory: %w", EnvBinDir, d, err)
		}
		return b, nil
	}
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			candidates = append(candidates, filepath.Dir(real))
		}
	}
	candidates = append(candidates, debianDirs()...)

	var found []Binaries
	seen := map[string]bool{}
	for _, d := range candidates {
		if seen[d] {
			continue
		}
		seen[d] = true
		b, err := probe(ctx, d)
		if err != nil {
			continue
		}
		if wantMajor > 0 && b.Major == wantMajor {
			return b, nil
		}
		found = append(found, b)
	}
	if len(found) == 0 {
		return Binaries{}, ErrNoBinaries
	}
	return found[0], nil
}

// debianDirs lists /usr/lib/postgresql/*/bin, newest major first.
func debianDirs() []string {
	dirs, _ := filepath.Glob(debianGlob)
	major := func(d string) int {
		n, _ := strconv.Atoi(filepath.Base(filepath.Dir(d)))
		return n
	}
	sort.SliceStable(dirs, func(i, j int) bool { return major(dirs[i]) > major(dirs[j]) })
	return dirs
}

var versionRE = regexp.MustCompile(`\(PostgreSQL\) ((\d+)(?:\.\d+)*\S*(?: \(.*\))?)`)

// probe checks that dir holds the three programs and asks postgres its version.
func probe(ctx context.Context, dir string) (Binaries, error) {
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || st.IsDir() || st.Mode().Perm()&0o111 == 0 {
			return Binaries{}, fmt.Errorf("%s has no executable %s", dir, name)
		}
	}
	out, err := exec.CommandContext(ctx, filepath.Join(dir, "postgres"), "--version").Output()
	if err != nil {
		return Binaries{}, fmt.Errorf("%s --version failed: %w", filepath.Join(dir, "postgres"), err)
	}
	m := versionRE.FindSubmatch(bytes.TrimSpace(out))
	if m == nil {
		return Binaries{}, fmt.Errorf("cannot parse the output of postgres --version: %q", out)
	}
	major, _ := strconv.Atoi(string(m[2]))
	return Binaries{Dir: dir, Major: major, Version: string(m[1])}, nil
}

// InstallHint is the command an operator runs to get the server binaries.
const InstallHint = "sudo apt-get update && sudo apt-get install -y postgresql"

// CanInstall reports whether Install can work here: root on a system with apt-get.
func CanInstall() bool {
	if os.Geteuid() != 0 {
		return false
	}
	_, err := exec.LookPath("apt-get")
	return err == nil
}

// Install installs Debian's postgresql package non-interactively (apt-get
// update, then apt-get install). It only works as root; progress goes to log.
// The package's own cluster is left alone: oml never uses it.
func Install(ctx context.Context, log io.Writer) error {
	if !CanInstall() {
		return fmt.Errorf("%w and cannot be installed automatically (needs root and apt-get); install them with `%s` or set %s to a directory holding initdb, pg_ctl and postgres", ErrNoBinaries, InstallHint, EnvBinDir)
	}
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	for _, args := range [][]string{
		{"update", "-q"},
		{"install", "-y", "-q", "--no-install-recommends", "postgresql"},
	} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			tail := lastLines(out.String(), 5)
			return fmt.Errorf("apt-get %s failed (%v): %s; install PostgreSQL yourself with `%s`", strings.Join(args, " "), err, tail, InstallHint)
		}
		if log != nil {
			fmt.Fprintf(log, "apt-get %s: done\n", args[0])
		}
	}
	return nil
}

// EnsureOptions are Ensure's inputs.
type EnsureOptions struct {
	WantMajor int       // the major version wanted (0: the newest found)
	Install   bool      // install Debian's postgresql package when none are found (and it can)
	Log       io.Writer // progress of an install (nil: none)
}

// Ensure returns the server binaries, installing Debian's postgresql package
// first when none are found and opts.Install is set and it is possible.
func Ensure(ctx context.Context, opts EnsureOptions) (Binaries, error) {
	wantMajor, log := opts.WantMajor, opts.Log
	b, err := FindBinaries(ctx, wantMajor)
	if err == nil || !errors.Is(err, ErrNoBinaries) {
		return b, err
	}
	if !opts.Install || !CanInstall() {
		return Binaries{}, fmt.Errorf("%w; install them with `%s` (or set %s to a directory holding them)", ErrNoBinaries, InstallHint, EnvBinDir)
	}
	if log != nil {
		fmt.Fprintln(log, "PostgreSQL server binaries not found; installing Debian's postgresql package (apt-get)...")
	}
	if err := Install(ctx, log); err != nil {
		return Binaries{}, err
	}
	b, err = FindBinaries(ctx, wantMajor)
	if err != nil {
		return Binaries{}, fmt.Errorf("installed the postgresql package but still cannot find its server binaries under %s: %w", debianGlob, err)
	}
	return b, nil
}

// errorLines keeps the lines of a program's output that say what went
// wrong ("error:", "FATAL:", "hint:"), falling back to the last n lines, so
// a failure reads as one sentence rather than initdb's whole chatter.
func errorLines(s string, n int) string {
	var keep []string
	for _, line := range strings.Split(s, "\n") {
		l := strings.ToLower(line)
		if strings.Contains(l, "error:") || strings.Contains(l, "fatal:") || strings.Contains(l, "hint:") || strings.Contains(l, "cannot be run") {
			keep = append(keep, strings.TrimSpace(line))
		}
	}
	if len(keep) == 0 {
		return lastLines(s, n)
	}
	if len(keep) > n {
		keep = keep[:n]
	}
	return strings.Join(keep, " | ")
}

func lastLines(s string, n int) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
