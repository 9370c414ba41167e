package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/pgconn"
)

// EnvDatabaseURL names an existing server to use instead of a throwaway one.
const EnvDatabaseURL = "OML_TEST_DATABASE_URL"

// DefaultTemplate is the name WithTemplate registers under.
const DefaultTemplate = "default"

// Hook prepares a template database; conn is connected to it as a
// superuser (or, with OML_TEST_DATABASE_URL, as that URL's role).
type Hook func(ctx context.Context, conn *pgx.Conn) error

// Option configures the harness for a test binary (see Main).
type Option func(*config)

type config struct {
	templates map[string]Hook
	// dropAfterTest drops each test's database in t.Cleanup. Always on
	// for an external server; off for the throwaway cluster, which is
	// deleted whole.
	dropAfterTest bool
}

// WithTemplate registers the default template: New(t) clones it.
func WithTemplate(hook Hook) Option { return WithNamedTemplate(DefaultTemplate, hook) }

// WithNamedTemplate registers a template that tests select with
// Template(name). The hook runs at most once per binary, on first use.
func WithNamedTemplate(name string, hook Hook) Option {
	return func(c *config) {
		if c.templates == nil {
			c.templates = map[string]Hook{}
		}
		c.templates[name] = hook
	}
}

// WithDropAfterTest drops every test's database when the test ends even on
// the throwaway cluster (for binaries with very many database tests).
func WithDropAfterTest() Option { return func(c *config) { c.dropAfterTest = true } }

var (
	mu      sync.Mutex
	cfg     config
	srv     *server
	srvErr  error
	counter atomic.Int64
)

// Configure registers options without taking over TestMain; Main calls it.
// Templates registered after the cluster started are still honoured.
func Configure(opts ...Option) {
	mu.Lock()
	defer mu.Unlock()
	for _, o := range opts {
		o(&cfg)
	}
	if srv != nil {
		srv.applyConfig(cfg)
	}
}

// applyConfig adopts cfg, keeping templates already built.
func (s *server) applyConfig(c config) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	s.cfg = c
	if s.templates == nil {
		s.templates = map[string]*template{}
	}
	for name, hook := range c.templates {
		if _, ok := s.templates[name]; !ok {
			s.templates[name] = &template{name: name, hook: hook}
		}
	}
}

// Main runs the tests and then removes the cluster (or, with
// OML_TEST_DATABASE_URL, the databases) they used. Call it from TestMain:
//
//	func TestMain(m *testing.M) { testdb.Main(m, testdb.WithTemplate(schema.Migrate)) }
func Main(m *testing.M, opts ...Option) {
	os.Exit(Run(m, opts...))
}

// Run is Main without the os.Exit, for a TestMain that does more after the
// tests (a goroutine-leak check, say); the cluster is already gone when it
// returns, so its pools do not count as leaks.
func Run(m *testing.M, opts ...Option) int {
	Configure(opts...)
	code := m.Run()
	if err := Shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "testdb: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Shutdown stops the cluster and removes its directory (or drops this
// binary's databases on an external server). Main calls it; it is safe to
// call when nothing was started, and more than once.
func Shutdown() error {
	mu.Lock()
	s := srv
	srv, srvErr = nil, errors.New("testdb: used after Shutdown")
	mu.Unlock()
	if s == nil {
		return nil
	}
	return s.close()
}

func getServer() (*server, error) {
	mu.Lock()
	defer mu.Unlock()
	if srv != nil || srvErr != nil {
		return srv, srvErr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		srv, srvErr = startExternal(ctx, u)
	} else {
		srv, srvErr = startLocal(ctx)
	}
	if srvErr != nil {
		srvErr = fmt.Errorf("testdb: %w", srvErr)
	} else {
		srv.applyConfig(cfg)
	}
	return srv, srvErr
}

// server is the cluster (or external server) of this test binary.
type server struct {
	baseURL  string // connection string for database "postgres" (or the external URL)
	prefix   string // database name prefix: "" locally, oml_test_<pid>_<rand>_ externally
	external bool
	admin    *pgxpool.Pool
	cfg      config
	local    *localCluster

	tmu       sync.Mutex
	templates map[string]*template
}

type template struct {
	name string
	hook Hook
	once sync.Once
	db   string
	err  error
}

func startExternal(ctx context.Context, u string) (*server, error) {
	admin, err := pgconn.Open(ctx, u, pgconn.Options{ApplicationName: "oml-testdb", MaxConns: 8})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvDatabaseURL, err)
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return &server{
		baseURL:  u,
		prefix:   fmt.Sprintf("oml_test_%d_%s_", os.Getpid(), hex.EncodeToString(b[:])),
		external: true,
		admin:    admin,
	}, nil
}

