package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/omlhq/oml/internal/lake/store"
)

// Region is the test server's region.
const Region = "us-east-1"

// Server is a running versitygw. Its root credentials are random per server
// (not secrets: a throwaway server on loopback), so a client can never
// mistake another test binary's server, started on the same port a moment
// earlier, for its own.
type Server struct {
	Endpoint  string // http://127.0.0.1:PORT
	Dir       string
	AccessKey string
	SecretKey string

	cmd    *exec.Cmd
	exited chan struct{}
}

var (
	once      sync.Once
	shared    *Server
	sharedErr error
)

// Main runs the tests of a package and stops the shared server afterwards:
//
//	func TestMain(m *testing.M) { os.Exit(s3test.Main(m)) }
func Main(m *testing.M) int {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	return code
}

// Shared returns the package's server, starting it on first use. If the
// server cannot be had it skips t (outside CI) or fails it (CI=true).
func Shared(t testing.TB) *Server {
	t.Helper()
	once.Do(func() { shared, sharedErr = Start() })
	if sharedErr != nil {
		unavailable(t, sharedErr)
	}
	return shared
}

func unavailable(t testing.TB, err error) {
	t.Helper()
	msg := fmt.Sprintf("S3 TESTS NOT RUN: no S3 test server (%v); run scripts/ensure-versitygw.sh or set OML_VERSITYGW", err)
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	fmt.Fprintln(os.Stderr, "!!!!!!!! "+msg)
	t.Skip(msg)
}

// Binary finds the versitygw binary: $OML_VERSITYGW, else what
// scripts/ensure-versitygw.sh prints (building it the first time).
func Binary() (string, error) {
	if p := os.Getenv("OML_VERSITYGW"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("OML_VERSITYGW=%s: %w", p, err)
		}
		return p, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command(filepath.Join(root, "scripts", "ensure-versitygw.sh"))
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("scripts/ensure-versitygw.sh failed: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find the repository root (no go.mod above the working directory)")
		}
		dir = parent
	}
}

// Options say how a server is started.
type Options struct {
	// CloseEachConnection leaves versitygw's default of answering every
	// request with "Connection: close" (its --keep-alive flag unset), so
	// a client dials a new connection for each request. S3 keeps
	// connections open, and so does a server from Start; only a benchmark
	// that compares the two wants this.
	CloseEachConnection bool
}

// Start starts a new server on a free loopback port with a fresh data
// directory and waits until it answers HTTP. Stop it with Stop.
func Start() (*Server, error) { return StartWith(Options{}) }

