// Package deadlettercmd is `oml deadletter list|show|reenqueue`: inspect
// the rows the lake writer gave up on and repair them with a journalled
// re-enqueue (internal/deadletter does the work; docs/deadletter.md is the
// runbook).
package deadlettercmd

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/keys"
)

// NewCmd builds `oml deadletter`.
func NewCmd(f *cliutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "deadletter",
		Aliases: []string{"deadletters", "dl"},
		Short:   "Inspect and repair outbox rows the lake writer dead-lettered",
		Long: `A row the lake writer cannot apply (a held body that is missing or no longer
matches its journalled digest, an undecodable payload) is retried a bounded
number of times, then journalled as materialize.skipped and moved to
oml.dead_letter. The lake is then knowingly incomplete until the row is
repaired: fix the cause, run oml deadletter reenqueue (a journalled
deadletter.reenqueued event that puts the operation back into the outbox),
and drain. A row that can never be repaired (its held body is gone for good)
is closed with oml deadletter abandon (a journalled deadletter.abandoned):
reconcile then lists it as an accepted gap. See docs/deadletter.md.`,
	}
	cmd.AddCommand(NewCmdList(f, nil), NewCmdShow(f, nil), NewCmdReenqueue(f, nil), NewCmdAbandon(f, nil))
	return cmd
}

func openDB(ctx context.Context, f *cliutil.Factory) (*pgxpool.Pool, error) {
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return nil, err
	}
	return pool, nil
}

