// Package deadlettercmd is `oml deadletter list|show|reenqueue`: inspect
// the rows the lake writer gave up on and repair them with a journalled
// re-enqueue (internal/deadletter does the work; docs/deadletter.md is the
// runbook).
package deadlettercmd

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/spf13/cobra"

	"github.com/omlhq/oml/internal/chain"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/deadletter"
	"github.com/omlhq/oml/internal/iostreams"
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

// OpenForAppend is the Open of the verbs that journal a repair (reenqueue,
// abandon): it loads the deployment key, then opens the database.
type OpenForAppend func(ctx context.Context) (*keys.Key, *pgxpool.Pool, error)

// Repair is the shape of the journalled repairs the verbs run
// (deadletter.Reenqueue, deadletter.Abandon), o being each one's options:
// one result per id.
type Repair[O any] func(ctx context.Context, pool *pgxpool.Pool, signer chain.Signer, ids []int64, o O) ([]deadletter.Result, error)

// openForAppend is OpenForAppend over the Factory (doing names the verb in
// the error).
func openForAppend(f *cliutil.Factory, doing string) OpenForAppend {
	return func(ctx context.Context) (*keys.Key, *pgxpool.Pool, error) {
		k, err := f.SigningKey(fmt.Sprintf("%s appends to the journal and needs the deployment key: pass --signing-key or set OML_SIGNING_KEY_FILE", doing))
		if err != nil {
			return nil, nil, err
		}
		pool, err := f.CurrentDB(ctx)
		if err != nil {
			return nil, nil, err
		}
		return k, pool, nil
	}
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

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
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

func timeOr(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return cliutil.Time(*t)
}

// repairArgs is the tail of reenqueue's and abandon's flag checks: the
// ids, each once, and the journalled --by (the OS user when not given).
func repairArgs(args []string, by string) ([]int64, string, error) {
	ids, err := parseIDs(args)
	if err != nil {
		return nil, "", err
	}
	if by, err = cliutil.JournalledBy(by); err != nil {
		return nil, "", err
	}
	return ids, by, nil
}

// writeResults prints a repair's results: the JSON list, or on a table
// one line per dead letter (line says what happened to it).
func writeResults(io *iostreams.IOStreams, format cliutil.Format, res []deadletter.Result, line func(deadletter.Result) string) error {
	if format == cliutil.FormatJSON {
		return cliutil.WriteJSON(io.Out, res)
	}
	for _, r := range res {
		fmt.Fprintln(io.Out, line(r))
	}
	return nil
}
