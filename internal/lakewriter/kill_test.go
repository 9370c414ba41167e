package lakewriter_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/omlhq/oml/internal/lake/s3test"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/testdb"
	"github.com/omlhq/oml/internal/workload"
)

var (
	omlBinOnce sync.Once
	omlBin     string
	omlBinErr  error
)

// buildOML builds the real oml binary once per test binary.
func buildOML(t *testing.T) string {
	t.Helper()
	omlBinOnce.Do(func() {
		dir, err := os.MkdirTemp("", "oml-killtest-bin-")
		if err != nil {
			omlBinErr = err
			return
		}
		omlBin = filepath.Join(dir, "oml")
		out, err := exec.Command("go", "build", "-o", omlBin, "github.com/omlhq/oml/cmd/oml").CombinedOutput()
		if err != nil {
			omlBinErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	require.NoError(t, omlBinErr)
	return omlBin
}

// TestKill9_RealProcess kills a real `oml lake drain` process with SIGKILL
// at random moments while the workload keeps writing, then three times
// mid-batch on purpose (every table of a batch committed, the frontier
// update not yet done: the kill is aimed by locking the frontier cache),
// restarts it each time, and finally checks the CLI's own last pass and
// the lake against the journal fold: exactly once, on the local store and
// on a real S3 server.
func TestKill9_RealProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills the real binary")
	}
	t.Parallel()
	for _, backend := range []string{"file", "s3"} {
		for _, seed := range seeds(t)[:1] {
			t.Run(fmt.Sprintf("%s/seed=%d", backend, seed), func(t *testing.T) {
				t.Parallel()
				t.Logf("replay with: go test ./internal/lakewriter -run 'TestKill9_RealProcess' -seed %d", seed)
				bin := buildOML(t)
				rng := rand.New(rand.NewPCG(seed, 3))
				db := testdb.New(t)
				b := setupOn(t, db, 3)

				var lake store.Store
				var lakeURL string
				env := os.Environ()
				switch backend {
				case "file":
					dir := t.TempDir()
					lakeURL = "file://" + dir
					st, err := store.Open(context.Background(), lakeURL)
					require.NoError(t, err)
					lake = st
				case "s3":
					bucket := s3test.NewBucket(t, nil)
					lakeURL = bucket.URL("lake")
					lake = store.MustSub(bucket.Store, "lake")
					env = append(env, bucket.Env()...)
				}
				keyFile := filepath.Join(t.TempDir(), "deploy.key")
				require.NoError(t, writeKey(keyFile, b))
				env = append(env, "OML_DATABASE_URL="+db.URL, "OML_LAKE_URL="+lakeURL, "OML_SIGNING_KEY_FILE="+keyFile)

				// Keep writing while the writer is killed and restarted.
				ctx, stopLoad := context.WithCancel(context.Background())
				loadDone := make(chan error, 1)
				go func() {
					_, err := workload.Run(ctx, b.pool, b.key, workload.Config{Tenants: b.tenants, Claims: 8, Seed: seed,
						PromoteRatio: 0.7, RetractRatio: 0.4, FollowUpRatio: 0.5, Duration: 3 * time.Second, Concurrency: 3})
					loadDone <- err
				}()

				start := func(round int) (*exec.Cmd, *bytes.Buffer) {
					// Let the killed writer's lease expire first, so the new
					// process is killed while it works, not while it waits.
					if le, err := lakewriter.ReadLease(context.Background(), b.pool); err == nil && le != nil {
						time.Sleep(time.Until(le.ExpiresAt) + 50*time.Millisecond)
					}
					var stderr bytes.Buffer
					cmd := exec.Command(bin, "lake", "drain", "--lease-ttl", "1s", "--batch-rows", fmt.Sprint(5+rng.IntN(40)),
						"--max-wait", "10ms", "--checkpoint-interval", "3", "--log-format", "text")
					cmd.Env = env
					cmd.Stderr = &stderr
					require.NoError(t, cmd.Start())
					t.Cleanup(func() { // a failed test must not leave a writer running
						if cmd.ProcessState == nil {
							_ = cmd.Process.Kill()
							_ = cmd.Wait()
						}
					})
					return cmd, &stderr
				}
				kill := func(round int, cmd *exec.Cmd, stderr *bytes.Buffer) {
					require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
					_ = cmd.Wait()
					if testing.Verbose() {
						t.Logf("round %d stderr tail: %s", round, tail(stderr.String(), 400))
					}
				}
				// midBatch reports whether the lake holds a batch the frontier
				// cache has not recorded: some table committed past it, so the
				// writer died between a table commit and the frontier update.
				midBatch := func() (bool, int64, int64) {
					var cache int64
					require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT frontier FROM oml.lake_frontier`).Scan(&cache))
					lakeAt := b.maxTxn(t, lake)
					return lakeAt > cache, lakeAt, cache
				}

				// Random kills while the workload keeps writing.
				kills, mid := 0, 0
				for round := 0; round < 3; round++ {
					cmd, stderr := start(round)
					time.Sleep(time.Duration(100+rng.IntN(700)) * time.Millisecond)
					kill(round, cmd, stderr)
					kills++
					if m, at, cache := midBatch(); m {
						t.Logf("after round %d: the lake is ahead of the frontier cache (lake at %d, cache %d)", round, at, cache)
					}
				}
				stopLoad()
				require.NoError(t, <-loadDone)

				// Aimed kills: the frontier cache is locked against writes
				// (LOCK TABLE takes no transaction id, so it does not hold the
				// snapshot horizon), so the writer stops after every table of
				// its next batch has committed, at the frontier update; it is
				// killed there, and its blocked statement dies with its
				// connection.
				lockFrontier := func() pgx.Tx {
					lock, err := b.pool.Begin(context.Background())
					require.NoError(t, err)
					t.Cleanup(func() { _ = lock.Rollback(context.Background()) })
					_, err = lock.Exec(context.Background(), `LOCK TABLE oml.lake_frontier IN SHARE MODE`)
					require.NoError(t, err)
					var xid *int64
					require.NoError(t, lock.QueryRow(context.Background(), `SELECT pg_current_xact_id_if_assigned()::text::bigint`).Scan(&xid))
					require.Nil(t, xid, "the lock must not hold the horizon")
					return lock
				}
				for round := 3; round < 6; round++ {
					b.load(t, workload.Config{Claims: 2, Seed: seed + uint64(round)*1000, Concurrency: 3})
					before := b.maxTxn(t, lake)
					lock := lockFrontier()
					cmd, stderr := start(round)
					var blockedPID int32
					deadline := time.Now().Add(time.Minute)
					for {
						require.Truef(t, time.Now().Before(deadline), "round %d: the writer never reached the frontier update of a new batch", round)
						var pid int32
						err := b.pool.QueryRow(context.Background(), `SELECT pid FROM pg_stat_activity
WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE '%INTO oml.lake_frontier%' LIMIT 1`).Scan(&pid)
						if err != nil {
							require.ErrorIs(t, err, pgx.ErrNoRows)
							time.Sleep(5 * time.Millisecond)
							continue
						}
						if b.maxTxn(t, lake) > before {
							blockedPID = pid
							break
						}
						// Blocked at recovery's frontier update, not a new
						// batch's: let it pass and lock again.
						require.NoError(t, lock.Rollback(context.Background()))
						lock = lockFrontier()
					}
					kill(round, cmd, stderr)
					kills++
					m, at, cache := midBatch()
					require.Truef(t, m, "round %d: the aimed kill must land mid-batch (lake at %d, frontier cache %d)", round, at, cache)
					mid++
					var terminated bool
					require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT pg_terminate_backend($1, 10000)`, blockedPID).Scan(&terminated))
					require.True(t, terminated, "the dead writer's blocked statement is gone before the lock is released")
					require.NoError(t, lock.Rollback(context.Background()))
				}
				require.Equal(t, 6, kills)
				require.Equal(t, 3, mid, "aimed kills that landed mid-batch")

				// A clean pass of the CLI, as the last restart: its own result
				// must be right, before anything in-process touches the lake.
				// (It waits out the killed writer's lease like every restart;
				// otherwise it would report "another drain is running" and do
				// nothing.)
				if le, err := lakewriter.ReadLease(context.Background(), b.pool); err == nil && le != nil {
					time.Sleep(time.Until(le.ExpiresAt) + 50*time.Millisecond)
				}
				cmd := exec.Command(bin, "lake", "drain", "--once", "-o", "json")
				cmd.Env = env
				var stdout, stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stdout, &stderr
				require.NoErrorf(t, cmd.Run(), "final drain: %s\n%s", stdout.String(), tail(stderr.String(), 2000))
				var sum struct {
					EndFrontier  int64   `json:"end_frontier"`
					HorizonHeld  bool    `json:"horizon_held"`
					DeadLettered []int64 `json:"dead_lettered"`
				}
				require.NoErrorf(t, json.Unmarshal(stdout.Bytes(), &sum), "final drain's JSON: %s", stdout.String())
				require.False(t, sum.HorizonHeld)
				require.Empty(t, sum.DeadLettered)
				require.Equal(t, b.lastSeq(t), sum.EndFrontier, "the final pass drained the whole outbox")
				b.verifyLake(t, lake)

				// And an in-process writer agrees that nothing is left.
				d, err := lakewriter.New(b.opts(lake))
				require.NoError(t, err)
				again, err := d.DrainOnce(context.Background())
				require.NoError(t, err)
				require.Zero(t, again.TableCommits, "the CLI left nothing to apply")
				b.verifyLake(t, lake)
			})
		}
	}
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}