// openForAppend loads the deployment key and opens the database, for the
// verbs that journal a repair (doing names the verb in the error).
func openForAppend(ctx context.Context, f *cliutil.Factory, doing string) (*keys.Key, *pgxpool.Pool, error) {
	k, err := f.SigningKey(fmt.Sprintf("%s appends to the journal and needs the deployment key: pass --signing-key or set OML_SIGNING_KEY_FILE", doing))
	if err != nil {
		return nil, nil, err
	}
	pool, err := openDB(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	return k, pool, nil
}

// resolveTenant is the --tenant filter: nil when not given.
func resolveTenant(ctx context.Context, f *cliutil.Factory, name string) (*uuid.UUID, error) {
	if name == "" {
		return nil, nil
	}
	t, err := f.Tenant(ctx, name)
	if err != nil {
		return nil, err
	}
	return &t.ID, nil
}

// ListOptions are `oml deadletter list`'s flags and dependencies.
type ListOptions struct {
	F      *cliutil.Factory
	Tenant string
	Since  time.Duration
	All    bool
}

// NewCmdList builds `oml deadletter list`.
func NewCmdList(f *cliutil.Factory, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{F: f}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead letters (open ones; --all includes re-enqueued ones)",
		Long: `List dead letters, oldest first: id, tenant, outbox seq, target, op, claim,
attempts, first failure, the error, and whether it was re-enqueued.

By default only open dead letters (not yet re-enqueued) are listed.
Exit status: 0 (also when there are open dead letters: this is a view; use
oml reconcile to fail on them); 2 usage or connection error.`,
		Example: `  oml deadletter list
  oml deadletter list --tenant acme --since 24h
  oml deadletter list --all -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Since < 0 {
				return cliutil.FlagErrorf("--since must be a positive duration such as 24h")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "only this tenant (name or id)")
	cmd.Flags().DurationVar(&opts.Since, "since", 0, "only dead letters that first failed within this long (e.g. 24h)")
	cmd.Flags().BoolVar(&opts.All, "all", false, "include dead letters that were already re-enqueued")
	return cmd
}

func listRun(ctx context.Context, opts *ListOptions) error {
	f := opts.F
	format, _ := f.Format()
	pool, err := openDB(ctx, f)
	if err != nil {
		return err
	}
	tn, err := resolveTenant(ctx, f, opts.Tenant)
	if err != nil {
		return err
	}
	lo := deadletter.ListOptions{Tenant: tn, All: opts.All}
	if opts.Since > 0 {
		lo.Since = time.Now().Add(-opts.Since)
	}
	ls, err := deadletter.List(ctx, pool, lo)
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(f.IO.Out, ls)
	}
	if len(ls) == 0 {
		what := "open dead letters"
		if opts.All {
			what = "dead letters"
		}
		_, err := fmt.Fprintf(f.IO.Out, "No %s.\n", what)
		return err
	}
	rows := make([][]string, 0, len(ls))
	for _, l := range ls {
		re := "no"
		if l.Reenqueued {
			re = fmt.Sprintf("yes, %s (outbox seq %d)", cliutil.Time(*l.ReenqueuedAt), deref(l.NewOutboxSeq))
		}
		if l.Abandoned {
			re = fmt.Sprintf("abandoned, %s (journal seq %d)", cliutil.Time(*l.AbandonedAt), deref(l.AbandonedSeq))
		}
		rows = append(rows, []string{fmt.Sprint(l.ID), tenantLabel(l), fmt.Sprint(l.OutboxSeq), l.Target, l.Op, l.Claim(),
			fmt.Sprint(l.Attempts), cliutil.Time(l.FirstFailedAt), re, oneLine(l.Error, f.IO.IsStdoutTTY())})
	}
	// ERROR last: it is the long free text, the one column a terminal
	// table wraps (cliutil.FitTable).
	return cliutil.Table(f.IO, []string{"ID", "TENANT", "OUTBOX SEQ", "TARGET", "OP", "CLAIM", "ATTEMPTS", "FIRST FAILURE", "REENQUEUED", "ERROR"}, rows)
}

func tenantLabel(l deadletter.Letter) string {
	if l.TenantName != "" {
		return l.TenantName
	}
	return l.TenantID.String()
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// oneLine keeps a table cell on one line, shortened on a terminal.
func oneLine(s string, short bool) string {
	s = strings.Join(strings.Fields(s), " ")
	if short && len(s) > 70 {
		s = s[:67] + "..."
	}
	return s
}

// ShowOptions are `oml deadletter show`'s flags and dependencies.
type ShowOptions struct {
	F  *cliutil.Factory
	ID int64
}

// NewCmdShow builds `oml deadletter show`.
func NewCmdShow(f *cliutil.Factory, runF func(context.Context, *ShowOptions) error) *cobra.Command {
	opts := &ShowOptions{F: f}
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one dead letter: the failed row, its payload, the journal events around it",
		Long: `Show everything about one dead letter: the failed outbox row and its payload,
the journal event it came from, the materialize.skipped event that
dead-lettered it, the payload the journal implies for the operation (and
whether the stored one matches it), for a materialization whether the held
body is present and matches its journalled digest, and, once repaired, the
deadletter.reenqueued event and the new outbox row.`,
		Example: `  oml deadletter show 3
  oml deadletter show 3 -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := parseID(args[0])
			if err != nil {
				return err
			}
			opts.ID = id
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return showRun(cmd.Context(), opts)
		},
	}
	return cmd
}

func parseID(s string) (int64, error) {
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id < 1 {
		return 0, cliutil.FlagErrorf("dead letter id %q is not a positive number: take it from oml deadletter list", s)
	}
	return id, nil
}

