package witness_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/witness"
)

var benchStore = flag.String("bench.witness-store", "file", "store of BenchmarkPublishWitnesses: file (a temporary directory, fsynced per put, as the lake writer's default) or mem")

// chainHash is the benchmark's journal: tenant's hash at seq.
func chainHash(tenant uuid.UUID, seq int64) []byte {
	var b [24]byte
	copy(b[:], tenant[:])
	binary.BigEndian.PutUint64(b[16:], uint64(seq))
	h := sha256.Sum256(b[:])
	return h[:]
}

func benchHead(tenant uuid.UUID, seq int64) *witness.Head {
	return &witness.Head{Tenant: tenant, Seq: seq, Hash: hex.EncodeToString(chainHash(tenant, seq)),
		Time: time.Now(), SystemIdentifier: "7312", Timeline: "00000001"}
}

// benchCheck is the lake writer's check over the benchmark's journal; the
// journal reads it makes are counted in *reads.
func benchCheck(k *keys.Key, tenant uuid.UUID, reads *int) witness.Check {
	return witness.Check{Trusted: trust(k), Contains: func(_ context.Context, seq int64, hash []byte) (bool, error) {
		*reads++
		return string(chainHash(tenant, seq)) == string(hash), nil
	}}
}

// publishSession12 is how the lake writer published a head before the
// Publisher (session 12): sign, CheckExtends, Publish, PublishCheckpoint.
// CheckExtends then listed a tenant with witnesses twice (the second
// listing, after the last key, always empty), which this repeats: prev is
// the seq of the tenant's newest witness (0: none).
func publishSession12(ctx context.Context, st store.Store, h *witness.Head, prev int64, k *keys.Key, c witness.Check) error {
	if err := h.Sign(k); err != nil {
		return err
	}
	if err := witness.CheckExtends(ctx, st, h, c.Trusted, c.Contains, c.Excused); err != nil {
		return err
	}
	if prev > 0 {
		if _, err := st.List(ctx, witness.Prefix+h.Tenant.String()+"/", witness.Key(h.Tenant, prev)); err != nil {
			return err
		}
	}
	if _, err := witness.Publish(ctx, st, h); err != nil {
		return err
	}
	return witness.PublishCheckpoint(ctx, st, h, k)
}

// BenchmarkPublishWitnesses publishes the heads of 1,000 tenants per
// round, the way the lake writer does, before (session12) and with the
// Publisher (publisher), in three rounds: a tenant's first witness in
// the process (first), the same head again (unchanged: a tenant touched
// again with no new event) and a head one event on (next). It reports
// the store and journal calls per tenant.
//
//	go test -run '^$' -bench BenchmarkPublishWitnesses -benchmem ./internal/witness/ [-args -bench.witness-store file]
func BenchmarkPublishWitnesses(b *testing.B) {
	const tenants = 1000
	k, err := keys.Generate()
	if err != nil {
		b.Fatal(err)
	}
	ids := make([]uuid.UUID, tenants)
	for i := range ids {
		ids[i] = uuid.New()
	}
	ctx := context.Background()
	newStore := func(b *testing.B) *store.Faulty {
		if *benchStore == "file" {
			st, err := store.NewFile(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			return store.NewFaulty(st)
		}
		return store.NewFaulty(store.NewMem())
	}
	type path struct {
		name    string
		publish func(st store.Store) func(h *witness.Head, c witness.Check) error
	}
	paths := []path{
		{"session12", func(st store.Store) func(*witness.Head, witness.Check) error {
			newest := map[uuid.UUID]int64{}
			return func(h *witness.Head, c witness.Check) error {
				err := publishSession12(ctx, st, h, newest[h.Tenant], k, c)
				newest[h.Tenant] = max(newest[h.Tenant], h.Seq)
				return err
			}
		}},
		{"publisher", func(st store.Store) func(*witness.Head, witness.Check) error {
			p := witness.NewPublisher(st)
			return func(h *witness.Head, c witness.Check) error {
				_, cpErr, err := p.Publish(ctx, h, k, c)
				if err == nil {
					err = cpErr
				}
				return err
			}
		}},
	}
	// round r's head of a tenant: first publishes seq 1 on a fresh store
	// each round; unchanged publishes seq 1 again; next publishes r+2.
	for _, round := range []string{"first", "unchanged", "next"} {
		for _, pa := range paths {
			b.Run(round+"/"+pa.name, func(b *testing.B) {
				st := newStore(b)
				publish := pa.publish(st)
				var reads int
				run := func(seq int64) {
					for _, id := range ids {
						if err := publish(benchHead(id, seq), benchCheck(k, id, &reads)); err != nil {
							b.Fatal(err)
						}
					}
				}
				if round != "first" {
					run(1) // the tenants' witnesses this process put
				}
				calls := map[store.OpKind]int{}
				count := func() {
					for _, op := range []store.OpKind{store.OpList, store.OpGet, store.OpPutIfAbsent} {
						calls[op] += st.Count(op)
					}
					st.Reset()
				}
				st.Reset()
				reads = 0
				cpu0 := cpuTime(b)
				b.ResetTimer()
				for r := 0; r < b.N; r++ {
					switch round {
					case "first":
						b.StopTimer()
						count()
						st = newStore(b)
						publish = pa.publish(st)
						b.StartTimer()
						run(1)
					case "unchanged":
						run(1)
					default:
						run(int64(r) + 2)
					}
				}
				b.StopTimer()
				count()
				per := float64(b.N * tenants)
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/per, "ns/tenant")
				b.ReportMetric(float64(cpuTime(b)-cpu0)/per, "cpu-ns/tenant")
				b.ReportMetric(0, "ns/op")
				for _, op := range []store.OpKind{store.OpList, store.OpGet, store.OpPutIfAbsent} {
					b.ReportMetric(float64(calls[op])/per, fmt.Sprintf("%ss/tenant", op))
				}
				b.ReportMetric(float64(reads)/per, "journal-reads/tenant")
			})
		}
	}
}

// cpuTime is the process's user + system CPU time so far, in ns (the
// "first" round's store set-up between rounds is in it too, for both
// paths alike).
func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
