package lakewriter_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/lake/tables"

	"github.com/omlhq/oml/internal/cli"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lake/delta"
	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/testkit"
	"github.com/omlhq/oml/internal/workload"
)

// newestCommit returns the key and bytes of a table's newest commit file.
func newestCommit(t *testing.T, lake store.Store, table string) (string, []byte) {
	t.Helper()
	ctx := context.Background()
	objs, err := lake.List(ctx, table+"/"+delta.LogDir, "")
	require.NoError(t, err)
	var key string
	for _, o := range objs {
		if strings.HasSuffix(o.Key, ".json") && !strings.HasSuffix(o.Key, "_last_checkpoint") {
			key = o.Key
		}
	}
	require.NotEmpty(t, key, "table %s has no commit", table)
	b, err := lake.Get(ctx, key)
	require.NoError(t, err)
	return key, b
}

func (b *bundle) doctorDelta(t *testing.T, lake store.Store) doctor.Result {
	t.Helper()
	rep := doctor.Run(context.Background(), doctor.Options{
		DB:   func(context.Context) (*pgxpool.Pool, error) { return b.pool, nil },
		Lake: func(context.Context) (store.Store, error) { return lake, nil },
	})
	for _, r := range rep.Checks {
		if r.ID == doctor.IDDelta {
			return r
		}
	}
	t.Fatal("doctor ran no Delta check")
	return doctor.Result{}
}

