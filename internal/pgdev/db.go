package pgdev

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// EnsureDatabase creates database name (owned by the superuser) unless it
// exists. It reports whether it created it.
func (c *Cluster) EnsureDatabase(ctx context.Context, name string) (bool, error) {
	return EnsureDatabase(ctx, c.URL("postgres"), name)
}

// EnsureDatabase is Cluster.EnsureDatabase for a server known by a
// connection string to an existing database (use the postmaster.pid's
// socket and port for a running cluster: they may differ from a fresh
// Config's).
func EnsureDatabase(ctx context.Context, adminURL, name string) (bool, error) {
	conn, err := pgx.Connect(ctx, adminURL)
	if err != nil {
		return false, fmt.Errorf("cannot connect to the cluster: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).Scan(&exists); err != nil {
		return false, fmt.Errorf("cannot list databases: %w", err)
	}
	if exists {
		return false, nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return false, fmt.Errorf("cannot create database %q: %w", name, err)
	}
	return true, nil
}
