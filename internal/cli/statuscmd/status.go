// Package statuscmd is `oml status`: one screen for the on-call engineer —
// the lake writer's frontier, lag, backlog and lease, the last drain, dead
// letters, and every chain's head against its newest witnessed head. It
// only reads; the detail commands are oml lake status, oml deadletter list,
// oml chain head and oml reconcile.
package statuscmd

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/chainverify"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/doctor"
	"github.com/omlhq/oml/internal/iostreams"
	"github.com/omlhq/oml/internal/journal"
	"github.com/omlhq/oml/internal/lakewriter"
	"github.com/omlhq/oml/internal/replication"
)

// Options are `oml status`'s flags and what its run function needs, as
// functions (NewCmd fills them from the Factory; a test replaces them).
type Options struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Read opens the database (and the lake, when one is configured) and
	// reads the screen (readReport); its errors are the command's.
	Read func(ctx context.Context, durable replication.Policy) (Report, error)

	DurableOn string
	durable   replication.Policy
}

// NewCmd builds `oml status`.
func NewCmd(f *cliutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IO, Format: f.Format, Read: func(ctx context.Context, durable replication.Policy) (Report, error) {
		return readReport(ctx, f, durable)
	}}
	cmd := &cobra.Command{
		Use:   "status",
		Short: "One-screen summary: frontier and lag, backlog, lease, last drain, dead letters, chain heads vs witnesses",
		Long: `One screen for the on-call engineer:

  lake writer   frontier, lag (age of the oldest row not in the lake), backlog,
                what holds the horizon back, the lease holder, the last drain,
                and whether the streaming standbys have flushed the stable
                prefix (as a lake writer with the same --durable-on sees it)
  dead letters  how many are open and the oldest (oml deadletter list)
  chains        each tenant's head and its newest head witnessed in the lake
                (ok, no-witness, tail-lost, fork; needs --lake)

Exit status: 0 (dead letters and lag are shown, not judged: oml reconcile and
oml doctor judge them); 1 a chain disagrees with its witnessed head
(tail-lost or fork); 2 usage or connection error.`,
		Example: `  oml status
  oml status -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if opts.durable, err = replication.ParsePolicy(opts.DurableOn); err != nil {
				return cliutil.FlagErrorf("%v", err)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.DurableOn, "durable-on", replication.DefaultPolicyText, replication.StatusFlagUsage)
	return cmd
}

// Chain is one tenant's head against its witness.
type Chain struct {
	Tenant      uuid.UUID  `json:"tenant_id"`
	Name        string     `json:"tenant"`
	Seq         int64      `json:"seq"`
	Hash        string     `json:"hash"`
	UpdatedAt   time.Time  `json:"updated_at"`
	WitnessSeq  *int64     `json:"witness_seq"`
	WitnessTime *time.Time `json:"witness_time"`
	Status      string     `json:"status"` // ok | no-witness | tail-lost | fork | unchecked
	Detail      string     `json:"detail,omitempty"`
}

// Report is the JSON document.
type Report struct {
	Lake             lakewriter.Status `json:"lake"`
	LastDrainAt      *time.Time        `json:"last_drain_at"`
	WitnessesChecked bool              `json:"witnesses_checked"`
	Chains           []Chain           `json:"chains"`
	Warnings         []string          `json:"warnings"`
	// BodyLostClaims counts the claims whose held body a failover lost
	// (state body_lost, docs/runbooks/failover.md).
	BodyLostClaims int64 `json:"body_lost_claims"`
	// LakeMissing, when set, says the lake holds none of the rows the
	// frontier says were drained (the wrong --lake, or a lost lake).
	LakeMissing string `json:"lake_missing,omitempty"`
}

// readReport is Options.Read over the Factory: the lake writer's status
// and durability, body-lost claims, the chain heads and, with a lake, the
// continuity check, the drained-lake check and each head against its
// newest witness.
func readReport(ctx context.Context, f *cliutil.Factory, durable replication.Policy) (Report, error) {
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Chains: []Chain{}, Warnings: []string{}}
	if rep.Lake, err = lakewriter.ReadStatus(ctx, pool, lakewriter.StatusOptions{}); err != nil {
		return Report{}, cliutil.AsConfigError(err)
	}
	if err := rep.Lake.ReadDurability(ctx, pool, durable); err != nil {
		return Report{}, cliutil.AsConfigError(err)
	}
	rep.Lake.Blockers = cliutil.NonNil(rep.Lake.Blockers)
	if rep.BodyLostClaims, err = journal.CountBodyLost(ctx, pool); err != nil {
		return Report{}, cliutil.AsConfigError(err)
	}
	if !rep.Lake.FrontierAt.IsZero() && (rep.Lake.LastBatchEnd > 0 || rep.Lake.Frontier > 0) {
		t := rep.Lake.FrontierAt
		rep.LastDrainAt = &t
	}

	heads, err := chainverify.StoredHeadsByName(ctx, pool)
	if err != nil {
		return Report{}, cliutil.AsConfigError(err)
	}
	for _, h := range heads {
		rep.Chains = append(rep.Chains, Chain{Tenant: h.Tenant, Name: h.Name, Seq: h.Seq, Hash: hex.EncodeToString(h.Hash),
			UpdatedAt: h.UpdatedAt, Status: "unchecked"})
	}

	st, err := f.OptionalLake(ctx)
	if err != nil {
		return Report{}, err
	}
	if st != nil {
		// An empty lake under a frontier past zero: the wrong lake, or a lost
		// one. The screen must not then say the lake holds every row.
		var missing *lakewriter.LakeMissingError
		if err := lakewriter.CheckLakeHoldsFrontier(ctx, st, rep.Lake.Frontier); err != nil {
			if !errors.As(err, &missing) {
				return Report{}, cliutil.AsConfigError(err)
			}
			rep.LakeMissing = missing.Error()
		}
		// One read of every table's log, through the lake summary doctor
		// stores, for the fork check's bronze heads and the continuity check.
		view, err := doctor.ReadLakeView(ctx, pool, st)
		if err != nil {
			return Report{}, cliutil.AsConfigError(err)
		}
		fc, c := view.Fork, view.Continuity
		rep.WitnessesChecked = true
		rep.Lake.Continuity = &c
		for _, u := range fc.Untrusted {
			rep.Warnings = append(rep.Warnings, u.Error())
		}
		for i := range rep.Chains {
			c := &rep.Chains[i]
			w := fc.Witnessed[c.Tenant]
			if w == nil {
				c.Status = "no-witness"
				continue
			}
			seq, t := w.Seq, w.Time
			c.WitnessSeq, c.WitnessTime, c.Status = &seq, &t, "ok"
			if fd, bad := fc.Forked(c.Tenant); bad {
				c.Status, c.Detail = string(fd.Reason), fd.Detail
			}
		}
	} else {
		rep.Warnings = append(rep.Warnings, "no lake configured (--lake or OML_LAKE_URL): chain heads not compared with their witnesses")
	}
	return rep, nil
}

// broken counts the chains that disagree with their witnessed head (a
// tail-lost or fork status, set from the fork check's findings).
func (r *Report) broken() int {
	n := 0
	for _, c := range r.Chains {
		switch c.Status {
		case "ok", "no-witness", "unchecked":
		default:
			n++
		}
	}
	return n
}

func run(ctx context.Context, opts *Options) error {
	format, _ := opts.Format()
	rep, err := opts.Read(ctx, opts.durable)
	if err != nil {
		return err
	}
	if format == cliutil.FormatJSON {
		if err := cliutil.WriteJSON(opts.IO.Out, rep); err != nil {
			return err
		}
	} else if err := printScreen(opts.IO, &rep); err != nil {
		return err
	}
	if rep.LakeMissing != "" {
		return cliutil.Findingsf("%s", rep.LakeMissing)
	}
	broken := rep.broken()
	if c := rep.Lake.Continuity; c != nil && !c.OK() {
		msg := (&lakewriter.ContinuityError{C: *c}).Error()
		if broken > 0 {
			msg += fmt.Sprintf("; and %d chain(s) disagree with their witnessed head", broken)
		}
		return cliutil.Findingsf("%s", msg)
	}
	if broken > 0 {
		return cliutil.Findingsf("%d chain(s) disagree with their witnessed head: run oml chain verify", broken)
	}
	return nil
}

func printScreen(ios *iostreams.IOStreams, rep *Report) error {
	s := rep.Lake
	lag := "none (the lake holds every row)"
	if rep.LakeMissing != "" {
		lag = "unknown: the lake holds none of the drained rows (see below)"
	} else if s.OldestUnapplied != nil {
		lag = fmt.Sprintf("%s (oldest row not in the lake since %s)", time.Duration(s.LagSeconds*float64(time.Second)).Round(time.Second), cliutil.Time(*s.OldestUnapplied))
	}
	if s.HorizonHeld {
		lag += "; the horizon is held back by an open transaction"
	}
	lease := "none (no lake writer is running)"
	if s.Lease != nil {
		state := "live"
		if !s.LeaseLive {
			state = "EXPIRED"
		}
		lease = fmt.Sprintf("%s on %s pid %d, heartbeat %s (%s)", s.Lease.Holder, s.Lease.Host, s.Lease.PID, cliutil.Time(s.Lease.HeartbeatAt), state)
	}
	last := "never"
	if rep.LastDrainAt != nil {
		last = fmt.Sprintf("%s, batch (%d, %d]", cliutil.Time(*rep.LastDrainAt), s.LastBatchStart, s.LastBatchEnd)
	}
	dead := "none"
	if s.DeadLetters > 0 {
		dead = fmt.Sprintf("%d open", s.DeadLetters)
		if s.OldestDeadAt != nil {
			dead += fmt.Sprintf(", oldest %s", cliutil.Time(*s.OldestDeadAt))
		}
		dead += ": oml deadletter list"
	}
	pairs := [][2]string{
		{"frontier", fmt.Sprintf("outbox seq %d of %d", s.Frontier, s.LastSeq)},
		{"lag", lag},
		{"backlog", fmt.Sprintf("%s, seq gap %d", cliutil.Count(s.BacklogRows, "row"), s.BacklogSeqGap)},
		{"lease", lease},
		{"last drain", last},
		{"dead letters", dead},
		{"continuity", continuityLine(s.Continuity)},
	}
	if rep.BodyLostClaims > 0 {
		pairs = append(pairs, [2]string{"body lost", fmt.Sprintf("%s whose held body a failover lost (state body_lost, never promotable): see docs/runbooks/failover.md", cliutil.Count(rep.BodyLostClaims, "claim"))})
	}
	for _, b := range s.Blockers {
		pairs = append(pairs, [2]string{"blocking", fmt.Sprintf("%s pid %d xid %d (%s@%s, %s, open since %s)", b.Kind, b.PID, b.Xid, b.User, b.Database, b.State, cliutil.Time(b.XactStart))})
	}
	pairs = append(pairs, s.DurabilityLines()...)
	if err := cliutil.KeyValuesTo(ios, pairs); err != nil {
		return err
	}
	fmt.Fprintln(ios.Out)
	rows := make([][]string, 0, len(rep.Chains))
	for _, c := range rep.Chains {
		ws, wt := "-", "-"
		if c.WitnessSeq != nil {
			ws, wt = fmt.Sprint(*c.WitnessSeq), cliutil.Time(*c.WitnessTime)
		}
		name := c.Name
		if name == "" {
			name = c.Tenant.String()
		}
		rows = append(rows, []string{name, fmt.Sprint(c.Seq), cliutil.Time(c.UpdatedAt), ws, wt, c.Status})
	}
	if err := cliutil.Table(ios, []string{"CHAIN", "HEAD SEQ", "HEAD AT", "WITNESSED SEQ", "WITNESSED AT", "STATUS"}, rows); err != nil {
		return err
	}
	for _, c := range rep.Chains {
		if c.Detail != "" {
			fmt.Fprintf(ios.ErrOut, "oml: chain %s: %s: %s\n", c.Name, c.Status, c.Detail)
		}
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(ios.ErrOut, "oml: note: %s\n", w)
	}
	return nil
}

func continuityLine(c *lakewriter.Continuity) string {
	switch {
	case c == nil:
		return "not checked (no lake configured)"
	case c.OK():
		return fmt.Sprintf("ok (lake at seq %d, database at seq %d, timeline %d)", c.LakePosition, c.DB.LastSeq, c.DB.Timeline)
	}
	return fmt.Sprintf("FAILED: %s; both agree up to seq %d: see docs/runbooks/continuity.md", c.State, c.LastAgreedSeq)
}
