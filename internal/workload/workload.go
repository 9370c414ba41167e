package workload

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/omlhq/oml/internal/backoff"
	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/journal"
)

// Config describes a workload.
type Config struct {
	Tenants      []uuid.UUID // tenants to write to (must exist)
	Claims       int         // claims submitted per tenant
	PromoteRatio float64     // share of claims promoted (0: none)
	RetractRatio float64     // share of promoted claims later retracted (0: none)
	// FollowUpRatio is the share of retracted claims that change again: a
	// demoted claim is then reassigned or ended with its simulation, and
	// any retired claim may then be erased (0: none). It gives a promoted
	// claim a lineage of several changes (gold.lineage).
	FollowUpRatio float64
	Poison        int // poison rows to plant in total (spread over tenants)
	Seed          uint64
	// FirstRound is the first round's number. Artifact ids carry the seed,
	// the tenant's index and the round (art-SEED-TENANT-ROUND-I), so a
	// re-run over the same database starts after the rounds already there
	// (NextRound) instead of resubmitting the same artifacts.
	FirstRound int
	// Concurrency is how many tenants write at once (default 8).
	Concurrency int
	// Batch is how many claims' events go into one append transaction
	// (default 1: one claim's submit/promote/retract per transaction).
	Batch int
	// Rate limits events per second across all tenants (0: unlimited).
	Rate float64
	// Duration, when set, keeps writing new rounds until it has passed,
	// every tenant in turn (Claims then bounds each round per tenant).
	Duration time.Duration
	// Progress, when set, is called after every append with running totals.
	Progress func(Stats)
}

// Stats count what the workload did.
type Stats struct {
	Events      int64 `json:"events"`
	Claims      int64 `json:"claims"`
	Promoted    int64 `json:"promoted"`
	Demoted     int64 `json:"demoted"`
	Erased      int64 `json:"erased"`
	Reassigned  int64 `json:"reassigned"`
	SimEnded    int64 `json:"simulation_ended"`
	Appends     int64 `json:"appends"`
	PoisonRows  int64 `json:"poison_rows"`
	ElapsedNano int64 `json:"-"`
	// ElapsedSeconds is ElapsedNano for JSON: durations are float seconds.
	ElapsedSeconds float64 `json:"elapsed_seconds"`
}

// Poison is one planted poison row and how to repair it.
type Poison struct {
	Kind       string    `json:"kind"` // digest-mismatch | missing-body | bad-payload
	Tenant     uuid.UUID `json:"tenant_id"`
	OutboxSeq  int64     `json:"outbox_seq"`
	ArtifactID string    `json:"artifact_id"`
	Version    int       `json:"version"`
	// Body is the original held ciphertext (digest-mismatch, missing-body):
	// restoring it repairs the row. For bad-payload, Payload is the
	// original outbox payload.
	Body    []byte `json:"-"`
	Payload []byte `json:"-"`
}

// Result is what Run did.
type Result struct {
	Stats  Stats    `json:"stats"`
	Poison []Poison `json:"poison"`
}

var provenances = []string{"human", "agent", "import", "simulation"}

