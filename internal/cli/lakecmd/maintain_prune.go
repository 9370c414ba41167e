package lakecmd

import (
	"context"
	"fmt"

	"github.com/omlhq/oml/internal/cli/outboxcmd"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/lake/store"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/outboxprune"
)

// pruneOutbox is `oml lake maintain --prune-outbox`: oml outbox prune
// (with maintain's --dry-run, and --yes implied: maintain runs from cron)
// after the table maintenance. Its error is already classified for the
// exit code.
func pruneOutbox(ctx context.Context, f *cliutil.Factory, lake store.Store, opts *MaintainOptions) (*outbox.PruneResult, error) {
	if lake == nil {
		var err error
		if lake, err = f.Lake(ctx, ""); err != nil {
			return nil, err
		}
	}
	pool, err := f.CurrentDB(ctx)
	if err != nil {
		return nil, err
	}
	res, err := outboxprune.Run(ctx, outboxprune.Options{DB: pool, Lake: lake, OlderThan: opts.olderThan, DryRun: opts.DryRun})
	if err != nil {
		return nil, fmt.Errorf("--prune-outbox: %w", outboxcmd.Classify(err))
	}
	return &res, nil
}
