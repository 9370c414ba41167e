package devcmd

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/keys"
	"github.com/omlhq/oml/internal/tenant"
	"github.com/omlhq/oml/internal/workload"
)

// LoadOptions are the inputs of `oml dev load`: its flags, and what its
// run function needs, as functions (NewCmdLoad fills them from the
// Factory; a test replaces them).
type LoadOptions struct {
	IO *iostreams.IOStreams
	// Format is the -o value (an invalid one reads as table, as before).
	Format func() (cliutil.Format, error)
	// Open returns the signing key (required) and the database, in that
	// order; their errors are the command's.
	Open func(ctx context.Context) (*pgxpool.Pool, *keys.Key, error)
	// Tenant creates the tenant name when missing (tenant.Create): its id.
	Tenant func(ctx context.Context, pool *pgxpool.Pool, k *keys.Key, name string) (uuid.UUID, error)
	// NextRound is the first round a run of seed continues from
	// (workload.NextRound).
	NextRound func(ctx context.Context, pool *pgxpool.Pool, tenants []uuid.UUID, seed uint64) (int, error)
	// Run writes the workload (workload.Run).
	Run func(ctx context.Context, pool *pgxpool.Pool, k *keys.Key, cfg workload.Config) (workload.Result, error)

	Tenants      int
	Claims       int
	PromoteRatio float64
	RetractRatio float64
	Poison       int
	Rate         float64
	Duration     time.Duration
	Seed         uint64
	Concurrency  int
	Batch        int
}