// Run writes the workload. It stops early, returning what it did, when ctx
// ends.
func Run(ctx context.Context, pool *pgxpool.Pool, signer chain.Signer, cfg Config) (Result, error) {
	if len(cfg.Tenants) == 0 {
		return Result{}, errors.New("workload: no tenants")
	}
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = 8
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 1
	}
	started := time.Now()
	var st counters
	var lim *limiter
	if cfg.Rate > 0 {
		lim = newLimiter(cfg.Rate)
	}
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		sem      = make(chan struct{}, cfg.Concurrency)
	)
	failed := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return firstErr != nil
	}
	deadline := time.Time{}
	if cfg.Duration > 0 {
		deadline = started.Add(cfg.Duration)
	}
	writers := make([]*tenantWriter, len(cfg.Tenants))
	// busy[i] is held while tenant i writes a round: a tenant's rounds
	// follow one another (its chain is appended in order), even when there
	// are fewer tenants than Concurrency.
	busy := make([]chan struct{}, len(cfg.Tenants))
	for i, t := range cfg.Tenants {
		writers[i] = &tenantWriter{pool: pool, signer: signer, tenant: t, cfg: cfg, st: &st, lim: lim,
			rng: rand.New(rand.NewPCG(cfg.Seed, uint64(i)+1+uint64(cfg.FirstRound)<<32)), prefix: artifactPrefix(cfg.Seed, i)}
		busy[i] = make(chan struct{}, 1)
	}
	// Rounds sweep every tenant in turn (round r of each tenant before round
	// r+1 of any), Concurrency tenants at a time, so a --duration load
	// spreads over all of them the way many tenants' traffic does; without
	// a Duration it is one round per tenant.
sweep:
	for round := cfg.FirstRound; ; round++ {
		for i := range writers {
			if ctx.Err() != nil || failed() || (!deadline.IsZero() && time.Now().After(deadline)) {
				break sweep
			}
			busy[i] <- struct{}{}
			sem <- struct{}{}
			wg.Add(1)
			go func(w *tenantWriter, round int, done chan struct{}) {
				defer wg.Done()
				defer func() { <-sem; <-done }()
				if err := w.round(ctx, round); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}(writers[i], round, busy[i])
		}
		if deadline.IsZero() {
			break
		}
	}
	wg.Wait()
	res := Result{Stats: st.snapshot(started)}
	if firstErr != nil {
		return res, firstErr
	}
	if cfg.Poison > 0 {
		p, err := PlantPoison(ctx, pool, cfg.Poison, cfg.Seed)
		res.Poison = p
		res.Stats.PoisonRows = int64(len(p))
		if err != nil {
			return res, err
		}
	}
	return res, nil
}

// artifactPrefix is the start of every artifact id the workload writes for
// seed and tenant index i: art-SEED-I-; ROUND-N follows.
func artifactPrefix(seed uint64, i int) string { return fmt.Sprintf("art-%x-%d-", seed, i) }

// NextRound is the first round number no tenant in tenants has used with
// seed: 0 on a fresh database, else one past the highest round whose
// claims are already in oml.claims. Passing it as Config.FirstRound makes
// a second `oml dev load` continue the workload with new claims, where it
// would otherwise collide with the first run's artifact ids.
func NextRound(ctx context.Context, pool *pgxpool.Pool, tenants []uuid.UUID, seed uint64) (int, error) {
	var next int
	// art-SEED-I-ROUND-N: the round is the fourth '-' field. The CASE keeps
	// the cast away from ids of another shape.
	err := pool.QueryRow(ctx, `
SELECT coalesce(max(CASE WHEN split_part(artifact_id, '-', 4) ~ '^[0-9]{1,9}$'
                         THEN split_part(artifact_id, '-', 4)::int END) + 1, 0)
  FROM oml.claims
 WHERE tenant_id = ANY($1) AND artifact_id LIKE $2`, tenants, fmt.Sprintf("art-%x-%%", seed)).Scan(&next)
	if err != nil {
		return 0, fmt.Errorf("workload: find the rounds already written: %w", err)
	}
	return next, nil
}

type counters struct {
	events, claims, promoted, demoted, erased, reassigned, simEnded, appends atomic.Int64
}

func (c *counters) snapshot(started time.Time) Stats {
	return Stats{Events: c.events.Load(), Claims: c.claims.Load(), Promoted: c.promoted.Load(), Demoted: c.demoted.Load(),
		Erased: c.erased.Load(), Reassigned: c.reassigned.Load(), SimEnded: c.simEnded.Load(), Appends: c.appends.Load(),
		ElapsedNano: time.Since(started).Nanoseconds(), ElapsedSeconds: time.Since(started).Seconds()}
}