// StartWith is Start with options.
func StartWith(opts Options) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	var lastErr error
	for try := 0; try < 3; try++ { // the free port can be taken before we bind it
		s, err := start(bin, opts)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func start(bin string, opts Options) (*Server, error) {
	dir, err := os.MkdirTemp("", "oml-versitygw-*")
	if err != nil {
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	var rnd [16]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	access, secret := "omltest"+hex.EncodeToString(rnd[:4]), hex.EncodeToString(rnd[4:])
	args := []string{"--port", addr, "--region", Region, "--quiet"}
	if !opts.CloseEachConnection {
		// Without it versitygw closes the connection after every answer:
		// a client then pays a TCP connection per request, which S3 does
		// not make it pay (and the drain's 32 requests at once leave
		// thousands of sockets in TIME_WAIT).
		args = append(args, "--keep-alive")
	}
	cmd := exec.Command(bin, append(args, "posix", dir)...)
	cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+access, "ROOT_SECRET_KEY="+secret)
	logPath := filepath.Join(os.TempDir(), filepath.Base(dir)+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	// Die with the test binary, even if it is killed.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	s := &Server{Endpoint: "http://" + addr, Dir: dir, AccessKey: access, SecretKey: secret, cmd: cmd, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(s.exited) }() //nolint:errcheck
	if err := s.waitReady(30 * time.Second); err != nil {
		s.Stop()
		log, _ := os.ReadFile(logPath)
		return nil, fmt.Errorf("versitygw on %s: %w; its output: %s", addr, err, strings.TrimSpace(string(log)))
	}
	os.Remove(logPath)
	return s, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitReady polls until the server answers a request signed with its own
// credentials (another server on a reused port would refuse them). Polling
// is the only signal an external process gives; the loop ends early if the
// process exits.
func (s *Server) waitReady(limit time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	cfg := s.Config("oml-ready-check")
	cfg.MaxAttempts = 1
	cfg.RequestTimeout = time.Second
	st, err := store.OpenS3(ctx, cfg)
	if err != nil {
		return err
	}
	for {
		select {
		case <-s.exited:
			return errors.New("the server exited during startup")
		default:
		}
		_, err = st.Client().ListBuckets(ctx, &s3.ListBucketsInput{})
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return errors.New("the server exited during startup")
		case <-ctx.Done():
			return fmt.Errorf("not ready after %s: %w", limit, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Stop terminates the server (SIGTERM, then SIGKILL) and removes its data.
func (s *Server) Stop() {
	if s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGTERM) //nolint:errcheck
		select {
		case <-s.exited:
		case <-time.After(10 * time.Second):
			s.cmd.Process.Kill() //nolint:errcheck
			<-s.exited
		}
	}
	os.RemoveAll(s.Dir)
}

// CPU returns the user and system CPU time the server has used so far
// (Linux: /proc/<pid>/stat), for benchmarks that report the server's
// cost beside the client's.
func (s *Server) CPU() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", s.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want at least 13", s.cmd.Process.Pid, len(f))
	}
	var ticks int64
	for _, v := range f[11:13] { // utime and stime: fields 14 and 15
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%d/stat: %w", s.cmd.Process.Pid, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// clockTicks is USER_HZ, the unit of /proc's CPU times: 100 on every
// Linux architecture Go supports.
const clockTicks = 100

// Env is the standard AWS environment that points a process at the server.
func (s *Server) Env() []string {
	return []string{
		"AWS_ENDPOINT_URL=" + s.Endpoint,
		"AWS_ACCESS_KEY_ID=" + s.AccessKey,
		"AWS_SECRET_ACCESS_KEY=" + s.SecretKey,
		"AWS_REGION=" + Region,
		// Keep a developer's profile and IMDS out of the child's config.
		"AWS_CONFIG_FILE=" + os.DevNull,
		"AWS_SHARED_CREDENTIALS_FILE=" + os.DevNull,
		"AWS_EC2_METADATA_DISABLED=true",
	}
}

// Config returns an S3Config for bucket on this server with explicit
// endpoint, region and credentials (no process environment involved, so
// parallel tests are safe).
func (s *Server) Config(bucket string) store.S3Config {
	return store.S3Config{
		Bucket: bucket, Endpoint: s.Endpoint, Region: Region,
		AccessKeyID: s.AccessKey, SecretAccessKey: s.SecretKey,
	}
}

// Bucket is a fresh bucket on the shared server.
type Bucket struct {
	Server *Server
	Name   string
	Store  *store.S3 // the bucket's root
}

// URL is the lake URL of prefix in the bucket (s3://name/prefix).
func (b *Bucket) URL(prefix string) string {
	return "s3://" + b.Name + "/" + strings.Trim(prefix, "/")
}

// Env is the environment a child process needs for the bucket's server.
func (b *Bucket) Env() []string { return b.Server.Env() }

// NewBucket creates a bucket with a unique name on the shared server and
// returns it; cfg (may be nil) adjusts the store's configuration (e.g. a
// small multipart threshold). The bucket is left to the server's teardown.
func NewBucket(t testing.TB, cfg func(*store.S3Config)) *Bucket {
	t.Helper()
	srv := Shared(t)
	var rnd [6]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		t.Fatal(err)
	}
	name := "oml-test-" + hex.EncodeToString(rnd[:])
	c := srv.Config(name)
	if cfg != nil {
		cfg(&c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := store.OpenS3(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &name}); err != nil {
		t.Fatalf("creating bucket %s on the S3 test server: %v", name, err)
	}
	return &Bucket{Server: srv, Name: name, Store: st}
}
