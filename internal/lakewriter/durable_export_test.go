package lakewriter

import (
	"context"

	"github.com/google/uuid"

	"github.com/omlhq/oml/internal/lake/tables"
)

// PublishWitnessesNow runs the witness publisher for tenants as it runs
// after a batch that touched them, and returns when it is done (tests of
// the durability fence).
func (d *Drainer) PublishWitnessesNow(ctx context.Context, tenants []uuid.UUID) {
	d.witnessTouched(ctx, touchedBy(tenants))
}

// PublishWitnessesBeside starts the witness publisher for tenants as the
// end of a batch does, and returns at once.
func (d *Drainer) PublishWitnessesBeside(ctx context.Context, tenants []uuid.UUID) {
	d.witnessInBackground(ctx, touchedBy(tenants))
}

// CheckForksNow runs the fork check as the long-running loop does every
// ForkCheckInterval.
func (d *Drainer) CheckForksNow(ctx context.Context) error { return d.checkForks(ctx, nil) }

func touchedBy(tenants []uuid.UUID) []tables.TableKey {
	var touched []tables.TableKey
	for _, t := range tenants {
		touched = append(touched, tables.TableKey{Tenant: t, Kind: tables.Kinds[0]})
	}
	return touched
}
