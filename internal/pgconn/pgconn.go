// Package pgconn opens oml's PostgreSQL connection pools with the settings
// every oml process wants (application name, timeouts) and turns connection
// failures into one-sentence errors that never echo a password.
package pgconn

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Options tune a pool. Zero values take the defaults.
type Options struct {
	// ApplicationName is shown in pg_stat_activity; default "oml".
	ApplicationName string
	// MaxConns caps the pool; default pgxpool's (max(4, NumCPU)).
	MaxConns int32
	// ConnectTimeout bounds each dial; default 10s.
	ConnectTimeout time.Duration
}

// ParseConfig parses a connection string and applies oml's defaults for
// anything the URL does not set itself.
func ParseConfig(dsn string, opts Options) (*pgxpool.Config, error) {
	if strings.TrimSpace(dsn) == "" {
		return nil, errors.New("no database URL given: pass --database-url or set OML_DATABASE_URL (for a local one, run `oml dev up` and `eval \"$(oml dev env)\"`)")
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("the database URL %s is malformed: %s", Redact(dsn), redactErr(err, dsn))
	}
	name := opts.ApplicationName
	if name == "" {
		name = "oml"
	}
	rp := cfg.ConnConfig.RuntimeParams
	if _, ok := rp["application_name"]; !ok {
		rp["application_name"] = name
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = opts.ConnectTimeout
		if cfg.ConnConfig.ConnectTimeout == 0 {
			cfg.ConnConfig.ConnectTimeout = 10 * time.Second
		}
	}
	if opts.MaxConns > 0 {
		cfg.MaxConns = opts.MaxConns
	}
	return cfg, nil
}

// Open parses dsn, opens a pool and proves it can reach the server.
func Open(ctx context.Context, dsn string, opts Options) (*pgxpool.Pool, error) {
	cfg, err := ParseConfig(dsn, opts)
	if err != nil {
		return nil, err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot open a connection pool to %s: %s", Redact(dsn), redactErr(err, dsn))
	}
	pctx, cancel := context.WithTimeout(ctx, cfg.ConnConfig.ConnectTimeout+time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("cannot reach the database at %s: %s; check that PostgreSQL is running and the URL is right", Redact(dsn), describe(err, dsn))
	}
	return pool, nil
}

// Connect opens a single connection (for migrations and tools that want one).
func Connect(ctx context.Context, dsn string, opts Options) (*pgx.Conn, error) {
	cfg, err := ParseConfig(dsn, opts)
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg.ConnConfig)
	if err != nil {
		return nil, fmt.Errorf("cannot reach the database at %s: %s; check that PostgreSQL is running and the URL is right", Redact(dsn), describe(err, dsn))
	}
	return conn, nil
}

func describe(err error, dsn string) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fmt.Sprintf("%s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
	}
	return redactErr(err, dsn)
}

// oneLine folds pgx's multi-line connect errors (one line per address
// tried, often repeated) into one line without duplicates.
func oneLine(msg string) string {
	var parts []string
	seen := map[string]bool{}
	for _, p := range strings.Split(msg, "\n") {
		p = strings.TrimSpace(p)
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		parts = append(parts, p)
	}
	return strings.Join(parts, " ")
}
