package chainverify

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	voi "github.com/oasisprotocol/curve25519-voi/primitives/ed25519"
)

// Benchmarks: the verifier's end-to-end rate (decode, digest, envelope,
// hash, links, signatures) on synthetic signed chains in memory, next to
// the raw signature-verification rates of this machine measured in the
// same run. Run:
//
//	go test -run '^$' -bench . -benchtime 3x ./internal/chainverify/
//
// The target (issue 5) is: verify rate ≥ 80% of the best single-core
// verification rate × cores. BenchmarkEfficiency measures both back to
// back and reports the ratio.

const benchEvents = 20000

var (
	benchMu       sync.Mutex
	benchFixtures = map[int]*fixture{}
)

func benchFixture(b *testing.B, tenants int) *fixture {
	benchMu.Lock()
	defer benchMu.Unlock()
	if f, ok := benchFixtures[tenants]; ok {
		return f
	}
	f := newFixture(b, 42, tenants, benchEvents/tenants)
	benchFixtures[tenants] = f
	return f
}

func benchVerify(b *testing.B, f *fixture, opts Options) float64 {
	b.Helper()
	n := f.count()
	start := time.Now()
	for range b.N {
		sum, err := Verify(context.Background(), f.events(), opts)
		if err != nil || len(sum.Findings) != 0 {
			b.Fatalf("verify: %v %v", err, sum.Findings)
		}
	}
	rate := float64(n*b.N) / time.Since(start).Seconds()
	b.ReportMetric(rate, "events/s")
	return rate
}

func BenchmarkVerify(b *testing.B) {
	for _, tenants := range []int{1, 100} {
		for _, strict := range []bool{false, true} {
			name := fmt.Sprintf("tenants=%d/rule=batch", tenants)
			if strict {
				name = fmt.Sprintf("tenants=%d/rule=strict", tenants)
			}
			b.Run(name, func(b *testing.B) {
				f := benchFixture(b, tenants)
				b.ResetTimer()
				benchVerify(b, f, Options{Strict: strict})
			})
		}
	}
}

// benchSigs returns envelope-sized messages and their signatures.
func benchSigs(n int) (*Key, [][]byte, [][]byte) {
	_, priv, _ := ed25519.GenerateKey(nil)
	pub := priv.Public().(ed25519.PublicKey)
	k, err := newKey(KeyID(pub), pub, 1)
	if err != nil {
		panic(err)
	}
	msgs := make([][]byte, n)
	sigs := make([][]byte, n)
	for i := range msgs {
		msgs[i] = make([]byte, 150)
		msgs[i][0], msgs[i][1] = byte(i), byte(i>>8)
		sigs[i] = ed25519.Sign(priv, msgs[i])
	}
	return k, msgs, sigs
}

// rawStdlib verifies per signature with crypto/ed25519 on `workers`
// goroutines; returns signatures/s.
func rawStdlib(k *Key, msgs, sigs [][]byte, rounds, workers int) float64 {
	var wg sync.WaitGroup
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				for i := w; i < len(msgs); i += workers {
					if !ed25519.Verify(k.Public, msgs[i], sigs[i]) {
						panic(fmt.Sprint("bad signature ", r))
					}
				}
			}
		}()
	}
	wg.Wait()
	return float64(rounds*len(msgs)) / time.Since(start).Seconds()
}

// rawBatch verifies voi batches of DefaultBatchSize with expanded keys on
// `workers` goroutines; returns signatures/s.
func rawBatch(k *Key, msgs, sigs [][]byte, rounds, workers int) float64 {
	var wg sync.WaitGroup
	per := len(msgs) / DefaultBatchSize
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			bv := voi.NewBatchVerifierWithCapacity(DefaultBatchSize)
			for range rounds {
				for bi := w; bi < per; bi += workers {
					bv.Reset()
					for i := bi * DefaultBatchSize; i < (bi+1)*DefaultBatchSize; i++ {
						bv.AddExpanded(k.expanded, msgs[i], sigs[i])
					}
					if !bv.VerifyBatchOnly(nil) {
						panic("bad batch")
					}
				}
			}
		}()
	}
	wg.Wait()
	return float64(rounds*per*DefaultBatchSize) / time.Since(start).Seconds()
}

func BenchmarkRawVerify(b *testing.B) {
	k, msgs, sigs := benchSigs(4096)
	cores := runtime.GOMAXPROCS(0)
	for _, tc := range []struct {
		name string
		fn   func(*Key, [][]byte, [][]byte, int, int) float64
		w    int
	}{
		{"stdlib/cores=1", rawStdlib, 1},
		{fmt.Sprintf("stdlib/cores=%d", cores), rawStdlib, cores},
		{"batch256/cores=1", rawBatch, 1},
		{fmt.Sprintf("batch256/cores=%d", cores), rawBatch, cores},
	} {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportMetric(tc.fn(k, msgs, sigs, b.N, tc.w), "sigs/s")
		})
	}
}

// BenchmarkEfficiency measures, interleaved in one run, the best
// single-core verification rate (max of crypto/ed25519 and the batch
// verifier), crypto/ed25519 and the batch verifier on all cores, and the
// verifier's end-to-end
// rate for 1 and 100 tenants. Each is the best of max(b.N, 3) rounds: on a
// shared machine other work only ever slows a round down, so the best
// rounds are the closest to what the hardware does. It reports end-to-end
// / (best per core × cores) as "pct_of_ideal".
func BenchmarkEfficiency(b *testing.B) {
	k, msgs, sigs := benchSigs(4096)
	cores := runtime.GOMAXPROCS(0)
	for _, tenants := range []int{1, 100} {
		b.Run(fmt.Sprintf("tenants=%d", tenants), func(b *testing.B) {
			f := benchFixture(b, tenants)
			n := f.count()
			b.ResetTimer()
			var bestCore, bestStdAll, bestBatchAll, bestVerify float64
			for range max(b.N, 3) {
				bestCore = max(bestCore, rawStdlib(k, msgs[:1024], sigs[:1024], 1, 1), rawBatch(k, msgs, sigs, 1, 1))
				bestStdAll = max(bestStdAll, rawStdlib(k, msgs[:2048], sigs[:2048], 1, cores))
				bestBatchAll = max(bestBatchAll, rawBatch(k, msgs, sigs, 1, cores))
				start := time.Now()
				sum, err := Verify(context.Background(), f.events(), Options{})
				if err != nil || len(sum.Findings) != 0 {
					b.Fatalf("verify: %v %v", err, sum.Findings)
				}
				bestVerify = max(bestVerify, float64(n)/time.Since(start).Seconds())
			}
			b.ReportMetric(bestVerify, "events/s")
			b.ReportMetric(bestCore, "best_per_core_sigs/s")
			b.ReportMetric(bestStdAll, "stdlib_all_cores_sigs/s")
			b.ReportMetric(bestBatchAll, "batch_all_cores_sigs/s")
			b.ReportMetric(100*bestVerify/(bestCore*float64(cores)), "pct_of_ideal")
			// The same ratio against what the batch verifier alone achieved
			// on all cores in this run: robust when other work shares them.
			b.ReportMetric(100*bestVerify/bestBatchAll, "pct_of_raw_all_cores")
		})
	}
}
