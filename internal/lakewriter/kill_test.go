package lakewriter_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

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
// at random moments while the workload keeps writing, restarts it, and
// finally checks the lake against the journal fold: exactly once, on the
// local store and on a real S3 server.
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
						PromoteRatio: 0.7, RetractRatio: 0.4, Duration: 3 * time.Second, Concurrency: 3})
					loadDone <- err
				}()

				kills := 0
				for round := 0; round < 6; round++ {
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
					time.Sleep(time.Duration(100+rng.IntN(700)) * time.Millisecond)
					require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
					_ = cmd.Wait()
					kills++
					if testing.Verbose() {
						t.Logf("round %d stderr tail: %s", round, tail(stderr.String(), 400))
					}
				}
				stopLoad()
				require.NoError(t, <-loadDone)

				// A clean pass, as the last restart, then the lake must be exact.
				cmd := exec.Command(bin, "lake", "drain", "--once", "-o", "json")
				cmd.Env = env
				out, err := cmd.CombinedOutput()
				require.NoErrorf(t, err, "final drain: %s", out)
				d, err := lakewriter.New(b.opts(lake))
				require.NoError(t, err)
				b.drainAll(t, d) // picks up anything appended after the final pass's fence
				b.verifyLake(t, lake)
				require.Equal(t, 6, kills)
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