func (s *server) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var errs []error
	if s.external {
		errs = append(errs, s.dropOwnDatabases(ctx))
	}
	s.admin.Close()
	if s.local != nil {
		errs = append(errs, s.local.remove(ctx))
	}
	return errors.Join(errs...)
}

// dropOwnDatabases removes every database this binary created on an
// external server (templates included).
func (s *server) dropOwnDatabases(ctx context.Context) error {
	rows, err := s.admin.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", s.prefix)
	if err != nil {
		return fmt.Errorf("cannot list this run's databases: %w", err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("cannot list this run's databases: %w", err)
	}
	var errs []error
	for _, n := range names {
		id := pgx.Identifier{n}.Sanitize()
		_, _ = s.admin.Exec(ctx, "ALTER DATABASE "+id+" IS_TEMPLATE false")
		if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+id+" WITH (FORCE)"); err != nil {
			errs = append(errs, fmt.Errorf("cannot drop %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

// urlFor returns the connection string for database db, optionally as
// another role.
func (s *server) urlFor(db, user, password string) string {
	return withDatabase(s.baseURL, db, user, password)
}

// withDatabase rewrites a connection string (URL or keyword/value form) to
// name database db and, when user is set, that user and password.
func withDatabase(base, db, user, password string) string {
	if u, err := url.Parse(base); err == nil && (u.Scheme == "postgres" || u.Scheme == "postgresql") {
		u.Path = "/" + db
		u.RawPath = ""
		q := u.Query()
		q.Del("dbname")
		if user != "" {
			q.Del("user")
			q.Del("password")
			if password != "" {
				u.User = url.UserPassword(user, password)
			} else {
				u.User = url.User(user)
			}
		}
		// Keep the original query's spelling when nothing was removed, so a
		// socket path stays readable.
		if len(q) != len(u.Query()) {
			u.RawQuery = q.Encode()
		}
		return u.String()
	}
	kv := func(k, v string) string {
		return " " + k + "='" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
	}
	out := base + kv("dbname", db)
	if user != "" {
		out += kv("user", user) + kv("password", password)
	}
	return out
}

// template returns the database name of template name, building it on
// first use.
func (s *server) template(ctx context.Context, name string) (string, error) {
	s.tmu.Lock()
	tp := s.templates[name]
	s.tmu.Unlock()
	if tp == nil {
		known := make([]string, 0, len(s.templates))
		for n := range s.templates {
			known = append(known, n)
		}
		sort.Strings(known)
		return "", fmt.Errorf("no template named %q is registered (registered: %s); register it with testdb.WithNamedTemplate in TestMain", name, strings.Join(known, ", "))
	}
	tp.once.Do(func() {
		tp.db = s.prefix + "tmpl_" + sanitize(name, 40)
		tp.err = s.buildTemplate(ctx, tp)
	})
	return tp.db, tp.err
}

func (s *server) buildTemplate(ctx context.Context, tp *template) error {
	id := pgx.Identifier{tp.db}.Sanitize()
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+id); err != nil {
		return fmt.Errorf("cannot create template database %s: %w", tp.db, err)
	}
	conn, err := pgx.Connect(ctx, s.urlFor(tp.db, "", ""))
	if err != nil {
		return fmt.Errorf("cannot connect to template database %s: %w", tp.db, err)
	}
	herr := tp.hook(ctx, conn)
	cerr := conn.Close(ctx)
	if herr != nil {
		return fmt.Errorf("template %q: the hook failed: %w", tp.name, herr)
	}
	if cerr != nil {
		return fmt.Errorf("template %q: closing the hook's connection: %w", tp.name, cerr)
	}
	// No connection may be open to a template while it is cloned; refusing
	// new ones makes a stray connection fail loudly where it is made.
	if _, err := s.admin.Exec(ctx, "ALTER DATABASE "+id+" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("cannot mark %s as a template: %w", tp.db, err)
	}
	return nil
}

var nonIdent = regexp.MustCompile(`[^a-z0-9]+`)

// sanitize turns a test name into a lower-case identifier fragment.
func sanitize(s string, max int) string {
	s = strings.Trim(nonIdent.ReplaceAllString(strings.ToLower(s), "_"), "_")
	if len(s) > max {
		s = strings.TrimRight(s[:max], "_")
	}
	return s
}

// createDatabase clones template (or template1 when empty) into a new
// database named after the test.
func (s *server) createDatabase(ctx context.Context, testName, tmplDB string) (string, error) {
	n := counter.Add(1)
	name := fmt.Sprintf("%st%04d_%s", s.prefix, n, sanitize(testName, 40))
	if len(name) > 63 {
		name = name[:63]
	}
	q := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if tmplDB != "" {
		q += " TEMPLATE " + pgx.Identifier{tmplDB}.Sanitize()
	}
	q += " " + cloneStrategy
	if _, err := s.admin.Exec(ctx, q); err != nil {
		return "", fmt.Errorf("cannot create the test database %s: %w", name, err)
	}
	return name, nil
}

// cloneStrategy is appended to CREATE DATABASE; see docs/testing.md for
// the measurement that chose it.
var cloneStrategy = "STRATEGY FILE_COPY"

func (s *server) dropDatabase(ctx context.Context, name string) error {
	_, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
	return err
}

// DB is one test's private database.
type DB struct {
	// Name is the database name.
	Name string
	// URL connects to it as the superuser (the throwaway cluster's
	// "postgres" role, or OML_TEST_DATABASE_URL's role).
	URL string

	srv *server
}

// NewOption selects what New clones.
type NewOption func(*newConfig)

type newConfig struct {
	template string
	empty    bool
}

// Template makes New clone the named template (see WithNamedTemplate).
func Template(name string) NewOption { return func(c *newConfig) { c.template = name } }

// Empty makes New create an empty database even when a default template is
// registered.
func Empty() NewOption { return func(c *newConfig) { c.empty = true } }

// New creates a fresh database for t, cloned from the default template when
// one is registered (else empty). It fails the test on error.
func New(t testing.TB, opts ...NewOption) *DB {
	t.Helper()
	var nc newConfig
	for _, o := range opts {
		o(&nc)
	}
	s, err := getServer()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tmplName := nc.template
	if tmplName == "" && !nc.empty {
		s.tmu.Lock()
		if _, ok := s.templates[DefaultTemplate]; ok {
			tmplName = DefaultTemplate
		}
		s.tmu.Unlock()
	}
	var tmplDB string
	if tmplName != "" {
		if tmplDB, err = s.template(ctx, tmplName); err != nil {
			t.Fatal(err)
		}
	}
	name, err := s.createDatabase(ctx, t.Name(), tmplDB)
	if err != nil {
		t.Fatal(err)
	}
	s.tmu.Lock()
	drop := s.external || s.cfg.dropAfterTest
	s.tmu.Unlock()
	if drop {
		t.Cleanup(func() {
			if err := s.dropDatabase(context.Background(), name); err != nil {
				t.Errorf("testdb: cannot drop %s: %v", name, err)
			}
		})
	}
	return &DB{Name: name, URL: s.urlFor(name, "", ""), srv: s}
}

// ConnString connects to the same database as another role.
func (db *DB) ConnString(user, password string) string {
	return db.srv.urlFor(db.Name, user, password)
}

// Pool opens a pool on the database (as the superuser), closed when the
// test ends.
func (db *DB) Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	return OpenPool(t, db.URL)
}

// PoolSized is Pool with at most conns connections (Pool's is pgxpool's
// default, max(4, NumCPU)): a benchmark's application side, one
// connection per writer.
func (db *DB) PoolSized(t testing.TB, conns int32) *pgxpool.Pool {
	t.Helper()
	pool, err := pgconn.Open(context.Background(), db.URL, pgconn.Options{ApplicationName: "oml-test", MaxConns: conns})
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Conn opens one connection to the database, closed when the test ends.
func (db *DB) Conn(t testing.TB) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), db.URL)
	if err != nil {
		t.Fatalf("testdb: cannot connect to %s: %v", db.Name, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// OpenPool opens a pool on any connection string (for example
// db.ConnString("oml_app", "")), closed when the test ends.
func OpenPool(t testing.TB, connString string) *pgxpool.Pool {
	t.Helper()
	pool, err := pgconn.Open(context.Background(), connString, pgconn.Options{ApplicationName: "oml-test"})
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// Server is cluster-level access for tests that need more than their own
// database (a role, another database holding a transaction open).
type Server struct{ s *server }

// Cluster returns this binary's server, starting it if needed.
func Cluster(t testing.TB) *Server {
	t.Helper()
	s, err := getServer()
	if err != nil {
		t.Fatal(err)
	}
	return &Server{s: s}
}

// URL connects to database db as the superuser ("postgres" is always there).
func (c *Server) URL(db string) string { return c.s.urlFor(db, "", "") }

// ConnString connects to database db as user.
func (c *Server) ConnString(db, user, password string) string { return c.s.urlFor(db, user, password) }

// External reports whether the server came from OML_TEST_DATABASE_URL
// (shared: cluster-wide changes such as roles are visible to other runs).
func (c *Server) External() bool { return c.s.external }

// Dir is the throwaway cluster's directory; empty for an external server.
func (c *Server) Dir() string {
	if c.s.local == nil {
		return ""
	}
	return c.s.local.dir
}
