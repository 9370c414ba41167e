package testdb_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/omlhq/oml/internal/testdb"
)

// benchSchema approximates a migrated oml schema: 30 tables with a few
// indexes each, so the clone copies a realistic number of files.
func benchSchema(ctx context.Context, conn *pgx.Conn) error {
	var b strings.Builder
	for i := range 30 {
		fmt.Fprintf(&b, "CREATE TABLE t%d (id bigint PRIMARY KEY, tenant uuid NOT NULL, body bytea, at timestamptz DEFAULT now());", i)
		fmt.Fprintf(&b, "CREATE INDEX ON t%d (tenant, at);", i)
	}
	_, err := conn.Exec(ctx, b.String())
	return err
}

func init() {
	testdb.Configure(testdb.WithNamedTemplate("bench", benchSchema))
}

// BenchmarkNew measures one test's database: clone of a 30-table template
// by each CREATE DATABASE strategy, with and without the DROP at test end.
//
//	go test -run '^$' -bench BenchmarkNew -benchtime 50x ./internal/testdb/
func BenchmarkNew(b *testing.B) {
	for _, strategy := range []string{"STRATEGY FILE_COPY", "STRATEGY WAL_LOG"} {
		for _, drop := range []bool{false, true} {
			name := fmt.Sprintf("%s/drop=%v", strings.TrimPrefix(strategy, "STRATEGY "), drop)
			b.Run(name, func(b *testing.B) {
				restore := testdb.SetCloneStrategy(strategy)
				defer restore()
				testdb.New(b, testdb.Template("bench")) // build the template outside the timing
				srv := testdb.Cluster(b)
				admin, err := pgx.Connect(context.Background(), srv.URL("postgres"))
				if err != nil {
					b.Fatal(err)
				}
				defer admin.Close(context.Background())
				b.ResetTimer()
				for range b.N {
					db := testdb.New(b, testdb.Template("bench"))
					if drop {
						if _, err := admin.Exec(context.Background(), "DROP DATABASE "+pgx.Identifier{db.Name}.Sanitize()); err != nil {
							b.Fatal(err)
						}
					}
				}
			})
		}
	}
}