func showRun(ctx context.Context, opts *ShowOptions) error {
	f := opts.F
	format, _ := f.Format()
	pool, err := openDB(ctx, f)
	if err != nil {
		return err
	}
	d, err := deadletter.Show(ctx, pool, opts.ID)
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(f.IO.Out, d)
	}
	ev := func(e *deadletter.Event) string {
		if e == nil {
			return "- (not in the journal)"
		}
		return fmt.Sprintf("seq %d %s at %s, hash %s, payload %s", e.Seq, e.EventType, cliutil.Time(e.RecordedAt), e.Hash, compact(e.Payload))
	}
	status := "open: repair the cause, then oml deadletter reenqueue " + fmt.Sprint(d.ID)
	if d.Abandoned {
		status = fmt.Sprintf("abandoned at %s by %s (journal seq %d): %s; it will never reach the lake", cliutil.Time(*d.AbandonedAt),
			strOr(d.AbandonedBy), deref(d.AbandonedSeq), strOr(d.AbandonReason))
	}
	if d.Reenqueued {
		status = fmt.Sprintf("re-enqueued at %s by %s into outbox seq %d (journal seq %d)", cliutil.Time(*d.ReenqueuedAt),
			strOr(d.ReenqueuedBy), deref(d.NewOutboxSeq), deref(d.ReenqueuedSeq))
		if d.ReenqueueReason != nil && *d.ReenqueueReason != "" {
			status += ": " + *d.ReenqueueReason
		}
	}
	pairs := [][2]string{
		{"id", fmt.Sprint(d.ID)},
		{"tenant", fmt.Sprintf("%s (%s)", tenantLabel(d.Letter), d.TenantID)},
		{"status", status},
		{"outbox seq", fmt.Sprint(d.OutboxSeq)},
		{"target / op", d.Target + " " + d.Op},
		{"claim", d.Claim()},
		{"attempts", fmt.Sprint(d.Attempts)},
		{"first failure", cliutil.Time(d.FirstFailedAt)},
		{"last failure", cliutil.Time(d.LastFailedAt)},
		{"error", d.Error},
		{"payload (dead-lettered)", compact(d.Payload)},
	}
	if d.ImpliedPayload != nil {
		verdict := "matches the dead-lettered payload"
		if !d.PayloadMatches {
			verdict = "DIFFERS from the dead-lettered payload: reenqueue will carry this one"
		}
		pairs = append(pairs, [2]string{"payload (journal implies)", compact(d.ImpliedPayload) + " — " + verdict})
	}
	if d.Original != nil {
		pairs = append(pairs, [2]string{"outbox row now", fmt.Sprintf("seq %d, payload %s", d.Original.Seq, compact(d.Original.Payload))})
	}
	if d.BodyPresent != nil {
		body := "missing from oml.claim_bodies"
		if *d.BodyPresent {
			body = "present, hashes to the journalled ciphertext digest"
			if !*d.BodyDigestMatches {
				body = "present, but does NOT hash to the journalled ciphertext digest"
			}
		}
		pairs = append(pairs, [2]string{"held body", body})
	}
	pairs = append(pairs,
		[2]string{"source event", ev(d.Source)},
		[2]string{"skipped event", ev(d.Skipped)})
	if d.Reenqueued {
		pairs = append(pairs, [2]string{"reenqueued event", ev(d.ReenqueuedEvent)})
		if d.Copy != nil {
			pairs = append(pairs, [2]string{"new outbox row", fmt.Sprintf("seq %d, payload %s", d.Copy.Seq, compact(d.Copy.Payload))})
		}
	}
	return cliutil.KeyValues(f.IO.Out, pairs)
}

func strOr(s *string) string {
	if s == nil {
		return "-"
	}
	return *s
}