// TestFaults_CorruptCommitInOneTable_HeldOthersDrainDoctorFails: one
// tenant's bronze table gets a garbage commit file. That is the table's
// fault, not an outage: --once ends, that table is held and named (the
// summary, the hold record, doctor's Delta check fails naming it), every
// other table drains; once the file is repaired, the next drain releases the
// table and catches it up, and the lake is exact.
func TestFaults_CorruptCommitInOneTable_HeldOthersDrainDoctorFails(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 3)
	b.load(t, workload.Config{Claims: 10, Seed: 81})
	lake := testkit.FileLake(t)
	b.drainInto(t, lake)

	victim := tables.TableKey{Tenant: b.tenants[0], Kind: tables.Bronze}
	key, good := newestCommit(t, lake, victim.Path())
	require.NoError(t, lake.Put(ctx, key, strings.NewReader("{this is not a Delta commit"), 27))
	b.load(t, workload.Config{Claims: 10, Seed: 82})

	o := b.opts(lake)
	o.MaxOutage = 5 * time.Second // were the fault taken for an outage, fail soon
	d2, err := lakewriter.New(o)
	require.NoError(t, err)
	sum, err := d2.DrainOnce(ctx)
	require.NoError(t, err, "a corrupt table is no outage: --once ends")
	require.Len(t, sum.HeldTables, 1)
	require.Equal(t, victim.Path(), sum.HeldTables[0].Table)
	require.Contains(t, sum.HeldTables[0].Reason, "corrupt Delta log")
	b.drainAll(t, d2)
	for _, tn := range b.tenants[1:] {
		var events int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM oml.journal WHERE tenant_id = $1`, tn).Scan(&events))
		require.Len(t, readBronze(t, lake, tn), events, "the other tenants drain")
	}
	holds, err := lakewriter.ReadHolds(ctx, lake)
	require.NoError(t, err)
	require.Len(t, holds, 1)
	res := b.doctorDelta(t, lake)
	require.Equal(t, doctor.StatusFail, res.Status)
	require.Contains(t, strings.Join(res.Details, "\n"), victim.Path(), "doctor names the held table")

	// Repair the file: the next drain releases the table and catches it up.
	require.NoError(t, lake.Put(ctx, key, strings.NewReader(string(good)), int64(len(good))))
	d3, err := lakewriter.New(b.opts(lake))
	require.NoError(t, err)
	b.drainAll(t, d3)
	require.Empty(t, d3.HeldTables())
	holds, err = lakewriter.ReadHolds(ctx, lake)
	require.NoError(t, err)
	require.Empty(t, holds, "the hold record is removed with the hold")
	b.verifyLake(t, lake)
}

// TestFaults_OutageLongerThanMaxOutage_DrainOnceEnds: every store operation
// fails as an outage would; DrainOnce gives up after MaxOutage with an
// *OutageError naming the step it waited for, instead of retrying for ever.
func TestFaults_OutageLongerThanMaxOutage_DrainOnceEnds(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.load(t, workload.Config{Claims: 5, Seed: 83})
	down := store.NewFaulty(store.NewMem(), store.Rule{Kind: store.FaultError, Err: errors.New("connection refused (injected outage)")})
	o := b.opts(down)
	o.MaxOutage = 200 * time.Millisecond
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	_, err = d.DrainOnce(context.Background())
	var oe *lakewriter.OutageError
	require.ErrorAs(t, err, &oe)
	require.Equal(t, "recover", oe.Step)
	require.GreaterOrEqual(t, oe.Waited, o.MaxOutage)
	require.Contains(t, err.Error(), "injected outage")
}

// drainCLI runs `oml lake drain --once ...` in process against the bundle's
// database with lake URL lakeURL.
func (b *bundle) drainCLI(t *testing.T, lakeURL string, args ...string) (cliutil.ExitCode, string, string) {
	t.Helper()
	keyFile := filepath.Join(t.TempDir(), "deploy.key")
	require.NoError(t, writeKey(keyFile, b))
	env := map[string]string{cliutil.EnvDatabaseURL: b.DB.URL, cliutil.EnvLakeURL: lakeURL, cliutil.EnvSigningKeyFile: keyFile}
	io, _, out, errOut := iostreams.Test()
	code := cli.Run(context.Background(), io, append([]string{"lake", "drain", "--once", "--log-level", "error"}, args...),
		func(k string) string { return env[k] })
	return code, out.String(), errOut.String()
}

// TestDrainCLI_BadS3Credentials_Exit2OneSentence: credentials the real S3
// server refuses are a configuration error: `oml lake drain --once` exits 2
// at once with one sentence naming the refusal, and never prints a secret.
// (Not parallel: the AWS settings come from the process environment.)
func TestDrainCLI_BadS3Credentials_Exit2OneSentence(t *testing.T) {
	b := setup(t, 1)
	b.load(t, workload.Config{Claims: 3, Seed: 84})
	bucket := s3test.NewBucket(t, nil)
	srv := bucket.Server
	for _, tc := range []struct {
		name, key, secret, want string
	}{
		{"wrong secret", srv.AccessKey, "not-the-secret-0123456789", "the server rejected the request signature (SignatureDoesNotMatch)"},
		{"unknown key", "AKIANOSUCHKEY0000000", "not-the-secret-0123456789", "the server does not know the access key id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, kv := range srv.Env() {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v)
			}
			t.Setenv("AWS_ACCESS_KEY_ID", tc.key)
			t.Setenv("AWS_SECRET_ACCESS_KEY", tc.secret)
			started := time.Now()
			code, out, errOut := b.drainCLI(t, bucket.URL("lake"))
			require.Equal(t, cliutil.ExitUsage, code, "stdout %q, stderr %q", out, errOut)
			lines := strings.Split(strings.TrimSpace(errOut), "\n")
			require.Len(t, lines, 1, "one sentence: %q", errOut)
			require.Contains(t, lines[0], tc.want)
			require.NotContains(t, errOut, tc.secret)
			require.Less(t, time.Since(started), time.Minute, "a configuration error is not retried as an outage")
		})
	}
}

// TestDrainCLI_OutageLongerThanMaxOutage_Exit1: an S3 endpoint that refuses
// every connection is an outage; `oml lake drain --once --max-outage 1s`
// exits 1 saying what it waited for.
func TestDrainCLI_OutageLongerThanMaxOutage_Exit1(t *testing.T) {
	b := setup(t, 1)
	b.load(t, workload.Config{Claims: 3, Seed: 85})
	t.Setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9") // discard: nothing listens
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIAOUTAGE0000000000")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "outage-secret")
	t.Setenv("AWS_REGION", s3test.Region)
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_MAX_ATTEMPTS", "1") // one attempt per request: the outage is the writer's to wait out
	code, out, errOut := b.drainCLI(t, "s3://oml-outage/lake", "--max-outage", "1s")
	require.Equal(t, cliutil.ExitFindings, code, "stdout %q, stderr %q", out, errOut)
	require.Contains(t, errOut, "gave up after waiting")
	require.Contains(t, errOut, "recover step")
	require.NotContains(t, errOut, "outage-secret")
}

// TestFaults_MissingSilverDataFile_TableHeldDoctorNamesIt: a data file of
// one tenant's silver table disappears, so the MERGE of a retract cannot
// read it. That is the table's fault (its log is fine, so only the hold
// record tells doctor): the table is held and named, the other tenants
// drain, and nothing is retried as an outage.
func TestFaults_MissingSilverDataFile_TableHeldDoctorNamesIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setup(t, 2)
	b.load(t, workload.Config{Claims: 10, Seed: 86, PromoteRatio: 0.9, RetractRatio: 0.01})
	lake := store.NewMem()
	b.drainInto(t, lake)

	victim := tables.TableKey{Tenant: b.tenants[0], Kind: tables.Silver}
	objs, err := lake.List(ctx, victim.Path()+"/", "")
	require.NoError(t, err)
	for _, o := range objs {
		if strings.HasSuffix(o.Key, ".parquet") && !strings.Contains(o.Key, delta.LogDir) {
			require.NoError(t, lake.Delete(ctx, o.Key))
		}
	}
	var art string
	var ver int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT artifact_id, version FROM oml.claims WHERE tenant_id = $1 AND state = 'promoted' LIMIT 1`,
		victim.Tenant).Scan(&art, &ver))
	_, err = chain.Append(ctx, b.pool, b.key, victim.Tenant, journal.MustNew(journal.ClaimDemoted{ArtifactID: art, Version: ver, By: "carol"}))
	require.NoError(t, err)
	b.load(t, workload.Config{Tenants: b.tenants[1:], Claims: 5, Seed: 87})

	o := b.opts(lake)
	o.MaxOutage = 5 * time.Second
	d2, err := lakewriter.New(o)
	require.NoError(t, err)
	sum, err := d2.DrainOnce(ctx)
	require.NoError(t, err)
	require.Len(t, sum.HeldTables, 1)
	require.Equal(t, victim.Path(), sum.HeldTables[0].Table)
	require.Contains(t, sum.HeldTables[0].Reason, "object not found")
	require.Equal(t, b.lastSeq(t), d2.Frontier(), "the other tables drained; the frontier moved on")
	other := b.tenants[1]
	var events int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM oml.journal WHERE tenant_id = $1`, other).Scan(&events))
	require.Len(t, readBronze(t, lake, other), events)
	res := b.doctorDelta(t, lake)
	require.Equal(t, doctor.StatusFail, res.Status)
	require.Contains(t, strings.Join(res.Details, "\n"), victim.Path()+": held by the lake writer")
}

// TestFaults_ConfigErrorInLoop_ReportedAndBackedOff: the long-running loop
// does not exit on a configuration error (an operator fixes it while the
// service runs): it reports it, counts it, backs off, and stops cleanly.
func TestFaults_ConfigErrorInLoop_ReportedAndBackedOff(t *testing.T) {
	t.Parallel()
	b := setup(t, 1)
	b.load(t, workload.Config{Claims: 3, Seed: 88})
	refused := store.NewFaulty(store.NewMem(), store.Rule{Kind: store.FaultError,
		Err: &store.ConfigError{Store: "s3://x", Problem: "the server refused access (AccessDenied): check the credentials", Err: errors.New("403")}})
	o := b.opts(refused)
	reg := prometheus.NewRegistry()
	o.Metrics = lakewriter.NewMetrics(reg)
	d, err := lakewriter.New(o)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	require.Eventually(t, func() bool {
		return testutil.ToFloat64(o.Metrics.Retries.WithLabelValues("config")) >= 3
	}, 30*time.Second, 5*time.Millisecond, "the loop keeps retrying a configuration error")
	select {
	case err := <-done:
		t.Fatalf("the loop exited on a configuration error: %v", err)
	default:
	}
	cancel()
	require.NoError(t, <-done, "it stops cleanly")
}