// NewCmdLoad builds `oml dev load`; runF replaces the run function in
// tests.
func NewCmdLoad(f *cliutil.Factory, runF func(context.Context, *LoadOptions) error) *cobra.Command {
	opts := &LoadOptions{IO: f.IO, Format: f.Format, NextRound: workload.NextRound,
		Open: func(ctx context.Context) (*pgxpool.Pool, *keys.Key, error) {
			k, err := f.SigningKey("")
			if err != nil {
				return nil, nil, err
			}
			pool, err := f.CurrentDB(ctx)
			return pool, k, err
		},
		Tenant: func(ctx context.Context, pool *pgxpool.Pool, k *keys.Key, name string) (uuid.UUID, error) {
			t, _, err := tenant.Create(ctx, pool, k, name)
			return t.ID, err
		},
		Run: func(ctx context.Context, pool *pgxpool.Pool, k *keys.Key, cfg workload.Config) (workload.Result, error) {
			return workload.Run(ctx, pool, k, cfg)
		}}
	cmd := &cobra.Command{
		Use:   "load",
		Short: "Generate a realistic workload through the real, signed append path",
		Long: `Generate a workload through the real append path: tenants (created when
missing, named load-001, load-002, ...) submit claims whose bodies are
AES-256-GCM ciphertext under a per-artifact data key (the journal holds only
the plaintext and ciphertext digests); an identity other than the writer
promotes --promote-ratio of them; --retract-ratio of the promoted ones are
later demoted, erased (the data key is destroyed), reassigned or ended with
their simulation.

--poison N then plants N poison rows behind the application's back, cycling
through a held body whose digest no longer matches the journal, a missing
held body and an undecodable retract payload. The lake writer dead-letters
each after its retry budget; the report lists them with how to repair them.
This writes to the database as its owner: use it on development databases.

--rate caps events per second; --duration keeps writing new rounds of
--claims per tenant until it has passed, every tenant in turn (round N of
each tenant before round N+1 of any, --concurrency tenants at a time), so
the load spreads over all of them. Needs --signing-key.

Re-running continues the workload: artifact ids carry the seed, the tenant
and the round (art-SEED-TENANT-ROUND-N), and a run starts after the highest
round already in the database for that seed, so a second run submits new
claims instead of colliding with the first. Same seed on a fresh database,
same workload.`,
		Example: `  oml dev load --tenants 3 --claims 100
  oml dev load --tenants 100 --claims 50 --poison 3 --seed 42
  oml dev load --tenants 10 --claims 20 --rate 500 --duration 5m`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case opts.Tenants < 1:
				return cliutil.FlagErrorf("--tenants must be 1 or more")
			case opts.Claims < 0:
				return cliutil.FlagErrorf("--claims must be 0 or more")
			case opts.PromoteRatio < 0 || opts.PromoteRatio > 1:
				return cliutil.FlagErrorf("--promote-ratio must be between 0 and 1")
			case opts.RetractRatio < 0 || opts.RetractRatio > 1:
				return cliutil.FlagErrorf("--retract-ratio must be between 0 and 1")
			case opts.Poison < 0:
				return cliutil.FlagErrorf("--poison must be 0 or more")
			case opts.Rate < 0:
				return cliutil.FlagErrorf("--rate must be 0 (unlimited) or more")
			case opts.Duration < 0:
				return cliutil.FlagErrorf("--duration must not be negative")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return loadRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.IntVar(&opts.Tenants, "tenants", 3, "tenants to write to (created if missing)")
	fl.IntVar(&opts.Claims, "claims", 50, "claims submitted per tenant (per round with --duration)")
	fl.Float64Var(&opts.PromoteRatio, "promote-ratio", 0.7, "share of claims promoted")
	fl.Float64Var(&opts.RetractRatio, "retract-ratio", 0.2, "share of promoted claims later retracted")
	fl.IntVar(&opts.Poison, "poison", 0, "poison rows to plant for the lake writer to dead-letter")
	fl.Float64Var(&opts.Rate, "rate", 0, "events per second across all tenants (0: as fast as possible)")
	fl.DurationVar(&opts.Duration, "duration", 0, "keep writing for this long (0: one round)")
	fl.Uint64Var(&opts.Seed, "seed", 1, "random seed (same seed, same workload)")
	fl.IntVar(&opts.Concurrency, "concurrency", 8, "tenants written at once")
	fl.IntVar(&opts.Batch, "batch", 1, "claims per append transaction (one tenant lock and one commit each)")
	return cmd
}

func loadRun(ctx context.Context, opts *LoadOptions) error {
	format, _ := opts.Format()
	pool, k, err := opts.Open(ctx)
	if err != nil {
		return err
	}
	var ids []uuid.UUID
	for i := 1; i <= opts.Tenants; i++ {
		id, err := opts.Tenant(ctx, pool, k, fmt.Sprintf("load-%03d", i))
		if errors.Is(err, tenant.ErrNotInitialized) {
			return cliutil.ConfigErrorf("the deployment is not initialised: run `oml init` first")
		}
		if err != nil {
			return cliutil.AsConfigError(fmt.Errorf("create tenant load-%03d: %w", i, err))
		}
		ids = append(ids, id)
	}
	// A re-run continues the workload: new rounds, new artifact ids.
	first, err := opts.NextRound(ctx, pool, ids, opts.Seed)
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	var last atomic.Pointer[workload.Stats]
	cfg := workload.Config{
		Tenants: ids, Claims: opts.Claims, PromoteRatio: opts.PromoteRatio, RetractRatio: opts.RetractRatio,
		Poison: opts.Poison, Seed: opts.Seed, FirstRound: first, Concurrency: opts.Concurrency, Batch: opts.Batch,
		Rate: opts.Rate, Duration: opts.Duration,
		Progress: func(s workload.Stats) { last.Store(&s) },
	}
	stop := func() {}
	if opts.IO.IsStderrTTY() {
		stop = cliutil.LiveLine(opts.IO.ErrOut, func(el time.Duration) string {
			s := last.Load()
			if s == nil {
				return "loading..."
			}
			return progressLine(*s, el, len(ids)*opts.Claims, opts.Duration)
		})
	}
	res, err := opts.Run(ctx, pool, k, cfg)
	stop()
	interrupted := ctx.Err() != nil
	if err != nil && !interrupted {
		return cliutil.AsConfigError(err)
	}
	if format == cliutil.FormatJSON {
		type poisonJSON struct {
			workload.Poison
			Repair string `json:"repair"`
		}
		out := struct {
			Tenants    []uuid.UUID    `json:"tenants"`
			FirstRound int            `json:"first_round"`
			Stats      workload.Stats `json:"stats"`
			Poison     []poisonJSON   `json:"poison"`
		}{Tenants: ids, FirstRound: first, Stats: res.Stats, Poison: []poisonJSON{}}
		for _, p := range res.Poison {
			out.Poison = append(out.Poison, poisonJSON{Poison: p, Repair: repairHint(p)})
		}
		if err := cliutil.WriteJSON(opts.IO.Out, out); err != nil {
			return err
		}
		return interruptedError(interrupted, res.Stats)
	}
	s := res.Stats
	el := time.Duration(s.ElapsedNano)
	pairs := [][2]string{
		{"tenants", fmt.Sprint(len(ids))},
		{"rounds", rounds(first, opts.Seed)},
		{"events", fmt.Sprintf("%d in %d transactions (%.0f events/s)", s.Events, s.Appends, float64(s.Events)/max(el.Seconds(), 1e-3))},
		{"claims", fmt.Sprint(s.Claims)},
		{"promoted", fmt.Sprint(s.Promoted)},
		{"retracted", fmt.Sprintf("%d demoted, %d erased, %d reassigned, %d simulation ended", s.Demoted, s.Erased, s.Reassigned, s.SimEnded)},
		{"took", el.Round(time.Millisecond).String()},
	}
	if len(res.Poison) > 0 {
		pairs = append(pairs, [2]string{"poison rows", fmt.Sprint(len(res.Poison))})
		for _, p := range res.Poison {
			pairs = append(pairs, [2]string{"  " + p.Kind, fmt.Sprintf("outbox seq %d (tenant %s, %s v%d): %s", p.OutboxSeq, p.Tenant, p.ArtifactID, p.Version, repairHint(p))})
		}
	}
	if err := cliutil.KeyValues(opts.IO.Out, pairs); err != nil {
		return err
	}
	return interruptedError(interrupted, res.Stats)
}

// interruptedError is the exit of a load stopped by SIGINT/SIGTERM: what
// was written is committed (every append is one transaction), but the
// workload asked for did not run to its end, which a script must see.
func interruptedError(interrupted bool, s workload.Stats) error {
	if !interrupted {
		return nil
	}
	return cliutil.Findingsf("interrupted: %d events (%d claims) were written and committed before the stop; run it again to continue the workload", s.Events, s.Claims)
}

// progressLine is the live counter: claims against the total of one round
// (tenants x --claims) with an ETA, or, with --duration, time against it.
func progressLine(s workload.Stats, el time.Duration, total int, duration time.Duration) string {
	rate := float64(s.Events) / max(el.Seconds(), 1e-3)
	if duration > 0 {
		return fmt.Sprintf("loading: %d claims, %d events, %.0f events/s, %s of %s",
			s.Claims, s.Events, rate, el.Round(time.Second), duration)
	}
	eta := "-"
	if s.Claims > 0 && total > 0 {
		left := time.Duration(float64(el) * float64(int64(total)-s.Claims) / float64(s.Claims))
		eta = max(left, 0).Round(time.Second).String()
	}
	pct := 0.0
	if total > 0 {
		pct = 100 * float64(s.Claims) / float64(total)
	}
	return fmt.Sprintf("loading: %d/%d claims (%.0f%%), %d events, %.0f events/s, ETA %s", s.Claims, total, pct, s.Events, rate, eta)
}

// rounds says where this run started: a re-run continues after the rounds
// already in the database instead of colliding with them.
func rounds(first int, seed uint64) string {
	if first == 0 {
		return fmt.Sprintf("from round 0 (seed %d)", seed)
	}
	return fmt.Sprintf("from round %d (seed %d): rounds 0-%d are already in the database, so this run continues the workload", first, seed, first-1)
}

func repairHint(p workload.Poison) string {
	switch p.Kind {
	case workload.PoisonDigestMismatch:
		return "repair by restoring the held body in oml.claim_bodies, then oml deadletter reenqueue"
	case workload.PoisonMissingBody:
		return "repair by re-inserting the held body into oml.claim_bodies, then oml deadletter reenqueue"
	default:
		return "nothing to restore: oml deadletter reenqueue re-derives the payload from the journal"
	}
}
