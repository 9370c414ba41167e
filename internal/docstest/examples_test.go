package docstest

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/testdb"
)

// TestMain gives the binary a throwaway PostgreSQL cluster (databases cloned
// from a migrated template) and, for the pages that ask for one, the S3 test
// server; both go at the end, with the oml binary built for the examples.
func TestMain(m *testing.M) {
	// A page waits on PostgreSQL and its own processes more than on the CPU:
	// run more pages at once than GOMAXPROCS (go test's default), unless
	// -parallel says otherwise.
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		flag.Set("test.parallel", "6") //nolint:errcheck
	}
	// The build is the longest wait of the examples: start it now, beside
	// the cluster start, when the examples will run.
	if run := flag.Lookup("test.run").Value.String(); run == "" || strings.Contains(run, "Shell") {
		go binOnce.Do(buildBinary)
	}
	testdb.Configure(testdb.WithTemplate(schema.Migrate))
	code := s3test.Main(m)
	if err := testdb.Shutdown(); err != nil && code == 0 {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	removeBinary()
	os.Exit(code)
}

// repoRoot is the checkout this test file is in.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// omlBinDir builds the real oml binary once per test binary (go build, so
// the Go build cache makes it cheap) and returns the directory holding it.
func omlBinDir(t *testing.T) string {
	t.Helper()
	binOnce.Do(buildBinary)
	require.NoError(t, binErr)
	return binDir
}

// buildBinary builds cmd/oml into a scratch directory (go build, so the Go
// build cache makes it cheap).
func buildBinary() {
	binDir, binErr = os.MkdirTemp("", "oml-docstest-bin-")
	if binErr != nil {
		return
	}
	// -s -w: no symbol table or DWARF, which halves the link (the longest
	// part of the build once the packages are cached); the binary behaves
	// the same.
	cmd := exec.Command("go", "build", "-ldflags=-s -w", "-o", filepath.Join(binDir, "oml"), "./cmd/oml")
	cmd.Dir = repoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		binErr = fmt.Errorf("go build ./cmd/oml: %v: %s", err, out)
	}
}

func removeBinary() {
	binOnce.Do(func() {}) // waits for a build TestMain started
	if binDir != "" {
		os.RemoveAll(binDir)
	}
}

// docPages lists README.md and every page under docs/ except the generated
// command reference, relative to the repository root.
func docPages(t *testing.T) []string {
	t.Helper()
	root := repoRoot()
	pages := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && rel == filepath.Join("docs", "reference") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, rel)
		}
		return nil
	})
	require.NoError(t, err)
	sort.Strings(pages)
	return pages
}

func parsePages(t *testing.T) []*Page {
	t.Helper()
	var out []*Page
	for _, rel := range docPages(t) {
		src, err := os.ReadFile(filepath.Join(repoRoot(), rel))
		require.NoError(t, err)
		p, err := ParsePage(rel, string(src))
		require.NoError(t, err)
		out = append(out, p)
	}
	return out
}

// TestDocs_ShellExamplesRun runs every ```sh block of the documentation,
// page by page (pages in parallel, each on its own fresh deployment; the
// blocks of one page in order, sharing the shell's state), and checks each
// command's exit status and the output a ```console block shows.
func TestDocs_ShellExamplesRun(t *testing.T) {
	pages := parsePages(t)
	var ran, skipped, checked, commands atomic.Int64
	var skips []string
	for _, p := range pages {
		for _, b := range p.Blocks {
			if b.Skip != "" {
				skipped.Add(1)
				skips = append(skips, fmt.Sprintf("%s:%d (%s)", p.File, b.Line, b.Skip))
			}
		}
	}
	t.Run("pages", func(t *testing.T) {
		for _, p := range pages {
			if !hasRunnable(p) {
				continue
			}
			t.Run(p.File, func(t *testing.T) {
				t.Parallel()
				sh := newPageShell(t, p.Fixture)
				for _, b := range p.Blocks {
					if b.Skip != "" {
						continue
					}
					var out strings.Builder
					for _, c := range b.Commands {
						res := sh.run(t, c.Text)
						out.WriteString(res.out)
						if res.code != c.Exit {
							t.Errorf("%s:%d: `%s` exited %d, want %d; output:\n%s", p.File, c.Line, c.Text, res.code, c.Exit, indent(res.out))
						}
					}
					if !b.Setup {
						ran.Add(1)
						commands.Add(int64(len(b.Commands)))
					}
					if len(b.Output) > 0 {
						checked.Add(1)
						if msg := MatchOutput(b.Output, out.String()); msg != "" {
							t.Errorf("%s:%d: the ```console block at line %d does not match the example's output: %s; output:\n%s", p.File, b.Line, b.OutLine, msg, indent(out.String()))
						}
					}
				}
			})
		}
	})
	t.Logf("docs examples: %d ```sh blocks run (%d commands; %d blocks with shown output checked), %d skipped with a reason", ran.Load(), commands.Load(), checked.Load(), skipped.Load())
	for _, s := range skips {
		t.Logf("skipped: %s", s)
	}
}

func hasRunnable(p *Page) bool {
	for _, b := range p.Blocks {
		if b.Skip == "" && !b.Setup {
			return true
		}
	}
	return false
}

