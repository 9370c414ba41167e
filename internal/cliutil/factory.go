package cliutil

import (
	"context"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/pgconn"
	"github.com/omlhq/oml/internal/schema"
	"github.com/omlhq/oml/internal/tenant"
)

// Environment variable names (the brief's contract).
const (
	EnvDatabaseURL    = "OML_DATABASE_URL"
	EnvLakeURL        = "OML_LAKE_URL"
	EnvSigningKeyFile = "OML_SIGNING_KEY_FILE"
)

// GlobalFlags are the values of the persistent flags on the root command.
// An empty value means "not given on the command line"; the environment
// fills it in (flags win over environment).
type GlobalFlags struct {
	DatabaseURL string
	Lake        string
	SigningKey  string
	Output      string
}

// Factory hands commands their dependencies lazily, so a command that never
// touches the database never needs a database URL: DB and CurrentDB (the
// pool, with or without the schema check), Lake and OptionalLake (the lake
// root), SigningKey and Signer (the deployment key), Tenant (a --tenant
// value). A failed open is not remembered: the next call tries again, so
// the doctor's live view retries a database or lake that was down and
// reuses one that is up.
type Factory struct {
	IO     *iostreams.IOStreams
	Flags  GlobalFlags
	Getenv func(string) string

	// PoolOptions configure the pool DB opens (application name, size,
	// connect timeout); a command that needs others sets them before its
	// first DB call (doctor names itself and bounds its connects).
	PoolOptions pgconn.Options

	mu      sync.Mutex
	pool    *pgxpool.Pool
	lake    store.Store
	lakeFor string // the URL lake was opened from
}

// New returns a Factory over the process's streams and environment.
func New(io *iostreams.IOStreams) *Factory {
	return &Factory{IO: io, Getenv: os.Getenv}
}

func (f *Factory) resolve(flag, env string) string {
	if flag != "" {
		return flag
	}
	if f.Getenv == nil {
		return ""
	}
	return f.Getenv(env)
}

// DatabaseURL is --database-url, else $OML_DATABASE_URL.
func (f *Factory) DatabaseURL() string { return f.resolve(f.Flags.DatabaseURL, EnvDatabaseURL) }

// LakeURL is --lake, else $OML_LAKE_URL.
func (f *Factory) LakeURL() string { return f.resolve(f.Flags.Lake, EnvLakeURL) }

// SigningKeyPath is --signing-key, else $OML_SIGNING_KEY_FILE.
func (f *Factory) SigningKeyPath() string { return f.resolve(f.Flags.SigningKey, EnvSigningKeyFile) }

// SigningKey loads the deployment key from --signing-key or
// OML_SIGNING_KEY_FILE: the one place commands that sign or journal load
// it. missing is the sentence to fail with when no key is configured (it
// names what the key is needed for); empty keeps keys.LoadFile's own. Every
// failure is a ConfigError (exit 2).
func (f *Factory) SigningKey(missing string) (*keys.Key, error) {
	p := f.SigningKeyPath()
	if p == "" && missing != "" {
		return nil, ConfigErrorf("%s", missing)
	}
	k, err := keys.LoadFile(p)
	if err != nil {
		return nil, AsConfigError(err)
	}
	return k, nil
}

// Format is the validated -o value; when -o is not given it is "table".
func (f *Factory) Format() (Format, error) { return ParseFormat(f.Flags.Output) }

// DB returns the shared pool, opening it on first use (a failed open is
// tried again on the next call). Failures are ConfigErrors (exit 2) with a
// one-sentence message.
func (f *Factory) DB(ctx context.Context) (*pgxpool.Pool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.pool != nil {
		return f.pool, nil
	}
	p, err := pgconn.Open(ctx, f.DatabaseURL(), f.PoolOptions)
	if err != nil {
		return nil, AsConfigError(err)
	}
	f.pool = p
	return p, nil
}

// CurrentDB is DB for commands that read or write oml's tables: it also
// checks the schema is migrated and current, so before `oml migrate` or
// `oml init` the operator is told which to run, not a SQLSTATE. The one
// place the schema check is made.
func (f *Factory) CurrentDB(ctx context.Context) (*pgxpool.Pool, error) {
	pool, err := f.DB(ctx)
	if err != nil {
		return nil, err
	}
	if err := schema.RequireCurrent(ctx, pool); err != nil {
		return nil, AsConfigError(err)
	}
	return pool, nil
}

