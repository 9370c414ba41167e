package lakecmd

import (
	"context"
	"fmt"

	"github.com/omlhq/oml/internal/cli/outboxcmd"
	"github.com/omlhq/oml/internal/cliutil"
	"github.com/omlhq/oml/internal/outbox"
	"github.com/omlhq/oml/internal/outboxprune"
)

// pruneOutbox is `oml lake maintain --prune-outbox`: oml outbox prune
// (with maintain's --dry-run, and --yes implied: maintain runs from cron)
// after the table maintenance. Its error is already classified for the
// exit code. The lake is the one the tables were selected under (the
// Factory opens it once and shares it).
func pruneOutbox(ctx context.Context, f *cliutil.Factory, opts *MaintainOptions) (*outbox.PruneResult, error) {
	lake, err := f.Lake(ctx, "")
	if err != nil {
		return nil, err
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
