package schema

import (
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Advisory lock keys (the two-int4 form of pg_advisory_lock). Class
// AdvisoryLockClass is oml's; object ids under it are allocated here so that
// no two oml locks collide:
//
//	1  the migrator (session lock, held for a whole Migrate)
//
// The per-tenant chain lock uses its own class (see package chain).
const (
	AdvisoryLockClass   int32 = 0x6f6d6c00 // "oml\x00"
	AdvisoryLockMigrate int32 = 1
)

// Migration is one embedded schema step.
type Migration struct {
	Version  int    // NNN from the file name
	Name     string // the rest of the file name, without ".sql"
	SQL      string
	Checksum string // lowercase hex SHA-256 of SQL
}

// Applied is a migration as recorded in oml.schema_migrations.
type Applied struct {
	Version   int
	Name      string
	Checksum  string
	AppliedAt time.Time
}

// StatusEntry pairs an embedded migration with its applied record, if any.
type StatusEntry struct {
	Migration
	Applied   bool
	AppliedAt time.Time
}

var fileRE = regexp.MustCompile(`^(\d{3})_([a-z0-9_]+)\.sql$`)

var (
	all     []Migration
	loadErr error
)

func init() { all, loadErr = load(migrationFS) }

func load(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, "migrations")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, e := range entries {
		m := fileRE.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("schema: migration file %q is not named NNN_name.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		b, err := fs.ReadFile(fsys, path.Join("migrations", e.Name()))
		if err != nil {
			return nil, err
		}
		sum := sha256.Sum256(b)
		ms = append(ms, Migration{Version: v, Name: m[2], SQL: string(b), Checksum: hex.EncodeToString(sum[:])})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("schema: migrations must be numbered 001, 002, ... without gaps; found %03d_%s at position %d", m.Version, m.Name, i+1)
		}
	}
	return ms, nil
}

// All returns every embedded migration in version order.
func All() []Migration {
	if loadErr != nil {
		panic(loadErr) // a build defect, caught by the package's tests
	}
	out := make([]Migration, len(all))
	copy(out, all)
	return out
}

// Latest is the highest embedded version.
func Latest() int { return len(All()) }

const bootstrapSQL = `
CREATE SCHEMA IF NOT EXISTS oml;
CREATE TABLE IF NOT EXISTS oml.schema_migrations (
    version    integer     PRIMARY KEY,
    name       text        NOT NULL,
    checksum   text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)`

// Migrate applies every pending migration, in order, each in its own
// transaction together with its oml.schema_migrations row. It is a no-op
// when the schema is current. It refuses (and changes nothing) when an
// applied migration's checksum differs from the embedded one or when the
// database records a version this binary does not know.
//
// conn must not be inside a transaction.
func Migrate(ctx context.Context, conn *pgx.Conn) error {
	_, err := Apply(ctx, conn)
	return err
}

// Apply is Migrate that also reports which migrations it applied (none when
// the schema was already current).
func Apply(ctx context.Context, conn *pgx.Conn) (applied []Migration, err error) {
	ms := All()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1, $2)", AdvisoryLockClass, AdvisoryLockMigrate); err != nil {
		return nil, fmt.Errorf("take the migration lock: %w", err)
	}
	defer func() {
		// Unlock even when ctx was cancelled; if the connection is broken
		// the server drops the session lock anyway.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, uerr := conn.Exec(uctx, "SELECT pg_advisory_unlock($1, $2)", AdvisoryLockClass, AdvisoryLockMigrate); uerr != nil && err == nil {
			err = fmt.Errorf("release the migration lock: %w", uerr)
		}
	}()
	if _, err := conn.Exec(ctx, bootstrapSQL); err != nil {
		return nil, fmt.Errorf("create oml.schema_migrations: %w", err)
	}
	done, err := readApplied(ctx, conn)
	if err != nil {
		return nil, err
	}
	if err := check(ms, done); err != nil {
		return nil, err
	}
	for _, m := range ms {
		if _, ok := done[m.Version]; ok {
			continue
		}
		if err := apply(ctx, conn, m); err != nil {
			return applied, err
		}
		applied = append(applied, m)
	}
	return applied, nil
}

func apply(ctx context.Context, conn *pgx.Conn, m Migration) error {
	return pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return fmt.Errorf("apply migration %03d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx,
			"INSERT INTO oml.schema_migrations (version, name, checksum) VALUES ($1, $2, $3)",
			m.Version, m.Name, m.Checksum); err != nil {
			return fmt.Errorf("record migration %03d_%s: %w", m.Version, m.Name, err)
		}
		return nil
	})
}