func indent(s string) string {
	if len(s) > 8000 {
		s = s[:8000] + "\n…(truncated)"
	}
	return "\t" + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n\t")
}

// pageShell is the shell one page's examples run in: every command is its
// own bash process, and the exported environment and the working directory
// carry over from one to the next (so `export`, `eval "$(oml dev env)"` and
// `cd` in one block hold for the blocks after it; so do plain variable
// assignments, which are exported).
type pageShell struct {
	dir   string // the page's working directory
	state string // `export -p` after the last command
	cwd   string
	env   []string
}

// workRoot is where page directories go: /dev/shm when it is there (a dev
// cluster's initdb and fsyncs are cheap on tmpfs), else the temp dir.
func workRoot() string {
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		return "/dev/shm"
	}
	return os.TempDir()
}

func newPageShell(t *testing.T, fixture string) *pageShell {
	t.Helper()
	bin := omlBinDir(t)
	dir, err := os.MkdirTemp(workRoot(), "oml-docstest-")
	require.NoError(t, err)
	// The dev cluster's server user (postgres when running as root) must be
	// able to enter the directory.
	require.NoError(t, os.Chmod(dir, 0o755))
	sh := &pageShell{dir: dir, state: filepath.Join(dir, ".docstest-env"), cwd: filepath.Join(dir, ".docstest-cwd")}
	require.NoError(t, os.WriteFile(sh.state, nil, 0o600))
	require.NoError(t, os.WriteFile(sh.cwd, []byte(dir), 0o600))
	// bin/oml is what `make build` makes (README's quick start runs it).
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	require.NoError(t, os.Symlink(filepath.Join(bin, "oml"), filepath.Join(dir, "bin", "oml")))
	sh.env = []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME"), "TERM=dumb", "LANG=C.UTF-8"}
	for _, k := range []string{"TMPDIR", "OML_PG_BINDIR", "OML_PG_USER"} {
		if v, ok := os.LookupEnv(k); ok {
			sh.env = append(sh.env, k+"="+v)
		}
	}
	t.Cleanup(func() {
		// A page that started a dev cluster and failed before `oml dev
		// down` must not leave a server running.
		if _, err := os.Stat(filepath.Join(dir, ".oml", "pgdata", "postmaster.pid")); err == nil {
			c := exec.Command(filepath.Join(bin, "oml"), "dev", "down", "--dir", dir)
			c.Env = sh.env
			c.Run() //nolint:errcheck
		}
		os.RemoveAll(dir)
	})
	switch fixture {
	case FixtureNone:
		return sh
	case FixtureS3:
		srv := s3test.Shared(t)
		s3Bucket(t, srv, "lake")
		sh.env = append(sh.env, srv.Env()...)
		sh.env = append(sh.env, "OML_LAKE_URL=s3://lake/prod")
	default:
		sh.env = append(sh.env, "OML_LAKE_URL=file://"+filepath.Join(dir, "lake"))
	}
	db := testdb.New(t)
	sh.env = append(sh.env, "OML_DATABASE_URL="+db.URL, "OML_SIGNING_KEY_FILE="+filepath.Join(dir, "deploy.key"))
	for _, c := range []string{
		`oml key generate --out "$OML_SIGNING_KEY_FILE"`,
		`oml init`,
		`oml tenant create acme`,
		`oml dev load --tenants 2 --claims 20 --seed 1`,
		`oml lake drain --once`,
	} {
		if res := sh.run(t, c); res.code != 0 {
			t.Fatalf("fixture %s: `%s` exited %d:\n%s", fixture, c, res.code, indent(res.out))
		}
	}
	return sh
}

var (
	bucketMu sync.Mutex
	buckets  = map[string]bool{}
)

// s3Bucket creates bucket name on the server once per test binary.
func s3Bucket(t *testing.T, srv *s3test.Server, name string) {
	t.Helper()
	bucketMu.Lock()
	defer bucketMu.Unlock()
	if buckets[name] {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.OpenS3(ctx, srv.Config(name))
	require.NoError(t, err)
	_, err = st.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name})
	require.NoError(t, err)
	buckets[name] = true
}

type shellResult struct {
	code int
	out  string // stdout and stderr, interleaved as written
}

// commandTimeout bounds one example; none should come near it.
const commandTimeout = 2 * time.Minute

func (sh *pageShell) run(t *testing.T, command string) shellResult {
	t.Helper()
	// set -a: a plain assignment (ID=$(oml ...)) carries over like an export.
	script := "set -o pipefail -a\n" +
		". " + shQuote(sh.state) + " 2>/dev/null\n" +
		"cd \"$(cat " + shQuote(sh.cwd) + ")\"\n" +
		command + "\n" +
		"__docstest_rc=$?\n" +
		"export -p > " + shQuote(sh.state) + "\n" +
		"pwd > " + shQuote(sh.cwd) + "\n" +
		"exit $__docstest_rc\n"
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "--noprofile", "--norc", "-c", script)
	cmd.Env = sh.env
	cmd.Dir = sh.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("running `%s`: %v", command, err)
	}
	if ctx.Err() != nil {
		t.Errorf("`%s` did not finish within %s", command, commandTimeout)
	}
	return shellResult{code, out.String()}
}

func shQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
