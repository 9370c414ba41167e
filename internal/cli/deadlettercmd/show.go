package deadlettercmd

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/iostreams"
)

// ShowOptions are `oml deadletter show`'s argument and what its run
// function needs, as functions (NewCmdShow fills them from the Factory; a
// test replaces them).
type ShowOptions struct {
	IO *iostreams.IOStreams
	// Format is the validated -o value.
	Format func() (cliutil.Format, error)
	// Detail opens the database and reads one dead letter with the journal
	// events around it (deadletter.Show); its errors are the command's.
	Detail func(ctx context.Context, id int64) (deadletter.Detail, error)

	ID int64
}

// NewCmdShow builds `oml deadletter show`.
func NewCmdShow(f *cliutil.Factory, runF func(context.Context, *ShowOptions) error) *cobra.Command {
	opts := &ShowOptions{IO: f.IO, Format: f.Format, Detail: func(ctx context.Context, id int64) (deadletter.Detail, error) {
		pool, err := f.CurrentDB(ctx)
		if err != nil {
			return deadletter.Detail{}, err
		}
		d, err := deadletter.Show(ctx, pool, id)
		if err != nil {
			return deadletter.Detail{}, cliutil.AsConfigError(err)
		}
		return d, nil
	}}
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
	format, _ := opts.Format()
	d, err := opts.Detail(ctx, opts.ID)
	if err != nil {
		return err
	}
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(opts.IO.Out, d)
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
	return cliutil.KeyValues(opts.IO.Out, pairs)
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
