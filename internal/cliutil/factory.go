package cliutil

import (
	"context"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/pgconn"
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
// touches the database never needs a database URL.
type Factory struct {
	IO     *iostreams.IOStreams
	Flags  GlobalFlags
	Getenv func(string) string

	poolOnce sync.Once
	pool     *pgxpool.Pool
	poolErr  error
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

// DB returns the shared pool, opening it on first use. Failures are
// ConfigErrors (exit 2) with a one-sentence message.
func (f *Factory) DB(ctx context.Context) (*pgxpool.Pool, error) {
	f.poolOnce.Do(func() {
		f.pool, f.poolErr = pgconn.Open(ctx, f.DatabaseURL(), pgconn.Options{})
		if f.poolErr != nil {
			f.poolErr = AsConfigError(f.poolErr)
		}
	})
	return f.pool, f.poolErr
}

// closeWait bounds how long Close waits for connections still in use.
const closeWait = 5 * time.Second

// Close releases what the factory opened. pgxpool's Close waits until every
// acquired connection is returned; a goroutine still holding one (a check
// abandoned at quit, say) must not keep the process from exiting, so Close
// gives up waiting after a few seconds (the process exit then closes the
// sockets).
func (f *Factory) Close() {
	if f.pool == nil {
		return
	}
	done := make(chan struct{})
	go func() {
		f.pool.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeWait):
	}
}