// check compares the embedded migrations with what the database recorded.
func check(ms []Migration, done map[int]Applied) error {
	known := make(map[int]Migration, len(ms))
	for _, m := range ms {
		known[m.Version] = m
	}
	var versions []int
	for v := range done {
		versions = append(versions, v)
	}
	sort.Ints(versions)
	for _, v := range versions {
		a := done[v]
		m, ok := known[v]
		if !ok {
			return &AheadError{DatabaseVersion: versions[len(versions)-1], BinaryVersion: len(ms)}
		}
		if m.Checksum != a.Checksum {
			return fmt.Errorf("migration %03d_%s was applied with checksum %s but this binary embeds %s: released migrations must never change; use the oml release that applied it, or add a new migration instead", v, m.Name, short(a.Checksum), short(m.Checksum))
		}
	}
	return nil
}

func short(s string) string {
	if len(s) > 12 {
		return s[:12]
	}
	return s
}

// AheadError means the database was migrated by a newer oml.
type AheadError struct {
	DatabaseVersion int
	BinaryVersion   int
}

func (e *AheadError) Error() string {
	return fmt.Sprintf("the database schema is at version %d but this oml only knows up to %d: upgrade oml before using this database", e.DatabaseVersion, e.BinaryVersion)
}

func readApplied(ctx context.Context, q interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}) (map[int]Applied, error) {
	rows, err := q.Query(ctx, "SELECT version, name, checksum, applied_at FROM oml.schema_migrations ORDER BY version")
	if err != nil {
		return nil, fmt.Errorf("read oml.schema_migrations: %w", err)
	}
	out := map[int]Applied{}
	for rows.Next() {
		var a Applied
		if err := rows.Scan(&a.Version, &a.Name, &a.Checksum, &a.AppliedAt); err != nil {
			rows.Close()
			return nil, err
		}
		out[a.Version] = a
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read oml.schema_migrations: %w", err)
	}
	return out, nil
}

// Querier is what Status and Pending need: a pool, a connection or a tx.
type Querier interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
	QueryRow(context.Context, string, ...any) pgx.Row
}

// Status lists every embedded migration with whether it is applied. It
// takes no lock and changes nothing; it fails with *AheadError or a
// checksum error exactly when Migrate would refuse.
func Status(ctx context.Context, q Querier) ([]StatusEntry, error) {
	ms := All()
	var exists bool
	if err := q.QueryRow(ctx, "SELECT to_regclass('oml.schema_migrations') IS NOT NULL").Scan(&exists); err != nil {
		return nil, fmt.Errorf("read the schema version: %w", err)
	}
	done := map[int]Applied{}
	if exists {
		var err error
		if done, err = readApplied(ctx, q); err != nil {
			return nil, err
		}
	}
	out := make([]StatusEntry, 0, len(ms))
	for _, m := range ms {
		a, ok := done[m.Version]
		out = append(out, StatusEntry{Migration: m, Applied: ok, AppliedAt: a.AppliedAt})
	}
	if err := check(ms, done); err != nil {
		return out, err
	}
	return out, nil
}

// Pending returns the embedded migrations not yet applied (empty when the
// schema is current).
func Pending(ctx context.Context, q Querier) ([]Migration, error) {
	st, err := Status(ctx, q)
	if err != nil {
		return nil, err
	}
	var out []Migration
	for _, e := range st {
		if !e.Applied {
			out = append(out, e.Migration)
		}
	}
	return out, nil
}

// ErrNotMigrated is returned by RequireCurrent when migrations are pending.
var ErrNotMigrated = errors.New("the database schema is not current")

// RequireCurrent fails unless every embedded migration is applied, with a
// message telling the operator to run oml migrate.
func RequireCurrent(ctx context.Context, q Querier) error {
	p, err := Pending(ctx, q)
	if err != nil {
		return err
	}
	if len(p) > 0 && len(p) == len(All()) {
		// Nothing applied: a fresh database wants the whole setup, schema
		// and deployment genesis, which is oml init (migrate alone would
		// leave every journal writer asking for init next).
		return fmt.Errorf("%w: the database has no oml schema yet; run `oml init` first (schema and deployment genesis)", ErrNotMigrated)
	}
	if len(p) > 0 {
		return fmt.Errorf("%w: %d migration(s) pending (first %03d_%s); run `oml migrate` first", ErrNotMigrated, len(p), p[0].Version, p[0].Name)
	}
	return nil
}