type tenantWriter struct {
	pool   *pgxpool.Pool
	signer chain.Signer
	tenant uuid.UUID
	cfg    Config
	st     *counters
	lim    *limiter
	rng    *rand.Rand
	prefix string
}

// claimPlan is one claim's life: submission, maybe promotion, maybe a retract.
type claimPlan struct {
	events []journal.Event
	kinds  []string
}

func (w *tenantWriter) round(ctx context.Context, round int) error {
	var pending []journal.Event
	var kinds []string
	started := time.Now()
	flush := func() error {
		if len(pending) == 0 {
			return nil
		}
		if w.lim != nil {
			if err := w.lim.wait(ctx, len(pending)); err != nil {
				return nil // stopped while waiting for the rate limit
			}
		}
		if _, err := chain.Append(ctx, w.pool, w.signer, w.tenant, pending...); err != nil {
			if ctx.Err() != nil {
				return nil // stopped: the last transaction committed or rolled back whole
			}
			return fmt.Errorf("workload: append to tenant %s: %w", w.tenant, err)
		}
		w.st.appends.Add(1)
		w.st.events.Add(int64(len(pending)))
		for _, k := range kinds {
			switch k {
			case "submit":
				w.st.claims.Add(1)
			case "promote":
				w.st.promoted.Add(1)
			case "demote":
				w.st.demoted.Add(1)
			case "erase":
				w.st.erased.Add(1)
			case "reassign":
				w.st.reassigned.Add(1)
			case "simend":
				w.st.simEnded.Add(1)
			}
		}
		pending, kinds = pending[:0], kinds[:0]
		if w.cfg.Progress != nil {
			w.cfg.Progress(w.st.snapshot(started))
		}
		return nil
	}
	for i := 0; i < w.cfg.Claims; i++ {
		if ctx.Err() != nil {
			return nil
		}
		p, err := w.plan(fmt.Sprintf("%s%d-%d", w.prefix, round, i))
		if err != nil {
			return err
		}
		pending = append(pending, p.events...)
		kinds = append(kinds, p.kinds...)
		if (i+1)%w.cfg.Batch == 0 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

func (w *tenantWriter) plan(artifact string) (claimPlan, error) {
	var p claimPlan
	rng := w.rng
	writer := fmt.Sprintf("agent-%d", rng.IntN(20))
	prov := provenances[rng.IntN(len(provenances))]
	plaintext := make([]byte, 256+rng.IntN(1536))
	for i := range plaintext {
		plaintext[i] = byte('a' + rng.IntN(26))
	}
	key := make([]byte, 32)
	for i := range key {
		key[i] = byte(rng.Uint32())
	}
	ct, err := seal(key, plaintext, rng)
	if err != nil {
		return p, err
	}
	pd, cd := sha256.Sum256(plaintext), sha256.Sum256(ct)
	workarea := rng.IntN(8)
	sub, err := journal.NewClaimSubmitted(journal.ClaimSubmitted{
		ArtifactID: artifact, Version: 1, WorkareaID: fmt.Sprintf("wa-%d", workarea),
		Writer: writer, Principal: fmt.Sprintf("principal-%d", rng.IntN(5)), Provenance: prov,
		PlaintextDigest: hex.EncodeToString(pd[:]), CiphertextDigest: hex.EncodeToString(cd[:]),
	}, ct, key)
	if err != nil {
		return p, err
	}
	p.events, p.kinds = append(p.events, sub), append(p.kinds, "submit")
	if rng.Float64() >= w.cfg.PromoteRatio {
		return p, nil
	}
	reviewer := fmt.Sprintf("reviewer-%d", rng.IntN(5))
	p.events = append(p.events, journal.MustNew(journal.ClaimPromoted{ArtifactID: artifact, Version: 1, By: reviewer}))
	p.kinds = append(p.kinds, "promote")
	if rng.Float64() >= w.cfg.RetractRatio {
		return p, nil
	}
	by := fmt.Sprintf("operator-%d", rng.IntN(3))
	switch k := rng.IntN(4); {
	case k == 0 && prov == "simulation":
		p.events = append(p.events, journal.MustNew(journal.SimulationEnded{SimulationID: "sim-" + artifact, By: by,
			Claims: []journal.ClaimRef{{ArtifactID: artifact, Version: 1}}}))
		p.kinds = append(p.kinds, "simend")
	case k == 1:
		p.events = append(p.events, journal.MustNew(journal.ClaimErased{ArtifactID: artifact, By: by, Reason: "erasure request"}))
		p.kinds = append(p.kinds, "erase")
	case k == 2:
		p.events = append(p.events, journal.MustNew(journal.ClaimReassigned{ArtifactID: artifact, Version: 1, By: by,
			ToWorkareaID: fmt.Sprintf("wa-%d", (workarea+1+rng.IntN(7))%8)}))
		p.kinds = append(p.kinds, "reassign")
	default:
		p.events = append(p.events, journal.MustNew(journal.ClaimDemoted{ArtifactID: artifact, Version: 1, By: by, Reason: "superseded"}))
		p.kinds = append(p.kinds, "demote")
	}
	if w.cfg.FollowUpRatio > 0 {
		w.followUps(&p, artifact, prov, workarea)
	}
	return p, nil
}

// followUps appends the later changes of a retired claim (FollowUpRatio):
// a demoted claim reassigned or ended with its simulation, then maybe an
// erasure of whatever it became.
func (w *tenantWriter) followUps(p *claimPlan, artifact, prov string, workarea int) {
	rng := w.rng
	if p.kinds[len(p.kinds)-1] == "erase" || rng.Float64() >= w.cfg.FollowUpRatio {
		return
	}
	by := fmt.Sprintf("operator-%d", rng.IntN(3))
	if p.kinds[len(p.kinds)-1] == "demote" && rng.IntN(3) > 0 {
		if prov == "simulation" && rng.IntN(2) == 0 {
			p.events = append(p.events, journal.MustNew(journal.SimulationEnded{SimulationID: "sim-" + artifact, By: by,
				Claims: []journal.ClaimRef{{ArtifactID: artifact, Version: 1}}}))
			p.kinds = append(p.kinds, "simend")
		} else {
			p.events = append(p.events, journal.MustNew(journal.ClaimReassigned{ArtifactID: artifact, Version: 1, By: by,
				ToWorkareaID: fmt.Sprintf("wa-%d", (workarea+1+rng.IntN(7))%8), Reason: "moved"}))
			p.kinds = append(p.kinds, "reassign")
		}
	}
	if rng.IntN(2) == 0 {
		p.events = append(p.events, journal.MustNew(journal.ClaimErased{ArtifactID: artifact, By: by, Reason: "erasure request"}))
		p.kinds = append(p.kinds, "erase")
	}
}

// seal encrypts plaintext with AES-256-GCM: nonce || ciphertext+tag.
func seal(key, plaintext []byte, rng *rand.Rand) ([]byte, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	nonce := make([]byte, gcm.NonceSize())
	for i := range nonce {
		nonce[i] = byte(rng.Uint32())
	}
	return gcm.Seal(nonce, nonce, plaintext, nil), nil
}

// limiter is a simple token bucket for --rate.
type limiter struct {
	mu       sync.Mutex
	interval time.Duration
	next     time.Time
}

func newLimiter(rate float64) *limiter {
	return &limiter{interval: time.Duration(float64(time.Second) / rate), next: time.Now()}
}

func (l *limiter) wait(ctx context.Context, n int) error {
	l.mu.Lock()
	now := time.Now()
	if l.next.Before(now) {
		l.next = now
	}
	at := l.next
	l.next = l.next.Add(time.Duration(n) * l.interval)
	l.mu.Unlock()
	if d := time.Until(at); d > 0 {
		return backoff.Sleep(ctx, d)
	}
	return nil
}
