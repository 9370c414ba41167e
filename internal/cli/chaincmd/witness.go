package chaincmd

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/replication"
	"github.com/omlhq/oml/internal/witness"
)

// WitnessOptions are `oml chain witness`'s flags and what its run function
// needs, as functions (NewCmdWitness fills them from the Factory; a test
// replaces them).
type WitnessOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Prepare opens the lake, the key and the database, captures the heads
	// to witness and waits until they are durable (prepareWitness); its
	// errors are the command's.
	Prepare func(ctx context.Context, opts *WitnessOptions) (*witnessRound, error)

	Tenant         string
	DurableOn      string
	DurableTimeout time.Duration
	durable        replication.Policy
}

// NewCmdWitness builds `oml chain witness`.
func NewCmdWitness(f *cliutil.Factory, runF func(context.Context, *WitnessOptions) error) *cobra.Command {
	opts := &WitnessOptions{IO: f.IO, Format: f.Format, Prepare: func(ctx context.Context, o *WitnessOptions) (*witnessRound, error) {
		return prepareWitness(ctx, f, o)
	}}
	cmd := &cobra.Command{
		Use:   "witness",
		Short: "Publish signed copies of the chain heads to the lake's object store",
		Long: `Sign each tenant's stored head (tenant, seq, hash, time, the database's system
identifier and timeline) with the deployment key and write it to the lake
under _oml_witness/<tenant>/<seq>.json with put-if-absent, so a witness is
never overwritten. oml chain verify and oml chain head compare the journal
with the newest witness: a journal behind it lost committed events
(tail-lost), one holding another hash at its seq forked (fork).

Run it from cron, or after each lake batch. Needs --lake and --signing-key.
A head is published only if it extends every earlier witness of its tenant:
the journal must still hold each earlier witnessed (seq, hash). A head below
an earlier witness (a lost tail) or on another chain (a fork) is refused,
unless oml chain accept-fork accepted that loss.

A witness never gets ahead of what a failover keeps: the heads are signed only
once the streaming standbys required by --durable-on (auto: every streaming
standby; N: at least N; none: no wait) have flushed the WAL that holds them.
If they have not within --durable-timeout, nothing is published, the standby
is named, and the exit status is 0 (lag, not loss: run it again later).

Exit status: 0 published (or already witnessed, or deferred for a lagging
standby); 1 a head does not extend an earlier witness or a different head is
already witnessed at its seq (fork evidence); 2 usage or connection error.`,
		Example: `  oml chain witness
  oml chain witness --tenant acme`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if opts.durable, err = cliutil.DurableWait(opts.DurableOn, opts.DurableTimeout); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return witnessRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "witness only this tenant's head (name or id)")
	cmd.Flags().StringVar(&opts.DurableOn, "durable-on", replication.DefaultPolicyText, replication.FlagUsage)
	cmd.Flags().DurationVar(&opts.DurableTimeout, "durable-timeout", time.Minute, "how long to wait for the standbys to flush the heads")
	return cmd
}

type witnessRow struct {
	Tenant  uuid.UUID `json:"tenant"`
	Name    string    `json:"name"`
	Seq     int64     `json:"seq"`
	Hash    string    `json:"hash"`
	Key     string    `json:"key"`
	Created bool      `json:"created"`
	// Superseded: a newer witness the journal holds was published after
	// the head was read; nothing was put.
	Superseded bool   `json:"superseded,omitempty"`
	Error      string `json:"error,omitempty"`
}

// witnessRound is one run of `oml chain witness` up to the decisions: the
// heads captured (with their tenants' names), why they may not be
// witnessed yet (notDurable, "" when they may), and the steps that sign
// and publish one head.
type witnessRound struct {
	heads      []*witness.Head
	names      map[uuid.UUID]string
	notDurable string
	// sign signs h with the deployment key.
	sign func(h *witness.Head) error
	// publish checks h extends every earlier witness, then writes it
	// (put-if-absent); created is false when it was already witnessed.
	publish func(ctx context.Context, h *witness.Head) (created bool, err error)
	// checkpoint writes the C2SP checkpoint form beside a published head.
	checkpoint func(ctx context.Context, h *witness.Head) error
}