// NoLake is Lake's sentence when no lake is configured and the command
// gives none of its own.
const NoLake = "no lake configured: pass --lake file:///abs/path or s3://bucket/prefix, or set OML_LAKE_URL"

// Lake opens the lake root from --lake or OML_LAKE_URL, for commands that
// cannot run without it. missing is the sentence to fail with when no lake
// is configured (it says what the lake is needed for); empty is NoLake.
// Every failure is a ConfigError (exit 2).
func (f *Factory) Lake(ctx context.Context, missing string) (store.Store, error) {
	if f.LakeURL() == "" {
		if missing == "" {
			missing = NoLake
		}
		return nil, ConfigErrorf("%s", missing)
	}
	return f.OptionalLake(ctx)
}

// OptionalLake opens the lake root, or returns nil (and no error) when no
// lake is configured: for commands that do more with a lake and still run
// without one. The store is opened once and shared; a failed open is tried
// again on the next call. A bad URL is a ConfigError (exit 2).
func (f *Factory) OptionalLake(ctx context.Context) (store.Store, error) {
	u := f.LakeURL()
	if u == "" {
		return nil, nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.lake != nil && f.lakeFor == u {
		return f.lake, nil
	}
	st, err := store.Open(ctx, u)
	if err != nil {
		return nil, AsConfigError(err)
	}
	f.lake, f.lakeFor = st, u
	return st, nil
}

// Signer is the deployment key for a long-running command (the lake
// writer): it re-reads the key file when it changes, so a rotated key (oml
// key rotate) is picked up without a restart. Nil, and no error, when no
// key is configured; the command decides what it can do without one.
func (f *Factory) Signer() (*keys.Reloading, error) {
	p := f.SigningKeyPath()
	if p == "" {
		return nil, nil
	}
	k, err := keys.OpenReloading(p, 0)
	if err != nil {
		return nil, AsConfigError(err)
	}
	return k, nil
}

// closeWait bounds how long Close waits for connections still in use.
const closeWait = 5 * time.Second

// Close releases what the factory opened. pgxpool's Close waits until every
// acquired connection is returned; a goroutine still holding one (a check
// abandoned at quit, say) must not keep the process from exiting, so Close
// gives up waiting after a few seconds (the process exit then closes the
// sockets).
func (f *Factory) Close() {
	f.mu.Lock()
	pool := f.pool
	f.pool = nil
	f.mu.Unlock()
	if pool == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		pool.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeWait):
	}
}

// Tenant resolves a --tenant value (a name, an id, or the provider's name)
// to the tenant, the one way commands do. An unknown tenant is a usage
// error naming the flag (exit 2); a database that cannot answer is a
// ConfigError (exit 2).
func (f *Factory) Tenant(ctx context.Context, nameOrID string) (tenant.Tenant, error) {
	pool, err := f.DB(ctx)
	if err != nil {
		return tenant.Tenant{}, err
	}
	t, err := tenant.Resolve(ctx, pool, nameOrID)
	if errors.Is(err, tenant.ErrUnknown) {
		return tenant.Tenant{}, FlagErrorf("--tenant: %v", err)
	}
	if err != nil {
		return tenant.Tenant{}, AsConfigError(err)
	}
	return t, nil
}

// Query is a command's read over the current database, as an Options
// function: it opens the pool (CurrentDB: the schema check) and runs read
// on it; read's errors are ConfigErrors (exit 2), as a failed query is a
// database that cannot answer.
func Query[T any](f *Factory, read func(ctx context.Context, pool *pgxpool.Pool) (T, error)) func(context.Context) (T, error) {
	return func(ctx context.Context) (T, error) {
		pool, err := f.CurrentDB(ctx)
		if err != nil {
			var zero T
			return zero, err
		}
		v, err := read(ctx, pool)
		if err != nil {
			return v, AsConfigError(err)
		}
		return v, nil
	}
}