func compact(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// ReenqueueOptions are `oml deadletter reenqueue`'s flags and dependencies.
type ReenqueueOptions struct {
	F      *cliutil.Factory
	IDs    []int64
	All    bool
	Tenant string
	Yes    bool
	Reason string
	By     string
	// Force re-enqueues rows whose cause still shows (deadletter.StillBroken).
	Force bool
}

// NewCmdReenqueue builds `oml deadletter reenqueue`.
func NewCmdReenqueue(f *cliutil.Factory, runF func(context.Context, *ReenqueueOptions) error) *cobra.Command {
	opts := &ReenqueueOptions{F: f}
	cmd := &cobra.Command{
		Use:   "reenqueue ID... | --all [--tenant T]",
		Short: "Put repaired dead letters back into the outbox (a journalled deadletter.reenqueued per dead letter)",
		Long: `Re-enqueue dead letters after their cause is repaired. For each one, in one
PostgreSQL transaction: append a deadletter.reenqueued event to the tenant's
chain (who: --by, why: --reason, which dead letter), insert a new outbox row
carrying the original operation, and mark the dead letter re-enqueued with the
new seq. Then run oml lake drain.

The operation re-enqueued is the one the journal implies: when the stored
payload disagrees with it (a damaged outbox payload), the journal's is used
and the journalled reason says so.

A dead letter that was already re-enqueued is left alone and reported as such.
--all asks for confirmation on a terminal; scripts pass --yes. Needs the
deployment key (--signing-key / OML_SIGNING_KEY_FILE).
Exit status: 0 every dead letter re-enqueued or already re-enqueued; 1 some
could not be (not found, or the append was refused); 2 usage or connection error.`,
		Example: `  oml deadletter reenqueue 3 --reason "restored the held body from backup"
  oml deadletter reenqueue --all --tenant acme --yes`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.All && len(args) > 0 {
				return cliutil.FlagErrorf("give dead letter ids or --all, not both")
			}
			if !opts.All && len(args) == 0 {
				return cliutil.FlagErrorf("name the dead letters to re-enqueue (ids from oml deadletter list) or pass --all")
			}
			if opts.Tenant != "" && !opts.All {
				return cliutil.FlagErrorf("--tenant only narrows --all; with ids, the ids say which dead letters")
			}
			if opts.All && !opts.Yes && !f.IO.IsStdinTTY() {
				return cliutil.FlagErrorf("--all re-enqueues every open dead letter and stdin is not a terminal to confirm on: pass --yes")
			}
			var err error
			if opts.IDs, err = parseIDs(args); err != nil {
				return err
			}
			if opts.By, err = journalledBy(opts.By); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return reenqueueRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "re-enqueue every open dead letter (of --tenant, if given)")
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "with --all: only this tenant (name or id)")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "do not ask for confirmation")
	cmd.Flags().StringVar(&opts.Reason, "reason", "", "why (journalled with the event)")
	cmd.Flags().StringVar(&opts.By, "by", "", "who is re-enqueueing (journalled; default: the OS user)")
	cmd.Flags().BoolVar(&opts.Force, "force", false, "re-enqueue even rows whose cause is visibly not repaired (they will dead-letter again)")
	return cmd
}

