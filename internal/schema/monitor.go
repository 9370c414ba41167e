package schema

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// The lake writer reads pg_stat_replication to cover only WAL the standbys
// flushed (--durable-on). PostgreSQL shows a walsender's positions only to
// superusers and members of pg_read_all_stats (pg_monitor includes it);
// anyone else reads NULL. A migration cannot grant that: granting a
// predefined role needs a superuser or ADMIN OPTION on it (CREATEROLE
// before PostgreSQL 16), which the schema owner usually lacks, and the
// grant is cluster-wide, not part of the database. So `oml init` grants it
// when the connecting role may (GrantMonitor), and otherwise prints the
// statement an administrator must run (MonitorGrantSQL).

// LakeWriterRole is the lake writer's job role (migration 004).
const LakeWriterRole = "oml_lakewriter"

// MonitorGrantSQL is the statement that lets the lake writer role read the
// standbys' positions: the one home of the sentence oml prints.
const MonitorGrantSQL = "GRANT pg_monitor TO " + LakeWriterRole + ";"

// MonitorGrant is what GrantMonitor did.
type MonitorGrant string

const (
	MonitorGranted    MonitorGrant = "granted"     // this call granted it
	MonitorAlready    MonitorGrant = "already"     // the role could already read them
	MonitorNeedsAdmin MonitorGrant = "needs-admin" // the connecting role may not grant it: run MonitorGrantSQL as an administrator
)

// LakeWriterReadsStandbys reports whether the lake writer role can read the
// standbys' positions in pg_stat_replication (it holds pg_read_all_stats,
// directly or through pg_monitor, or is a superuser). False when the role
// does not exist.
func LakeWriterReadsStandbys(ctx context.Context, q Querier) (bool, error) {
	var ok bool
	err := q.QueryRow(ctx, `SELECT coalesce((SELECT rolsuper OR pg_has_role(oid, 'pg_read_all_stats', 'USAGE')
	                                          FROM pg_roles WHERE rolname = $1), false)`, LakeWriterRole).Scan(&ok)
	if err != nil {
		return false, fmt.Errorf("check whether %s can read pg_stat_replication: %w", LakeWriterRole, err)
	}
	return ok, nil
}

// GrantMonitor grants pg_monitor to the lake writer role when it cannot
// read the standbys' positions yet and the connecting role may grant it. A
// refusal for lack of privilege is MonitorNeedsAdmin, not an error.
func GrantMonitor(ctx context.Context, conn *pgx.Conn) (MonitorGrant, error) {
	ok, err := LakeWriterReadsStandbys(ctx, conn)
	if err != nil {
		return "", err
	}
	if ok {
		return MonitorAlready, nil
	}
	// In a transaction of its own, so a refusal leaves the session usable.
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, MonitorGrantSQL)
		return err
	})
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" { // insufficient_privilege
		return MonitorNeedsAdmin, nil
	}
	if errors.As(err, &pe) && pe.Code == "23505" { // unique_violation
		// A role membership is the cluster's, not the database's: another
		// session (an `oml init` of another database of the same cluster)
		// granted it between our check and our GRANT, and ours then
		// collided with its row of pg_auth_members. The grant is there
		// when the check says so; anything else is still an error.
		if ok, cerr := LakeWriterReadsStandbys(ctx, conn); cerr == nil && ok {
			return MonitorAlready, nil
		}
	}
	if err != nil {
		return "", fmt.Errorf("grant pg_monitor to %s: %w", LakeWriterRole, err)
	}
	return MonitorGranted, nil
}
