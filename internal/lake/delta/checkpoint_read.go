package delta

import (
	"context"
	"errors"

	"github.com/omlhq/oml/internal/lake/store"
)

// readCheckpoint streams the actions of a classic (single or multi-part)
// checkpoint to fn.
func readCheckpoint(ctx context.Context, st store.Store, cp *checkpointRef, fn func(*Action) error) error {
	return errors.New("reading checkpoints is not implemented yet")
}