// parseIDs parses dead letter ids, each once, in the order given.
func parseIDs(args []string) ([]int64, error) {
	var ids []int64
	seen := map[int64]bool{}
	for _, a := range args {
		id, err := parseID(a)
		if err != nil {
			return nil, err
		}
		if !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// journalledBy is --by, else the OS user: the identity a manual repair
// journals.
func journalledBy(by string) (string, error) {
	if by == "" {
		by = cliutil.OSUser()
	}
	if strings.TrimSpace(by) == "" {
		return "", cliutil.FlagErrorf("cannot tell who you are: pass --by NAME (it is journalled)")
	}
	return by, nil
}

func reenqueueRun(ctx context.Context, opts *ReenqueueOptions) error {
	f := opts.F
	format, _ := f.Format()
	k, pool, err := openForAppend(ctx, f, "re-enqueueing")
	if err != nil {
		return err
	}
	ids := opts.IDs
	if opts.All {
		tn, err := resolveTenant(ctx, f, opts.Tenant)
		if err != nil {
			return err
		}
		if ids, err = deadletter.OpenIDs(ctx, pool, tn); err != nil {
			return cliutil.AsConfigError(err)
		}
		if len(ids) == 0 {
			if format == cliutil.FormatJSON {
				return cliutil.WriteJSON(f.IO.Out, []deadletter.Result{})
			}
			_, err := fmt.Fprintln(f.IO.Out, "No open dead letters: nothing to re-enqueue.")
			return err
		}
		if !opts.Yes {
			ok, err := confirm(f, fmt.Sprintf("Re-enqueue %d open dead letter(s) as %s? [y/N] ", len(ids), opts.By))
			if err != nil {
				return err
			}
			if !ok {
				// Declining is a decision, not a problem: exit 0.
				fmt.Fprintln(f.IO.ErrOut, "Nothing re-enqueued.")
				return nil
			}
		}
	}
	ids, broken, err := unrepaired(ctx, pool, ids, opts.Force)
	if err != nil {
		return err
	}
	for _, b := range broken {
		fmt.Fprintf(f.IO.ErrOut, "oml: dead letter %d was NOT re-enqueued: %s, so the lake writer would dead-letter it again; repair it first (docs/deadletter.md), or pass --force\n", b.id, b.why)
	}
	if len(ids) == 0 {
		return cliutil.Findingsf("%d dead letter(s) not re-enqueued: their cause is not repaired", len(broken))
	}
	res, err := deadletter.Reenqueue(ctx, pool, k, ids, deadletter.Options{By: opts.By, Reason: opts.Reason})
	if err != nil {
		return cliutil.AsConfigError(err)
	}
	failed, done := 0, 0
	for _, r := range res {
		switch r.Outcome {
		case deadletter.OutcomeFailed, deadletter.OutcomeNotFound, deadletter.OutcomeRefusedAbandoned:
			failed++
		case deadletter.OutcomeReenqueued:
			done++
		}
	}
	if format == cliutil.FormatJSON {
		if err := cliutil.WriteJSON(f.IO.Out, res); err != nil {
			return err
		}
	} else {
		for _, r := range res {
			var line string
			switch r.Outcome {
			case deadletter.OutcomeReenqueued:
				line = fmt.Sprintf("Re-enqueued dead letter %d (outbox seq %d) as outbox seq %d: journal seq %d deadletter.reenqueued by %s.",
					r.ID, r.OutboxSeq, r.NewOutboxSeq, r.JournalSeq, r.By)
				if r.PayloadRederived {
					line += " The payload was re-derived from the journal (the dead-lettered one disagreed with it)."
				}
			case deadletter.OutcomeAlreadyReenqueued:
				line = fmt.Sprintf("Dead letter %d was already re-enqueued at %s by %s (outbox seq %d, journal seq %d); nothing to do.",
					r.ID, timeOr(r.At), r.By, r.NewOutboxSeq, r.JournalSeq)
			default:
				line = fmt.Sprintf("Dead letter %d was NOT re-enqueued: %s", r.ID, r.Error)
			}
			fmt.Fprintln(f.IO.Out, cliutil.Sanitize(line)) // By and Error are untrusted text
		}
		if done > 0 {
			fmt.Fprintln(f.IO.Out, "Run oml lake drain to apply the re-enqueued rows.")
		}
	}
	if failed > 0 {
		return cliutil.Findingsf("%d of %d dead letter(s) could not be re-enqueued", failed, len(res))
	}
	if len(broken) > 0 {
		return cliutil.Findingsf("%d dead letter(s) not re-enqueued: their cause is not repaired", len(broken))
	}
	return nil
}

type brokenLetter struct {
	id  int64
	why string
}

// unrepaired splits ids into those to re-enqueue and those whose cause
// visibly still holds (deadletter.StillBroken); with force nothing is held
// back. Unknown ids stay in: Reenqueue reports them.
func unrepaired(ctx context.Context, pool deadletter.Querier, ids []int64, force bool) ([]int64, []brokenLetter, error) {
	if force {
		return ids, nil, nil
	}
	var keep []int64
	var broken []brokenLetter
	for _, id := range ids {
		l, err := deadletter.Get(ctx, pool, id)
		if err != nil {
			keep = append(keep, id)
			continue
		}
		why, err := deadletter.StillBroken(ctx, pool, l)
		if err != nil {
			return nil, nil, cliutil.AsConfigError(err)
		}
		if why != "" {
			broken = append(broken, brokenLetter{id, why})
			continue
		}
		keep = append(keep, id)
	}
	return keep, broken, nil
}

func timeOr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return cliutil.Time(*t)
}

// confirm asks on the terminal; anything but y/yes is a no.
func confirm(f *cliutil.Factory, prompt string) (bool, error) {
	return cliutil.Confirm(f, prompt), nil
}