// prepareWitness is WitnessOptions.Prepare over the Factory.
func prepareWitness(ctx context.Context, f *cliutil.Factory, opts *WitnessOptions) (*witnessRound, error) {
	if f.LakeURL() == "" {
		return nil, cliutil.ConfigErrorf("no lake configured: set --lake or OML_LAKE_URL to where witnesses are kept")
	}
	k, err := f.SigningKey("no signing key: set --signing-key or OML_SIGNING_KEY_FILE to the deployment key that signs witnessed heads")
	if err != nil {
		return nil, err
	}
	pool, err := f.DB(ctx)
	if err != nil {
		return nil, err
	}
	trusted, err := issuedKeys(ctx, pool)
	if err != nil {
		return nil, cliutil.AsConfigError(err)
	}
	if _, ok := trusted(k.KeyID(), chainverify.ProviderTenant, math.MaxInt64); !ok {
		return nil, cliutil.ConfigErrorf("the signing key %s was never issued by this deployment's provider chain, or it is revoked: use the deployment's current key file", k.KeyID())
	}
	st, err := f.OptionalLake(ctx)
	if err != nil {
		return nil, err
	}
	only, err := onlyTenant(ctx, pool, opts.Tenant)
	if err != nil {
		return nil, err
	}
	r := &witnessRound{}
	if r.names, err = tenantNames(ctx, pool); err != nil {
		return nil, cliutil.AsConfigError(err)
	}
	if r.heads, err = witness.Capture(ctx, pool, only, time.Now()); err != nil {
		return nil, cliutil.AsConfigError(err)
	}
	if v, err := headsDurable(ctx, pool, opts); err != nil {
		return nil, cliutil.AsConfigError(err)
	} else if !v.Durable {
		r.notDurable = v.Reason
		return r, nil
	}
	acc, err := chainverify.ReadAcceptances(ctx, pool)
	if err != nil {
		return nil, cliutil.AsConfigError(err)
	}
	r.sign = func(h *witness.Head) error { return h.Sign(k) }
	r.publish = func(ctx context.Context, h *witness.Head) (bool, error) {
		// A head must extend every earlier witness, not only differ from
		// none at its own seq: signing a head past a lost tail would
		// release the tenant from the fork check.
		if err := chainverify.CheckWitnessExtends(ctx, pool, st, h, trusted, acc); err != nil {
			return false, err
		}
		return witness.Publish(ctx, st, h)
	}
	r.checkpoint = func(ctx context.Context, h *witness.Head) error { return witness.PublishCheckpoint(ctx, st, h, k) }
	return r, nil
}

func witnessRun(ctx context.Context, opts *WitnessOptions) error {
	format, _ := opts.Format()
	r, err := opts.Prepare(ctx, opts)
	if err != nil {
		return err
	}
	heads, names := r.heads, r.names
	if r.notDurable != "" {
		fmt.Fprintf(opts.IO.ErrOut, "oml: nothing witnessed: %s; a failover to that standby would lose heads the witness would already vouch for. Run again once it catches up (see oml lake status), or pass --durable-on none\n", r.notDurable)
		if format == cliutil.FormatJSON {
			return cliutil.WriteJSON(opts.IO.Out, []witnessRow{})
		}
		return nil
	}
	rows := make([]witnessRow, 0, len(heads))
	conflicts := 0
	for _, h := range heads {
		if err := r.sign(h); err != nil {
			return err
		}
		row := witnessRow{Tenant: h.Tenant, Name: names[h.Tenant], Seq: h.Seq, Hash: h.Hash, Key: witness.Key(h.Tenant, h.Seq)}
		created, err := r.publish(ctx, h)
		switch {
		case errors.Is(err, witness.ErrSuperseded):
			// A later head was witnessed (by the lake writer) after this
			// one was read, and the journal holds it: nothing to add.
			row.Superseded = true
		case errors.Is(err, witness.ErrConflict), errors.Is(err, witness.ErrNotExtending):
			conflicts++
			row.Error = err.Error()
		case err != nil:
			return cliutil.AsConfigError(err)
		default:
			// The C2SP checkpoint form beside it, for external witnesses.
			if err := r.checkpoint(ctx, h); err != nil {
				if !errors.Is(err, witness.ErrCheckpointConflict) {
					return cliutil.AsConfigError(err)
				}
				conflicts++
				row.Error = err.Error()
			}
		}
		row.Created = created
		rows = append(rows, row)
	}
	if format == cliutil.FormatJSON {
		if err := cliutil.WriteJSON(opts.IO.Out, rows); err != nil {
			return err
		}
	} else {
		table := make([][]string, 0, len(rows))
		for _, r := range rows {
			state := "witnessed"
			switch {
			case r.Error != "":
				state = "CONFLICT"
			case r.Superseded:
				state = "already witnessed (newer)"
			case !r.Created:
				state = "already witnessed"
			}
			table = append(table, []string{r.Tenant.String(), r.Name, fmt.Sprint(r.Seq), short(r.Hash), state})
		}
		if err := cliutil.Table(opts.IO, []string{"TENANT", "NAME", "SEQ", "HASH", "STATE"}, table); err != nil {
			return err
		}
		for _, r := range rows {
			if r.Error != "" {
				fmt.Fprintf(opts.IO.ErrOut, "oml: %s\n", r.Error)
			}
		}
	}
	if conflicts > 0 {
		return cliutil.Findingsf("%d head(s) do not extend an earlier witness: the chain lost its tail or forked; run oml chain verify and see docs/runbooks/failover.md", conflicts)
	}
	return nil
}

// headsDurable waits until the standbys --durable-on requires have flushed
// the WAL holding the heads just captured: the insert position read after
// the read covers every commit the read saw.
func headsDurable(ctx context.Context, pool *pgxpool.Pool, opts *WitnessOptions) (replication.Verdict, error) {
	if !opts.durable.Waits() {
		return replication.Verdict{Durable: true}, nil
	}
	lsn, err := outbox.CoverLSN(ctx, pool)
	if err != nil {
		return replication.Verdict{}, err
	}
	return replication.Wait(ctx, pool, opts.durable, lsn, opts.DurableTimeout, 100*time.Millisecond)
}
